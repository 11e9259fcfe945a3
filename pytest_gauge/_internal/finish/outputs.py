"""The controller's end of a run: outputs (docs/protocol.md#outputs), metrics, gates and reports, once
all cases are done.

Runs once every case has finished (on the controller under xdist), so gates see the whole run. Each
gate is a test item collected after the cases (``plugin.GateItem``): the outcomes made here are what
those items report, so every report a team reads (the terminal, junit, pytest-html, Allure) has the gate
as a test; a check no item reports (a report snapshot) is reported by :func:`emit_entry`.
"""

from __future__ import annotations

import difflib
import functools
import importlib.metadata
import json
import os
import platform
import subprocess
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..analysis.numbers import compare_with_baseline
from ..analysis.suite import AdaptiveGates, analyse_suite
from ..files.baseline import baseline_side, side_of_outputs, transcript_links
from ..files.folders import OutFolder, SuiteFolder
from ..files.html import TranscriptLines, suite_outputs
from ..files.labels import suite_labels
from ..files.readwrite import write_atomic, write_lines_atomic
from ..files.replay import load_recording
from ..files.shards import parse_shard, write_shard_manifest
from ..files.work_store import WorkStore
from ..files.written_rows import WrittenRows
from ..fixtures import finish_tests
from ..gateway.ledger import merge_ledgers
from ..gateway.shared import REPLAY_THEN_LIVE
from ..gateway.store import content_key
from ..process.replay import miss_message, miss_reasons
from ..process.shards import options_json
from ..process.state import GaugeState
from ..records import (
    CaseRecord,
    LedgerRecord,
    SuiteMeta,
    content_hash,
    dumps,
)
from ..records.checks import CheckEntry, gate_nodeid
from ..records.json_types import JSONObject
from ..run.judge import JUDGE_SYSTEM_PROMPT
from .otel_setup import otel_settings
from .pending import complete, mark_pending, provisional
from .verdict import append_step_summary, ci_active, gate_outcome

if TYPE_CHECKING:
    from ..analysis.gates import GateResult
    from ..options import GaugeOptions
    from ..process.adaptive import AdaptiveRun
    from ..records.html import SuiteOutputs
    from ..records.run_side import RunSide
    from ..report import ReportContext

__all__ = [
    "SuiteReports",
    "Written",
    "emit_entry",
    "finish_run",
    "gate_entry",
    "report_suite",
    "run_side",
    "write_summary",
]


def _jsonl(rows: Sequence[Mapping[str, object]]) -> str:
    return "".join(dumps(r) + "\n" for r in rows)


@functools.cache
def _installed_versions() -> tuple[tuple[str, str], ...]:
    """Python's and the installed distributions' versions, read once per process: each metadata lookup
    scans ``sys.path`` (about 18 ms of CPU for the six, on every suite's end)."""
    out = [("python", platform.python_version())]
    for dist in ("pytest-gauge", "pytest", "openai", "numpy", "pytest-xdist", "syrupy"):
        try:
            out.append((dist, importlib.metadata.version(dist)))
        except importlib.metadata.PackageNotFoundError:
            out.append((dist, "not installed"))
    return tuple(out)


def _git_commit(folder: Path) -> str | None:
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=folder, capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def _needed(meta: SuiteMeta) -> dict[str, list[tuple[str, int]]]:
    """Each agent's transcripts of the selected cases, (task, sample) in task then sample order."""
    task_rank = {str(t["task_id"]): i for i, t in enumerate(meta.tasks)}
    needed: dict[str, set[tuple[str, int]]] = {a: set() for a in meta.agents}
    for case in meta.selected_cases():
        needed[case.left].add((case.task_id, case.sample))
        needed[case.right].add((case.task_id, case.sample))
    return {a: sorted(keys, key=lambda k: (task_rank[k[0]], k[1])) for a, keys in needed.items()}


def _agent_rows(
    work: WorkStore, meta: SuiteMeta, agent: str, keys: list[tuple[str, int]]
) -> Iterator[JSONObject]:
    """One agent's transcript rows (or their errors), a work-store entry at a time."""
    for task_id, sample in keys:
        entry = work.get(content_key(["transcript", meta.name, task_id, agent, sample]))
        row = None if entry is None else _transcript_row(entry, task_id, agent, sample)
        if row is not None:
            yield row


