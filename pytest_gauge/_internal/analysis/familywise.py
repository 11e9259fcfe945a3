"""Many gates at once: which gates can fail an unchanged system, by how much their
number inflates that chance, and Holm's step-down over them (``--gauge-familywise holm``).

A run fails when any gate fails. A gate that fails only when its interval is confidently on the wrong
side (``upper(x) >= thr``, ``upper(x) > thr``, ``lower(x) <= thr``, ``lower(x) < thr``: "fail when
confident it got worse") is a one-sided test at 2.5% whose rejection fails the run, so ``m`` of them fail
an unchanged system (every truth at its threshold) up to ``1 - 0.975^m`` of the time (independent gates;
at most ``m * 2.5%``). Gates that pass only when confident (``upper(x) <= thr``, ``lower(x) >= thr``) do
not add up that way: the run passes only when all of them pass. Holm's step-down keeps the family's
chance of a wrong failure at 2.5% (docs/protocol.md#family-wise-error): each confident-fail gate's
one-sided p-value is read off its interval with the same quantile arithmetic as an adaptive look (the
quantile at which the bound reaches the threshold), and the i-th smallest is tested at ``0.025 / (m - i
+ 1)`` until one is not rejected.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from .adaptive import interval_quantiles, quantity_of
from .gates import Gate, GateResult, MetricSource, Status, is_count
from .sequential import t_upper_tail, widen, widen_wilson

__all__ = [
    "ALPHA_SIDE",
    "FAMILYWISE_MODES",
    "FamilyWise",
    "apply_holm",
    "confident_fail",
    "family_of",
    "inflation",
]

ALPHA_SIDE = 0.025
"""Each gate's one-sided level (one side of a 95% interval), and the family's level under Holm."""
FAMILYWISE_MODES = ("per-gate", "holm")
_Q_MAX = 60.0


def confident_fail(gate: Gate) -> bool:
    """Whether the gate fails only when its interval is confidently on the wrong side of the threshold
    (an upper bound that must reach it, a lower bound that must stay under it); exact counts are not."""
    if is_count(gate):
        return False
    return (gate.bound == "upper" and gate.op in (">=", ">")) or (
        gate.bound == "lower" and gate.op in ("<=", "<")
    )


def inflation(m: int, alpha: float = ALPHA_SIDE) -> float:
    """The chance that ``m`` independent confident-fail gates, each at its threshold, fail the run."""
    return 1.0 - (1.0 - alpha) ** m if m > 0 else 0.0


@dataclass(frozen=True)
class FamilyWise:
    """A run's gates by kind, for the terminal and the reports: the confident-fail gates (which inflate
    an unchanged system's chance of failing), the confident-pass ones (which do not), point and count
    gates (not tests at a stated level), and the mode the run used."""

    mode: str
    confident_fail: tuple[str, ...]
    confident_pass: tuple[str, ...]
    point: tuple[str, ...]

    @property
    def inflated(self) -> float:
        """Per-gate: ``1 - 0.975^m`` over the confident-fail gates; Holm: 2.5% (or 0 without any)."""
        m = len(self.confident_fail)
        if self.mode == "holm":
            return ALPHA_SIDE if m else 0.0
        return inflation(m)

    def sentence(self) -> str:
        """One line: how many gates can fail an unchanged system and the chance that one does."""
        m = len(self.confident_fail)
        if m == 0:
            return "family-wise: no fail-when-confident gate (no gate kind that inflates a wrong failure)"
        each = f"{m} fail-when-confident gate{'s' if m != 1 else ''}"
        if self.mode == "holm":
            return f"family-wise: {each}, Holm's step-down (--gauge-familywise holm): at most 2.5% together"
        return (
            f"family-wise: {each} at 2.5% each: an unchanged system fails one up to "
            f"{self.inflated:.1%} of the time (--gauge-familywise holm: 2.5%)"
        )


def family_of(gates: Sequence[Gate], mode: str) -> FamilyWise:
    """The run's gates by kind (see :class:`FamilyWise`)."""
    fail = tuple(g.canonical() for g in gates if confident_fail(g))
    confident_pass = tuple(
        g.canonical() for g in gates if g.bound != "point" and not confident_fail(g) and not is_count(g)
    )
    point = tuple(g.canonical() for g in gates if g.bound == "point" or is_count(g))
    return FamilyWise(mode, fail, confident_pass, point)


