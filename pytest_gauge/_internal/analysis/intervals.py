"""Task-clustered intervals for ratios of counts, vectorised over many runs.

Cases of one task share transcripts, so a rate over cases is a ratio estimator over tasks. The
percentile bootstrap over tasks under-covers when tasks differ (83-87% for a nominal 95% at 20 tasks
with Beta-heterogeneous tasks, docs/protocol.md#coverage). These intervals use the cluster-robust
(between-task) variance of the ratio instead, with a Student-t quantile on ``T - 1`` degrees of freedom:

* :func:`cluster_wilson`: a Wilson score interval on the *effective* count ``N / deff``, where the
  design effect ``deff = max(1, var_cluster / var_binomial)``; it stays inside [0, 1] and has width
  at 0% and 100%, where a bootstrap collapses to a point. Its t quantile takes the Satterthwaite degrees
  of freedom of the cluster variance (:func:`satterthwaite_df`, at most ``T - 1``): when a few tasks
  carry all the events (a rare rate on skewed tasks) the variance estimate rests on those few tasks
  and the interval widens accordingly.
* :func:`cluster_difference`: ``p1 - p2 +- t * se`` with the cluster-robust variance of the difference
  (the two rates share tasks, so their covariance counts).

Arrays are ``(..., T)``: the leading axes are independent runs (the coverage simulation) or absent.
"""

from __future__ import annotations

from statistics import NormalDist
from typing import TYPE_CHECKING

import numpy as np

from .exact_tasks import exact_task_bounds

if TYPE_CHECKING:
    from ..records import FloatArray

__all__ = [
    "CONTINUITY",
    "FEW_TASKS",
    "SKEW_SHARE",
    "Z95",
    "cluster_difference",
    "cluster_difference_se",
    "cluster_wilson",
    "cluster_wilson_df",
    "cluster_wilson_parts",
    "satterthwaite_df",
    "t_quantile",
    "task_mean_wilson",
    "z_value",
]

Z95 = 1.959963984540054
"""The normal quantile of a two-sided 95% interval (the gates' confidence): the one definition."""


def z_value(confidence: float) -> float:
    """The two-sided normal quantile for ``confidence`` (0.95 -> 1.96)."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def t_quantile(df: FloatArray | float) -> FloatArray:
    """The 97.5% quantile of Student's t with ``df`` degrees of freedom (Cornish-Fisher expansion,
    within 0.002 of the exact value for df >= 3; the normal quantile for df = inf)."""
    v = np.maximum(np.asarray(df, dtype=np.float64), 1.0)
    z = Z95
    g1 = (z**3 + z) / 4.0
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96.0
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384.0
    return np.asarray(z + g1 / v + g2 / v**2 + g3 / v**3, dtype=np.float64)


def _residual_var(k: FloatArray, n: FloatArray, p: FloatArray, total: FloatArray) -> FloatArray:
    """Small-sample cluster-robust (CR2) variance of ``sum(k) / sum(n)``: ``sum(r^2 / (1 - h)) / N^2``
    with the residuals ``r = k - p n`` and each task's leverage ``h = n / N``. With equal cases per task
    it is the CR1 ``T / (T - 1) sum(r^2) / N^2``; with unequal ones it corrects the big tasks' residuals,
    which the fit pulls towards 0 the most (Bell & McCaffrey 2002)."""
    return _cr2_var(n, k - p[..., None] * n, np.sum(n > 0, axis=-1), total)


def _cr2_var(n: FloatArray, resid: FloatArray, tasks: FloatArray, total: FloatArray) -> FloatArray:
    """:func:`_residual_var` from its residuals and task count (computed once by the caller)."""
    safe = np.maximum(total, 1.0)
    lever = np.where(n > 0, np.minimum(n / safe[..., None], 1.0 - 1e-12), 0.0)
    var = np.sum(resid * resid / (1.0 - lever), axis=-1) / safe**2
    return np.asarray(np.where(tasks > 1, var, np.nan), dtype=np.float64)


def satterthwaite_df(k: FloatArray, n: FloatArray, p: FloatArray) -> FloatArray:
    """Degrees of freedom of the cluster variance of ``sum(k) / sum(n)``, in [1, tasks - 1].

    The variance is a sum of the tasks' squared residuals ``r = k - p n``; Satterthwaite's approximation
    gives it ``2 T m2^2 / (m4 - m2^2)`` df (``m2``, ``m4``: the residuals' second and fourth moments over
    the T tasks), which is T for normal residuals and few when a few tasks hold nearly all of the sum.
    ``T - 1`` where every residual is 0 (nothing to estimate the shape from) or for light tails.
    """
    present = n > 0
    tasks = np.sum(present, axis=-1).astype(np.float64)
    return _satterthwaite(np.where(present, k - p[..., None] * n, 0.0), tasks)


def _satterthwaite(resid: FloatArray, tasks: FloatArray) -> FloatArray:
    """:func:`satterthwaite_df` from the present tasks' residuals (0 elsewhere) and their count."""
    safe = np.maximum(tasks, 1.0)
    squared = resid * resid  # resid**2 to the bit; its square for the 4th power (numpy's pow is ~30x slower)
    m2 = np.sum(squared, axis=-1) / safe
    m4 = np.sum(squared * squared, axis=-1) / safe
    excess = m4 - m2 * m2
    ok = (m2 > 0) & (excess > 0)
    df = np.where(ok, 2.0 * safe * m2 * m2 / np.where(ok, excess, 1.0), tasks - 1.0)
    return np.asarray(np.clip(df, 1.0, np.maximum(tasks - 1.0, 1.0)), dtype=np.float64)


