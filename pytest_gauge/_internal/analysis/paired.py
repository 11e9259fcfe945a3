"""Paired statistics over tasks: the statistical core of baseline comparison (and of later adaptive and
coverage work), as pure, vectorised functions.

Two runs evaluated on the same tasks are *paired*: a task that is hard stays hard in both runs, so the
per-task difference ``current - baseline`` varies far less than either run's rate. Every interval here
resamples *tasks* (rows of a ``rounds x tasks`` count matrix, see :func:`task_counts`) and takes the
percentile interval of the resampled statistic; passing the same count matrix to several statistics makes
their differences consistent. Every function also accepts a matrix of datasets (``tasks x M``), one
column per simulated run, so validity simulations run thousands of comparisons in one product.

The exact test on flipped tasks is McNemar's: under "no change", each discordant task (passed in one run,
failed in the other) is equally likely to have flipped either way, so the number of regressions among
the ``b + c`` discordant tasks is Binomial(b + c, 1/2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .estimates import Estimate
from .intervals import Z95, t_quantile
from .resampling import bootstrap_ratios, percentile_interval

if TYPE_CHECKING:
    from ..records import FloatArray
    from .resampling import Counts

__all__ = [
    "PairedTally",
    "mcnemar_exact",
    "mcnemar_mid_p",
    "mcnemar_randomized",
    "paired_interval",
    "paired_mean_delta",
    "paired_ratio_delta",
    "tango_interval",
]


def _tango_stat(fixed: FloatArray, regressed: FloatArray, n: FloatArray, delta: FloatArray) -> FloatArray:
    """Tango's (1998) score statistic for a paired difference ``delta`` of proportions: the observed
    ``fixed - regressed - n delta`` over its standard error at the restricted maximum-likelihood
    discordance (closed form), decreasing in ``delta``."""
    a = 2.0 * n
    b = -fixed - regressed + (2.0 * n - fixed + regressed) * delta
    c = -regressed * delta * (1.0 - delta)
    p21 = (-b + np.sqrt(np.maximum(b * b - 4.0 * a * c, 0.0))) / (2.0 * a)
    var = n * (2.0 * p21 + delta * (1.0 - delta))
    return np.asarray((fixed - regressed - n * delta) / np.sqrt(np.maximum(var, 1e-300)), dtype=np.float64)


def tango_interval(
    fixed: FloatArray, regressed: FloatArray, n: FloatArray, z: FloatArray | float = Z95
) -> tuple[FloatArray, FloatArray]:
    """Tango's score interval for ``(fixed - regressed) / n``, the difference of two paired proportions
    (``fixed``: units that fail in the baseline and pass now, ``regressed`` the reverse), vectorised.

    Unlike a resampling interval it has width with no discordant unit (``+-z^2 / (n + z^2)``, 16% for 20
    tasks), so "no task flipped" never reads as "certainly no change". Found by bisection on the
    statistic (monotone in the difference); accepts fractional counts.
    """
    shape = np.broadcast(fixed, regressed, n).shape
    bounds = []
    for target in (z, -z):
        lo, hi = np.full(shape, -1.0 + 1e-12), np.full(shape, 1.0 - 1e-12)
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            above = _tango_stat(fixed, regressed, n, mid) > target
            lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
        bounds.append(0.5 * (lo + hi))
    return bounds[0], bounds[1]


MIN_MOVED = 8
"""Fractional per-task differences on at least this many moved tasks get the studentized interval alone:
the score interval treats each fraction as a whole flip's variance, so its hull with the t interval lost
power as samples per task rose (a 5-point drop at 44 tasks caught 2.5% of the time with 3 samples against
6.2% with 1); below it the hull keeps width where almost nothing moved."""


def paired_interval(d: FloatArray) -> tuple[FloatArray, FloatArray]:
    """The 95% interval of the mean over tasks (last axis) of per-task differences ``d`` in [-1, 1].

    Tango's score interval with the tasks' gains and losses as the discordant counts (exact form for
    0/1 outcomes, one sample per task) on the t quantile of tasks - 1 df (the normal one missed 3.2% on
    one side at 20 heterogeneous tasks); where the differences are fractional (several samples, rewards)
    the studentized interval over tasks on tasks - 1 df when :data:`MIN_MOVED` tasks or more moved, else
    the hull of the two (the score side keeps width where almost no task moved). Chosen by the
    simulation of docs/protocol.md#paired-deltas, where the task bootstrap let a non-inferiority gate pass
    wrongly in 6-42% of near-deterministic runs (target 2.5%).
    """
    tasks = np.asarray(np.sum(np.isfinite(d), axis=-1), dtype=np.float64)
    fixed = np.sum(np.maximum(d, 0.0), axis=-1)
    regressed = np.sum(np.maximum(-d, 0.0), axis=-1)
    quantile = t_quantile(np.maximum(tasks - 1.0, 1.0))
    low, high = tango_interval(fixed, regressed, tasks, quantile)
    fractional = np.any((d != 0.0) & (np.abs(d) != 1.0), axis=-1)
    mean = np.mean(d, axis=-1)
    sd = np.std(d, axis=-1, ddof=1) if d.shape[-1] > 1 else np.zeros_like(mean)
    half = quantile * sd / np.sqrt(np.maximum(tasks, 1.0))
    studentized = fractional & (np.sum(d != 0.0, axis=-1) >= MIN_MOVED)
    low = np.where(fractional, np.minimum(low, mean - half), low)
    high = np.where(fractional, np.maximum(high, mean + half), high)
    low = np.where(studentized, mean - half, low)
    high = np.where(studentized, mean + half, high)
    return np.asarray(np.maximum(low, -1.0)), np.asarray(np.minimum(high, 1.0))


def paired_mean_delta(current: FloatArray, baseline: FloatArray) -> Estimate:
    """Mean over tasks of ``current - baseline`` (per-task values in [0, 1], same task order) with the
    paired score interval of :func:`paired_interval`; ``n`` is the number of shared tasks."""
    d = np.asarray(current, dtype=np.float64) - np.asarray(baseline, dtype=np.float64)
    n = int(d.shape[0])
    if n == 0:
        return Estimate(None, 0, None, None, "none")
    low, high = paired_interval(d)
    return Estimate(float(d.mean()), n, float(low), float(high), "paired-score", float(max(n - 1, 1)))


@dataclass(frozen=True)
class PairedTally:
    """Per-task numerators and denominators of one ratio metric in both runs, on the shared tasks."""

    current_num: FloatArray
    current_den: FloatArray
    baseline_num: FloatArray
    baseline_den: FloatArray

    def ratios(self) -> tuple[float | None, float | None]:
        """The current and baseline ratios over all shared tasks (None where the denominator is 0)."""
        cd, bd = float(self.current_den.sum()), float(self.baseline_den.sum())
        cur = float(self.current_num.sum()) / cd if cd > 0 else None
        base = float(self.baseline_num.sum()) / bd if bd > 0 else None
        return cur, base


def paired_ratio_delta(tally: PairedTally, counts: Counts, confidence: float = 0.95) -> Estimate:
    """``ratio(current) - ratio(baseline)`` with both ratios computed on the SAME resampled tasks, so
    task difficulty cancels; ``n`` is the smaller of the two denominators."""
    cur, base = tally.ratios()
    n = round(min(float(tally.current_den.sum()), float(tally.baseline_den.sum())))
    if cur is None or base is None:
        return Estimate(None, n, None, None, "none")
    diff = bootstrap_ratios(tally.current_num, tally.current_den, counts) - bootstrap_ratios(
        tally.baseline_num, tally.baseline_den, counts
    )
    low, high = percentile_interval(diff, confidence)
    return Estimate(cur - base, n, low, high, "paired-bootstrap-tasks")


def _binom_cdf_half(k: int, n: int) -> float:
    """P(X <= k) for X ~ Binomial(n, 1/2), exactly (integer sums, one correctly rounded division)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return float(sum(math.comb(n, i) for i in range(k + 1)) / 2**n)