def _transcript_row(entry: Mapping[str, Any], task_id: str, agent: str, sample: int) -> dict[str, Any] | None:
    """An ``agents/<agent>.jsonl`` row from a transcript's work-store entry, as its JSON stands (the entry
    is the result's ``to_json``, written this run: reading it into records to write it back out cost a
    tenth of a second at the end of a 1,578-case run); a failure's row names the error."""
    if not entry.get("ok"):
        return {
            "task_id": task_id,
            "agent": agent,
            "sample": sample,
            "error": str(entry.get("error")),  # WorkFailure.error, as work_result_from_json reads it
        }
    if "transcript" not in entry:
        return None  # a judgment's entry under a transcript's key: never written so
    return {**entry["transcript"], "spend": entry["spend"], "score": entry.get("score")}


Written = tuple[dict[str, Any], Mapping[str, Iterable[Mapping[str, Any]]]]
"""A suite's outputs as just written: the manifest and each agent's transcript rows (at the end of a run,
read back from the files written: see :class:`~pytest_gauge._internal.files.written_rows.WrittenRows`)."""


def write_outputs(
    state: GaugeState,
    meta: SuiteMeta,
    records: list[CaseRecord],
    ledger: Sequence[LedgerRecord],
    out: Path,
    interrupted: str | None = None,
) -> Written:
    """tasks.jsonl, agents/<agent>.jsonl, pairs/pair_results.jsonl, agent_runs.jsonl, manifest.json
    (with ``interrupted: "interrupted: N of M cases"`` when the run was stopped); returns the manifest
    and each agent's transcript rows as written (the HTML page is made from them)."""
    folder = SuiteFolder(out)
    tasks_text = _jsonl([{"format_version": 1}, *meta.tasks])
    write_atomic(folder.tasks, tasks_text)
    work, needed = WorkStore(state.run_folder.work), _needed(meta)
    for agent, keys in needed.items():  # a row at a time: the rows are read back when needed
        write_lines_atomic(
            folder.transcripts(agent), (dumps(r) + "\n" for r in _agent_rows(work, meta, agent, keys))
        )
    write_lines_atomic(folder.pairs, (dumps(r.to_json()) + "\n" for r in records))
    write_lines_atomic(folder.ledger, (dumps(r.to_json()) + "\n" for r in ledger))
    opts = state.options
    manifest = {
        "format_version": 1,
        "suite": meta.name,
        "run_id": state.run_id,
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "seed": opts.seed,
        "backend": opts.backend,
        "cache": opts.cache_mode,
        "versions": dict(_installed_versions()),
        "models": dict(meta.models),
        "settings": dict(meta.settings),
        "hashes": {
            "tasks": content_hash(tasks_text),
            "judge_prompt": content_hash(JUDGE_SYSTEM_PROMPT),
            **{f"prompt:{k}": content_hash(v) for k, v in sorted(meta.prompts.items()) if v},
        },
        "git_commit": _git_commit(Path(meta.folder)),
        "cases_total": len(meta.cases),
        "cases_selected": len(meta.selected),
        "cases_recorded": len(records),
        **({"interrupted": interrupted} if interrupted else {}),
    }
    write_atomic(folder.manifest, dumps(provisional(manifest, out)) + "\n")  # complete() once reported
    return manifest, WrittenRows(out, list(needed))


def html_page(
    meta: SuiteMeta,
    out: Path,
    written: Written,
    records: Sequence[CaseRecord],
    ledger: Sequence[LedgerRecord],
    reports: Mapping[str, str],
) -> SuiteOutputs:
    """The suite's HTML page values from what the run has just written to ``out``: the manifest and the
    agents' transcript files (``written``, read on access), the records, the ledger and the reports (the
    agents in the order of their files, as a folder read back gives them)."""
    manifest, agent_rows = written
    metrics = reports.get("metrics.json")
    folder = SuiteFolder(out)
    return suite_outputs(
        meta.name,
        manifest=manifest,
        task_rows=meta.tasks,
        records=records,
        transcripts=TranscriptLines(
            folder.transcripts(a) for a in sorted(agent_rows, key=lambda a: f"{a}.jsonl")
        ),
        ledger=ledger,
        elo_svg=reports.get("elo.svg"),
        metrics=json.loads(metrics) if metrics else {},
        history=json.loads(reports["history.json"]) if "history.json" in reports else None,
    )


