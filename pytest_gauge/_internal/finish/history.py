"""The end of a run's verdict history (``--gauge-history``, docs/protocol.md#verdict-history): each
suite's run as a :class:`~pytest_gauge._internal.records.history.HistoryRun`, its view of the history in
conclusion.md, and the history file written once, on the controller, after every report.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..analysis.history import MERGED_SHARD, HistoryView, history_view, task_flakes, without_merged_shards
from ..files.folders import SuiteFolder
from ..files.history import HistoryError, append_runs, read_history
from ..files.readwrite import read_jsonl, write_atomic
from ..records import CaseRecord, SuiteMeta, content_hash
from ..records.history import AgentOutcome, GateOutcome, HistoryRun, TaskOutcome
from ..report.history import HISTORY_FILE, history_json, history_lines, render_history_section
from ..run.judge import JUDGE_SYSTEM_PROMPT

if TYPE_CHECKING:
    from ..analysis.gates import GateResult
    from ..process.state import GaugeState
    from .merge import ShardRun
    from .outputs import SuiteReports

__all__ = [
    "RunHistory",
    "history_run",
    "merged_history_run",
    "open_history",
    "past_flake_rates",
    "record_merges",
]

RULE_FIELDS = ("success_criteria", "hard_constraints")


def _hash(value: object) -> str:
    return content_hash(json.dumps(value, sort_keys=True, ensure_ascii=False))


def _setup_hashes(meta: SuiteMeta) -> tuple[str, str]:
    """The agents' (with the user simulator's) and the judge's hashes: models and prompts."""
    agents = {
        **{a: [meta.models.get(f"agent:{a}"), _hash(meta.prompts.get(f"agent:{a}"))] for a in meta.agents},
        "user_sim": [meta.models.get("user_sim"), _hash(meta.prompts.get("user_sim_extra"))],
    }
    judge = {
        "models": list(meta.judge_models),
        "prompt": content_hash(JUDGE_SYSTEM_PROMPT),
        "repeats": meta.judge_repeats,
        "format": meta.judge_format,
    }
    return _hash(agents), _hash(judge)


def _outcome(records: Sequence[CaseRecord]) -> str:
    """A task's outcome as canonical JSON: each case's preferred agent (or tie/error), each agent's
    rule successes by sample."""
    cases = {
        r.case_id: r.preferred_agent or ("error" if r.judge_error else str(r.judge_choice)) for r in records
    }
    success: dict[str, dict[str, bool]] = {}
    for r in records:
        success.setdefault(r.agent_left, {})[str(r.sample)] = r.task_success_left
        success.setdefault(r.agent_right, {})[str(r.sample)] = r.task_success_right
    return json.dumps({"cases": cases, "success": success}, sort_keys=True)


def _complete_tasks(meta: SuiteMeta, records: Sequence[CaseRecord]) -> dict[str, list[CaseRecord]]:
    """The tasks every case of which ran and was recorded (a partial task's outcome is not comparable)."""
    by_case = {r.case_id: r for r in records}
    by_task: dict[str, list[CaseRecord]] = {}
    missing: set[str] = set()
    for case in meta.cases:
        record = by_case.get(case.case_id)
        if record is None:
            missing.add(case.task_id)
        else:
            by_task.setdefault(case.task_id, []).append(record)
    return {t: rows for t, rows in by_task.items() if t not in missing}


def _task_key(meta: SuiteMeta, row: Mapping[str, Any], agents_hash: str, judge_hash: str) -> str:
    """The task's key: what its outcome may depend on (records/history.py's ``TaskOutcome.key``)."""
    rules_hash = _hash({k: row.get(k) for k in RULE_FIELDS})
    return _hash([meta.name, _hash(row), rules_hash, agents_hash, judge_hash])


def _task_outcomes(meta: SuiteMeta, complete: Mapping[str, list[CaseRecord]]) -> tuple[TaskOutcome, ...]:
    agents_hash, judge_hash = _setup_hashes(meta)
    out = []
    for row in meta.tasks:
        task_id = str(row["task_id"])
        if task_id not in complete:
            continue
        task_hash = _hash(row)
        rules_hash = _hash({k: row.get(k) for k in RULE_FIELDS})
        key = _task_key(meta, row, agents_hash, judge_hash)
        outcome = _outcome(complete[task_id])
        out.append(TaskOutcome(task_id, task_hash, rules_hash, agents_hash, judge_hash, key, outcome))
    return tuple(out)


def _agent_outcomes(meta: SuiteMeta, complete: Mapping[str, list[CaseRecord]]) -> tuple[AgentOutcome, ...]:
    """Each agent's successes over its transcripts of the complete tasks (one per task and sample)."""
    seen: dict[str, dict[tuple[str, int], bool]] = {a: {} for a in meta.agents}
    for task_id, rows in complete.items():
        for r in rows:
            seen[r.agent_left][(task_id, r.sample)] = r.task_success_left
            seen[r.agent_right][(task_id, r.sample)] = r.task_success_right
    return tuple(
        AgentOutcome(
            a,
            str(meta.models.get(f"agent:{a}") or ""),
            _hash(meta.prompts.get(f"agent:{a}")),
            sum(seen[a].values()),
            len(seen[a]),
        )
        for a in meta.agents
    )


