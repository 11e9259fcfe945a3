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
from .resampling import bootstrap_means, bootstrap_ratios, percentile_interval

if TYPE_CHECKING:
    from ..records import FloatArray

__all__ = [
    "PairedTally",
    "mcnemar_exact",
    "mcnemar_mid_p",
    "mcnemar_randomized",
    "paired_mean_delta",
    "paired_ratio_delta",
]


def paired_mean_delta(
    current: FloatArray, baseline: FloatArray, counts: FloatArray, confidence: float = 0.95
) -> Estimate:
    """Mean over tasks of ``current - baseline`` (per-task values, same task order) with the paired
    task-resampling percentile interval; ``n`` is the number of shared tasks."""
    d = np.asarray(current, dtype=np.float64) - np.asarray(baseline, dtype=np.float64)
    n = int(d.shape[0])
    if n == 0:
        return Estimate(None, 0, None, None, "none")
    low, high = percentile_interval(bootstrap_means(d, counts), confidence)
    return Estimate(float(d.mean()), n, low, high, "paired-bootstrap-tasks")


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


def paired_ratio_delta(tally: PairedTally, counts: FloatArray, confidence: float = 0.95) -> Estimate:
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
