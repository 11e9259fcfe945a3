"""Intervals for a ratio of per-task sums whose numerator is a right-skewed bill: cost per success and
its paired delta between two runs (docs/protocol.md#cost-intervals).

A few looping tasks can carry most of a suite's cost, and a sample of 20-40 tasks often holds none of
them: every resampling interval then sees a light-tailed bill and ends too low (the percentile bootstrap
missed the upper side 6-21% of the time at lognormal sigma 1.5). The interval here is the hull of

* a studentized (bootstrap-t) interval of ``log(sum(cost) / sum(successes))`` over resampled tasks,
  with the delta-method standard error in every resample, and
* on the upper side, the generalized pivotal interval of the delta-lognormal mean (the positive costs'
  logs are normal, Krishnamoorthy and Mathew 2003), with the successes' and zero-cost share's part of
  the log ratio carried as a correlated normal term:

the pivotal side reads a tail the sample has not shown from the spread of the log costs, the bootstrap
side keeps the interval honest where costs are not lognormal. A paired delta combines the two runs'
intervals by MOVER (Zou and Donner 2008) with the tasks' correlation. Every function takes per-task
arrays ``(T,)`` or ``(T, M)`` (one column per simulated run) and returns NaN where no interval is
supported (fewer than :data:`MIN_COST_TASKS` tasks, fewer than two tasks with a cost).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ..records import FloatArray
    from .resampling import Counts

__all__ = [
    "MIN_COST_TASKS",
    "PIVOT_DRAWS",
    "cost_interval_note",
    "ratio_delta_interval",
    "skewed_ratio_interval",
]

MIN_COST_TASKS = 20
"""Below this many tasks no cost-ratio interval is given: a skewed bill's tail cannot be read from fewer
(at 8 tasks every method tried missed the upper side 8-14% of the time at lognormal sigma 1.5)."""

PIVOT_DRAWS = 2000
"""Draws of the generalized pivotal quantity (its Monte Carlo error on the bound is about 1%)."""

_TAIL = 0.025


def cost_interval_note(n_tasks: int, costed_tasks: int) -> str | None:
    """Why a cost ratio has no interval (None: it has one)."""
    if n_tasks < MIN_COST_TASKS:
        return (
            f"a skewed per-task cost needs at least {MIN_COST_TASKS} tasks for an interval "
            f"(this suite has {n_tasks})"
        )
    if costed_tasks < 2:
        return f"cost on {costed_tasks} task(s): no spread to read the bill's tail from"
    return None


def _columns(x: FloatArray) -> FloatArray:
    arr = np.asarray(x, dtype=np.float64)
    return arr[:, None] if arr.ndim == 1 else arr


def _log_bootstrap_t(num: FloatArray, den: FloatArray, counts: Counts) -> tuple[FloatArray, FloatArray]:
    """Bootstrap-t interval of ``log(mean num / mean den)`` with the delta-method standard error (the
    influence ``num / mean num - den / mean den``) recomputed in every resample, exponentiated."""
    n = num.shape[0]
    mc, md = num.mean(axis=0), den.mean(axis=0)
    ok = (mc > 0) & (md > 0)
    smc, smd = np.where(ok, mc, 1.0), np.where(ok, md, 1.0)
    log_r = np.log(smc) - np.log(smd)
    se = np.std(num / smc - den / smd, axis=0, ddof=1) / np.sqrt(n)
    bc, bd = counts @ num / n, counts @ den / n
    c2, d2, cd = counts @ (num * num) / n, counts @ (den * den) / n, counts @ (num * den) / n
    good = (bc > 0) & (bd > 0)
    sbc, sbd = np.where(good, bc, 1.0), np.where(good, bd, 1.0)
    var_b = (c2 / sbc**2 - 2.0 * cd / (sbc * sbd) + d2 / sbd**2) * n / (n - 1)
    se_b = np.sqrt(np.maximum(var_b, 0.0) / n)
    good &= se_b > 0
    t = np.where(good, (np.log(sbc) - np.log(sbd) - log_r) / np.where(good, se_b, 1.0), np.nan)
    any_t = np.asarray(np.isfinite(t).any(axis=0), dtype=bool)
    filled = np.where(any_t[None, :], t, 0.0)
    q_hi, q_lo = np.nanpercentile(filled, [100.0 * (1.0 - _TAIL), 100.0 * _TAIL], axis=0)
    valid = ok & any_t & (se > 0)
    low = np.where(valid, np.exp(log_r - q_hi * se), np.nan)
    high = np.where(valid, np.exp(log_r - q_lo * se), np.nan)
    return low, high


def _pivotal_upper(num: FloatArray, den: FloatArray, seed: int) -> FloatArray:
    """Upper 97.5% bound of ``mean num / mean den`` from the generalized pivotal quantity of the
    delta-lognormal mean of ``num`` (share of positive costs times the lognormal mean of those), the
    rest of the log ratio (log share - log mean den) a normal term correlated with the log costs' mean."""
    n = num.shape[0]
    pos = num > 0
    k = pos.sum(axis=0).astype(np.float64)
    share = k / n
    y = np.log(np.where(pos, num, 1.0))
    m = np.where(pos, y, 0.0).sum(axis=0) / np.maximum(k, 1.0)
    v = np.where(pos, (y - m) ** 2, 0.0).sum(axis=0) / np.maximum(k - 1.0, 1.0)
    md = den.mean(axis=0)
    safe_share, safe_md = np.maximum(share, 1e-300), np.where(md > 0, md, 1.0)
    a = np.where(pos, (y - m) / safe_share, 0.0)  # influence of the log costs' mean
    b = pos / safe_share - den / safe_md  # influence of log share - log mean den
    sa, sb = np.std(a, axis=0, ddof=1), np.std(b, axis=0, ddof=1)
    cov = np.sum((a - a.mean(axis=0)) * (b - b.mean(axis=0)), axis=0) / (n - 1)
    rho = np.clip(cov / np.maximum(sa * sb, 1e-300), -1.0, 1.0)
    rng = np.random.default_rng(seed)
    df = np.maximum(k - 1.0, 1.0)
    z1 = rng.standard_normal((PIVOT_DRAWS, 1))
    z2 = rho * z1 + np.sqrt(1.0 - rho**2) * rng.standard_normal((PIVOT_DRAWS, 1))
    ratio = df / rng.chisquare(df[None, :], size=(PIVOT_DRAWS, df.size))
    pivot = (
        m
        - z1 * np.sqrt(ratio * v / np.maximum(k, 1.0))
        + 0.5 * v * ratio
        + np.log(safe_share)
        - np.log(safe_md)
        - z2 * sb / np.sqrt(n)
    )
    upper = np.exp(np.percentile(pivot, 100.0 * (1.0 - _TAIL), axis=0))
    return np.asarray(np.where((k >= 2) & (md > 0), upper, np.nan), dtype=np.float64)


