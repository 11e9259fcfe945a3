"""Cost per success on skewed bills: the percentile task bootstrap against the skew-corrected interval.

Run: ``python benchmarks/bench_cost_intervals.py`` (``--runs 2000``). For each simulated process (per-task
cost lognormal, Lomax or a looping-task mixture; successes independent of the cost or driven by the same
task difficulty) it prints the share of runs whose 95% interval misses the true cost per success on the
upper side and the coverage, for both methods, with the Monte Carlo standard error; the table in
docs/protocol.md#cost-intervals is this output. About a minute of CPU.
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from scipy.special import ndtr

from pytest_gauge._internal.analysis.resampling import percentile_bounds, ratio_rows, resample_counts
from pytest_gauge._internal.analysis.skewed import ratio_delta_interval, skewed_ratio_interval

NODES, WEIGHTS = np.polynomial.hermite_e.hermegauss(80)
WEIGHTS = WEIGHTS / WEIGHTS.sum()
CASES = [  # (label, cost shape, success slope on difficulty, samples per task, tasks)
    ("lognormal 1.5, independent", "ln1.5", 0.0, 1, 20),
    ("lognormal 1.5, expensive fail", "ln1.5", 1.0, 1, 20),
    ("lognormal 1.5, expensive fail", "ln1.5", 1.0, 1, 44),
    ("lognormal 1.5, expensive succeed, 3 samples", "ln1.5", -0.8, 3, 20),
    ("lognormal 1.5, expensive succeed, 3 samples", "ln1.5", -0.8, 3, 44),
    ("lognormal 1.0, expensive succeed, 3 samples", "ln1.0", -0.8, 3, 20),
    ("lognormal 1.0, independent", "ln1.0", 0.0, 1, 44),
    ("Lomax alpha 2.5", "lomax", 1.0, 1, 20),
    ("Lomax alpha 2.5", "lomax", 1.0, 1, 44),
    ("12% looping tasks", "mix", 0.0, 1, 20),
    ("12% looping tasks", "mix", 0.0, 1, 44),
    ("12% looping tasks", "mix", 0.0, 1, 100),
]


def expit(x: np.ndarray) -> np.ndarray:
    return np.asarray(1.0 / (1.0 + np.exp(-x)))


def costs(shape: str, z: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, float]:
    if shape.startswith("ln"):
        sigma = float(shape[2:])
        return np.exp(sigma * z), math.exp(sigma**2 / 2)
    u = np.minimum(ndtr(z), 1 - 1e-12)
    if shape == "lomax":
        return (1 - u) ** (-1 / 2.5) - 1, 1 / 1.5
    return np.where(u > 0.88, 25.0, 1.0) * rng.gamma(2.0, 0.5, z.shape), 0.88 + 0.12 * 25


def row(label: str, n: int, runs: int, old: tuple[float, float], new: tuple[float, float]) -> str:
    def cell(miss: float, cover: float) -> str:
        se_m, se_c = math.sqrt(miss * (1 - miss) / runs), math.sqrt(cover * (1 - cover) / runs)
        return f"{100 * miss:5.1f}% ±{100 * se_m:.1f} / {100 * cover:5.1f}% ±{100 * se_c:.1f}"

    return f"| {label} ({n}) | {cell(*old)} | {cell(*new)} |"


def rates(low: np.ndarray, high: np.ndarray, truth: float) -> tuple[float, float]:
    up, down = float(np.mean(~(high >= truth))), float(np.mean(~(low <= truth)))
    return up, 1 - up - down


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=2000)
    runs = parser.parse_args().runs
    print("| process (tasks) | percentile bootstrap: upper miss / coverage | now: upper miss / coverage |")
    for i, (label, shape, b, k, n) in enumerate(CASES):
        rng = np.random.default_rng(100 + i)
        z = rng.standard_normal((n, runs))
        cost, mean_cost = costs(shape, z, rng)
        a = 0.5 if k == 1 else 0.0
        wins = rng.binomial(k, expit(a - b * z)).astype(np.float64)
        truth = mean_cost / (k * float(np.sum(WEIGHTS * expit(a - b * NODES))))
        counts = resample_counts(n, 1000, rng)
        old = percentile_bounds(ratio_rows(counts @ cost, counts @ wins))
        new = skewed_ratio_interval(cost, wins, counts, seed=1)
        print(row(label, n, runs, rates(*old, truth), rates(*new, truth)))
    for n, shift, rho in ((20, 0.3, 0.8), (44, 0.0, 0.8), (44, -0.3, 0.3)):
        rng = np.random.default_rng(n + int(10 * rho))
        z = rng.standard_normal((n, runs))
        own = math.sqrt(1 - rho**2)
        cur = np.exp(1.5 * (rho * z + own * rng.standard_normal(z.shape)) + shift)
        base = np.exp(1.5 * (rho * z + own * rng.standard_normal(z.shape)))
        p = expit(0.5 - z)
        cw, bw = rng.binomial(1, p).astype(float), rng.binomial(1, p).astype(float)
        truth = (math.exp(shift) - 1) * math.exp(1.125) / float(np.sum(WEIGHTS * expit(0.5 - NODES)))
        counts = resample_counts(n, 1000, rng)
        old = percentile_bounds(
            ratio_rows(counts @ cur, counts @ cw) - ratio_rows(counts @ base, counts @ bw)
        )
        new = ratio_delta_interval((cur, cw), (base, bw), counts, seed=1)
        label = f"paired delta, lognormal 1.5, x{math.exp(shift):.2f}, rho {rho}"
        print(row(label, n, runs, rates(*old, truth), rates(*new, truth)))


if __name__ == "__main__":
    main()
