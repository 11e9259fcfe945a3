"""Adaptive runs under drift: how often an early stop passes a gate the full run would not.

Run: ``python benchmarks/bench_drift.py`` (``--runs 600``, ``--sizes 44 100``). The rate gate of
``bench_adaptive.py`` (``upper(position_bias) <= 0.65``, 6 cases per task, tasks' rates Beta around the
mean with concentration 4, looks of 5 tasks) on suites whose mean rate moves linearly in run order by
``--move`` logits (1.5: moderate) with the suite mean at the threshold, so every pass is wrong. It prints
the share of wrong passes of the full run and of the adaptive run on the same data, with Monte Carlo
standard errors: the early stop assumes the tasks run so far are exchangeable with the rest
(docs/protocol.md#adaptive-runs), and a rate that drifts breaks it. Under a minute of CPU.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the benchmarks import each other by name

import bench_adaptive as ba

from pytest_gauge.analysis.sequential import equal_looks

THRESHOLD = 0.65


def _expit(x: np.ndarray) -> np.ndarray:
    return np.asarray(1.0 / (1.0 + np.exp(-x)))


def _centre(move: float, tasks: int) -> float:
    """The starting logit whose drifting rate averages the threshold over the run (bisection)."""
    pos = np.linspace(-0.5, 0.5, tasks)
    lo, hi = -5.0, 5.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if _expit(mid + move * pos).mean() < THRESHOLD else (lo, mid)
    return 0.5 * (lo + hi)


def drifting(rng: np.random.Generator, move: float, runs: int, tasks: int) -> ba.Data:
    mean = _expit(_centre(move, tasks) + move * np.linspace(-0.5, 0.5, tasks))
    rates = rng.beta(4.0 * mean, 4.0 * (1.0 - mean), (runs, tasks))
    return (rng.binomial(6, rates).astype(np.float64), np.full((runs, tasks), 6.0))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=600)
    parser.add_argument("--sizes", type=int, nargs="+", default=[44, 100])
    parser.add_argument("--move", type=float, default=1.5)
    args = parser.parse_args()
    kind = ba.KINDS[0]
    for tasks in args.sizes:
        for move in (args.move, -args.move, 0.0):
            data = drifting(
                np.random.default_rng([46, tasks, round(10 * move) + 100]), move, args.runs, tasks
            )
            full = float(np.mean(ba.full_run(kind, data, THRESHOLD).verdict == 1))
            adaptive = float(np.mean(ba.adaptive(kind, data, equal_looks(tasks, 5), THRESHOLD).verdict == 1))
            se = math.sqrt(adaptive * (1 - adaptive) / args.runs)
            print(
                f"{tasks} tasks, move {move:+.1f} logits: wrong passes full {100 * full:.1f}%, "
                f"adaptive {100 * adaptive:.1f}% (MC se {100 * se:.1f})"
            )


if __name__ == "__main__":
    main()