def _module_id(session: pytest.Session, meta: SuiteMeta) -> str:
    """The suite module's node id (as the process that collected it named it: a worker started in
    another folder has the same ids, not the same paths)."""
    if "::" in meta.nodeid_prefix:
        return meta.nodeid_prefix.rsplit("::", 1)[0]
    module = Path(meta.module_path)
    try:
        return module.relative_to(session.config.rootpath).as_posix()
    except ValueError:
        return module.as_posix()


def emit_entry(session: pytest.Session, entry: CheckEntry) -> None:
    """Report a check that no test item reported (a report snapshot; a gate whose item did not run:
    the run stopped first) as a test entry on this process: setup, call and teardown reports like a
    test's, so the terminal, ``--junitxml`` and pytest-html all count it, and a failure fails the run."""
    group, name = entry.group, entry.name
    rel = entry.nodeid.split("::", 1)[0]
    longrepr: Any = None
    if entry.outcome == "skipped":
        longrepr = (rel, 0, f"{group} {name}: {entry.message}")
    elif entry.outcome == "failed":
        longrepr = f"{group} {name} [{entry.suite}]\n{entry.message}"
    location = (rel, None, f"{group} {name}")
    hook = session.config.hook
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    reported = int(getattr(reporter, "reported_progress", 0) or 0)
    if reported >= session.testscollected:  # never past 100% (xdist counts only the workers' cases)
        session.testscollected = reported + 1
    hook.pytest_runtest_logstart(nodeid=entry.nodeid, location=location)
    for when, outcome, text in (("setup", "passed", None), ("call", entry.outcome, longrepr)):
        if when == "call" and entry.outcome == "skipped":
            when, outcome = "setup", "skipped"  # as pytest reports a test skipped before its call
        now = time.time()
        report = pytest.TestReport(
            nodeid=entry.nodeid,
            location=location,
            keywords={f"gauge_{group}": 1},
            outcome=outcome,  # type: ignore[arg-type]
            longrepr=text,
            when=when,  # type: ignore[arg-type]
            sections=[],
            duration=0.0,
            start=now,
            stop=now,
            user_properties=list(entry.properties),
        )
        hook.pytest_runtest_logreport(report=report)
        if outcome == "skipped":
            break
    now = time.time()
    teardown = pytest.TestReport(
        entry.nodeid, location, {f"gauge_{group}": 1}, "passed", None, "teardown", [], 0.0, now, now,
        list(entry.properties),
    )  # fmt: skip
    hook.pytest_runtest_logreport(report=teardown)
    hook.pytest_runtest_logfinish(nodeid=entry.nodeid, location=location)


def _number(x: float | None) -> str:
    return "none" if x is None else f"{x:.6g}"


def gate_entry(module_id: str, meta: SuiteMeta, result: GateResult, *, strict_skips: bool) -> CheckEntry:
    """One gate's test outcome (under CI, ``strict_skips``, a skipped gate fails) with its numbers as
    properties: value, interval, threshold, n, status and reproducibility."""
    outcome, message = gate_outcome(result, strict_skips=strict_skips)
    canonical = result.gate.canonical()
    props = [
        ("gauge_gate", canonical),
        ("gauge_status", result.status),
        ("gauge_value", _number(result.value)),
        ("gauge_interval", f"[{_number(result.low)}, {_number(result.high)}]"),
        ("gauge_threshold", f"{result.gate.op} {_number(result.gate.threshold)}"),
        ("gauge_n", str(result.n)),
    ]
    if result.reproducibility is not None:
        repro = result.reproducibility
        rate = f"same tasks {repro.same_tasks:.3f}, fresh {repro.fresh_tasks:.3f}"
        props.append(("gauge_reproducibility", rate))
    nodeid = gate_nodeid(module_id, canonical)
    return CheckEntry(nodeid, "gates", canonical, meta.name, outcome, message, tuple(props))  # type: ignore[arg-type]


