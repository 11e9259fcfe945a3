"""``python -m pytest_gauge merge SHARD_DIRS... --out DIR``: one verdict from the shards of a suite.

Checks that the shards agree (task set, prompts, seed, versions, the options that change results) and
that every task ran in exactly one shard, concatenates their records, ledgers and transcripts in the
order one machine would have written them, then runs the end of a run's own analysis
(:func:`~pytest_gauge._internal.analysis.suite.analyse_suite`, rendered by
:func:`~pytest_gauge._internal.finish.outputs.report_suite`): metrics, Elo, gates and every report. A failing
(or, with ``CI`` set, skipped) gate makes the merge exit 1.
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ..files.folders import OutFolder, SuiteFolder
from ..files.readwrite import FileFormatError, read_json_object, read_jsonl, write_atomic
from ..files.shards import RESULT_OPTIONS
from ..gateway.ledger import attribute_shared_calls
from ..options import GaugeOptions
from ..records import CaseRecord, LedgerRecord, SuiteMeta, dumps
from .outputs import report_suite
from .verdict import append_step_summary, ci_active, gate_outcome

if TYPE_CHECKING:
    from .outputs import SuiteReports

__all__ = ["MergeError", "ShardRun", "check_shards", "find_shards", "merge_shards", "run_merge"]


class MergeError(Exception):
    """Shards that cannot be merged; the message names the shards, tasks or settings and the fix."""


@dataclass(frozen=True)
class ShardRun:
    """One suite's outputs from one shard: its folder, ``shard.json`` and ``manifest.json``."""

    folder: Path
    shard: dict[str, Any]
    manifest: dict[str, Any]

    @property
    def label(self) -> str:
        return f"{self.shard['shard']} ({self.folder})"


def _read_json(path: Path) -> dict[str, Any]:
    """A shard's JSON file, or a MergeError naming it (a shard folder copied in part, say)."""
    try:
        return read_json_object(path)
    except FileFormatError as exc:
        raise MergeError(f"{exc}; copy the shard's whole --gauge-out folder") from None


def find_shards(dirs: Sequence[str | os.PathLike[str]]) -> dict[str, list[ShardRun]]:
    """Every suite's shard runs in ``dirs`` (each a ``--gauge-out`` folder or one suite's folder)."""
    found: dict[str, list[ShardRun]] = {}
    for raw in dirs:
        folder = Path(raw)
        own = SuiteFolder(folder).shard
        files = [own] if own.is_file() else sorted(folder.glob(f"*/{own.name}"))
        if not files:
            raise MergeError(
                f"{folder}: no {own.name} found; give the --gauge-out folders of the --gauge-shard runs"
            )
        for path in files:
            shard = _read_json(path)
            run = ShardRun(path.parent, shard, _read_json(SuiteFolder(path.parent).manifest))
            found.setdefault(str(shard["suite"]), []).append(run)
    return found


def _agreement(suite: str, runs: Sequence[ShardRun]) -> list[str]:
    """What the shards disagree on (each a line naming the setting and every shard's value)."""
    first = runs[0]
    checks: dict[str, Any] = {
        "shard count": lambda r: r.shard["count"],
        "task set and prompts (manifest hashes)": lambda r: r.manifest.get("hashes"),
        "seed": lambda r: r.manifest.get("seed"),
        "backend": lambda r: r.manifest.get("backend"),
        "versions": lambda r: r.manifest.get("versions"),
        "case ids": lambda r: r.shard["meta"].get("case_ids"),
        **{f"option {k}": (lambda r, k=k: r.shard["options"].get(k)) for k in RESULT_OPTIONS},
    }
    problems = []
    for what, value in checks.items():
        if any(value(r) != value(first) for r in runs[1:]):
            shown = "; ".join(f"{r.label}: {json.dumps(value(r), sort_keys=True)[:200]}" for r in runs)
            problems.append(f"suite {suite}: the shards disagree on the {what}: {shown}")
    return problems


