"""Flake rates and gate records from the verdict history (docs/protocol.md#verdict-history): pure
functions of :class:`~pytest_gauge._internal.records.history.HistoryRun` values.

A task is flaky on evidence, never by declaration: among the runs that ran it with the same key (the
same task, rules, agents, user simulator and judge), its outcome (each case's preferred agent, each
agent's successes) was not always the same.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from ..records.history import HistoryRun
from .estimates import wilson

__all__ = [
    "DEFAULT_LAST",
    "MERGED_SHARD",
    "GateRecord",
    "HistoryView",
    "TaskFlake",
    "gate_records",
    "history_view",
    "task_flakes",
    "without_merged_shards",
]

DEFAULT_LAST = 10  # runs a gate's record shows
MERGED_SHARD = "merged"  # the shard of a merge's run; its run id joins the shards' with "+"


@dataclass(frozen=True)
class TaskFlake:
    """One task's record under one key: ``runs`` that ran it, ``differing`` of them whose outcome is not
    the most common one; ``rate`` = differing / runs with its 95% Wilson interval ``low``-``high``."""

    task_id: str
    key: str
    runs: int
    differing: int
    outcomes: int  # distinct outcomes seen
    rate: float
    low: float
    high: float

    @property
    def flaky(self) -> bool:
        """Seen with two different outcomes under the same key."""
        return self.outcomes > 1


@dataclass(frozen=True)
class GateRecord:
    """A gate's statuses over the suite's last runs that evaluated it, oldest first."""

    expr: str
    statuses: tuple[str, ...]

    def count(self, status: str) -> int:
        return sum(1 for s in self.statuses if s == status)


@dataclass(frozen=True)
class HistoryView:
    """What a run shows from its history: the suite's runs (this one included), this run's tasks' flake
    records under this run's keys and its gates' records over the last ``last`` runs."""

    suite: str
    runs: int
    flakes: tuple[TaskFlake, ...]
    gates: tuple[GateRecord, ...]
    last: int

    @property
    def flaky(self) -> tuple[TaskFlake, ...]:
        """The flaky tasks, highest rate first (then by task id)."""
        return tuple(sorted((f for f in self.flakes if f.flaky), key=lambda f: (-f.rate, f.task_id)))


def _flake(task_id: str, key: str, outcomes: Sequence[str]) -> TaskFlake:
    counts = Counter(outcomes)
    runs = len(outcomes)
    differing = runs - counts.most_common(1)[0][1]
    low, high = wilson(differing, runs)
    return TaskFlake(task_id, key, runs, differing, len(counts), differing / runs, low, high)


def task_flakes(runs: Sequence[HistoryRun], suite: str) -> list[TaskFlake]:
    """Every (task, key) of the suite's runs with its flake record, by task id then key."""
    outcomes: dict[tuple[str, str], list[str]] = {}
    for run in runs:
        if run.suite == suite:
            for task in run.tasks:
                outcomes.setdefault((task.task_id, task.key), []).append(task.outcome)
    return [_flake(task, key, found) for (task, key), found in sorted(outcomes.items())]


def gate_records(runs: Sequence[HistoryRun], suite: str, exprs: Sequence[str], last: int) -> list[GateRecord]:
    """Each gate's statuses over the suite's last ``last`` runs that evaluated it (runs oldest first)."""
    records = []
    for expr in exprs:
        statuses = [g.status for r in runs if r.suite == suite for g in r.gates if g.expr == expr]
        records.append(GateRecord(expr, tuple(statuses[-last:])))
    return records


def without_merged_shards(runs: Sequence[HistoryRun]) -> list[HistoryRun]:
    """The runs less the shard runs a merge's run stands for (its run id joins theirs with "+"): the
    merge holds every task and the merged gates, so a sharded run counts once."""
    merged = {(r.suite, part) for r in runs if r.shard == MERGED_SHARD for part in r.run_id.split("+")}
    return [r for r in runs if r.shard in ("", MERGED_SHARD) or (r.suite, r.run_id) not in merged]


def history_view(past: Sequence[HistoryRun], current: HistoryRun, last: int = DEFAULT_LAST) -> HistoryView:
    """The current run's view of its history: ``past`` (oldest first) followed by the run itself (shard
    runs a merge stands for left out)."""
    mine = [r for r in past if r.identity != current.identity and r.suite == current.suite] + [current]
    runs = without_merged_shards(mine)
    keys = {(t.task_id, t.key) for t in current.tasks}
    flakes = tuple(f for f in task_flakes(runs, current.suite) if (f.task_id, f.key) in keys)
    gates = tuple(gate_records(runs, current.suite, [g.expr for g in current.gates], last))
    return HistoryView(current.suite, len(runs), flakes, gates, last)
