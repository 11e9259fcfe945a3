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

from pytest_gauge._internal.analysis.drift import drift_hold
from pytest_gauge._internal.analysis.gates import OPS
from pytest_gauge._internal.analysis.sequential import Look, decide, equal_looks

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


def checked(kind: ba.Kind, data: ba.Data, looks: tuple[Look, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(verdicts, tasks run) of the adaptive procedure with the drift check of the plugin's looks
    (:func:`~pytest_gauge._internal.analysis.drift.drift_hold`): a decision before the last look stands only
    when the rate extrapolated along its trend in run order agrees (data columns are in run order)."""
    runs = data[0].shape[0]
    verdict = np.full(runs, -1)
    tasks = np.zeros(runs, dtype=np.int64)
    open_ = np.ones(runs, dtype=bool)
    gate = kind.gate
    for look in looks:
        rows = np.flatnonzero(open_)
        q = kind.at(tuple(a[rows] for a in data), look.tasks)
        for i, r in enumerate(rows):
            df = None if q.df is None else float(q.df[i])
            value, low, high = ba._num(q.value[i]), ba._num(q.low[i]), ba._num(q.high[i])
            got, _, _ = decide(
                gate, value, low, high, q.n, look=look, df=df, nominal_quantile=float(q.q95[i]), wilson=True
            )
            if got is not None and not look.final:
                k, n = data[0][r, : look.tasks], data[1][r, : look.tasks]
                if drift_hold(k, n, look.total_tasks, lambda v: OPS[gate.op](v, gate.threshold), got):
                    continue
            if got is None and not look.final:
                continue
            open_[r] = False
            tasks[r] = look.tasks
            verdict[r] = {"pass": 1, "fail": 0, None: -1}[got]
        if not open_.any():
            break
    return verdict, tasks


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
            plain = ba.adaptive(kind, data, equal_looks(tasks, 5), THRESHOLD)
            adaptive = float(np.mean(plain.verdict == 1))
            verdict, run = checked(kind, data, equal_looks(tasks, 5))
            held = float(np.mean(verdict == 1))
            se = math.sqrt(adaptive * (1 - adaptive) / args.runs)
            se_held = math.sqrt(max(held, 1 / args.runs) * (1 - held) / args.runs)
            print(
                f"{tasks} tasks, move {move:+.1f} logits: wrong passes full {100 * full:.1f}%, "
                f"adaptive {100 * adaptive:.1f}% (MC se {100 * se:.1f}), with the drift check "
                f"{100 * held:.1f}% ({100 * se_held:.1f}); mean tasks run {plain.tasks.mean():.1f} -> "
                f"{run.mean():.1f}"
            )
        clear = kind.simulate(np.random.default_rng([47, tasks]), kind.truths["clear pass"], args.runs, tasks)
        plain = ba.adaptive(kind, clear, equal_looks(tasks, 5), kind.truths["clear pass"])
        verdict, run = checked(kind, clear, equal_looks(tasks, 5))
        print(
            f"{tasks} tasks, no drift, clear pass ({kind.truths['clear pass']}): passes "
            f"{100 * np.mean(plain.verdict == 1):.1f}% -> {100 * np.mean(verdict == 1):.1f}%, median tasks "
            f"run {np.median(plain.tasks):.0f} -> {np.median(run):.0f} (mean {plain.tasks.mean():.1f} -> "
            f"{run.mean():.1f})"
        )


if __name__ == "__main__":
    main()