def history_run(
    meta: SuiteMeta,
    records: Sequence[CaseRecord],
    results: Sequence[GateResult],
    manifest: Mapping[str, Any],
    shard: str | None,
) -> HistoryRun:
    """The suite's run as the history remembers it, from what the end of the run has just written. A
    shard's gates are deferred, not evaluated: it records none (the merge records the verdicts once)."""
    complete = _complete_tasks(meta, records)
    gates = tuple(GateOutcome(r.gate.canonical(), r.status, r.value, r.low, r.high, r.n) for r in results)
    gates = () if shard and shard != MERGED_SHARD else gates
    return HistoryRun(
        run_id=str(manifest["run_id"]),
        suite=meta.name,
        shard=shard or "",
        finished_at=str(manifest["finished_at"]),
        seed=int(manifest["seed"]),
        backend=str(manifest["backend"]),
        git_commit=manifest.get("git_commit"),
        hashes=tuple(sorted((str(k), str(v)) for k, v in (manifest.get("hashes") or {}).items())),
        tasks=_task_outcomes(meta, complete),
        agents=_agent_outcomes(meta, complete),
        gates=gates,
    )


def merged_history_run(
    meta: SuiteMeta,
    records: Sequence[CaseRecord],
    results: Sequence[GateResult],
    manifests: Sequence[Mapping[str, Any]],
) -> HistoryRun:
    """The merge's run of a sharded suite: every task and the merged gates, its run id the shards' joined
    with "+" (so a history that also holds the shards' own runs counts the sharded run once, and merging
    the same shards again replaces it), finished when its last shard did."""
    manifest = {
        **manifests[0],
        "run_id": "+".join(sorted(str(m["run_id"]) for m in manifests)),
        "finished_at": max(str(m["finished_at"]) for m in manifests),
    }
    return history_run(meta, records, results, manifest, MERGED_SHARD)


@dataclass
class RunHistory:
    """The history of a run being finished: the runs it held at the start (``past``) and this run's."""

    path: Path
    past: list[HistoryRun]
    runs: list[HistoryRun] = field(default_factory=list)

    def add(self, run: HistoryRun, reports: MutableMapping[str, str], out: Path) -> HistoryView:
        """This suite's run added; its view of the history appended to conclusion.md and written to
        ``reports/history.json`` for the HTML page's trend view (in ``reports`` and on disk)."""
        self.runs.append(run)
        view = history_view(self.past, run)
        section = render_history_section(view, self.path.name)
        reports["conclusion.md"] = reports["conclusion.md"].rstrip("\n") + "\n\n" + section
        write_atomic(SuiteFolder(out).report("conclusion.md"), reports["conclusion.md"])
        reports[HISTORY_FILE] = json.dumps(history_json(view), indent=1) + "\n"
        write_atomic(SuiteFolder(out).report(HISTORY_FILE), reports[HISTORY_FILE])
        return view

    def flake_rates(self, meta: SuiteMeta) -> dict[str, float]:
        """Each task's flake rate over the runs before this one with its current key (for
        ``exclude_flaky`` gates; a task without such runs has none)."""
        agents_hash, judge_hash = _setup_hashes(meta)
        keys = {str(row["task_id"]): _task_key(meta, row, agents_hash, judge_hash) for row in meta.tasks}
        past = without_merged_shards(self.past)
        return {f.task_id: f.rate for f in task_flakes(past, meta.name) if keys.get(f.task_id) == f.key}

    def write(self, state: GaugeState) -> None:
        """The run's suites appended to the file, once (a failure is a loud note, not a lost run)."""
        try:
            append_runs(self.path, self.runs)
        except HistoryError as exc:
            state.gate_notes.append((True, str(exc)))


def open_history(state: GaugeState) -> RunHistory | None:
    """The run's history when ``--gauge-history`` is given (None otherwise, or with a loud note when the
    file cannot be read now)."""
    if not state.options.history:
        return None
    path = Path(state.options.history)
    try:
        return RunHistory(path, read_history(path) if path.is_file() else [])
    except HistoryError as exc:
        state.gate_notes.append((True, str(exc)))
        return None


def past_flake_rates(path: Path, shard_ids: set[str]) -> Callable[[SuiteMeta], dict[str, float]] | None:
    """The history's flake rates by suite before the run being merged (its shards' own rows, run ids
    ``shard_ids``, left out), for a merge's ``exclude_flaky`` gates (None when the file cannot be read:
    :func:`record_merges` then says why)."""
    try:
        past = read_history(path) if path.is_file() else []
        return RunHistory(path, [r for r in past if r.run_id not in shard_ids]).flake_rates
    except HistoryError:
        return None


def record_merges(
    path: Path, shards: Mapping[str, Sequence[ShardRun]], merged: Mapping[str, SuiteReports], out_dir: Path
) -> list[str]:
    """``merge --history PATH``: each merged suite's run appended once (every task, the merged gates),
    its view of the history added to the merged conclusion.md; the terminal's lines (a file that cannot
    be read or written is an error line, the merge's verdicts stand)."""
    try:
        history = RunHistory(path, read_history(path) if path.is_file() else [])
    except HistoryError as exc:
        return [f"error: {exc}"]
    lines = []
    for suite, analysis in merged.items():
        runs = shards[suite]
        folder = SuiteFolder(out_dir / suite)
        meta = SuiteMeta.from_json(runs[0].shard["meta"])
        records = [CaseRecord.from_json(r) for r in read_jsonl(folder.pairs, missing_ok=True)]
        run = merged_history_run(meta, records, analysis.results, [r.manifest for r in runs])
        view = history.add(run, analysis.reports, folder.path)
        lines += [f"{suite}: {line}" for line in history_lines(view)]
    try:
        append_runs(path, history.runs)
    except HistoryError as exc:
        lines.append(f"error: {exc}")
    return lines
