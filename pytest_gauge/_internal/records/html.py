"""The HTML report's input: one suite's outputs as typed values.

:mod:`pytest_gauge._internal.files.html` reads them from an output folder; they are plain frozen
values, so :mod:`.payload` and :mod:`.render` stay pure functions of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from . import CaseRecord, LedgerRecord, Transcript
from .json_types import JSONObject
from .labels import SampleCase

__all__ = [
    "GateRow",
    "LatencyRow",
    "MetricRow",
    "RoleCost",
    "RuleRow",
    "SuiteOutputs",
    "TaskRow",
    "TranscriptRow",
    "WatchRow",
    "redaction_names",
]


@dataclass(frozen=True)
class RuleRow:
    """One success criterion or hard constraint on one transcript, as the verifier decided it."""

    rule: str
    passed: bool
    detail: str
    weight: float = 1.0


@dataclass(frozen=True)
class TranscriptRow:
    """One line of ``agents/<agent>.jsonl``: the transcript (None when it failed), its cost and verdict."""

    task_id: str
    agent: str
    sample: int
    transcript: Transcript | None
    error: str | None
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = None
    reward: float | None = None
    task_success: bool | None = None
    criteria: tuple[RuleRow, ...] = ()
    constraints: tuple[RuleRow, ...] = ()


@dataclass(frozen=True)
class TaskRow:
    """One task as run: id, category, prompt."""

    task_id: str
    category: str
    prompt: str


FlipKey = tuple[str, str, int]
"""A flipped group of ``metrics.json``: (task_id, pair_id, sample)."""


@dataclass(frozen=True)
class GateRow:
    """One gate result of ``metrics.json``; ``drivers`` are its drivers' labels (case ids, flip groups,
    transcripts, tasks), ``driver_cases`` the ids of the cases they name (``metrics.json``'s)."""

    expr: str
    status: str
    value: float | None
    low: float | None
    high: float | None
    n: int
    threshold: float | None
    message: str
    drivers: tuple[str, ...] = ()
    driver_cases: tuple[str, ...] = ()
    reproducibility: tuple[float, float] | None = None  # (same tasks, fresh tasks): a rerun's same verdict


@dataclass(frozen=True)
class MetricRow:
    """One metric of ``metrics.json`` with its interval."""

    name: str
    value: float | None
    low: float | None
    high: float | None
    n: int
    method: str


@dataclass(frozen=True)
class RoleCost:
    """Nominal calls, tokens and cost of one role (``metrics.json`` ``costs.per_role``)."""

    role: str
    calls: int
    attempts: int
    input_tokens: int
    output_tokens: int
    cost: float | None
    usage_missing: int = 0  # calls without usage: the cost is then a lower bound


@dataclass(frozen=True)
class WatchRow:
    """What to watch for one (role, model) (``metrics.json`` ``costs.per_model``): nominal tokens per task,
    the share of attempts that were retries, 429 answers and the seconds the gateway asked to wait."""

    role: str
    model: str
    tokens_per_task: float
    retry_rate: float
    rate_limited: int
    asked_wait_s: float


@dataclass(frozen=True)
class LatencyRow:
    """p50/p95 seconds of one (role, model)'s successful live attempts (``metrics.json`` ``volatile``):
    they vary from run to run, so the page keeps them in its volatile block."""

    role: str
    model: str
    attempts: int
    p50: float
    p95: float


@dataclass(frozen=True)
class SuiteOutputs:
    """Everything the HTML report shows about one suite, read from its output folder."""

    name: str
    seed: int | None
    backend: str
    models: dict[str, str]
    tasks: tuple[TaskRow, ...]
    records: tuple[CaseRecord, ...]
    transcripts: Sequence[TranscriptRow]  # the run's files read on access (files/html.py), or rows
    ledger: Sequence[LedgerRecord]  # the run's columns (records/ledger_columns.py), or a folder's records
    gates: tuple[GateRow, ...] = ()
    metrics: tuple[MetricRow, ...] = ()
    costs: tuple[RoleCost, ...] = ()
    watch: tuple[WatchRow, ...] = ()
    latency: tuple[LatencyRow, ...] = ()  # volatile
    total_cost: float | None = None
    usage_missing: int = 0  # calls without usage in any role: ``total_cost`` is then a lower bound
    pair_class: dict[str, str] = field(default_factory=dict)
    flipped: tuple[FlipKey, ...] = ()  # the (task, pair, sample) groups whose verdict flipped with the order
    elo_svg: str | None = None
    baseline: JSONObject | None = None  # metrics.json's "baseline" block (--gauge-baseline), or None
    human: JSONObject | None = None  # metrics.json's "human" block (--gauge-labels), None without labels
    self_preference: JSONObject | None = None  # metrics.json's: a judge sharing a contestant's model
    sample: tuple[SampleCase, ...] = ()  # labels/sample.jsonl: the cases the labelling mode offers first
    history: JSONObject | None = None  # reports/history.json (--gauge-history): the trend view's data


def redaction_names(outputs: SuiteOutputs) -> list[str]:
    """The names the judge never saw: every agent of the suite and each agent's model."""
    agents = {r.agent_left for r in outputs.records} | {r.agent_right for r in outputs.records}
    agents |= {t.agent for t in outputs.transcripts}
    models = {m for k, m in outputs.models.items() if k.startswith("agent:")}
    return sorted(agents | models)
