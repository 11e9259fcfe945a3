"""Gates decided look by look in an adaptive run: each gate's anytime-valid decision from
the suite's metrics at a look, and the gate results an adaptive run reports (docs/protocol.md#adaptive-runs).

The statistics (alpha-spending boundaries, the widened interval, the decision rule) live in
:mod:`.sequential`; this module applies them to every gate of a suite: which interval method a metric
used (so which quantile to widen), which gates cannot be made anytime-valid, and the message each
decision reports.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from .drift import drift_hold
from .gates import OPS, Gate, GateResult, MetricSource, QuantityLike, is_cost_gate, is_count
from .intervals import Z95, t_quantile
from .sequential import Look, decide

__all__ = [
    "AdaptiveSummary",
    "GateDecision",
    "adaptive_results",
    "decide_gates",
    "gate_key",
    "interval_quantiles",
    "quantity_of",
    "waits_for_last_look",
]

_CLUSTER_METHODS = ("cluster-wilson", "cluster-t", "task-wilson")
_TASK_BOOTSTRAPS = ("bootstrap-tasks", "paired-bootstrap-tasks", "paired-score")
_EXACT = "exact"  # accounting totals and counts: no interval


@dataclass(frozen=True)
class GateDecision:
    """A gate decided at a look: its verdict and the anytime-valid interval that decided it."""

    status: Literal["pass", "fail"]
    look: int
    tasks: int
    total_tasks: int
    value: float | None
    low: float | None
    high: float | None
    n: int


@dataclass(frozen=True)
class AdaptiveSummary:
    """Where an adaptive run ended, for one suite's reports: the look it stopped after (None: it ran
    every look), the tasks run, the gate decided last, and what the tasks not run would have cost
    (estimated from the tasks run)."""

    stopped_after: int | None
    planned: int
    tasks_run: int
    total_tasks: int
    last_gate: str | None
    calls_saved: int
    tokens_saved: int
    cost_saved: float | None
    undecided: tuple[str, ...] = ()  # gates the run could not decide (it ended before they were)
    budget_out: bool = False  # it stopped because the run's budget ran out, not because all was decided
    waiting: tuple[str, ...] = ()  # gates that cannot be decided before the last look, with why


def gate_key(gate: Gate) -> str:
    """A gate's identity across looks (its canonical text)."""
    return gate.canonical()


def interval_quantiles(q: QuantityLike, tasks: int) -> tuple[float | None, float]:
    """(df of the anytime-valid quantile, nominal quantile of the reported interval): Student t on the
    interval's own df (cluster-Wilson's Satterthwaite df) or tasks - 1 for the cluster-adjusted intervals;
    for a percentile bootstrap over tasks the normal 95% quantile, widened on t with tasks - 1 df; plain
    Wilson (not over tasks) on the normal quantile alone."""
    method = str(getattr(q, "method", "none"))
    over_tasks = float(max(tasks - 1, 1))
    if method in _CLUSTER_METHODS:
        own = getattr(q, "df", None)
        df = float(own) if isinstance(own, int | float) else over_tasks
        return df, float(t_quantile(df))
    if method in _TASK_BOOTSTRAPS:  # behaves like a t statistic over tasks (docs/protocol.md#adaptive-runs)
        return over_tasks, Z95
    return None, Z95


def quantity_of(gate: Gate, source: MetricSource) -> QuantityLike | None:
    """The gate's compared quantity (a term or a difference of two), None for an unknown metric."""
    try:
        if gate.right is None:
            return source.lookup(gate.left.name, gate.left.args)
        return source.difference(gate.left, gate.right)
    except KeyError:
        return None  # an unknown metric fails at the end of the run, with its message


def waits_for_last_look(gate: Gate, source: MetricSource) -> str | None:
    """Why the procedure cannot decide this gate before the last look (it keeps the run going), or None."""
    if gate.op == "==":
        return "'==' is only decided at the last look"
    q = quantity_of(gate, source)
    if q is None or is_count(gate) or _growing(gate, q):
        return None
    method = str(getattr(q, "method", "none"))
    if method == _EXACT:
        return "a difference of exact totals is only known at the last look"
    if method == "none" and q.value is not None:
        return "its metric has no interval to make anytime-valid"
    return None


def _growing(gate: Gate, q: QuantityLike) -> bool:
    """An exact total of one term (a cost): it only grows as tasks run, so it decides like a count."""
    return str(getattr(q, "method", "none")) == _EXACT and gate.right is None