def _gate_note(name: str, results: list[Any], *, strict: bool) -> str | None:
    """The loud summary line for a suite's skipped gates, or None when none was skipped."""
    skipped = sum(1 for r in results if r.status == "skipped")
    if not skipped:
        return None
    noun = "gate" if skipped == 1 else "gates"
    if strict:
        return f"{skipped} {noun} skipped in suite {name} (partial run): FAILED because CI is set"
    return (
        f"{skipped} {noun} skipped in suite {name} (partial run): NOT CHECKED; with CI set this run fails"
        " (--gauge-allow-skipped-gates to allow)"
    )


def check_report_snapshots(
    session: pytest.Session, meta: SuiteMeta, reports: dict[str, str]
) -> list[CheckEntry]:
    """Opt-in (``--gauge-snapshot-reports``): compare the suite's reports with the snapshots stored in
    ``<suite>/gauge-snapshots/``; ``--snapshot-update`` (syrupy's flag) writes them."""
    from ..report import SNAPSHOT_REPORTS  # deferred: keeps numpy off the import of finish.outputs

    folder = Path(meta.folder) / "gauge-snapshots"
    update = bool(session.config.getoption("update_snapshots", False))
    module_id = _module_id(session, meta)
    entries = []
    for name in SNAPSHOT_REPORTS:
        if name in reports:
            outcome, message = _snapshot_check(folder / name, name, reports[name], update=update)
            nodeid = f"{module_id}::snapshots[{name}]"
            entries.append(CheckEntry(nodeid, "snapshots", name, meta.name, outcome, message))  # type: ignore[arg-type]
    return entries


def _snapshot_check(path: Path, name: str, text: str, *, update: bool) -> tuple[str, str]:
    """One report against its stored snapshot: the entry's outcome and message (written when
    ``update``, passed when equal, failed with a short unified diff or the missing file named)."""
    if update:
        write_atomic(path, text)
        return "passed", ""
    if not path.is_file():
        return "failed", f"no snapshot at {path}; run with --snapshot-update to create it"
    stored = path.read_text(encoding="utf-8")
    if stored == text:
        return "passed", ""
    diff = list(
        difflib.unified_diff(stored.splitlines(), text.splitlines(), "snapshot", "this run", lineterm="", n=1)
    )
    shown = "\n".join(diff[:80]) + (f"\n... {len(diff) - 80} more diff lines" if len(diff) > 80 else "")
    return (
        "failed",
        f"{name} differs from its snapshot {path} (review, then --snapshot-update to accept):\n{shown}",
    )


@dataclass
class SuiteReports:
    """A suite's analysis rendered: the report context (metrics, Elo, gates...), the gate results and the
    rendered reports (already written to ``<out>/reports``)."""

    ctx: ReportContext
    results: list[GateResult]
    reports: dict[str, str]


