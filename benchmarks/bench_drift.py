"""Adaptive runs under drift: how often an early stop passes a gate the full run would not.

Run: ``python benchmarks/bench_drift.py`` (``--runs 600``, ``--sizes 44 100``). The rate gate of
``bench_adaptive.py`` (``upper(position_bias) <= 0.65``, 6 cases per task, tasks' rates Beta around the
mean with concentration 4, looks of 5 tasks) on suites whose mean rate moves in run order by ``--move``
logits (1.5: moderate) with the suite mean at the threshold, so every pass is wrong: linearly over the
run (up and down), or in one step at 1/2, 2/3 or 3/4 of the run (up and down); and one agent of a pair
drifting (a step at 3/4) while the other's gate is a clear pass, the run stopping only when both are
decided. It prints the share of wrong passes of the full run, of the adaptive run without and with the
drift check (docs/gates.md#drift), with Monte Carlo standard errors, and without drift the mean share of
tasks a clear gate runs. About two minutes of CPU.
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


SHAPES = ("linear", "step at 1/2", "step at 2/3", "step at 3/4")


def _course(shape: str, tasks: int) -> np.ndarray:
    """The rate's logit course in run order, from -0.5 to 0.5 over the move (a linear ramp or one step)."""
    pos = np.linspace(0.0, 1.0, tasks)
    if shape == "linear":
        return np.asarray(pos - 0.5)
    at = {"step at 1/2": 0.5, "step at 2/3": 2 / 3, "step at 3/4": 0.75}[shape]
    return np.where(pos < at, -0.5, 0.5)


def _centre(move: float, course: np.ndarray) -> float:
    """The starting logit whose drifting rate averages the threshold over the run (bisection)."""
    lo, hi = -5.0, 5.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if _expit(mid + move * course).mean() < THRESHOLD else (lo, mid)
    return 0.5 * (lo + hi)


def drifting(rng: np.random.Generator, move: float, runs: int, tasks: int, shape: str = "linear") -> ba.Data:
    course = _course(shape, tasks)
    mean = _expit(_centre(move, course) + move * course)
    rates = rng.beta(4.0 * mean, 4.0 * (1.0 - mean), (runs, tasks))
    return (rng.binomial(6, rates).astype(np.float64), np.full((runs, tasks), 6.0))


def checked(kind: ba.Kind, data: ba.Data, looks: tuple[Look, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(verdicts, tasks run) of the adaptive procedure with the drift check of the plugin's looks
    (:func:`~pytest_gauge._internal.analysis.drift.drift_hold`): a decision before the last look stands only
    without a trend in run order and when the tasks not run could not flip it (data columns in run order)."""
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
                bounds = (low, high)
                if drift_hold(k, n, look.total_tasks, lambda v: OPS[gate.op](v, gate.threshold), got, bounds):
                    continue
            if got is None and not look.final:
                continue
            open_[r] = False
            tasks[r] = look.tasks
            verdict[r] = {"pass": 1, "fail": 0, None: -1}[got]
        if not open_.any():
            break
    return verdict, tasks


def _pc(x: float, runs: int) -> str:
    """A share in percent with its Monte Carlo standard error."""
    return f"{100 * x:.1f}% ({100 * math.sqrt(max(x, 1 / runs) * (1 - x) / runs):.1f})"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=600)
    parser.add_argument("--sizes", type=int, nargs="+", default=[44, 100])
    parser.add_argument("--move", type=float, default=1.5)
    args = parser.parse_args()
    kind = ba.KINDS[0]
    runs = args.runs
    for tasks in args.sizes:
        looks = equal_looks(tasks, 5)
        for shape in SHAPES:
            for move in (args.move, -args.move):
                seed = [46, tasks, round(10 * move) + 100, SHAPES.index(shape)]
                data = drifting(np.random.default_rng(seed), move, runs, tasks, shape)
                full = float(np.mean(ba.full_run(kind, data, THRESHOLD).verdict == 1))
                plain = ba.adaptive(kind, data, looks, THRESHOLD)
                verdict, run = checked(kind, data, looks)
                print(
                    f"{tasks} tasks, {shape}, move {move:+.1f} logits: wrong passes full {_pc(full, runs)}, "
                    f"adaptive {_pc(float(np.mean(plain.verdict == 1)), runs)}, with the drift check "
                    f"{_pc(float(np.mean(verdict == 1)), runs)}; mean tasks run {plain.tasks.mean():.1f} -> "
                    f"{run.mean():.1f}"
                )
        truth = kind.truths["clear pass"]
        data = drifting(np.random.default_rng([48, tasks]), args.move, runs, tasks, "step at 3/4")
        other = kind.simulate(np.random.default_rng([49, tasks]), truth, runs, tasks)
        verdict, run = checked(kind, data, looks)
        _, run_other = checked(kind, other, looks)
        full = float(np.mean(ba.full_run(kind, data, THRESHOLD).verdict == 1))
        print(
            f"{tasks} tasks, a pair: one agent steps at 3/4, the other a clear pass ({truth}): the drifting "
            f"agent's wrong passes full {_pc(full, runs)}, with the drift check "
            f"{_pc(float(np.mean(verdict == 1)), runs)}; the run takes "
            f"{np.maximum(run, run_other).mean():.1f} tasks"
        )
        clear = kind.simulate(np.random.default_rng([47, tasks]), truth, runs, tasks)
        plain = ba.adaptive(kind, clear, looks, truth)
        verdict, run = checked(kind, clear, looks)
        print(
            f"{tasks} tasks, no drift, clear pass ({truth}): passes "
            f"{100 * np.mean(plain.verdict == 1):.1f}% -> {100 * np.mean(verdict == 1):.1f}%, median tasks "
            f"run {np.median(plain.tasks):.0f} -> {np.median(run):.0f}, mean share "
            f"{plain.tasks.mean() / tasks:.3f} -> {run.mean() / tasks:.3f}"
        )


if __name__ == "__main__":
    main()