def _drift(gate: Gate, q: QuantityLike, look: Look, status: str, order: Sequence[int] | None) -> str | None:
    """Why a rate gate decided at a look before the last must wait (:func:`.drift.drift_hold`), or None:
    a rate of one term with per-task counts whose tasks ``order`` puts in run order."""
    counts = getattr(q, "counts", None)
    if order is None or look.final or gate.right is not None or counts is None or len(counts) != 2:
        return None
    k, n = counts
    if len(k) != len(order) or str(getattr(q, "method", "")) != "cluster-wilson":
        return None
    index = list(order)

    def passes(value: float) -> bool:
        return bool(OPS[gate.op](value, gate.threshold))

    return drift_hold(k[index], n[index], look.total_tasks, passes, status, (q.low, q.high))


def _decide_one(
    gate: Gate, source: MetricSource, look: Look, order: Sequence[int] | None, held: dict[str, str]
) -> GateDecision | None:
    q = quantity_of(gate, source)
    if q is None:
        return None
    method = str(getattr(q, "method", "none"))
    n = int(q.n)
    if gate.min_n is not None and n < gate.min_n:
        return None
    if method == _EXACT and not _growing(gate, q) and not look.final:
        return None  # a difference of exact totals (of costs, say) need not grow: the last look decides
    df, nominal = interval_quantiles(q, look.tasks)
    wilson = method in ("cluster-wilson", "wilson", "task-wilson")  # recomputed at the look's quantile
    status, low, high = decide(
        gate, q.value, q.low, q.high, n, look=look, df=df, nominal_quantile=nominal, wilson=wilson,
        growing=_growing(gate, q),
    )  # fmt: skip
    if status is None:
        return None
    why = _drift(gate, q, look, status, order)
    if why is not None:
        held[gate.expression()] = why
        return None
    return GateDecision(status, look.index, look.tasks, look.total_tasks, q.value, low, high, n)


def decide_gates(
    gates: Iterable[Gate],
    source: MetricSource,
    look: Look,
    decided: Mapping[str, GateDecision],
    *,
    order: Sequence[int] | None = None,
    held: dict[str, str] | None = None,
) -> dict[str, GateDecision]:
    """The gates newly decided at this look (gates already decided keep their decision: a decision is
    final, or the error rate would grow with every look). ``order``: the metrics' per-task counts'
    indices in run order (None: no drift check); ``held`` receives, per gate expression, why a rate gate
    its interval decided waits (its rate may drift)."""
    held = {} if held is None else held
    found: dict[str, GateDecision] = {}
    for gate in gates:
        key = gate_key(gate)
        if key in decided or key in found:
            continue
        decision = _decide_one(gate, source, look, order, held)
        if decision is not None:
            found[key] = decision
    return found


def _number(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.4g}"


def _message(gate: Gate, d: GateDecision) -> str:
    where = f"look {d.look} ({d.tasks} of {d.total_tasks} tasks)"
    interval = f"{_number(d.value)} [{_number(d.low)}, {_number(d.high)}], n={d.n}"
    return (
        f"{d.status.upper()} {gate.expression()}: decided at {where}, anytime-valid 95% interval {interval}"
    )


def adaptive_results(
    ordinary: Sequence[GateResult], decided: Mapping[str, GateDecision], ended: str
) -> list[GateResult]:
    """The gate results of an adaptive run from the ordinary ones (evaluated on every case that ran):
    a decided gate reports the look and the anytime-valid interval that decided it; a gate undecided
    when the run ended (``ended``: why) is inconclusive, with the ordinary numbers for its "how many
    more tasks"."""
    results = []
    for r in ordinary:
        d = decided.get(gate_key(r.gate))
        if d is not None and is_cost_gate(r.gate) and r.status == "inconclusive":
            results.append(r)  # a cost with calls lacking usage is a lower bound: no look decides it
        elif d is None:
            message = f"INCONCLUSIVE {r.gate.expression()}: not decided when the run ended ({ended})"
            if r.gate.allow_inconclusive:
                message += "; allowed (allow_inconclusive)"
            results.append(replace(r, status="inconclusive", message=message))
        else:
            results.append(
                replace(
                    r,
                    status=d.status,
                    value=d.value,
                    low=d.low,
                    high=d.high,
                    n=d.n,
                    message=_message(r.gate, d),
                )
            )
    return results