def report_suite(
    meta: SuiteMeta,
    records: list[CaseRecord],
    ledger: Sequence[LedgerRecord],
    opts: GaugeOptions,
    out: Path,
    written: Written,
    *,
    partial: bool,
    deferred: bool = False,
    report_options: GaugeOptions | None = None,
    interrupted: str | None = None,
    adaptive: AdaptiveGates | None = None,
    flake_rates: Mapping[str, float] | None = None,
) -> SuiteReports:
    """The suite analysed (:func:`~pytest_gauge._internal.analysis.suite.analyse_suite`) and every report
    rendered and written under ``out/reports``. Shared by the end of a run and by ``python -m pytest_gauge
    merge``. ``written``: the manifest and transcript rows just written to ``out`` (the baseline comparison's
    side of this run is made from them, not read back). ``report_options``: the options the reports show (the
    run's, with the prices actually used); the other arguments are
    :func:`~pytest_gauge._internal.analysis.suite.analyse_suite`'s."""
    from ..report import (  # deferred: keeps numpy off the import of finish.outputs
        ReportContext,
        render_reports,
    )
    from ..report.common import failures_by_agent  # deferred: keeps numpy off the import

    def current() -> RunSide:
        return run_side(out, meta, written, records, ledger)

    analysis = analyse_suite(
        meta,
        records,
        ledger,
        opts,
        comparison=compare_with_baseline(
            baseline_side(opts.baseline, meta.name, SuiteFolder(out).reports), opts, current
        ),
        labels=suite_labels(meta.name, opts.labels),
        partial=partial,
        deferred=deferred,
        flake_rates=flake_rates,
        interrupted=interrupted,
        adaptive=adaptive,
        case_hashes=_case_hashes(records, written) if opts.labels else None,
    )
    numbers = analysis.numbers
    comparison, elo = numbers.comparison, numbers.elo
    quoted = report_options or opts
    ctx = ReportContext(
        meta=meta,
        records=records,
        ledger=ledger,
        metrics=numbers.metrics,
        gates=analysis.results,
        seed=quoted.seed,
        backend=quoted.backend,
        prices=quoted.prices,
        elo=elo.result if elo is not None else None,
        baseline=comparison,
        baseline_note=numbers.note if opts.baseline else "",
        repeats=numbers.repeats,
        interrupted=interrupted,
        adaptive=adaptive.summary if adaptive is not None else None,
        elo_report=elo,
        baseline_link=_baseline_link(opts, out) if comparison is not None else "",
        familywise=opts.familywise,
        agent_failures=failures_by_agent(written[1]),
        unsandboxed=opts.unsandboxed,
    )
    reports = render_reports(ctx)
    for filename, text in reports.items():
        write_atomic(SuiteFolder(out).report(filename), text)
    return SuiteReports(ctx, analysis.results, reports)


def _case_hashes(records: Sequence[CaseRecord], written: Written) -> dict[str, str]:
    """Each case's transcripts hash (what a label was given on) from the transcripts just written."""
    from ..records.labels import case_transcripts, seen_text  # deferred: keeps numpy off the import

    seen = {
        (r["task_id"], r["agent"], int(r["sample"])): seen_text(r) for v in written[1].values() for r in v
    }
    cases = ((r.case_id, r.task_id, r.agent_left, r.agent_right, r.sample) for r in records)
    return case_transcripts(cases, seen)


def run_side(
    out: Path,
    meta: SuiteMeta,
    written: Written,
    records: Sequence[CaseRecord],
    ledger: Sequence[LedgerRecord],
) -> RunSide:
    """This run's side of a baseline comparison from the outputs just written to ``out``, in memory: the
    side :func:`~pytest_gauge._internal.files.baseline.load_run_side` reads back from the folder (one
    builder)."""
    manifest, agent_rows = written
    folder = SuiteFolder(out)
    files = [(folder.transcripts(a), agent_rows[a]) for a in sorted(agent_rows, key=lambda a: f"{a}.jsonl")]
    links = transcript_links(files, folder.reports)
    return side_of_outputs(manifest, meta.tasks, records, [r.to_json() for r in ledger], links)


def _baseline_link(opts: GaugeOptions, out: Path) -> str:
    """The baseline folder as baseline.md links it: relative to the suite's reports/ folder."""
    return Path(os.path.relpath(str(opts.baseline), SuiteFolder(out).reports)).as_posix()


def _defer_to_merge(
    state: GaugeState,
    meta: SuiteMeta,
    out: Path,
    manifest: Mapping[str, Any],
    gates: int,
    *,
    interrupted: bool,
) -> None:
    """A shard's end of suite: its shard manifest written, its gates left to ``merge``."""
    opts = state.options
    shard, options = parse_shard(str(opts.shard)), options_json(opts)
    write_shard_manifest(out, meta, shard, options, manifest, interrupted=interrupted)
    state.gate_notes.append((False, f"{gates} gates of suite {meta.name} deferred to merge"))


