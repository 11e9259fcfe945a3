"""The upper side of a case rate's interval on skewed tasks with unequal cases per task: at most 3.5%
missed at 44 tasks. A sample that lacks the rare high tasks has both its rate and its variance too
small; ``cluster_wilson`` widens the side its tasks' residuals lean to (half of Hall's correction)."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_gauge._internal.analysis.intervals import cluster_wilson

Array = np.ndarray
RUNS = 8000  # Monte Carlo standard error 0.2 points at a 3.5% miss


def _logit_location(mean: float, sd: float) -> float:
    z = np.random.default_rng(0).standard_normal(100_000)
    lo, hi = -15.0, 5.0
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if float(np.mean(1 / (1 + np.exp(-(mid + sd * z))))) < mean else (lo, mid)
    return (lo + hi) / 2


def _suite(rng: np.random.Generator, process: str, tasks: int) -> tuple[Array, Array, float]:
    """(events, cases, truth): task rates and case counts independent, so the truth is the mean rate."""
    shape = (RUNS, tasks)
    if process == "logit-normal sd 2 around 0.1, 4 or 12 cases":
        rate = 1 / (1 + np.exp(-(_logit_location(0.1, 2.0) + 2.0 * rng.standard_normal(shape))))
        n, truth = np.where(rng.random(shape) < 0.5, 4.0, 12.0), 0.1
    elif process == "logit-normal sd 1.5 around 0.2, 3 or 15 cases":
        rate = 1 / (1 + np.exp(-(_logit_location(0.2, 1.5) + 1.5 * rng.standard_normal(shape))))
        n, truth = np.where(rng.random(shape) < 0.5, 3.0, 15.0), 0.2
    else:  # Beta(0.3, 2.7): mean 0.1, a J-shaped spread; 2 to 16 cases
        rate, truth = rng.beta(0.3, 2.7, shape), 0.1
        n = rng.integers(2, 17, shape).astype(np.float64)
    return rng.binomial(n.astype(np.int64), rate).astype(np.float64), n, truth


@pytest.mark.parametrize(
    "process",
    [
        "logit-normal sd 2 around 0.1, 4 or 12 cases",
        "logit-normal sd 1.5 around 0.2, 3 or 15 cases",
        "Beta(0.3, 2.7), 2 to 16 cases",
    ],
)
def test_upper_side_of_an_unequal_case_rate_misses_at_most_3_5_percent(process: str) -> None:
    """At 44 tasks each side misses <= 3.5% (8,000 runs). Measured upper / lower: 2.4 / 1.9%,
    2.4 / 1.9%, 1.9 / 1.6% (mean widths 0.152, 0.180, 0.138); without the skew correction the upper side
    missed 3.7%, 3.0%, 3.0% (widths 0.139, 0.170, 0.126)."""
    rng = np.random.default_rng(44)
    k, n, truth = _suite(rng, process, 44)
    _, low, high = cluster_wilson(k, n)
    upper, lower = float(np.mean(high < truth)), float(np.mean(low > truth))
    assert upper <= 0.035 and lower <= 0.035, (upper, lower)