def skewed_ratio_interval(
    num: FloatArray, den: FloatArray, counts: Counts, seed: int = 0
) -> tuple[FloatArray, FloatArray]:
    """95% interval of ``sum(num) / sum(den)`` over tasks for a skewed, non-negative ``num`` (see the
    module text): per column, NaN where unsupported; the point value always lies inside."""
    num, den = _columns(num), _columns(den)
    n = num.shape[0]
    shape = (num.shape[1],)
    if n < MIN_COST_TASKS:
        return np.full(shape, np.nan), np.full(shape, np.nan)
    low, high = _log_bootstrap_t(num, den, counts)
    high = np.fmax(high, _pivotal_upper(num, den, seed))
    sd = den.sum(axis=0)
    value = np.where(sd > 0, num.sum(axis=0) / np.where(sd > 0, sd, 1.0), np.nan)
    supported = ((num > 0).sum(axis=0) >= 2) & np.isfinite(low) & np.isfinite(high)
    low = np.where(supported, np.minimum(low, value), np.nan)
    high = np.where(supported, np.maximum(high, value), np.nan)
    return np.asarray(low), np.asarray(high)


def _ratio_influence(num: FloatArray, den: FloatArray) -> FloatArray:
    md = den.mean(axis=0)
    safe = np.where(md > 0, md, 1.0)
    return np.asarray((num - num.mean(axis=0) / safe * den) / safe)


def ratio_delta_interval(
    current: tuple[FloatArray, FloatArray],
    baseline: tuple[FloatArray, FloatArray],
    counts: Counts,
    seed: int = 0,
) -> tuple[FloatArray, FloatArray]:
    """95% interval of ``ratio(current) - ratio(baseline)`` on the same tasks (per-task numerator and
    denominator of each run): MOVER on the two runs' :func:`skewed_ratio_interval` with the correlation
    of their delta-method influences over tasks; NaN where either side has none."""
    cn, cd = _columns(current[0]), _columns(current[1])
    bn, bd = _columns(baseline[0]), _columns(baseline[1])
    l1, h1 = skewed_ratio_interval(cn, cd, counts, seed)
    l0, h0 = skewed_ratio_interval(bn, bd, counts, seed + 1)
    r1 = cn.sum(axis=0) / np.where(cd.sum(axis=0) > 0, cd.sum(axis=0), np.nan)
    r0 = bn.sum(axis=0) / np.where(bd.sum(axis=0) > 0, bd.sum(axis=0), np.nan)
    a, b = _ratio_influence(cn, cd), _ratio_influence(bn, bd)
    ac, bc = a - a.mean(axis=0), b - b.mean(axis=0)
    norm = np.sqrt(np.sum(ac * ac, axis=0) * np.sum(bc * bc, axis=0))
    rho = np.where(norm > 0, np.sum(ac * bc, axis=0) / np.where(norm > 0, norm, 1.0), 0.0)
    d = r1 - r0
    down = np.sqrt(np.maximum((r1 - l1) ** 2 + (h0 - r0) ** 2 - 2.0 * rho * (r1 - l1) * (h0 - r0), 0.0))
    up = np.sqrt(np.maximum((h1 - r1) ** 2 + (r0 - l0) ** 2 - 2.0 * rho * (h1 - r1) * (r0 - l0), 0.0))
    return np.asarray(d - down), np.asarray(d + up)
