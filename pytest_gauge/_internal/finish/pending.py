"""The end of a run made atomic: a suite folder never claims completion without its reports.

Before a suite's outputs are written, ``reports-pending.json`` keeps what its reports are made from
(the suite's metadata and the run's options); its ``manifest.json`` is first written marked interrupted,
and rewritten as the run meant it only once every report (and the HTML pages) is written. A run stopped
in between (Ctrl-C while the outputs are written) leaves its records and ledger, a manifest that says it
was interrupted, and the pending file, from which ``python -m pytest_gauge report OUT`` writes the
missing reports (:mod:`~pytest_gauge._internal.finish.resume`; docs/architecture.md#the-run-folder)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..files.folders import SuiteFolder
from ..files.readwrite import write_atomic
from ..records import SuiteMeta, dumps

if TYPE_CHECKING:
    from ..options import GaugeOptions

__all__ = ["PENDING", "complete", "mark_pending", "pending_suites", "provisional"]

PENDING = "reports-pending.json"
"""Beside a suite's manifest while its reports are not all written."""


def _stopped_note(out: Path) -> str:
    return (
        "interrupted while the outputs were written: the reports are missing (python -m pytest_gauge"
        f" report {out.parent} writes them from the records and ledger kept here)"
    )


def mark_pending(out: Path, meta: SuiteMeta, opts: GaugeOptions, *, partial: bool, label: str | None) -> None:
    """Keep what the suite's reports are made from, before any of its outputs is written."""
    doc = {
        "format_version": 1,
        "meta": meta.to_json(),
        "options": opts.to_json(),
        "partial": partial,
        "interrupted": label,
    }
    write_atomic(out / PENDING, dumps(doc) + "\n")


def provisional(manifest: dict[str, Any], out: Path) -> dict[str, Any]:
    """The manifest as first written: marked interrupted until the reports are written."""
    return {**manifest, "interrupted": manifest.get("interrupted") or _stopped_note(out)}


def complete(out: Path, manifest: dict[str, Any]) -> None:
    """The reports are written: the manifest as the run meant it, and nothing pending."""
    write_atomic(SuiteFolder(out).manifest, dumps(manifest) + "\n")
    (out / PENDING).unlink(missing_ok=True)


def pending_suites(out_dir: Path) -> list[Path]:
    """The suite folders of ``out_dir`` whose run stopped before their reports (sorted; none when
    ``out_dir`` is not a folder): a look at file names only, cheap enough for every run's start."""
    if not out_dir.is_dir():
        return []
    return sorted(p for p in out_dir.iterdir() if (p / PENDING).is_file())