def check_shards(suite: str, runs: Sequence[ShardRun]) -> None:
    """Refuse shards that disagree, and any task missing or run twice (naming the tasks and shards)."""
    problems = _agreement(suite, runs)
    if not problems:
        count = int(runs[0].shard["count"])
        all_tasks = [str(t["task_id"]) for t in runs[0].shard["meta"]["tasks"]]
        where: dict[str, list[str]] = {}
        for run in runs:
            for task in run.shard["tasks"]:
                where.setdefault(str(task), []).append(run.label)
        missing = [t for t in all_tasks if t not in where]
        if missing:
            absent = sorted(set(range(1, count + 1)) - {int(r.shard["index"]) for r in runs})
            shards = ", ".join(f"{i}/{count}" for i in absent) or "none (a shard ran without them)"
            problems.append(
                f"suite {suite}: {len(missing)} tasks missing: {', '.join(missing)}"
                f" (shards absent: {shards}); merge every shard's output folder"
            )
        twice: dict[tuple[str, ...], list[str]] = {}
        for task in all_tasks:
            if len(where.get(task, ())) > 1:
                twice.setdefault(tuple(where[task]), []).append(task)
        for labels, tasks in twice.items():
            problems.append(
                f"suite {suite}: {len(tasks)} tasks ran more than once: {', '.join(tasks)}"
                f" (in shards {', '.join(labels)}); give each shard's folder once"
            )
        for run in runs:
            if run.shard.get("interrupted"):
                problems.append(f"suite {suite}: shard {run.label} was interrupted; run it again")
    if problems:
        raise MergeError("\n".join(problems))


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return read_jsonl(path, missing_ok=True, error=MergeError)


def _options(runs: Sequence[ShardRun], out: Path) -> GaugeOptions:
    data = dict(runs[0].shard["options"])
    data["gates"] = tuple(data.get("gates", ()))
    data["prices"] = tuple(tuple(row) for row in data.get("prices", ()))
    known = set(GaugeOptions.__dataclass_fields__)
    return GaugeOptions(**{k: v for k, v in data.items() if k in known}, out_dir=str(out))


def _write_transcripts(
    runs: Sequence[ShardRun], meta: SuiteMeta, out: Path
) -> dict[str, list[dict[str, Any]]]:
    """``agents/<agent>.jsonl`` of every shard, in task order then sample (as one run writes them);
    returns each agent's rows as written."""
    rank = {str(t["task_id"]): i for i, t in enumerate(meta.tasks)}
    written: dict[str, list[dict[str, Any]]] = {}
    for agent in meta.agents:
        rows = [row for run in runs for row in _jsonl(SuiteFolder(run.folder).transcripts(agent))]
        rows.sort(key=lambda r: (rank.get(str(r.get("task_id")), 1 << 30), int(r.get("sample", 0))))
        write_atomic(SuiteFolder(out).transcripts(agent), "".join(dumps(r) + "\n" for r in rows))
        written[agent] = rows
    return written


def merge_shards(
    suite: str,
    runs: Sequence[ShardRun],
    out_dir: Path,
    flake_rates: Callable[[SuiteMeta], Mapping[str, float]] | None = None,
) -> SuiteReports:
    """Write the merged suite folder ``out_dir/<suite>`` and return its
    :class:`~pytest_gauge._internal.finish.outputs.SuiteReports` (gates evaluated; ``flake_rates``: the
    history's, for ``exclude_flaky`` gates)."""
    check_shards(suite, runs)
    runs = sorted(runs, key=lambda r: int(r.shard["index"]))
    out = out_dir / suite
    first = SuiteMeta.from_json(runs[0].shard["meta"])
    order = {f"{suite}::{cid}": i for i, cid in enumerate(first.case_ids)}
    selected = {c for run in runs for c in run.shard["meta"]["selected"]}
    meta = replace(
        first, selected=tuple(sorted(selected, key=lambda c: order.get(c, 1 << 30))), shard_tasks=None
    )
    case_rank = {cid: i for i, cid in enumerate(meta.case_ids)}
    records = [CaseRecord.from_json(r) for run in runs for r in _jsonl(SuiteFolder(run.folder).pairs)]
    records.sort(key=lambda r: case_rank.get(r.case_id, 1 << 30))
    ledger = attribute_shared_calls(
        LedgerRecord.from_json(r) for run in runs for r in _jsonl(SuiteFolder(run.folder).ledger)
    )
    folder = SuiteFolder(out)
    write_atomic(folder.tasks, SuiteFolder(runs[0].folder).tasks.read_text(encoding="utf-8"))
    transcripts = _write_transcripts(runs, meta, out)
    write_atomic(folder.pairs, "".join(dumps(r.to_json()) + "\n" for r in records))
    write_atomic(folder.ledger, "".join(dumps(r.to_json()) + "\n" for r in ledger))
    manifest = {
        **runs[0].manifest,
        "cases_selected": len(meta.selected),
        "cases_recorded": len(records),
    }
    write_atomic(folder.manifest, dumps(manifest) + "\n")
    opts = _options(runs, out_dir)
    shown = replace(opts, prices=opts.prices_for(str(m) for m in meta.models.values() if m))
    partial = len(meta.selected) < len(meta.cases)
    written = (manifest, transcripts)
    rates = flake_rates(meta) if flake_rates is not None else None
    return report_suite(
        meta, records, ledger, opts, out, written, partial=partial, report_options=shown, flake_rates=rates
    )