FEW_TASKS = 5
"""With events in at most this many tasks (or non-events, for a common rate), :func:`cluster_wilson` counts
at most one effective trial per task: a variance estimated from so few tasks is too often far too small
(the upper side of a rare rate on 4 or 12 cases per task missed 5% at 20 tasks)."""
CONTINUITY = 0.25
"""The continuity correction of :func:`cluster_wilson`, in effective cases: a quarter of the usual
Yates half, enough to keep each side's miss under 3.5% where a few tasks carry every event."""


def _wilson_side(p: FloatArray, n_eff: FloatArray, z: FloatArray, sign: float) -> FloatArray:
    """One side of Wilson's score interval at the effective count, from ``p`` moved a continuity
    correction outwards."""
    q = np.clip(p + sign * CONTINUITY / n_eff, 0.0, 1.0)
    z2 = z * z
    denom = 1.0 + z2 / n_eff
    centre = (q + z2 / (2 * n_eff)) / denom
    half = z * np.sqrt(q * (1 - q) / n_eff + z2 / (4 * n_eff * n_eff)) / denom
    return np.asarray(centre + sign * half, dtype=np.float64)


def _effective_count(k: FloatArray, n: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """(rate, effective count, df of the t quantile, Kish's effective number of tasks) of
    ``sum(k) / sum(n)``: the design-effect adjusted count on the Satterthwaite df, or at most one trial per
    task on tasks - 1 df when :data:`FEW_TASKS` tasks or fewer hold the events (a bound on the
    clustering, not an estimate of it) or when no task varies."""
    return _effective_parts(k, n)[:4]


def _effective_parts(
    k: FloatArray, n: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray]:
    """:func:`_effective_count` and ``sum(n)``; the residuals, task counts and totals are computed once,
    and the Satterthwaite df only where some row uses it (the results are those of the plain formulas)."""
    total = np.sum(n, axis=-1)
    safe = np.maximum(total, 1.0)
    p = np.sum(k, axis=-1) / safe
    present = n > 0
    counted = np.sum(present, axis=-1)
    resid = k - p[..., None] * n
    var_cluster = _cr2_var(n, resid, counted, total)
    var_binomial = p * (1.0 - p) / safe
    varies = var_binomial > 0
    deff = np.where(varies, np.maximum(1.0, var_cluster / np.where(varies, var_binomial, 1.0)), 1.0)
    deff = np.where(np.isfinite(deff), deff, 1.0)
    kish = np.maximum(safe * safe / np.maximum(np.sum(n * n, axis=-1), 1.0), 1.0)
    rarer = np.minimum(np.sum(present & (k > 0), axis=-1), np.sum(present & (k < n), axis=-1))
    n_eff = np.where(varies, safe / deff, kish)
    few = (rarer <= FEW_TASKS) & (kish < n_eff)
    tasks = counted.astype(np.float64)
    plain = few | ~varies
    fallback = np.maximum(tasks - 1.0, 1.0)
    if np.all(plain):
        df = np.where(plain, fallback, fallback)
    else:
        df = np.where(plain, fallback, _satterthwaite(np.where(present, resid, 0.0), tasks))
    return p, np.where(few, kish, n_eff), np.asarray(df, dtype=np.float64), kish, total


def cluster_wilson_df(k: FloatArray, n: FloatArray) -> FloatArray:
    """The degrees of freedom of :func:`cluster_wilson`'s t quantile (what an adaptive look widens on)."""
    return _effective_count(k, n)[2]


SKEW_SHARE = 0.5
"""The share of Hall's (1992) skewness correction of a studentized mean that :func:`cluster_wilson` adds to
the quantile of the side the tasks' residuals are skewed towards: ``z + SKEW_SHARE * g (2 z^2 + 1) /
(6 sqrt(T))`` (``g`` their skewness). Half, because the Wilson interval already carries a rate's own skew:
the full correction put the upper misses of symmetric Beta tasks near 1%, none left the upper side of
logit-normal tasks with 4 or 12 cases missing 3.6% at 44 tasks (now 2.3%)."""


def _skew_quantiles(
    k: FloatArray, n: FloatArray, p: FloatArray, z: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """(lower-side, upper-side) quantiles: ``z`` with the side the tasks' residuals ``k - p n`` lean to
    widened by :data:`SKEW_SHARE` of the Edgeworth term of a studentized mean (a skewed sample that
    lacks the rare high tasks has a point value and a variance that are both too small)."""
    present = n > 0
    tasks = np.maximum(np.sum(present, axis=-1), 1).astype(np.float64)
    resid = np.where(present, k - p[..., None] * n, 0.0)
    squared = resid * resid
    m2 = np.sum(squared, axis=-1) / tasks
    m3 = np.sum(squared * resid, axis=-1) / tasks
    spread = m2 > 1e-12
    skew = np.where(spread, m3 / np.where(spread, m2, 1.0) ** 1.5, 0.0)
    shift = SKEW_SHARE * (2.0 * z * z + 1.0) / (6.0 * np.sqrt(tasks))
    return z + shift * np.maximum(-skew, 0.0), z + shift * np.maximum(skew, 0.0)


def cluster_wilson(k: FloatArray, n: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(rate, low, high) of ``sum(k) / sum(n)`` over the last axis (tasks); NaN where ``sum(n) == 0``.

    Wilson's score interval with the design-effect-adjusted count (the CR2 cluster variance over the
    binomial one, at least 1), a small continuity correction, and a t quantile on the df of the cluster
    variance (:func:`satterthwaite_df`); at most one effective trial per task (Kish's count) when the
    events sit in :data:`FEW_TASKS` tasks or fewer. With no event (or only events) the between-task
    variance cannot be estimated: the bound is then exact over tasks, as if each task were one trial
    (Kish's effective number of tasks ``N^2 / sum(n^2)``): ``1 - 0.025^(1/T)``, 16.8% for 20 tasks,
    however many cases each task has, where treating the cases as independent gave 1.8% at 12 cases per
    task.
    """
    p, n_eff, df, kish, total = _effective_parts(k, n)
    varies = p * (1.0 - p) > 0
    z_low, z_high = _skew_quantiles(k, n, p, t_quantile(df))
    low = np.where(p > 0, _wilson_side(p, n_eff, z_low, -1.0), 0.0)
    high = np.where(p < 1, _wilson_side(p, n_eff, z_high, 1.0), 1.0)
    exact = 1.0 - 0.025 ** (1.0 / kish)
    high = np.where(~varies & (p <= 0), exact, high)
    low = np.where(~varies & (p >= 1), 1.0 - exact, low)
    over_low, over_high = exact_task_bounds(k, n, rare_side=True)  # never looser than a trial per task
    high = np.where(np.isfinite(over_high) & (p <= 0.5), np.minimum(high, over_high), high)
    low = np.where(np.isfinite(over_low) & (p >= 0.5), np.maximum(low, over_low), low)
    empty = total <= 0
    low = np.where(empty, np.nan, np.clip(low, 0.0, 1.0))
    high = np.where(empty, np.nan, np.clip(high, 0.0, 1.0))
    return np.where(empty, np.nan, p), low, high


def cluster_wilson_parts(k: FloatArray, n: FloatArray) -> tuple[FloatArray, ...]:
    """(rate, effective count, df, low-side quantile, high-side quantile, CR2 cluster variance) of
    :func:`cluster_wilson`: what its Wilson sides are computed from, for a caller that inverts a bound
    (the rate at which it would reach a threshold) or needs the rate's spread."""
    p, n_eff, df, _, total = _effective_parts(k, n)
    z_low, z_high = _skew_quantiles(k, n, p, t_quantile(df))
    return p, n_eff, df, z_low, z_high, _residual_var(k, n, p, total)


def cluster_difference_se(
    k1: FloatArray, n1: FloatArray, k2: FloatArray, n2: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(difference, standard error, df) of ``sum(k1)/sum(n1) - sum(k2)/sum(n2)`` over shared tasks (last
    axis): the cluster-robust variance of the difference (floored at half the two binomial variances, so
    two rates at 0 or 1 still have width), on tasks - 1 df. The interval (:func:`cluster_difference`)
    and the one-sided p-value of a difference come from this one statistic."""
    t1, t2 = np.sum(n1, axis=-1), np.sum(n2, axis=-1)
    p1 = np.sum(k1, axis=-1) / np.maximum(t1, 1.0)
    p2 = np.sum(k2, axis=-1) / np.maximum(t2, 1.0)
    resid = (k1 - p1[..., None] * n1) / np.maximum(t1, 1.0)[..., None]
    resid = resid - (k2 - p2[..., None] * n2) / np.maximum(t2, 1.0)[..., None]
    tasks = np.sum((n1 + n2) > 0, axis=-1).astype(np.float64)
    var = np.where(tasks > 1, tasks / np.maximum(tasks - 1, 1.0), np.nan) * np.sum(resid * resid, axis=-1)
    floor = 0.5 * (p1 * (1 - p1) / np.maximum(t1, 1.0) + p2 * (1 - p2) / np.maximum(t2, 1.0))
    se = np.sqrt(np.maximum(var, floor))
    return np.asarray(p1 - p2), np.asarray(se), np.asarray(np.maximum(tasks - 1, 1.0))


def cluster_difference(
    k1: FloatArray, n1: FloatArray, k2: FloatArray, n2: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(difference, low, high) of ``sum(k1)/sum(n1) - sum(k2)/sum(n2)`` over shared tasks (last axis):
    the cluster-robust variance of the difference with a t quantile on (tasks - 1) df."""
    t1, t2 = np.sum(n1, axis=-1), np.sum(n2, axis=-1)
    d, se, df = cluster_difference_se(k1, n1, k2, n2)
    half = t_quantile(df) * se
    empty = (t1 <= 0) | (t2 <= 0)
    return (
        np.where(empty, np.nan, d),
        np.where(empty, np.nan, np.maximum(d - half, -1.0)),
        np.where(empty, np.nan, np.minimum(d + half, 1.0)),
    )


FEW_TASKS_MEAN = 10
""":func:`task_mean_wilson` counts at most one effective trial per task when this many tasks or fewer are
away from 0 (or from 1): pass^k on mostly-hard tasks has a handful of non-zero tasks, whose variance
estimate is too often far too small (upper side missed 6.6% at 44 tasks with a cap of 5)."""


def task_mean_wilson(x: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """(mean, low, high, df) of per-task values in [0, 1] over the last axis (pass@k, pass^k): Wilson's
    score interval on the effective count ``p (1 - p) / (s^2 / T)`` (the count of independent trials
    with the same variance), a t quantile on the Satterthwaite df of the per-task residuals (at most
    T - 1), at most T effective trials when :data:`FEW_TASKS_MEAN` tasks or fewer are away from 0 (or
    1), and the exact bound over tasks when every value is 0 (or 1). The percentile bootstrap it
    replaced covered pass^5 of 10 samples on mostly-hard tasks 72-84% at 44 tasks
    (docs/protocol.md#repeats)."""
    tasks = float(x.shape[-1])
    p = np.mean(x, axis=-1)
    resid = x - p[..., None]
    m2, m4 = np.mean(resid**2, axis=-1), np.mean(resid**4, axis=-1)
    var = m2 * tasks / max(tasks - 1.0, 1.0) / tasks
    pq = p * (1.0 - p)
    n_eff = np.where(var > 0, pq / np.where(var > 0, var, 1.0), tasks)
    rarer = np.minimum(np.sum(x > 0, axis=-1), np.sum(x < 1, axis=-1))
    n_eff = np.maximum(np.where(rarer <= FEW_TASKS_MEAN, np.minimum(n_eff, tasks), n_eff), 1.0)
    spread = m4 - m2 * m2
    df = np.where(spread > 0, 2.0 * tasks * m2 * m2 / np.where(spread > 0, spread, 1.0), tasks - 1.0)
    df = np.clip(df, 1.0, max(tasks - 1.0, 1.0))
    z = t_quantile(df)
    z2 = z * z
    denom = 1.0 + z2 / n_eff
    centre = (p + z2 / (2 * n_eff)) / denom
    half = z * np.sqrt(pq / n_eff + z2 / (4 * n_eff * n_eff)) / denom
    exact = 1.0 - 0.025 ** (1.0 / tasks)
    low = np.where(p >= 1, 1.0 - exact, np.where(p > 0, centre - half, 0.0))
    high = np.where(p <= 0, exact, np.where(p < 1, centre + half, 1.0))
    return p, np.clip(low, 0.0, 1.0), np.clip(high, 0.0, 1.0), np.asarray(df, dtype=np.float64)
