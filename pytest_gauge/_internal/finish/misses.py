"""The end of a ``--gauge-cache replay-then-live`` run (docs/protocol.md#record-once-replay-on-pull-requests):
the calls sent live, named, counted and priced apart in token_cost.md."""

from __future__ import annotations

from collections.abc import MutableMapping, Sequence
from pathlib import Path

from ..analysis.misses import live_misses
from ..files.folders import SuiteFolder
from ..files.readwrite import write_atomic
from ..records import LedgerRecord
from ..report.misses import render_misses_section

__all__ = ["add_misses_section"]


def add_misses_section(ledger: Sequence[LedgerRecord], reports: MutableMapping[str, str], out: Path) -> None:
    """The suite's misses appended to token_cost.md (in ``reports`` and on disk)."""
    section = render_misses_section(live_misses(ledger))
    reports["token_cost.md"] = reports["token_cost.md"].rstrip("\n") + "\n\n" + section
    write_atomic(SuiteFolder(out).report("token_cost.md"), reports["token_cost.md"])
