"""A case rate's reproducibility figure in closed form, vectorised over runs (docs/calibration.md).

The gate compares the rate's bound (or the rate) with a threshold ``t``. Inverting the bound gives the
rate ``p_t`` at which this run's interval would reach ``t`` (Wilson's score equation at this run's
effective count and quantile); a rerun repeats the verdict when its rate lands on the same side of
``p_t``. Under a flat prior on the truth the rerun's rate differs from this one by the truth's
uncertainty plus the rerun's own noise, twice the variance a rerun redraws (this run's tasks and the
rerun's): for fresh tasks the CR2 cluster variance over tasks, scaled up to the spread at the crossing
where a rate's ``mu (1 - mu)`` is larger there (the verdict flips only if the truth is near it). On
the same tasks only each task's count is redrawn, so the compared bound itself is propagated: its
slope in each task's count times that task's binomial variance (:func:`_same_task_spread`; the
crossing's Wilson scaling assumed the interval widens with the rate, which a rerun on these tasks
does not do where always/never tasks carry the spread). A rerun also reads its own spread, so its
bound moves even where its rate does not: the variance of that width (``z^2 var / (2 df)``) is added.
The variance is itself read from the run's tasks, so the figure is Student's t on the cluster
variance's Satterthwaite df, capped by the tasks that hold the rarer outcome (a spread read from a few
event tasks is as uncertain as those few). Below :data:`MIN_OUTCOME_TASKS` such tasks no figure is
given (:func:`withheld`). Pure functions of arrays ``(..., T)``: one run or thousands at once.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from .exact_tasks import beta_cdf
from .intervals import CONTINUITY, cluster_wilson, cluster_wilson_parts

if TYPE_CHECKING:
    import numpy.typing as npt

    from ..records import FloatArray

__all__ = ["MIN_OUTCOME_TASKS", "case_rate_figures", "enough_cases", "student_cdf", "withheld"]

MIN_OUTCOME_TASKS = 4
"""Fewest tasks that must show the rarer outcome (an event, or a non-event for a common rate) for a
figure: with fewer the spread rests on one to three tasks (and no event at all says nothing of how an
event would cluster); benchmarks/bench_calibration.py, always 30% / never 70% at 20 tasks."""


def student_cdf(x: FloatArray, df: FloatArray) -> FloatArray:
    """``P(T <= x)`` of Student's t on ``df`` for ``x >= 0`` (1 at infinity), exactly through the
    regularised incomplete beta: ``1 - I_(df / (df + x^2))(df / 2, 1 / 2) / 2``."""
    x, df = np.broadcast_arrays(np.asarray(x, dtype=np.float64), np.asarray(df, dtype=np.float64))
    finite = np.isfinite(x)
    xs = np.where(finite, x, 0.0)
    tail = beta_cdf(df / (df + xs * xs), df / 2.0, np.full(df.shape, 0.5))
    return np.asarray(np.where(finite, 1.0 - 0.5 * tail, 1.0), dtype=np.float64)


def _outcome_tasks(k: FloatArray, n: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(tasks with cases, tasks with an event, tasks with a non-event) per run."""
    present = n > 0
    tasks = np.sum(present, axis=-1).astype(np.float64)
    events = np.sum(present & (k > 0), axis=-1).astype(np.float64)
    others = np.sum(present & (k < n), axis=-1).astype(np.float64)
    return tasks, events, others


def withheld(k: FloatArray, n: FloatArray) -> str | None:
    """Why one run's counts cannot support a figure (``44 tasks, 2 events in 2 of them``, ``44 tasks,
    no event``), or None: fewer than :data:`MIN_OUTCOME_TASKS` tasks show an event (or a non-event, for
    a common rate)."""
    tasks, events, others = (int(v) for v in _outcome_tasks(k, n))
    if min(events, others) >= MIN_OUTCOME_TASKS:
        return None
    total, cases = int(np.sum(k)), int(np.sum(n))
    word, count, where = (
        ("event", total, events) if events <= others else ("non-event", cases - total, others)
    )
    if count == 0:
        return f"{tasks} tasks, no {word}"
    return f"{tasks} tasks, {count} {word}{'s' * (count != 1)} in {where} of them"


def _task_within(k: FloatArray, n: FloatArray, p: FloatArray) -> FloatArray:
    """Each task's binomial variance of its count, unbiased: ``k (n - k) / (n - 1)`` (a task of one case
    takes the pooled ``p (1 - p)``)."""
    pooled = n * (p * (1.0 - p))[..., None]
    return np.asarray(np.where(n >= 2, k * (n - k) / np.maximum(n - 1.0, 1.0), pooled), dtype=np.float64)