def finish_run(session: pytest.Session, state: GaugeState, *, interrupted: bool) -> list[CheckEntry]:
    """Write every suite's outputs and reports, evaluate its gates and report snapshots: their test
    outcomes, which the gate items (or, for what no item reports, :func:`emit_entry`) report."""
    ledger_all = merge_ledgers(state.run_folder.ledgers())
    finish_tests(session.config, Path(state.options.out_dir), ledger_all)
    metas = state.suite_metas()
    entries: list[CheckEntry] = []
    if not metas:
        return entries
    opts = state.options
    strict = ci_active(os.environ) and not opts.allow_skipped_gates
    from .history import history_run, open_history  # deferred: keeps numpy off the import of finish.outputs
    from .misses import add_misses_section  # deferred: keeps numpy off the import of finish.outputs

    pages: list[tuple[Path, SuiteOutputs]] = []
    history = open_history(state)
    otel, telemetry = otel_settings(session.config, os.environ), list[Any]()
    for meta in metas:
        name = meta.name
        if not meta.selected and not opts.shard:  # every case deselected: so are its gates
            count = len([*meta.gates, *opts.gates])
            if count:
                line = f"{count} gates deselected in suite {name} (no case selected)"
                state.gate_notes.append((False, line))
            continue
        records = state.ordered_records(meta)
        ledger = ledger_all.of_suite(name)
        out = Path(opts.out_dir) / name
        label = f"interrupted: {len(records)} of {len(meta.selected)} cases" if interrupted else None
        adaptive = None
        if state.adaptive is not None:
            adaptive, meta = _adaptive_gates(state.adaptive, meta, ledger, label)
        partial = len(meta.selected) < len(meta.cases) or interrupted
        mark_pending(out, meta, opts, partial=partial, label=label)
        written = write_outputs(state, meta, records, ledger, out, label)
        shown = replace(opts, prices=opts.prices_for(str(m) for m in meta.models.values() if m))
        analysis = report_suite(
            meta, records, ledger, opts, out, written, partial=partial, deferred=bool(opts.shard),
            report_options=shown,
            interrupted=label,
            adaptive=adaptive,
            flake_rates=history.flake_rates(meta) if history is not None else None,
        )  # fmt: skip
        if opts.shard:
            _defer_to_merge(state, meta, out, written[0], len(analysis.results), interrupted=interrupted)
        if opts.snapshot_reports and not partial:
            entries += check_report_snapshots(session, meta, analysis.reports)
        state.finished[name] = {"ctx": analysis.ctx, "out": out, "manifest": written[0]}
        if opts.cache_mode == REPLAY_THEN_LIVE:
            add_misses_section(ledger, analysis.reports, out)
        if history is not None:
            run = history_run(meta, records, analysis.results, written[0], opts.shard)
            state.finished[name]["history"] = history.add(run, analysis.reports, out)
        pages.append((out, html_page(meta, out, written, records, ledger, analysis.reports)))
        skip_note = None if opts.shard else _gate_note(name, analysis.results, strict=strict)
        state.gate_notes += [(True, skip_note)] if skip_note else []
        if not opts.shard:  # a shard's gates are deferred to merge
            module_id = _module_id(session, meta)
            entries += [gate_entry(module_id, meta, r, strict_skips=strict) for r in analysis.results]
        if otel is not None:
            from .otel import SuiteTelemetry  # deferred: the export's module, for a run that asks for it

            gates = () if opts.shard else analysis.results
            telemetry.append(SuiteTelemetry(meta, records, ledger, written[1], written[0], gates, strict))
    from .html import write_html_pages  # deferred: keeps numpy off the import of finish.outputs

    if pages:
        write_html_pages(Path(opts.out_dir), pages)
    for name in state.finished:  # every report written: only now does a manifest say the suite is done
        complete(state.finished[name]["out"], state.finished[name]["manifest"])
    if history is not None:
        history.write(state)  # once, after every report
    if otel is not None and telemetry:
        from .otel import export_run  # deferred: imports the OpenTelemetry SDK, asked for only

        state.gate_notes.append((False, export_run(telemetry, otel)))
    return entries


