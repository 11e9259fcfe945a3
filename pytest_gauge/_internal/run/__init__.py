"""Producing transcripts and verdicts: the engine that runs a suite's work, the user-simulator ↔ agent
dialogue, and the double-blind pairwise judge."""