def mcnemar_exact(regressed: int, fixed: int) -> float:
    """Two-sided exact McNemar p-value: ``min(1, 2 P(X <= min(b, c)))``, X ~ Bin(b + c, 1/2); 1.0 with no
    discordant task. Conservative (discrete): use it for decisions."""
    if regressed < 0 or fixed < 0:
        raise ValueError("counts must be >= 0")
    n = regressed + fixed
    if n == 0:
        return 1.0
    return min(1.0, 2.0 * _binom_cdf_half(min(regressed, fixed), n))


def mcnemar_mid_p(regressed: int, fixed: int) -> float:
    """The mid-p version (half the probability of the observed table counted): less conservative and
    close to uniform under "no change", which is what a calibration check looks at."""
    n = regressed + fixed
    if n == 0:
        return 1.0
    k = min(regressed, fixed)
    point = float(math.comb(n, k) / 2**n)
    return min(1.0, 2.0 * (_binom_cdf_half(k, n) - 0.5 * point))


def mcnemar_randomized(regressed: int, fixed: int, u: float) -> float:
    """The randomized exact McNemar p-value: tables strictly more extreme than the observed one, plus ``u``
    (uniform in [0, 1)) times those exactly as extreme. Exactly uniform under "no change", so it checks the
    test's null model (flips equally likely both ways) without the discreteness of the exact p-value."""
    n = regressed + fixed
    if n == 0:
        return u
    k = min(regressed, fixed)
    point = float(math.comb(n, k) / 2**n)
    if 2 * k == n:
        return u * point + (1.0 - point)
    return 2.0 * _binom_cdf_half(k - 1, n) + u * 2.0 * point
