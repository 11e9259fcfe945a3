"""``python -m pytest_gauge report``'s first step, and the first thing a run does with a ``--gauge-out``
folder holding such a run: the reports of a run stopped while it wrote its outputs, written from what it
kept (:mod:`~pytest_gauge._internal.finish.pending`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from ..files.folders import SuiteFolder
from ..files.readwrite import FileFormatError, read_json_object, read_jsonl
from ..options import GaugeOptions
from ..records import CaseRecord, LedgerRecord, SuiteMeta
from .outputs import report_suite
from .pending import PENDING, complete, pending_suites

__all__ = ["resume_at_start", "write_pending_reports"]


def _transcripts(folder: SuiteFolder, meta: SuiteMeta) -> dict[str, list[dict[str, Any]]]:
    return {agent: read_jsonl(folder.transcripts(agent), missing_ok=True) for agent in meta.agents}


def _report_one(out: Path) -> None:
    """Write one pending suite's reports from its kept outputs, then its final manifest."""
    folder = SuiteFolder(out)
    doc = read_json_object(out / PENDING)
    meta = SuiteMeta.from_json(doc["meta"])
    opts = GaugeOptions.from_json(doc["options"])
    label = doc.get("interrupted")
    manifest = read_json_object(folder.manifest)
    manifest.pop("interrupted", None)
    final = {**manifest, **({"interrupted": label} if label else {})}
    records = [CaseRecord.from_json(r) for r in read_jsonl(folder.pairs)]
    ledger = [LedgerRecord.from_json(r) for r in read_jsonl(folder.ledger, missing_ok=True)]
    shown = replace(opts, prices=opts.prices_for(str(m) for m in meta.models.values() if m))
    written = (final, _transcripts(folder, meta))
    report_suite(
        meta, records, ledger, opts, out, written,
        partial=bool(doc.get("partial")), deferred=bool(opts.shard), report_options=shown, interrupted=label,
    )  # fmt: skip
    complete(out, final)


def write_pending_reports(out_dir: Path) -> list[Path]:
    """Every suite folder of ``out_dir`` whose run stopped before its reports: its reports written from
    its kept outputs and its manifest completed; returns the suite folders done. ``FileFormatError``
    (or a subclass) names a file that cannot be read."""
    done: list[Path] = []
    for out in pending_suites(out_dir):
        try:
            _report_one(out)
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, FileFormatError):
                raise
            raise FileFormatError(f"{out / PENDING}: cannot be read ({exc})") from None
        done.append(out)
    return done


def resume_at_start(out_dir: Path) -> str | None:
    """At a run's start, before it writes anything: the missing reports of an earlier run stopped while
    it wrote its outputs into ``out_dir``, written first (this run may then replace some of those folders,
    not the others); the one line saying so, or None when nothing was pending. A pending
    file that cannot be read does not stop this run: the line says so and names the command to retry."""
    if not pending_suites(out_dir):
        return None
    try:
        done = write_pending_reports(out_dir)
    except (FileFormatError, OSError) as exc:
        return (
            f"pytest-gauge warning: an earlier run in {out_dir} stopped before its reports, which could not"
            f" be written ({exc}); python -m pytest_gauge report {out_dir} tries again"
        )
    names = ", ".join(p.name for p in done)
    return f"pytest-gauge: an earlier run in {out_dir} stopped before its reports: wrote them first ({names})"
