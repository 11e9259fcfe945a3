"""Suite gates evaluated: each parsed gate (:mod:`.gate_grammar`) against suite metrics into pass / fail /
inconclusive / skipped results that can fail a pytest run. The grammar's names are re-exported here.

A gate on a cost (``total_cost``, ``cost_per_success``, a role's cost, the judge's share) is inconclusive
while any call of the run reported no usage (its cost is then a lower bound), unless it says
``allow_unpriced``. A gate with ``reproducible=0.9`` fails (``:inconclusive``: is inconclusive) when its
PASS would repeat on a rerun of the same tasks less than 90% of the time (analysis/reproducibility.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from .gate_grammar import (
    BASELINE_METRICS,
    DELTA,
    GRAMMAR,
    OPS,
    Gate,
    GateSyntaxError,
    Term,
    gate_arg,
    number_text,
    parse_gate,
    parse_gates,
    parse_term,
)
from .metric_table import DELTA_METRICS

if TYPE_CHECKING:
    from .reproducibility import Reproducibility

__all__ = [
    "BASELINE_METRICS",
    "COST_METRICS",
    "COUNT_METRICS",
    "DELTA",
    "DELTA_METRICS",
    "GRAMMAR",
    "OPS",
    "Gate",
    "GateResult",
    "GateSyntaxError",
    "MetricSource",
    "NoData",
    "Quantity",
    "QuantityLike",
    "Term",
    "count_noise",
    "evaluate_gate",
    "evaluate_gates",
    "fails_run",
    "gate_arg",
    "is_cost_gate",
    "is_count",
    "parse_gate",
    "parse_gates",
    "parse_term",
]

Status = Literal["pass", "fail", "inconclusive", "skipped"]

_NEGATED = {"<=": ">", ">=": "<", "<": ">=", ">": "<=", "==": "!="}
_MAX_DRIVERS = 10
SKIPPED_MESSAGE = "skipped: partial run (cases deselected), gates need the whole suite"


class NoData(KeyError):
    """A term a source knows but has no number for in this run (an agent without a judged case): the gate
    is inconclusive with this reason, not a failure for an unknown name."""


COUNT_METRICS: tuple[str, ...] = ("regressions", "fixes")
"""Gate terms that are exact counts of this run (no sampling interval): shown as counts, never with a
zero-width "95% CI 17.000–17.000"."""


COST_METRICS: dict[str, tuple[str, ...]] = {
    "total_cost": (),
    "cost_per_success": (),
    "judge_cost_share": (),
    "agent_cost": ("agent",),
    "user_sim_cost": ("user_sim",),
    "judge_cost": ("judge",),
}
"""Gate terms that are costs, with the roles whose calls they sum (empty: every role). While a call of
those roles reported no usage its cost is unknown, so the term is a lower bound (docs/protocol.md#costs)."""


class UsageSource(Protocol):
    """A metric source that knows how many calls reported no usage (``GateSource``, ``SuiteMetrics``)."""

    def without_usage(self, roles: tuple[str, ...]) -> int:
        """Calls of ``roles`` (empty: every role) whose response had no usage."""
        ...


def _cost_terms(gate: Gate) -> list[Term]:
    """The gate's cost terms, ``delta(total_cost)``'s inner term included."""
    found: list[Term] = []
    for term in (gate.left, gate.right):
        if term is not None and term.name == DELTA and len(term.args) == 1:
            try:
                term = parse_term(term.args[0])
            except GateSyntaxError:
                continue
        if term is not None and term.name in COST_METRICS:
            found.append(term)
    return found


def is_cost_gate(gate: Gate) -> bool:
    """Whether the gate compares a cost (a lower bound while calls lack usage: see ``allow_unpriced``)."""
    return bool(_cost_terms(gate))


def _without_usage(gate: Gate, source: object) -> int:
    """Calls without usage behind the gate's cost terms (0 for a gate on no cost)."""
    terms = _cost_terms(gate)
    if not terms or not hasattr(source, "without_usage"):
        return 0
    counted: UsageSource = source
    if any(not COST_METRICS[t.name] for t in terms):
        return counted.without_usage(())
    return counted.without_usage(tuple(sorted({r for t in terms for r in COST_METRICS[t.name]})))


def _lower_bound_fails(gate: Gate, status: Status) -> bool:
    """A cost known to be at least X already above an upper limit fails whatever the unknown part is."""
    return (
        status == "fail"
        and gate.op in ("<", "<=")
        and gate.right is None
        and gate.left.name in COST_METRICS
        and gate.left.name != "judge_cost_share"
    )


def _unpriced(gate: Gate, status: Status, detail: str, missing: int) -> tuple[Status, str]:
    """A cost gate while ``missing`` calls reported no usage: inconclusive (never a pass) unless the gate
    says ``allow_unpriced`` or the known part alone already fails it."""
    calls = "call" if missing == 1 else "calls"
    note = f"{missing} {calls} without usage, so the cost is a lower bound (at least the value shown)"
    if gate.allow_unpriced:
        return status, f"{detail}; allowed (allow_unpriced): {note}"
    if _lower_bound_fails(gate, status):
        return status, f"{detail}; {note}"
    return "inconclusive", f"{note}; the known part: {detail}; add '; allow_unpriced' to gate on it"


def is_count(gate: Gate) -> bool:
    """Whether the gate compares an exact count (``regressions(agent)``, ``fixes(agent)``)."""
    return gate.right is None and gate.left.name in COUNT_METRICS


class QuantityLike(Protocol):
    """Anything with an estimate, its count and a 95% interval (``metrics.Estimate`` fits)."""

    @property
    def value(self) -> float | None: ...
    @property
    def n(self) -> int: ...
    @property
    def low(self) -> float | None: ...
    @property
    def high(self) -> float | None: ...


@dataclass(frozen=True)
class Quantity:
    """A plain estimate: point value, count, and 95% interval bounds (None when undefined)."""

    value: float | None
    n: int
    low: float | None = None
    high: float | None = None


class MetricSource(Protocol):
    """Where gates read suite metrics; raises KeyError (message lists the known names) if unknown."""

    def lookup(self, name: str, args: tuple[str, ...]) -> QuantityLike: ...

    def difference(self, left: Term, right: Term) -> QuantityLike:
        """``left - right`` with its interval taken from the same bootstrap resamples."""
        ...


@dataclass(frozen=True)
class GateResult:
    """The outcome of one gate; ``drivers`` are the cases that drove it (e.g. flipped pairs)."""

    gate: Gate
    status: Status
    value: float | None
    low: float | None
    high: float | None
    n: int
    message: str
    drivers: tuple[str, ...] = ()
    needed_n: int | None = None
    needed: str = ""
    needed_samples: int | None = None
    holm_level: float | None = None  # --gauge-familywise holm: the one-sided level it was tested at
    needed_range: tuple[int | None, int | None] = (None, None)  # needed_n at the effect's 50% interval ends
    reproducibility: Reproducibility | None = None  # how often a rerun would give the same verdict
    no_figure: str = ""  # why there is no reproducibility figure: not enough data to support one

    def to_json(self) -> dict[str, object]:
        """The JSON report row: canonical expression, status, numbers, message and the suite size that
        would decide the gate (``needed_n``, for inconclusive gates and intervals across the threshold),
        or the samples per task that would at the current size (``needed_samples``, when samples help)."""
        row: dict[str, object] = {
            "expr": self.gate.canonical(),
            "status": self.status,
            "value": self.value,
            "low": self.low,
            "high": self.high,
            "n": self.n,
            "message": self.message,
            "needed_n": self.needed_n,
            "needed_samples": self.needed_samples,
        }
        if self.holm_level is not None:
            row["holm_level"] = self.holm_level
        if self.reproducibility is not None:
            row["reproducibility"] = self.reproducibility.to_json()
        return row


def fails_run(result: GateResult) -> bool:
    """Whether this result fails the run: a fail always, an inconclusive unless the gate allows it."""
    if result.status == "fail":
        return True
    return result.status == "inconclusive" and not result.gate.allow_inconclusive


def _clean(x: float | None) -> float | None:
    """NaN means 'no number' (comparisons with it are meaningless), so it is treated as None."""
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else x


def _decimals(x: float) -> int:
    """Three decimals, or three significant digits for small magnitudes."""
    if x == 0 or not math.isfinite(x) or abs(x) >= 0.01:
        return 3
    return min(12, 2 - math.floor(math.log10(abs(x))))


def _fmt(x: float | None, against: float | None = None) -> str:
    """Format a number; with ``against``, add digits until it no longer prints equal to a different one."""
    if x is None:
        return "n/a"
    if not math.isfinite(x):
        return str(x)
    d = _decimals(x)
    if against is not None and math.isfinite(against) and x != against:
        while d < 12 and f"{x:.{d}f}" == f"{against:.{d}f}":
            d += 1
    return f"{x:.{d}f}"


def _context(value: float | None, low: float | None, high: float | None, n: int, with_value: bool) -> str:
    parts = [f"value {_fmt(value)}"] if with_value else []
    if low is None or high is None:
        parts.append("no CI")
    else:
        dash = "–" if low >= 0 else " to "  # "-35.2–20.1" would read as a subtraction
        parts.append(f"95% CI {_fmt(low)}{dash}{_fmt(high)}")
    parts.append(f"n={n}")
    return ", ".join(parts)


def _binomial_half_quantile(flips: int, q: float = 0.975) -> int:
    """The least ``k`` with ``P(Bin(flips, 1/2) <= k) >= q``."""
    total = 0.0
    for k in range(flips + 1):
        total += math.comb(flips, k) / 2.0**flips
        if total >= q:
            return k
    return flips


def count_noise(gate: Gate, source: MetricSource) -> str:
    """``; noise alone: about 4 of 8 flips, up to 7`` for a regressions/fixes gate: with no change each of
    the units that flipped either way (regressions + fixes) is as likely to go one way as the other
    (McNemar's model), so noise alone gives about half of them in one direction and at most the 97.5%
    quantile of Bin(flips, 1/2) in 97.5% of unchanged runs; empty without the other count."""
    other = "fixes" if gate.left.name == "regressions" else "regressions"
    try:
        this, that = source.lookup(gate.left.name, gate.left.args), source.lookup(other, gate.left.args)
    except KeyError:
        return ""
    if this.value is None or that.value is None:
        return ""
    flips = round(float(this.value) + float(that.value))
    return f"; noise alone: about {flips / 2:g} of {flips} flips, up to {_binomial_half_quantile(flips)}"


def _drivers_text(drivers: Sequence[str]) -> str:
    shown = ", ".join(drivers[:_MAX_DRIVERS])
    extra = len(drivers) - _MAX_DRIVERS
    return f"driven by: {shown}" + (f" … and {extra} more" if extra > 0 else "")


def evaluate_gate(
    gate: Gate,
    source: MetricSource,
    *,
    partial_run: bool = False,
    missing_cases: int = 0,
    drivers: Callable[[Gate], Sequence[str]] | None = None,
) -> GateResult:
    """Evaluate one gate: skipped on a partial run, fail on an unknown metric, inconclusive without a
    number to compare or with n < min_n, else pass/fail by comparing the point value or interval bound."""
    if partial_run:
        return GateResult(gate, "skipped", None, None, None, 0, SKIPPED_MESSAGE)
    expr = gate.expression()
    try:
        if gate.right is None:
            q = source.lookup(gate.left.name, gate.left.args)
        else:
            q = source.difference(gate.left, gate.right)
    except NoData as err:
        reason = err.args[0] if err.args and isinstance(err.args[0], str) else str(err)
        return GateResult(gate, "inconclusive", None, None, None, 0, f"INCONCLUSIVE {expr}: {reason}")
    except KeyError as err:
        reason = err.args[0] if err.args and isinstance(err.args[0], str) else str(err)
        if "unknown" not in reason.lower():
            reason = f"unknown metric: {reason}"
        return GateResult(gate, "fail", None, None, None, 0, f"FAIL {expr}: {reason}")

    value, low, high, n = _clean(q.value), _clean(q.low), _clean(q.high), int(q.n)
    compared = {"point": value, "lower": low, "upper": high}[gate.bound]
    label = {"point": "value", "lower": "lower 95% bound", "upper": "upper 95% bound"}[gate.bound]

    status: Status
    if compared is None:
        status = "inconclusive"
        if n == 0:
            detail = "no data (n=0)"
        elif gate.bound == "point":
            detail = f"the value is undefined ({_context(value, low, high, n, False)})"
        else:
            note = getattr(q, "note", None)
            why = f": {note}" if note else ""
            detail = f"no 95% interval{why}, so no {gate.bound} bound ({_context(value, low, high, n, True)})"
    elif gate.min_n is not None and n < gate.min_n:
        status = "inconclusive"
        shown_ctx = f"count {value:.0f}, n={n}" if is_count(gate) and value is not None else None
        detail = f"n={n} < min_n={gate.min_n} ({shown_ctx or _context(value, low, high, n, True)})"
    else:
        ok = OPS[gate.op](compared, gate.threshold)
        status = "pass" if ok else "fail"
        relation = gate.op if ok else _NEGATED[gate.op]
        if is_count(gate):  # an exact count: no interval to show, whatever the bound
            label, shown, context = "count", f"{compared:.0f}", f"n={n}{count_noise(gate, source)}"
        else:
            context = _context(value, low, high, n, gate.bound != "point")
            shown = _fmt(compared, gate.threshold)
        detail = f"{label} {shown} ({context}) {relation} {number_text(gate.threshold)}"

    missing = _without_usage(gate, source)
    if missing:
        status, detail = _unpriced(gate, status, detail, missing)
    parts = [f"{status.upper()} {expr}: {detail}"]
    if status == "inconclusive" and gate.allow_inconclusive:
        parts.append("allowed (allow_inconclusive)")
    if missing_cases > 0:
        noun = "case" if missing_cases == 1 else "cases"
        parts.append(f"{missing_cases} {noun} missing (errored); computed on the rest")
    found = tuple(drivers(gate)) if drivers is not None else ()
    if found:
        parts.append(_drivers_text(found))
    return GateResult(gate, status, value, low, high, n, "; ".join(parts), found)


def evaluate_gates(
    gates: Iterable[Gate],
    source: MetricSource,
    *,
    partial_run: bool = False,
    missing_cases: int = 0,
    drivers: Callable[[Gate], Sequence[str]] | None = None,
) -> list[GateResult]:
    """Evaluate every gate against the same source, in order."""
    return [
        evaluate_gate(g, source, partial_run=partial_run, missing_cases=missing_cases, drivers=drivers)
        for g in gates
    ]