_FAILS: dict[str, Callable[[float, float], bool]] = {
    ">=": lambda x, t: x < t,
    ">": lambda x, t: x <= t,
    "<=": lambda x, t: x > t,
    "<": lambda x, t: x >= t,
}
"""Whether a compared bound ``x`` fails the gate's comparison with threshold ``t``."""


def _bound_at(gate: Gate, value: float, low: float, high: float, q95: float, q: float, wilson: bool) -> float:
    """The gate's compared bound recomputed at quantile ``q`` (as an adaptive look widens it)."""
    if wilson:
        new_low, new_high = widen_wilson(value, low, high, quantile=q95, new_quantile=q)
    else:
        new_low, new_high = widen(value, low, high, factor=q / q95)
    bound = new_high if gate.bound == "upper" else new_low
    return float("nan") if bound is None else bound


def _tail(q: float, df: float | None) -> float:
    """One-sided tail of quantile ``q``: Student t on ``df``, or normal."""
    if df is None:
        return 0.5 * math.erfc(q / math.sqrt(2.0))
    return t_upper_tail(q, df)


def one_sided_p(gate: Gate, source: MetricSource, tasks: int) -> float | None:
    """The confident-fail gate's one-sided p-value: the tail of the quantile at which its bound reaches
    the threshold (bisection; below 0.025 exactly when the 95% bound is on the failing side). None
    without an interval."""
    q = quantity_of(gate, source)
    if q is None or q.value is None or q.low is None or q.high is None:
        return None
    value, low, high = float(q.value), float(q.low), float(q.high)
    if any(math.isnan(x) for x in (value, low, high)):
        return None
    if not _FAILS[gate.op](value, gate.threshold):
        return 1.0  # the point value is on the passing side: nothing to reject
    df, q95 = interval_quantiles(q, tasks)
    method = str(getattr(q, "method", ""))
    wilson = method in ("cluster-wilson", "wilson", "task-wilson")
    if method not in ("cluster-wilson", "cluster-t", "task-wilson"):
        df = None  # the interval's own quantile is the normal one (a bootstrap, Wilson, a score interval)
    lo, hi = 0.0, _Q_MAX
    if _FAILS[gate.op](_bound_at(gate, value, low, high, q95, hi, wilson), gate.threshold):
        return _tail(hi, df)
    for _ in range(40):  # the quantile at which the bound crosses the threshold (to 1e-10)
        mid = (lo + hi) / 2
        if _FAILS[gate.op](_bound_at(gate, value, low, high, q95, mid, wilson), gate.threshold):
            lo = mid
        else:
            hi = mid
    return _tail((lo + hi) / 2, df)


def _holm_levels(ps: Sequence[float], alpha: float = ALPHA_SIDE) -> tuple[list[float], list[bool]]:
    """Holm's step-down: each p's level ``alpha / (m - rank + 1)`` in ascending order, and whether it is
    rejected (every smaller p rejected at its own level too)."""
    m = len(ps)
    order = sorted(range(m), key=lambda i: (ps[i], i))
    levels, rejected = [0.0] * m, [False] * m
    going = True
    for rank, i in enumerate(order):
        levels[i] = alpha / (m - rank)
        going = going and ps[i] <= levels[i]
        rejected[i] = going
    return levels, rejected


def apply_holm(results: Sequence[GateResult], source: MetricSource, tasks: int) -> list[GateResult]:
    """The results with Holm's step-down over the confident-fail gates that passed or failed: a gate
    failing on its own 95% interval but not rejected at its Holm level passes; each such gate's message
    says its adjusted one-sided level (``holm level 0.0042, p=0.011``). Other gates are unchanged."""
    family = [
        (i, p)
        for i, r in enumerate(results)
        if confident_fail(r.gate) and r.status in ("pass", "fail")
        for p in [one_sided_p(r.gate, source, tasks)]
        if p is not None
    ]
    if not family:
        return list(results)
    levels, rejected = _holm_levels([p for _, p in family])
    out = list(results)
    for (i, p), level, reject in zip(family, levels, rejected, strict=True):
        r = out[i]
        status: Status = "fail" if reject and r.status == "fail" else "pass"
        note = f"holm level {level:.3g} (one-sided, {len(family)} gates), p={p:.2g}"
        message = r.message
        if status != r.status:
            message = status.upper() + message.removeprefix(r.status.upper())
            note += f": {r.status} on its own 95% interval, {status} under Holm"
        out[i] = replace(r, status=status, message=f"{message}; {note}", holm_level=level)
    return out
