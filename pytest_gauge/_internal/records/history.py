"""The records of the verdict history (``--gauge-history``, docs/protocol.md#verdict-history): one suite's
run as remembered across runs, with its per-task, per-agent and per-gate outcomes.

One :class:`HistoryRun` per suite and run (and shard): what :mod:`pytest_gauge._internal.files.history` stores
in SQLite and :mod:`pytest_gauge._internal.analysis.history` reads flake rates and gate records from.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["AgentOutcome", "GateOutcome", "HistoryRun", "TaskOutcome"]


@dataclass(frozen=True)
class TaskOutcome:
    """One task's outcome in one run. ``key`` hashes everything the outcome may depend on (the suite, the
    task's row, its rules, the agents' and user simulator's models and prompts, the judge's models and
    prompt): two runs with the same key ran the same thing, so a different ``outcome`` is evidence of
    flakiness. ``outcome`` is canonical JSON: each case's preferred agent and each agent's successes."""

    task_id: str
    task_hash: str
    rules_hash: str
    agents_hash: str
    judge_hash: str
    key: str
    outcome: str


@dataclass(frozen=True)
class AgentOutcome:
    """One agent's rule successes over the run's complete tasks (one per task and sample)."""

    agent: str
    model: str
    prompt_hash: str
    successes: int
    attempts: int


@dataclass(frozen=True)
class GateOutcome:
    """One gate's outcome in one run (its canonical expression, status and numbers)."""

    expr: str
    status: str
    value: float | None
    low: float | None
    high: float | None
    n: int


@dataclass(frozen=True)
class HistoryRun:
    """One suite's run as the history remembers it; ``(run_id, suite, shard)`` is unique (``shard`` is
    ``""`` outside a sharded run). ``hashes`` are the manifest's (docs/protocol.md#outputs)."""

    run_id: str
    suite: str
    shard: str
    finished_at: str
    seed: int
    backend: str
    git_commit: str | None
    hashes: tuple[tuple[str, str], ...]
    tasks: tuple[TaskOutcome, ...] = ()
    agents: tuple[AgentOutcome, ...] = ()
    gates: tuple[GateOutcome, ...] = ()

    @property
    def identity(self) -> tuple[str, str, str]:
        """What makes the run unique in a history (merges skip a second copy)."""
        return (self.run_id, self.suite, self.shard)
