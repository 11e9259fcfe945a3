"""The example suite as a package, so its test module imports its sibling ``tools.py`` plainly."""
