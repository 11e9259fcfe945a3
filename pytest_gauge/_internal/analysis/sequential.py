"""Group-sequential statistics for adaptive runs: alpha spending over planned looks, exact
boundaries by recursive numerical integration, and the anytime-valid gate decision at each look.

An adaptive run takes its tasks in looks and re-evaluates every gate after each look. Looking at an
ordinary 95% interval after every look and stopping when it clears the threshold inflates the error
rate (Armitage, McPherson & Rowe 1969). Here each side of the interval is a one-sided test at
``ALPHA_SIDE = 0.025`` that *spends* its alpha over the looks (Lan & DeMets 1983) along the Kim & DeMets
power family ``alpha(t) = alpha * t**rho``, where ``t`` is the cumulative information fraction (tasks
done / tasks planned; tasks are the clusters). The critical value ``c_k`` of look ``k`` is chosen so that
the probability, under the null, of first crossing at look ``k`` is exactly ``alpha(t_k) - alpha(t_{k-1})``
for the canonical joint distribution ``Z_k = W(t_k) / sqrt(t_k)`` (Brownian motion ``W``): computed by
recursive numerical integration on a grid (Jennison & Turnbull, *Group Sequential Methods with
Applications to Clinical Trials*, 2000, ch. 7 and 19), not by simulation.

A gate's interval at look ``k`` is its metric's usual 95% interval, each side widened around the point
value by ``q_k / q_95`` (:func:`critical_quantile`, :func:`widen`; a Wilson interval is recomputed at
``q_k``, :func:`widen_wilson`); :func:`decide` turns that anytime-valid interval into pass / fail /
undecided. No interval gate is decided before :data:`MIN_TASKS` tasks (:func:`look_boundaries` spends no
alpha there). Pure functions, numpy and the standard library only.
docs/protocol.md#adaptive-runs states the method and the benchmark that chose :data:`RHO`.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import TYPE_CHECKING, Literal

import numpy as np

from .exact_tasks import beta_fraction
from .gates import OPS, Gate, is_count

if TYPE_CHECKING:
    from ..records import FloatArray

__all__ = [
    "ALPHA_SIDE",
    "MIN_TASKS",
    "RHO",
    "Decision",
    "Look",
    "boundaries",
    "critical_quantile",
    "crossing_probabilities",
    "decide",
    "equal_looks",
    "look_boundaries",
    "spending_boundaries",
    "spent",
    "t_upper_tail",
    "widen",
    "widen_wilson",
]


RHO = 2.0
"""The spending power, chosen by benchmarks/bench_adaptive.py: rho = 3 (closer to O'Brien-Fleming, final
boundary nearest 1.96) stopped a clear 100-task rate gate by 60 tasks in only 51-53% of 2,000 runs, so
the median run sat exactly on the 60%-of-calls target; rho = 2 stops 57-60% of them by then, with the
same error control and agreement >= 95% wherever the full run is itself sure of the verdict (its price:
final boundaries 2.17-2.25 instead of 2.10-2.16, so a little less agreement where the full run is not)."""
ALPHA_SIDE = 0.025
"""Each side of a 95% two-sided interval is a one-sided test at this level."""
MIN_TASKS = 20
"""No interval gate is decided at a look with fewer tasks (except the final one): the early boundaries sit
far in the tails (c = 3-4.5), where the small-sample approximations of the intervals (a cluster variance
from 5-15 tasks, a percentile bootstrap) are off by far more than at 95% (bench_adaptive.py); the
reports call intervals below 20 tasks approximate for the same reason (docs/protocol.md#coverage)."""

Decision = Literal["pass", "fail"] | None

_NORMAL = NormalDist()
_SD_RANGE = 8.0  # the grid covers the null density of W(t) from -8 sd up to the boundary
_STEPS_PER_SD = 16.0  # grid spacing: this many points per standard deviation of the next increment
_MAX_POINTS = 3001  # a 3001 x 3001 kernel is 72 MB; spacing then stays under sd / 6 for 100 looks
_erfc = np.frompyfunc(math.erfc, 1, 1)


def spent(t: float, alpha: float = ALPHA_SIDE, rho: float = RHO) -> float:
    """Cumulative alpha spent at information fraction ``t``: ``alpha * min(t, 1)**rho`` (0 for t <= 0)."""
    return float(alpha * min(max(t, 0.0), 1.0) ** rho)


def _upper_tail(x: FloatArray) -> FloatArray:
    """1 - Phi(x), elementwise, accurate far into the upper tail (erfc, not 1 - erf)."""
    return np.asarray(0.5 * _erfc(x / math.sqrt(2.0)), dtype=np.float64)


def _simpson(a: float, b: float, step: float) -> tuple[FloatArray, FloatArray]:
    """Grid points and Simpson weights on [a, b], an odd number of points at most ``step`` apart."""
    m = max(2, math.ceil((b - a) / step))
    m += m % 2
    m = min(m, _MAX_POINTS - 1)
    x = np.linspace(a, b, m + 1)
    h = (b - a) / m
    w = np.full(m + 1, 2.0)
    w[1::2] = 4.0
    w[0] = w[-1] = 1.0
    return x, w * h / 3.0


def _check_fractions(fractions: Sequence[float]) -> list[float]:
    ts = [float(t) for t in fractions]
    if not ts:
        raise ValueError("no information fractions: a look plan needs at least one look")
    for prev, t in zip([0.0, *ts], ts, strict=False):
        if not (0.0 < t <= 1.0) or t <= prev:
            raise ValueError(f"information fractions must be strictly increasing in (0, 1], got {ts}")
    return ts


def _crossing(mass: FloatArray, u: FloatArray, sd: float, scale: float, c: float) -> float:
    """P(no crossing before, Z_k >= c): the masses of W(t_{k-1}) on ``u`` times the chance that the
    increment (sd ``sd``) lifts W(t_k) above ``c * scale`` (``scale = sqrt(t_k)``)."""
    return float(np.dot(mass, _upper_tail((c * scale - u) / sd)))


def _solve(mass: FloatArray, u: FloatArray, sd: float, scale: float, target: float) -> float:
    """The c with P(c) = sum(mass * Q((c * scale - u) / sd)) == target: Newton's method safeguarded by
    bisection on a bracket that always holds the root. P decreases in c and P(c) <= Q(c) (a first
    crossing is a crossing), so the root lies at or below the unconditional quantile."""
    if target >= float(mass.sum()):
        return -math.inf  # everything still running crosses: no finite boundary spends this much
    hi = -_NORMAL.inv_cdf(target) + 1e-9
    lo = hi - 1.0
    while _crossing(mass, u, sd, scale, lo) < target and lo > -40.0:
        lo -= 1.0
    c = hi
    for _ in range(100):
        f = _crossing(mass, u, sd, scale, c) - target
        if abs(f) <= 1e-14 * target or hi - lo < 1e-12:
            return c
        if f > 0:
            lo = c
        else:
            hi = c
        z = (c * scale - u) / sd
        slope = -float(np.dot(mass, np.exp(-0.5 * z * z))) * scale / (sd * math.sqrt(2.0 * math.pi))
        step = c - f / slope if slope < 0 else math.nan
        c = step if lo < step < hi else 0.5 * (lo + hi)
    return c


def _advance(
    u: FloatArray, mass: FloatArray, t_prev: float, t: float, c: float, next_sd: float
) -> tuple[FloatArray, FloatArray]:
    """The sub-density of W(t) on the continuation region (-inf, c * sqrt(t)), from the quadrature
    masses of W(t_prev) on ``u``: grid points and masses (density times Simpson weight) on the new grid."""
    sd = math.sqrt(t - t_prev)
    top = c * math.sqrt(t)
    step = min(sd, next_sd) / _STEPS_PER_SD
    s, w = _simpson(min(-_SD_RANGE * math.sqrt(t), top - step * 2), top, step)
    kernel = np.exp(-0.5 * ((s[:, None] - u[None, :]) / sd) ** 2) / (sd * math.sqrt(2.0 * math.pi))
    return s, w * (kernel @ mass)


def _first_look(t: float, c: float, next_sd: float) -> tuple[FloatArray, FloatArray]:
    """Grid and masses of W(t_1) ~ N(0, t_1) on (-inf, c * sqrt(t_1))."""
    sd = math.sqrt(t)
    step = min(sd, next_sd) / _STEPS_PER_SD
    s, w = _simpson(min(-_SD_RANGE * sd, c * sd - 2 * step), c * sd, step)
    return s, w * np.exp(-0.5 * (s / sd) ** 2) / (sd * math.sqrt(2.0 * math.pi))


def spending_boundaries(fractions: Sequence[float], cumulative: Sequence[float]) -> tuple[float, ...]:
    """One-sided critical values whose first-crossing probabilities under the null are the increments of
    ``cumulative`` (the alpha spent by each look): the exact recursion behind :func:`boundaries`, for any
    spending function (e.g. Lan-DeMets O'Brien-Fleming, to check against published tables)."""
    ts = _check_fractions(fractions)
    spend = [float(a) for a in cumulative]
    if len(spend) != len(ts) or any(b < a for a, b in zip([0.0, *spend], spend, strict=False)):
        raise ValueError("cumulative alpha must be non-decreasing, one value per information fraction")
    if not (0.0 < spend[0] and spend[-1] < 1.0):
        raise ValueError("cumulative alpha must be in (0, 1)")
    out = [-_NORMAL.inv_cdf(spend[0])]
    sds = [math.sqrt(b - a) for a, b in itertools.pairwise(ts)]
    if len(ts) == 1:
        return tuple(out)
    u, mass = _first_look(ts[0], out[0], sds[0])
    for k in range(1, len(ts)):
        target = spend[k] - spend[k - 1]
        c = math.inf if target <= 0 else _solve(mass, u, sds[k - 1], math.sqrt(ts[k]), target)
        out.append(c)
        if k + 1 < len(ts):
            u, mass = _advance(u, mass, ts[k - 1], ts[k], min(c, 40.0), sds[k])
    return tuple(out)


def boundaries(fractions: Sequence[float], alpha: float = ALPHA_SIDE, rho: float = RHO) -> tuple[float, ...]:
    """One-sided normal critical values c_1..c_K for cumulative information fractions (strictly
    increasing, in (0, 1]; the last may be < 1 for a look plan cut short), spending ``alpha * t**rho``.
    Exact recursive integration: P(Z_j < c_j for j < k, Z_k >= c_k) = spent(t_k) - spent(t_{k-1})."""
    if not 0.0 < alpha < 0.5 or rho <= 0:
        raise ValueError(f"need 0 < alpha < 0.5 and rho > 0, got alpha={alpha}, rho={rho}")
    ts = _check_fractions(fractions)
    return spending_boundaries(ts, [spent(t, alpha, rho) for t in ts])


def crossing_probabilities(fractions: Sequence[float], critical: Sequence[float]) -> tuple[float, ...]:
    """P(first crossing at look k) under the null for given boundaries: the same recursion run forwards
    (for tests and for the power of a plan; the inverse of :func:`spending_boundaries`)."""
    ts = _check_fractions(fractions)
    cs = [float(c) for c in critical]
    if len(cs) != len(ts):
        raise ValueError("one critical value per information fraction")
    out = [float(_upper_tail(np.array([cs[0]]))[0])]
    sds = [math.sqrt(b - a) for a, b in itertools.pairwise(ts)]
    if len(ts) == 1:
        return tuple(out)
    u, mass = _first_look(ts[0], cs[0], sds[0])
    for k in range(1, len(ts)):
        out.append(_crossing(mass, u, sds[k - 1], math.sqrt(ts[k]), cs[k]))
        if k + 1 < len(ts):
            u, mass = _advance(u, mass, ts[k - 1], ts[k], cs[k], sds[k])
    return tuple(out)


def _log_beta_front(x: float, a: float, b: float) -> float:
    return math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)


