"""Claude Code against Codex as agents under test: the example suite of program agents."""
