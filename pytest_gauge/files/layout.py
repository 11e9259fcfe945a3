"""The output folder's file names that more than one module needs (the run's writers, its readers and
the counts made before the run ends)."""

from __future__ import annotations

__all__ = ["SNAPSHOT_REPORTS"]

SNAPSHOT_REPORTS = ("pairwise_table.md", "conclusion.md", "elo.md")
"""The reports ``--gauge-snapshot-reports`` compares with their stored snapshots, one test entry each."""