def _reg_beta(x: float, a: float, b: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(_log_beta_front(x, a, b)) * beta_fraction(x, a, b, steps=500) / a
    return 1.0 - math.exp(_log_beta_front(1.0 - x, b, a)) * beta_fraction(1.0 - x, b, a, steps=500) / b


def t_upper_tail(x: float, df: float) -> float:
    """P(T > x) for Student's t with ``df`` > 0 degrees of freedom (exact, via the incomplete beta)."""
    if df <= 0 or math.isnan(df):
        raise ValueError(f"degrees of freedom must be > 0, got {df}")
    half = 0.5 * _reg_beta(df / (df + x * x), df / 2.0, 0.5)
    return half if x >= 0 else 1.0 - half


def critical_quantile(c: float, df: float | None) -> float:
    """q_k: ``c`` itself when ``df`` is None, else the Student-t quantile with the same upper tail
    ``1 - Phi(c)`` (bisection on :func:`t_upper_tail`, to 1e-12 relative; memoised, since every gate of
    a look asks for the same few)."""
    if df is None:
        return c
    return _t_quantile(float(c), float(df))


@functools.lru_cache(maxsize=65536)
def _t_quantile(c: float, df: float) -> float:
    """Newton's method on log P(T > x) (nearly linear in the tail), safeguarded by bisection."""
    if c < 0:
        return -_t_quantile(-c, df)  # symmetry
    log_tail = math.log(_NORMAL.cdf(-c))
    if t_upper_tail(c, df) <= math.exp(log_tail):  # t tails are never lighter: the quantile is >= c
        return c
    lo, hi = c, max(2.0 * c, 1.0)
    while t_upper_tail(hi, df) > math.exp(log_tail):
        lo, hi = hi, 2.0 * hi
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    x = c
    for _ in range(200):
        tail = t_upper_tail(x, df)
        g = math.log(tail) - log_tail
        if g > 0:
            lo = x
        else:
            hi = x
        if abs(g) < 1e-13 or hi - lo < 1e-12 * hi:
            return x
        density = math.exp(log_norm - (df + 1) / 2 * math.log1p(x * x / df))
        step = x + g * tail / density  # d log(tail) / dx = -density / tail
        x = step if lo < step < hi else 0.5 * (lo + hi)
    return x


def widen(
    value: float | None, low: float | None, high: float | None, *, factor: float
) -> tuple[float | None, float | None]:
    """(low', high'): each side's distance from ``value`` times ``factor`` (None stays None; without a
    value there is no centre to widen around, so both sides are None)."""
    if value is None:
        return None, None
    new_low = None if low is None else value - (value - low) * factor
    new_high = None if high is None else value + (high - value) * factor
    return new_low, new_high


def _wilson_bound(value: float, bound: float, quantile: float, new_quantile: float) -> float:
    """The same side of a Wilson score interval at ``new_quantile``: the bound solves
    ``(value - b)**2 = quantile**2 * b (1 - b) / n``, which gives the (effective) count ``n``; the new
    bound is the root of that equation with ``new_quantile`` on the bound's side of ``value``."""
    if bound == value or bound <= 0.0 or bound >= 1.0:
        return bound
    n = quantile * quantile * bound * (1.0 - bound) / (value - bound) ** 2
    z2 = new_quantile * new_quantile
    denom = 1.0 + z2 / n
    centre = (value + z2 / (2.0 * n)) / denom
    half = new_quantile * math.sqrt(value * (1.0 - value) / n + z2 / (4.0 * n * n)) / denom
    return centre + half if bound > value else centre - half


def widen_wilson(
    value: float | None, low: float | None, high: float | None, *, quantile: float, new_quantile: float
) -> tuple[float | None, float | None]:
    """(low', high') of a Wilson score interval (plain or cluster-adjusted: Wilson on an effective count)
    recomputed at ``new_quantile``: each side's own effective count is recovered from the bound, so the
    asymmetry of the interval grows as Wilson's does (a linear widening of the upper side of a rare rate
    falls short of it). A bound at 0 or 1 (clipped) stays; None stays None."""
    if value is None:
        return None, None
    new_low = None if low is None else _wilson_bound(value, low, quantile, new_quantile)
    new_high = None if high is None else _wilson_bound(value, high, quantile, new_quantile)
    return new_low, new_high


@dataclass(frozen=True)
class Look:
    """Where an adaptive run is: look ``index`` (1-based) of ``planned`` looks, ``tasks`` of
    ``total_tasks`` done; ``critical`` is this look's one-sided normal boundary c_k (``inf`` for a look
    that tests nothing: before :data:`MIN_TASKS` tasks, see :func:`look_boundaries`)."""

    index: int
    planned: int
    tasks: int
    total_tasks: int
    critical: float

    @property
    def final(self) -> bool:
        """Whether every planned task is done (the last look of a plan that was not cut short)."""
        return self.tasks >= self.total_tasks


def look_boundaries(
    tasks_through: Sequence[int], total_tasks: int, alpha: float = ALPHA_SIDE, rho: float = RHO
) -> tuple[float, ...]:
    """The critical value of each look of a plan, given the tasks done through each look (increasing, the
    last at most ``total_tasks``): ``inf`` for a look before :data:`MIN_TASKS` tasks that is not the final
    one (it tests nothing and spends no alpha, so the first look that tests spends all of ``alpha(t)``
    so far), :func:`boundaries` over the information fractions of the others."""
    done = [int(d) for d in tasks_through]
    if total_tasks < 1 or any(d < 1 or d > total_tasks for d in done):
        raise ValueError(f"tasks through each look must be in 1..{total_tasks}, got {done}")
    tested = [d for d in done if d >= MIN_TASKS or d == total_tasks]
    if not tested:
        return tuple(math.inf for _ in done)
    cs = dict(zip(tested, boundaries([d / total_tasks for d in tested], alpha, rho), strict=True))
    return tuple(cs.get(d, math.inf) for d in done)


def equal_looks(
    total_tasks: int, per_look: int, alpha: float = ALPHA_SIDE, rho: float = RHO
) -> tuple[Look, ...]:
    """The looks of a run of ``total_tasks`` tasks taken ``per_look`` at a time (the last look takes the
    rest), with their critical values (:func:`look_boundaries`)."""
    if total_tasks < 1 or per_look < 1:
        raise ValueError(f"need total_tasks >= 1 and per_look >= 1, got {total_tasks} and {per_look}")
    done = [*range(per_look, total_tasks, per_look), total_tasks]
    cs = look_boundaries(done, total_tasks, alpha, rho)
    return tuple(
        Look(i + 1, len(done), d, total_tasks, c) for i, (d, c) in enumerate(zip(done, cs, strict=True))
    )


def _count_decision(gate: Gate, value: float, final: bool) -> Decision:
    """An exact count only grows with tasks: a '<='/'<' gate exceeded stays failed and a '>='/'>' gate met
    stays passed; anything else waits for the final look."""
    ok = OPS[gate.op](value, gate.threshold)
    if final:
        return "pass" if ok else "fail"
    if gate.op in ("<=", "<") and not ok:
        return "fail"
    if gate.op in (">=", ">") and ok:
        return "pass"
    return None


def _final_decision(gate: Gate, value: float, low: float | None, high: float | None) -> Decision:
    """The ordinary verdict (analysis.gates.evaluate_gate) on the anytime-valid interval."""
    compared = {"point": value, "lower": low, "upper": high}[gate.bound]
    if compared is None:
        return None
    return "pass" if OPS[gate.op](compared, gate.threshold) else "fail"


def decide(
    gate: Gate,
    value: float | None,
    low: float | None,
    high: float | None,
    n: int,
    *,
    look: Look,
    df: float | None,
    nominal_quantile: float,
    wilson: bool = False,
    growing: bool = False,
) -> tuple[Decision, float | None, float | None]:
    """The gate's decision at this look from its 95% quantity (value, low, high, n; low/high as the
    metric computed them with quantile ``nominal_quantile``), with the anytime-valid (low, high): each
    side widened by ``q_k / nominal_quantile`` (:func:`widen`), or with ``wilson`` (a Wilson score
    interval: ``wilson``, ``cluster-wilson``) the Wilson interval recomputed at ``q_k``
    (:func:`widen_wilson`).

    Undecided (None) while n < min_n or without a value. Counts, and other exact totals that only grow
    with the tasks run (``growing``: a total cost), are exact (see :func:`_count_decision`).
    No other gate is decided at a look that tests nothing (``critical = inf``, or fewer than
    :data:`MIN_TASKS` tasks before the final look; the anytime-valid interval is then None, None).
    '==' waits for the final look.
    Otherwise a gate is decided early when its whole anytime-valid
    interval satisfies the comparison ('pass') or violates it ('fail'): for ``upper(x) <= thr`` that is
    AV high <= thr, resp. AV low > thr; ``lower`` symmetric; ``point`` likewise. At the final look the
    verdict is the ordinary one, on the anytime-valid interval for bound gates and on the value for
    point gates."""
    if nominal_quantile <= 0:
        raise ValueError(f"nominal_quantile must be > 0, got {nominal_quantile}")
    av_low: float | None = None
    av_high: float | None = None
    testable = math.isfinite(look.critical) and (look.final or look.tasks >= MIN_TASKS)
    if testable:
        q_k = critical_quantile(look.critical, df)
        if wilson:
            av_low, av_high = widen_wilson(value, low, high, quantile=nominal_quantile, new_quantile=q_k)
        else:
            av_low, av_high = widen(value, low, high, factor=q_k / nominal_quantile)
    if value is None or (gate.min_n is not None and n < gate.min_n):
        return None, av_low, av_high
    if is_count(gate) or growing:
        return _count_decision(gate, value, look.final), av_low, av_high
    if look.final:
        return _final_decision(gate, value, av_low, av_high), av_low, av_high
    if not testable or gate.op == "==" or av_low is None or av_high is None:
        return None, av_low, av_high
    holds = [OPS[gate.op](side, gate.threshold) for side in (av_low, av_high)]
    if all(holds):
        return "pass", av_low, av_high
    if not any(holds):
        return "fail", av_low, av_high
    return None, av_low, av_high
