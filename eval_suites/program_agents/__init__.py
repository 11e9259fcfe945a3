"""Claude Code against Codex as agents under test (issue 28): the example suite of program agents."""
