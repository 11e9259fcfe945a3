"""A difference of two case rates' reproducibility figure in closed form, vectorised over runs.

The gate compares ``d ± q se`` (the cluster-t interval of :func:`~.intervals.cluster_difference`) with
a threshold. Under a flat prior on the true difference a rerun's bound differs from this one's by the
truth's uncertainty plus the rerun's noise (twice the variance a rerun redraws: the cluster variance
for fresh tasks, its within-task binomial part for the same tasks) plus the noise of the rerun's own
width, ``q^2 var / (2 df)`` on the residuals' Satterthwaite df, plus ``±2 q Cov(d', se')`` where the
rerun's spread moves with its difference (a few tasks carrying it). The spread is read from the tasks, so
the figure is Student's t on that df, capped by the tasks whose two counts disagree in rate (the ones
that say how a difference varies). Figures in docs/calibration.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .intervals import cluster_difference_se, t_quantile
from .repeat_figure import MIN_OUTCOME_TASKS, enough_cases, student_cdf

if TYPE_CHECKING:
    from ..records import FloatArray

__all__ = ["difference_figures", "difference_withheld"]


def _binomial_part(k: FloatArray, n: FloatArray) -> FloatArray:
    """The within-task (binomial) variance of ``sum(k) / sum(n)``, unbiased per task (a task of one
    case contributes the pooled ``p (1 - p)``)."""
    total = np.maximum(np.sum(n, axis=-1), 1.0)
    p = np.sum(k, axis=-1) / total
    pooled = n * (p * (1.0 - p))[..., None]
    per_task = np.where(n >= 2, k * (n - k) / np.maximum(n - 1.0, 1.0), pooled)
    return np.asarray(np.sum(per_task, axis=-1) / (total * total), dtype=np.float64)


def _informative(k1: FloatArray, n1: FloatArray, k2: FloatArray, n2: FloatArray) -> FloatArray:
    """Tasks whose two rates differ (a task where both are at 0, or both at 1, moves neither)."""
    r1 = k1 / np.maximum(n1, 1.0)
    r2 = k2 / np.maximum(n2, 1.0)
    present = (n1 > 0) & (n2 > 0)
    both_flat = ((k1 == 0) & (k2 == 0)) | ((k1 == n1) & (k2 == n2))
    return np.asarray(np.sum(present & ~both_flat & (r1 != r2), axis=-1), dtype=np.float64)


def difference_withheld(k1: FloatArray, n1: FloatArray, k2: FloatArray, n2: FloatArray) -> str | None:
    """Why one run's counts cannot support a difference's figure, or None: fewer than
    :data:`~.repeat_figure.MIN_OUTCOME_TASKS` tasks where the two rates differ."""
    differ = int(_informative(k1, n1, k2, n2))
    if differ >= MIN_OUTCOME_TASKS:
        return None
    tasks = int(np.sum((n1 + n2) > 0))
    return f"{tasks} tasks, the two rates differ on {differ} of them"


def _residuals(k1: FloatArray, n1: FloatArray, k2: FloatArray, n2: FloatArray) -> FloatArray:
    """Each task's share of the difference's deviation (they sum to 0; their squares to the cluster
    variance before its ``T / (T - 1)``)."""
    t1, t2 = np.maximum(np.sum(n1, axis=-1), 1.0), np.maximum(np.sum(n2, axis=-1), 1.0)
    p1, p2 = np.sum(k1, axis=-1) / t1, np.sum(k2, axis=-1) / t2
    resid = (k1 - p1[..., None] * n1) / t1[..., None] - (k2 - p2[..., None] * n2) / t2[..., None]
    return np.asarray(resid, dtype=np.float64)


def _satterthwaite(k1: FloatArray, n1: FloatArray, k2: FloatArray, n2: FloatArray) -> FloatArray:
    """The df of the cluster variance from its per-task residuals' moments, ``2 T m2^2 / (m4 - m2^2)``
    (``T`` for normal residuals, few where a few tasks carry it), within 1 and ``T - 1``."""
    resid = _residuals(k1, n1, k2, n2)
    tasks = np.sum((n1 + n2) > 0, axis=-1).astype(np.float64)
    m2, m4 = np.mean(resid**2, axis=-1), np.mean(resid**4, axis=-1)
    spread = m4 - m2 * m2
    df = np.where(spread > 0, 2.0 * tasks * m2 * m2 / np.where(spread > 0, spread, 1.0), tasks - 1.0)
    return np.asarray(np.clip(df, 1.0, np.maximum(tasks - 1.0, 1.0)), dtype=np.float64)


def _spread_with_difference(
    k1: FloatArray, n1: FloatArray, k2: FloatArray, n2: FloatArray, se: FloatArray
) -> FloatArray:
    """``Cov(d', se')`` of a fresh rerun: where a few tasks carry the difference (more of them, a larger
    difference and a wider interval) the two move together, ``sum(r^3) / (2 se)`` over the tasks'
    residuals ``r`` (times ``T / (T - 1)``, as the cluster variance)."""
    resid = _residuals(k1, n1, k2, n2)
    tasks = np.maximum(np.sum((n1 + n2) > 0, axis=-1).astype(np.float64), 2.0)
    third = tasks / (tasks - 1.0) * np.sum(resid**3, axis=-1)
    return np.asarray(np.where(se > 0, third / (2.0 * np.where(se > 0, se, 1.0)), 0.0), dtype=np.float64)


def difference_figures(
    k1: FloatArray,
    n1: FloatArray,
    k2: FloatArray,
    n2: FloatArray,
    threshold: FloatArray | float,
    bound: str,
    min_n: int = 0,
) -> tuple[FloatArray, FloatArray]:
    """(same tasks, fresh tasks): the probability that a rerun gives this run's verdict on a gate that
    compares the ``bound`` (``upper``, ``lower``; anything else: the value) of ``sum(k1)/sum(n1) -
    sum(k2)/sum(n2)`` over shared tasks with ``threshold``, per run; NaN where
    :func:`difference_withheld` would withhold it. A fresh rerun with fewer cases than ``min_n`` in
    either rate would be inconclusive (:func:`~.repeat_figure.enough_cases`)."""
    k1, n1, k2, n2 = (np.asarray(a, dtype=np.float64) for a in (k1, n1, k2, n2))
    d, se, tdf = cluster_difference_se(k1, n1, k2, n2)
    q = t_quantile(tdf)
    side = {"upper": 1.0, "lower": -1.0}.get(bound, 0.0)
    margin = np.abs(d + side * q * se - np.asarray(threshold, dtype=np.float64))
    fresh_var = se * se
    same_var = np.minimum(_binomial_part(k1, n1) + _binomial_part(k2, n2), fresh_var)
    df = _satterthwaite(k1, n1, k2, n2)
    differ = _informative(k1, n1, k2, n2)
    dof = np.maximum(np.minimum(df, differ), 1.0)
    width = side * side * q * q * fresh_var / (2.0 * df)
    # A fresh rerun's bound d' + side q se' moves less (or more) where se' moves with d'; at least the
    # rerun's own noise.
    along = 2.0 * side * q * _spread_with_difference(k1, n1, k2, n2, se)
    out = []
    for var in (same_var, fresh_var):
        share = np.clip(var / np.where(fresh_var > 0, fresh_var, 1.0), 0.0, 1.0)
        total = 2.0 * np.maximum(var, 0.0) + share * (width + along)
        spread = np.sqrt(np.maximum(total, np.maximum(var, 0.0)))
        x = np.where(
            spread > 0, margin / np.where(spread > 0, spread, 1.0), np.where(margin > 0, np.inf, 0.0)
        )
        out.append(np.where(differ >= MIN_OUTCOME_TASKS, student_cdf(x, dof), np.nan))
    same, fresh = out
    if min_n > 0:
        fresh = fresh * enough_cases(n1, min_n) * enough_cases(n2, min_n)
    # A fresh rerun redraws all a same-task one does and more.
    return np.asarray(np.maximum(same, fresh)), np.asarray(fresh)
