"""Cost intervals that hold on skewed bills: a simulation with known truth (one column per simulated run).

Each run draws T tasks with a latent difficulty z; a task's cost is a skewed function of z and its
successes (1 or 3 samples) are Binomial with a rate that falls or rises with z, so cost and success are
correlated (or not, b = 0). The true cost per success is E[cost] / E[successes], by quadrature. Cost
shapes: lognormal sigma 1.0 and 1.5 (the target), and processes the method was not chosen on: a Lomax
(Pareto II) tail with alpha 2.5, and a mixture where 12% of tasks loop at 25 times the cost. The targets
(docs/protocol.md#cost-intervals): the upper side, the one a budget gate reads, missed at most 3.5% of the
time from 20 tasks on, and coverage at least 94% from 44 tasks on. The mixture is held to them from 44
tasks: at 20 tasks 8% of samples hold no looping task at all, which no interval can see.

With 1500 runs the Monte Carlo standard error of a 2.5% miss rate is 0.4 points and of 95% coverage 0.6.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import ndtr

from pytest_gauge._internal.analysis.resampling import resample_counts
from pytest_gauge._internal.analysis.skewed import MIN_COST_TASKS, ratio_delta_interval, skewed_ratio_interval

RUNS = 1500
ROUNDS = 1000
_NODES, _WEIGHTS = np.polynomial.hermite_e.hermegauss(80)
_WEIGHTS = _WEIGHTS / _WEIGHTS.sum()


def _expit(x: np.ndarray) -> np.ndarray:
    return np.asarray(1.0 / (1.0 + np.exp(-x)))


def _costs(shape: str, z: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, float]:
    """Per-task costs driven by z, and their expectation."""
    if shape.startswith("lognormal"):
        sigma = float(shape.split(":")[1])
        return np.exp(sigma * z), float(np.exp(sigma**2 / 2.0))
    u = np.minimum(ndtr(z), 1.0 - 1e-12)
    if shape == "lomax":
        alpha = 2.5
        return (1.0 - u) ** (-1.0 / alpha) - 1.0, 1.0 / (alpha - 1.0)
    loop = u > 0.88
    return np.where(loop, 25.0, 1.0) * rng.gamma(2.0, 0.5, z.shape), 0.88 + 0.12 * 25.0


def _run(shape: str, n: int, b: float, samples: int, seed: int) -> tuple[np.ndarray, np.ndarray, float]:
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, RUNS))
    cost, mean_cost = _costs(shape, z, rng)
    a = 0.5 if samples == 1 else 0.0
    wins = rng.binomial(samples, _expit(a - b * z)).astype(np.float64)
    mean_wins = samples * float(np.sum(_WEIGHTS * _expit(a - b * _NODES)))
    return cost, wins, mean_cost / mean_wins


def _misses(low: np.ndarray, high: np.ndarray, truth: float) -> tuple[float, float]:
    assert np.all(np.isfinite(low)) and np.all(np.isfinite(high))
    return float(np.mean(high < truth)), float(np.mean(low > truth))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("shape", "n", "b", "samples"),
    [
        ("lognormal:1.5", 20, 1.0, 1),  # expensive tasks fail more often
        ("lognormal:1.5", 20, -0.8, 3),  # expensive tasks succeed more often, 3 samples
        ("lognormal:1.5", 44, -0.8, 3),
        ("lognormal:1.0", 44, 0.0, 1),  # independent of success
        ("lomax", 20, 1.0, 1),  # a Pareto tail
        ("mixture", 44, 0.0, 1),  # a few looping tasks
    ],
)
def test_cost_per_success_interval_holds_on_skewed_bills(shape: str, n: int, b: float, samples: int) -> None:
    cost, wins, truth = _run(shape, n, b, samples, seed=n * 7 + samples)
    counts = resample_counts(n, ROUNDS, np.random.default_rng(1))
    low, high = skewed_ratio_interval(cost, wins, counts, seed=3)
    upper_miss, lower_miss = _misses(low, high, truth)
    assert upper_miss <= 0.035, (shape, n, upper_miss)
    if n >= 44:
        assert 1.0 - upper_miss - lower_miss >= 0.94, (shape, n, upper_miss, lower_miss)
    value = cost.sum(axis=0) / wins.sum(axis=0)
    assert np.all((low <= value) & (value <= high))  # the printed value inside its printed interval


@pytest.mark.slow
@pytest.mark.parametrize(("n", "shift", "rho"), [(20, 0.3, 0.8), (44, 0.0, 0.8), (44, -0.3, 0.3)])
def test_paired_cost_delta_holds_on_skewed_bills(n: int, shift: float, rho: float) -> None:
    """Two runs on the same tasks, their log costs correlated (rho) and the current run's scaled by
    e^shift, successes driven by the same task difficulty."""
    sigma = 1.5
    rng = np.random.default_rng(n + int(10 * rho))
    z = rng.standard_normal((n, RUNS))
    own = np.sqrt(1.0 - rho**2)
    current = np.exp(sigma * (rho * z + own * rng.standard_normal(z.shape)) + shift)
    baseline = np.exp(sigma * (rho * z + own * rng.standard_normal(z.shape)))
    rate = _expit(0.5 - z)
    cur_wins = rng.binomial(1, rate).astype(np.float64)
    base_wins = rng.binomial(1, rate).astype(np.float64)
    mean_wins = float(np.sum(_WEIGHTS * _expit(0.5 - _NODES)))
    truth = (np.exp(shift) - 1.0) * np.exp(sigma**2 / 2.0) / mean_wins
    counts = resample_counts(n, ROUNDS, np.random.default_rng(2))
    low, high = ratio_delta_interval((current, cur_wins), (baseline, base_wins), counts, seed=5)
    upper_miss, lower_miss = _misses(low, high, truth)
    assert upper_miss <= 0.035 and lower_miss <= 0.035, (upper_miss, lower_miss)
    assert 1.0 - upper_miss - lower_miss >= 0.94


def test_no_cost_interval_below_what_the_method_supports() -> None:
    """Fewer than MIN_COST_TASKS tasks, or cost on a single task: no interval (NaN), never a guess."""
    rng = np.random.default_rng(0)
    n = MIN_COST_TASKS - 1
    low, high = skewed_ratio_interval(rng.lognormal(size=n), np.ones(n), resample_counts(n, 50, rng))
    assert np.isnan(low).all() and np.isnan(high).all()
    one = np.zeros(MIN_COST_TASKS)
    one[3] = 1.0
    low, high = skewed_ratio_interval(one, np.ones(MIN_COST_TASKS), resample_counts(MIN_COST_TASKS, 50, rng))
    assert np.isnan(low).all() and np.isnan(high).all()


def test_cost_interval_is_deterministic_and_contains_the_value() -> None:
    rng = np.random.default_rng(4)
    cost, wins = rng.lognormal(0.0, 1.5, 30), rng.binomial(1, 0.6, 30).astype(np.float64)
    counts = resample_counts(30, 400, np.random.default_rng(0))
    first = skewed_ratio_interval(cost, wins, counts, seed=1)
    again = skewed_ratio_interval(cost, wins, counts, seed=1)
    assert first[0][0] == again[0][0] and first[1][0] == again[1][0]
    assert first[0][0] <= cost.sum() / wins.sum() <= first[1][0]