def _within_variance(k: FloatArray, n: FloatArray, p: FloatArray) -> FloatArray:
    """The within-task (binomial) part of the rate's variance: :func:`_task_within` over ``N^2``."""
    total = np.maximum(np.sum(n, axis=-1), 1.0)
    return np.asarray(np.sum(_task_within(k, n, p), axis=-1) / (total * total), dtype=np.float64)


STEP = 0.5
"""Cases: the central difference of the bound in one task's count (half a case either way)."""
BATCH_CELLS = 1 << 15
"""Counts per :func:`cluster_wilson` call of the nudged copies (256 KB an array): one call for all
tasks of a run; a task per call for a simulation's thousands of runs at once, whose arrays are large
already (larger calls only left the cache: 8 MB arrays took a fifth more time)."""


def _same_task_spread(
    k: FloatArray, n: FloatArray, p: FloatArray, bound: str
) -> tuple[FloatArray, FloatArray]:
    """(compared side, its same-task variance): a same-task rerun redraws each task's count with that
    task's binomial variance, so the bound moves by ``sum_i g_i e_i`` (``g_i`` its slope in task ``i``'s
    count, a central difference): variance ``sum_i g_i^2 var_i``. The slope says how far the rerun's own
    interval moves with its rate on these tasks (little where always/never tasks carry the spread)."""
    side = {"upper": 2, "lower": 1}.get(bound)
    task_var = _task_within(k, n, p)
    if side is None:
        total = np.maximum(np.sum(n, axis=-1), 1.0)
        return p, np.asarray(np.sum(task_var, axis=-1) / (total * total), dtype=np.float64)
    here = np.asarray(cluster_wilson(k, n)[side], dtype=np.float64)
    var = np.zeros_like(here)
    tasks = np.flatnonzero(np.any(task_var > 0, axis=tuple(range(k.ndim - 1))))
    if tasks.size == 0:
        return here, var
    per_call = max(1, BATCH_CELLS // (2 * k.size))  # a few tasks per call where k holds many runs
    for start in range(0, tasks.size, per_call):
        chunk = tasks[start : start + per_call]
        for i, slope in zip(chunk.tolist(), _slopes(k, n, chunk, side), strict=True):
            var = var + np.where(task_var[..., i] > 0, slope * slope * task_var[..., i], 0.0)  # task order
    return here, np.asarray(var, dtype=np.float64)


def _slopes(k: FloatArray, n: FloatArray, tasks: npt.NDArray[np.intp], side: int) -> FloatArray:
    """The compared side's central difference in each of ``tasks``' counts (leading axis: those tasks),
    from one :func:`cluster_wilson` call over every nudged copy: a call per nudge was the figure's cost."""
    rows = np.arange(tasks.size)
    up = np.repeat(k[None], tasks.size, axis=0)
    down = up.copy()
    up[rows, ..., tasks] = np.minimum(up[rows, ..., tasks] + STEP, np.moveaxis(n[..., tasks], -1, 0))
    down[rows, ..., tasks] = np.maximum(down[rows, ..., tasks] - STEP, 0.0)
    both = np.broadcast_to(n, (2 * tasks.size, *n.shape))
    moved = cluster_wilson(np.concatenate([up, down]), both)[side]
    step = up[rows, ..., tasks] - down[rows, ..., tasks]
    return np.asarray((moved[: tasks.size] - moved[tasks.size :]) / np.where(step > 0, step, 1.0))


def _crossing(
    threshold: FloatArray, bound: str, n_eff: FloatArray, z_low: FloatArray, z_high: FloatArray
) -> FloatArray:
    """The rate at which this run's interval would put its compared side at the threshold: Wilson's
    score equation solved for the rate, with the interval's continuity correction."""
    t = np.clip(threshold, 1e-9, 1.0 - 1e-9)
    score = np.sqrt(t * (1.0 - t) / n_eff)
    if bound == "upper":
        return np.asarray(np.clip(t - z_high * score - CONTINUITY / n_eff, 0.0, 1.0))
    if bound == "lower":
        return np.asarray(np.clip(t + z_low * score + CONTINUITY / n_eff, 0.0, 1.0))
    return np.asarray(t)


def _width_noise(
    bound: str, var: FloatArray, df: FloatArray, z_low: FloatArray, z_high: FloatArray
) -> FloatArray:
    """The variance a rerun's compared bound gets from reading its own spread: its half-width is ``z``
    times a standard error estimated on the Satterthwaite ``df``, whose variance is about ``var / (2
    df)`` (0 for a gate on the rate itself). Even a rerun whose rate lands on this run's lands its bound
    elsewhere; on skewed tasks at 20 this was 4-7 points of over-confidence (docs/calibration.md)."""
    if bound not in ("upper", "lower"):
        return np.zeros_like(var)
    z = z_high if bound == "upper" else z_low
    dof = np.where(np.isfinite(df), np.maximum(df, 1.0), 1.0)
    return np.asarray(z * z * np.maximum(var, 0.0) / (2.0 * dof), dtype=np.float64)


def case_rate_figures(
    k: FloatArray, n: FloatArray, threshold: FloatArray | float, bound: str, min_n: int = 0
) -> tuple[FloatArray, FloatArray]:
    """(same tasks, fresh tasks): the probability that a rerun gives this run's verdict on a gate that
    compares the cluster-Wilson ``bound`` (``upper``, ``lower``; anything else: the rate) of the per-task
    counts with ``threshold``, per run; NaN where :func:`withheld` would withhold it. A fresh rerun with
    fewer cases than ``min_n`` would be inconclusive: its total is taken as normal around this run's
    (the tasks' sizes resampled)."""
    k, n = np.asarray(k, dtype=np.float64), np.asarray(n, dtype=np.float64)
    p, n_eff, df, z_low, z_high, cluster = cluster_wilson_parts(k, n)
    within = _within_variance(k, n, p)
    fresh_var = np.where(np.isfinite(cluster) & (cluster > 0), cluster, within)
    same_var = np.minimum(within, fresh_var)
    _, events, others = _outcome_tasks(k, n)
    rarer = np.minimum(events, others)
    dof = np.maximum(np.minimum(np.where(np.isfinite(df), df, 1.0), rarer), 1.0)
    crossing = _crossing(np.asarray(threshold, dtype=np.float64), bound, n_eff, z_low, z_high)
    margin = np.abs(p - crossing)
    # The verdict flips only where the truth is near the crossing, and a rate's spread there is its
    # spread here scaled by mu (1 - mu): the larger of the two (never narrower than measured).
    toward = np.maximum(1.0, crossing * (1.0 - crossing) / np.maximum(p * (1.0 - p), 1e-12))
    width = _width_noise(bound, fresh_var, df, z_low, z_high)
    # The rerun's own width noise, in the share of the spread a rerun of this kind redraws.
    share = np.clip(same_var / np.where(fresh_var > 0, fresh_var, 1.0), 0.0, 1.0)
    # Same tasks: the bound itself, moved by each task's redrawn count (no crossing far away to reach).
    compared, bound_var = _same_task_spread(k, n, p, bound)
    same_margin = np.abs(compared - np.asarray(threshold, dtype=np.float64))
    same_spread = np.sqrt(2.0 * np.maximum(bound_var, 0.0) + share * width)
    fresh_spread = np.sqrt(toward * (2.0 * np.maximum(fresh_var, 0.0) + width))
    out = []
    for gap, spread in ((same_margin, same_spread), (margin, fresh_spread)):
        x = np.where(spread > 0, gap / np.where(spread > 0, spread, 1.0), np.where(gap > 0, np.inf, 0.0))
        out.append(np.where(rarer >= MIN_OUTCOME_TASKS, student_cdf(x, dof), np.nan))
    same, fresh = out
    if min_n > 0:
        fresh = fresh * enough_cases(n, min_n)
    # A fresh rerun redraws all a same-task one does and more.
    return np.asarray(np.maximum(same, fresh)), np.asarray(fresh)


def enough_cases(n: FloatArray, min_n: int) -> FloatArray:
    """The chance a fresh rerun holds ``min_n`` cases or more: its total taken as normal around this
    run's, the tasks' sizes resampled (a rerun below ``min_n`` would be inconclusive)."""
    total = np.sum(n, axis=-1)
    sd = np.sqrt(n.shape[-1] * np.var(n, axis=-1))
    z = (total - min_n + 0.5) / np.where(sd > 0, sd, 1.0)
    normal = 0.5 * (1.0 + _erf(z / math.sqrt(2.0)))
    return np.asarray(np.where(sd > 0, normal, (total >= min_n).astype(np.float64)), dtype=np.float64)


_erf_scalar = np.frompyfunc(math.erf, 1, 1)


def _erf(x: FloatArray) -> FloatArray:
    return np.asarray(_erf_scalar(x), dtype=np.float64)