def _junit(path: Path, results: Sequence[tuple[str, Any, str]]) -> None:
    """One ``<testcase>`` per gate (``<failure>`` when it fails the merge, ``<skipped>`` when skipped)."""
    failures = sum(1 for _s, _r, outcome in results if outcome == "failed")
    skipped = sum(1 for _s, _r, outcome in results if outcome == "skipped")
    suite = ET.Element(
        "testsuite",
        name="pytest-gauge merge",
        tests=str(len(results)),
        failures=str(failures),
        skipped=str(skipped),
        errors="0",
    )
    for name, result, outcome in results:
        case = ET.SubElement(suite, "testcase", classname=f"{name}.gates", name=result.gate.canonical())
        if outcome == "failed":
            ET.SubElement(case, "failure", message=result.message[:200]).text = result.message
        elif outcome == "skipped":
            ET.SubElement(case, "skipped", message=result.message[:200])
    root = ET.Element("testsuites")
    root.append(suite)
    path.parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)


def run_merge(
    dirs: Sequence[str],
    out_dir: str,
    junitxml: str | None,
    environ: Mapping[str, str],
    out: TextIO,
    history: str | None = None,
) -> int:
    """The ``merge`` command: 0 when every gate passes, 1 on a failing gate, 2 on shards that cannot
    be merged. ``history``: the verdict history the merged run is appended to, once per suite."""
    from ..report import render_summary  # deferred: keeps numpy off the import of finish.merge
    from ..report.github import (  # deferred: keeps numpy off the import of finish.merge
        render_pr_comment,
        render_step_summary,
        report_link,
    )
    from .html import write_html_reports  # deferred: keeps numpy off the import of finish.merge

    try:
        found = find_shards(dirs)
        rates = None
        if history:
            from .history import past_flake_rates  # deferred: sqlite3 only when a history is given

            shard_ids = {str(r.manifest.get("run_id")) for runs in found.values() for r in runs}
            rates = past_flake_rates(Path(history), shard_ids)
        merged = {
            suite: merge_shards(suite, runs, Path(out_dir), rates) for suite, runs in sorted(found.items())
        }
    except MergeError as exc:
        out.write(f"pytest-gauge merge: {exc}\n")
        return 2
    if history:
        from .history import record_merges  # deferred: sqlite3 only when a history is given

        for line in record_merges(Path(history), found, merged, Path(out_dir)):
            out.write(f"pytest-gauge history: {line}\n")
    strict = ci_active(environ)
    verdicts: list[tuple[str, Any, str]] = []
    texts = []
    for suite, analysis in merged.items():
        strict_skips = strict and not _options(found[suite], Path(out_dir)).allow_skipped_gates
        for result in analysis.results:
            outcome, message = gate_outcome(result, strict_skips=strict_skips)
            out.write(f"{suite}::gates[{result.gate.canonical()}] {outcome.upper()}: {message}\n")
            verdicts.append((suite, result, outcome))
        text = render_summary(analysis.ctx)
        texts.append(render_step_summary(analysis.ctx, report_link(environ)))
        out.write(f"===== pytest-gauge: {suite} (merged) =====\n{text}\noutputs: {Path(out_dir) / suite}\n")
    write_html_reports(Path(out_dir), list(merged))
    if junitxml:
        _junit(Path(junitxml), verdicts)
    append_step_summary(environ, texts)
    if merged:
        comment = render_pr_comment([a.ctx for a in merged.values()], report_link(environ))
        write_atomic(OutFolder(Path(out_dir)).pr_comment, comment)
    failed = sum(1 for _s, _r, outcome in verdicts if outcome == "failed")
    out.write(f"pytest-gauge merge: {len(verdicts)} gates, {failed} failed\n")
    return 1 if failed else 0
