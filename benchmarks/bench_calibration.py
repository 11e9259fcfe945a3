"""Is "holds on ~X% of reruns" calibrated for thresholds fixed before the data? Per-bin figures.

Run: ``python benchmarks/bench_calibration.py`` (``--runs 800``). For each simulated process (per-task
rates and cases of a case-rate gate) and suite size, the bound's sampling distribution is found first
(a pilot of 300 runs); each run's threshold is then drawn uniformly within 3 of its standard deviations
of its mean, before that run's data, as a user sets a threshold without seeing the run (the validation
design of docs/calibration.md). Each run prints its figure (``case_rate_reproducibility``,
what the gate prints) and is rerun once on the same tasks (the tasks' true rates, new cases) and once on
fresh tasks; runs are binned by the printed figure and each bin's mean printed figure is set against
the share of its reruns that repeated the verdict (target: within 5 points in every bin). Bins with
fewer than 50 runs are not shown; a bin of n runs has a Monte Carlo error of about sqrt(p (1 - p) / n).
About 90 seconds of CPU.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import itertools

from pytest_gauge._internal.analysis.gates import GateResult, parse_gate
from pytest_gauge._internal.analysis.intervals import cluster_wilson
from pytest_gauge._internal.analysis.reproducibility import case_rate_reproducibility

Process = Callable[[np.random.Generator, int], tuple[np.ndarray, np.ndarray]]
BINS = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1.01)


def _expit(x: np.ndarray) -> np.ndarray:
    return np.asarray(1.0 / (1.0 + np.exp(-x)))


def always(rng: np.random.Generator, tasks: int) -> tuple[np.ndarray, np.ndarray]:
    """Always 30% / never 70% of tasks, 4 cases each (no heterogeneity within a task)."""
    return (rng.random(tasks) < 0.3).astype(float), np.full(tasks, 4.0)


def unequal(rng: np.random.Generator, tasks: int) -> tuple[np.ndarray, np.ndarray]:
    """Logit-normal rates, sd 2 around 0.1, 4 or 12 cases: skewed, unequal clusters."""
    return _expit(np.log(0.1 / 0.9) + rng.normal(0.0, 2.0, tasks)), rng.choice([4.0, 12.0], tasks)


def temperature_zero(rng: np.random.Generator, tasks: int) -> tuple[np.ndarray, np.ndarray]:
    """85% of tasks at 0.01 or 0.99, the rest uniform in 0.2-0.8, 4 cases."""
    u = rng.random(tasks)
    return np.where(u < 0.425, 0.01, np.where(u < 0.85, 0.99, rng.uniform(0.2, 0.8, tasks))), np.full(
        tasks, 4.0
    )


def homogeneous(rng: np.random.Generator, tasks: int) -> tuple[np.ndarray, np.ndarray]:
    """Every task at 0.2, 6 cases: no task heterogeneity."""
    return np.full(tasks, 0.2), np.full(tasks, 6.0)


PROCESSES: dict[str, Process] = {
    "always 30% / never 70%": always,
    "logit-normal sd 2, unequal": unequal,
    "temperature 0": temperature_zero,
    "homogeneous 0.2": homogeneous,
}


def _bound(p: np.ndarray, n: np.ndarray, rng: np.random.Generator) -> float:
    return float(cluster_wilson(rng.binomial(n.astype(int), p).astype(float), n)[2])


def cell(process: Process, tasks: int, runs: int, seed: int) -> np.ndarray:
    """Rows of (printed same, repeated same, printed fresh, repeated fresh) for ``upper(x) <= t``."""
    rng = np.random.default_rng([seed, tasks])
    pilot = [_bound(*process(rng, tasks), rng) for _ in range(300)]
    centre, spread = float(np.mean(pilot)), float(np.std(pilot))
    rows = []
    for run in range(runs):
        threshold = float(centre + rng.uniform(-3.0, 3.0) * spread)
        p, n = process(rng, tasks)
        k = rng.binomial(n.astype(int), p).astype(float)
        value, low, high = (float(x) for x in cluster_wilson(k, n))
        passed = high <= threshold
        gate = parse_gate(f"upper(x{run}) <= {threshold!r}")
        result = GateResult(gate, "pass" if passed else "fail", value, low, high, int(n.sum()), "")
        rep = case_rate_reproducibility(result, (k, n))
        assert rep is not None
        same = (_bound(p, n, rng) <= threshold) == passed
        fresh = (_bound(*process(rng, tasks), rng) <= threshold) == passed
        rows.append((rep.same_tasks, same, rep.fresh_tasks, fresh))
    return np.array(rows, dtype=float)


def binned(printed: np.ndarray, repeated: np.ndarray) -> tuple[str, float]:
    """``[0.80) 85.0/84.2 (n 373)`` per bin with 50 runs or more, and the largest |printed - repeated|."""
    parts, worst = [], 0.0
    for a, b in itertools.pairwise(BINS):
        m = (printed >= a) & (printed < b)
        if m.sum() < 50:
            continue
        pr, rp = 100 * float(printed[m].mean()), 100 * float(repeated[m].mean())
        se = 100 * math.sqrt(max(rp / 100 * (1 - rp / 100), 1e-4) / m.sum())
        worst = max(worst, abs(pr - rp))
        parts.append(f"{100 * a:.0f}+: {pr:.1f}/{rp:.1f} ±{se:.1f} (n {m.sum()})")
    return "; ".join(parts), worst


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=800)
    parser.add_argument("--sizes", type=int, nargs="+", default=[20, 44])
    args = parser.parse_args()
    for name, process in PROCESSES.items():
        for tasks in args.sizes:
            rows = cell(process, tasks, args.runs, seed=46)
            for label, i in (("same tasks", 0), ("fresh tasks", 2)):
                text, worst = binned(rows[:, i], rows[:, i + 1])
                print(f"{name}, {tasks} tasks, {label} (worst bin {worst:.1f} points): {text}")


if __name__ == "__main__":
    main()