def _adaptive_gates(
    run: AdaptiveRun, meta: SuiteMeta, ledger: Sequence[LedgerRecord], interrupted: str | None
) -> tuple[AdaptiveGates, SuiteMeta]:
    """An adaptive run's gates for the suite, and the suite with only the cases its looks needed
    selected (the others were skipped as not needed, not missing)."""
    stop = run.looks.stopped_after
    if stop is not None:
        task = {c.case_id: c.task_id for c in meta.cases}
        prefix = f"{meta.name}::"
        kept = [c for c in meta.selected if run.plan.look_of(meta.name, task[c.removeprefix(prefix)]) <= stop]
        meta = replace(meta, selected=tuple(kept))
    ended = interrupted or run.ended() or "its last look gave no number for it"
    return AdaptiveGates(run.decisions(meta.name), ended, run.summary(meta.name, ledger)), meta


def _replay_misses(state: GaugeState, name: str, info: dict[str, Any]) -> str | None:
    """On replay, one message for the suite's cases that could not be replayed (how many, the first few,
    the likely reasons from the recording against this run's manifest), or None."""
    opts = state.options
    if opts.backend != "replay":
        return None
    ctx = info["ctx"]
    recorded = {r.case_id for r in ctx.records}
    prefix = f"{name}::"
    missing = [c.removeprefix(prefix) for c in ctx.meta.selected if c.removeprefix(prefix) not in recorded]
    if not missing:
        return None

    recording = load_recording(opts.cassettes, name) if opts.cassettes else None
    hashes = info["manifest"].get("hashes") or {}  # the manifest as written, not read back
    reasons = miss_reasons(recording, ctx.meta.models, opts.seed, hashes, opts.cassettes)
    return miss_message(name, missing, reasons)


def write_summary(terminalreporter: Any, state: GaugeState) -> None:
    """The compact end-of-run table, once, on the controller; the GitHub step summary (Markdown, when
    ``GITHUB_STEP_SUMMARY`` is set) and ``pr-comment.md``."""
    from ..analysis.misses import live_misses  # deferred: keeps numpy off the import of finish.outputs
    from ..report import (  # deferred: keeps numpy off the import of finish.outputs
        render_summary,
        unpriced_warnings,
    )
    from ..report.github import (  # deferred: keeps numpy off the import of finish.outputs
        render_pr_comment,
        render_step_summary,
        report_link,
    )
    from ..report.history import history_lines  # deferred: keeps numpy off the import of finish.outputs
    from ..report.misses import misses_line  # deferred: keeps numpy off the import of finish.outputs

    texts = []
    link = report_link(os.environ)
    for name in sorted(state.finished):
        info = state.finished[name]
        text = render_summary(info["ctx"])
        texts.append(render_step_summary(info["ctx"], link))
        terminalreporter.write_sep("=", f"pytest-gauge: {name}")
        for line in text.splitlines():
            terminalreporter.write_line(line)
        for warning in unpriced_warnings(info["ctx"].ledger):
            terminalreporter.write_line(f"pytest-gauge {warning}", yellow=True)
        if state.options.cache_mode == REPLAY_THEN_LIVE:
            terminalreporter.write_line(f"pytest-gauge {misses_line(live_misses(info['ctx'].ledger))}")
        if "history" in info:
            for line in history_lines(info["history"]):
                terminalreporter.write_line(f"pytest-gauge {line}")
        miss = _replay_misses(state, name, info)
        if miss:
            terminalreporter.write_line(f"pytest-gauge {miss}", red=True)
        terminalreporter.write_line(f"outputs: {info['out']}")
    page = OutFolder(Path(state.options.out_dir)).page
    if state.finished and page.is_file():
        terminalreporter.write_line(f"HTML report: {page} (open it in a browser)")
    for loud, note in state.gate_notes:
        if loud:
            terminalreporter.write_sep("!", f"pytest-gauge: {note}", red=True, bold=True)
        else:
            terminalreporter.write_line(f"pytest-gauge: {note}")
    append_step_summary(os.environ, texts)
    if state.finished:
        contexts = [state.finished[name]["ctx"] for name in sorted(state.finished)]
        write_atomic(OutFolder(Path(state.options.out_dir)).pr_comment, render_pr_comment(contexts, link))
