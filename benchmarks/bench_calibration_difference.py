"""Is a difference of two rates' "holds on ~X% of reruns" calibrated for thresholds fixed before the data?

Run: ``python benchmarks/bench_calibration_difference.py`` (``--runs 10000``, about 3 s). The design
of benchmarks/bench_calibration.py for a gate on ``sum(k1)/sum(n1) - sum(k2)/sum(n2)`` over shared
tasks (two agents' rates, or a close and a distant pair's): per process and suite size a pilot of 2,000
runs finds the compared bound's sampling distribution, each run's threshold is drawn uniformly within 3
of its standard deviations of its mean before the run's data, the run prints its figure and is rerun
once on the same tasks (the tasks' true rates, new cases) and once on fresh tasks; runs are binned by
the printed figure and each bin's mean printed figure set against its share of repeating reruns
(target: 5 points; bins with a Monte Carlo error above 1.5 points not held). The figure is the closed
form the gate prints (``difference_figures``, all runs at once); the simulated reruns it replaced (400
per run, 3 ms each) were 7.2 and 8.9 points over on the same tasks of two close agents (20 and 44
tasks), 6.7 on the skewed rare-event pair and 6.9 on fresh tasks of near-deterministic agents at 20
(6,000 runs per cell, docs/calibration.md).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_calibration import bins, worst

from pytest_gauge._internal.analysis.intervals import cluster_difference
from pytest_gauge._internal.analysis.repeat_difference import difference_figures

Array = np.ndarray
Pair = tuple[Array, Array, Array, Array]
Process = Callable[[np.random.Generator, int, int], Pair]


def _expit(x: Array) -> Array:
    return np.asarray(1.0 / (1.0 + np.exp(-x)))


def close_agents(rng: np.random.Generator, runs: int, tasks: int) -> Pair:
    """Two agents on logit-normal tasks (sd 1.5), the second 0.4 logits worse, 4 cases each."""
    z = rng.normal(0.0, 1.5, (runs, tasks))
    n = np.full((runs, tasks), 4.0)
    return _expit(z), n, _expit(z - 0.4), n


def flat(rng: np.random.Generator, runs: int, tasks: int) -> Pair:
    """No task heterogeneity: 0.35 against 0.25 on every task, 6 cases each."""
    n = np.full((runs, tasks), 6.0)
    return np.full((runs, tasks), 0.35), n, np.full((runs, tasks), 0.25), n


def temperature_zero(rng: np.random.Generator, runs: int, tasks: int) -> Pair:
    """Near-deterministic agents: 85% of tasks at 0.01 or 0.99 for the first, the second the same but
    on a fifth of those tasks the other way; the rest uniform in 0.2-0.8 for both; 4 cases."""
    u = rng.random((runs, tasks))
    middle = rng.uniform(0.2, 0.8, (runs, tasks))
    first = np.where(u < 0.425, 0.01, np.where(u < 0.85, 0.99, middle))
    flip = (rng.random((runs, tasks)) < 0.2) & (u < 0.85)
    second = np.where(flip, 1.0 - first, np.where(u < 0.85, first, rng.uniform(0.2, 0.8, (runs, tasks))))
    n = np.full((runs, tasks), 4.0)
    return first, n, second, n


def rare(rng: np.random.Generator, runs: int, tasks: int) -> Pair:
    """Rare events on skewed tasks: logit-normal sd 2 around 0.1 against the same tasks 0.7 logits
    lower (a close pair's rate against a distant one's), 4 or 12 cases, each rate its own."""
    z = np.log(0.1 / 0.9) + rng.normal(0.0, 2.0, (runs, tasks))
    return (
        _expit(z),
        rng.choice([4.0, 12.0], (runs, tasks)),
        _expit(z - 0.7),
        rng.choice([4.0, 12.0], (runs, tasks)),
    )


PROCESSES: dict[str, Process] = {
    "close agents, logit-normal tasks": close_agents,
    "0.35 vs 0.25, no heterogeneity": flat,
    "temperature 0": temperature_zero,
    "rare events, skewed": rare,
}


def bound_of(counts: Pair, side: str) -> Array:
    """The compared side of the cluster-t interval of the difference, per run."""
    _, low, high = cluster_difference(*counts)
    return np.asarray(high if side == "upper" else low)


def draw(p1: Array, n1: Array, p2: Array, n2: Array, rng: np.random.Generator) -> Pair:
    """One draw of cases at the tasks' rates."""
    k1 = rng.binomial(n1.astype(int), p1).astype(float)
    k2 = rng.binomial(n2.astype(int), p2).astype(float)
    return k1, n1, k2, n2


@dataclass(frozen=True)
class Runs:
    """Simulated runs: their counts and thresholds, and whether each rerun repeated the verdict."""

    counts: Pair
    threshold: Array
    passed: Array
    same: Array
    fresh: Array


def simulate(process: Process, tasks: int, runs: int, seed: int, side: str = "upper") -> Runs:
    """Runs of ``upper(d) <= t`` (or ``lower(d) >= t``) with ``t`` drawn before each run's data: counts,
    thresholds, verdicts, and whether a same-task and a fresh-task rerun repeated each verdict."""
    rng = np.random.default_rng([seed, tasks])
    pilot = bound_of(draw(*process(rng, 2000, tasks), rng), side)
    centre, spread = float(np.nanmean(pilot)), float(np.nanstd(pilot))
    threshold = centre + rng.uniform(-3.0, 3.0, runs) * spread
    truth = process(rng, runs, tasks)
    counts = draw(*truth, rng)

    def verdict(b: Array) -> Array:
        return np.asarray(b <= threshold if side == "upper" else b >= threshold)

    passed = verdict(bound_of(counts, side))
    same = verdict(bound_of(draw(*truth, rng), side)) == passed
    fresh = verdict(bound_of(draw(*process(rng, runs, tasks), rng), side)) == passed
    return Runs(counts, threshold, passed, same, fresh)


def report(label: str, printed: Array, repeated: Array) -> str:
    """One line: worst bin, withheld share, every bin."""
    shown = np.isfinite(printed)
    rows = bins(printed[shown], repeated[shown].astype(float))
    gap, se, at = worst(rows)
    text = "; ".join(f"{a:.0f}+: {pr:.1f}/{rp:.1f} ±{e:.1f} (n {c})" for a, pr, rp, e, c in rows)
    withheld = 100 * (1 - shown.mean())
    return f"{label}: worst bin {gap:+.1f} ±{se:.1f} ({at:.0f}+), withheld {withheld:.1f}%: {text}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10000)
    parser.add_argument("--sizes", type=int, nargs="+", default=[20, 44])
    args = parser.parse_args()
    for name, process in PROCESSES.items():
        for tasks in args.sizes:
            run = simulate(process, tasks, args.runs, seed=52)
            same, fresh = difference_figures(*run.counts, run.threshold, "upper")
            for label, printed, repeated in (("same", same, run.same), ("fresh", fresh, run.fresh)):
                print(report(f"{name}, {tasks} tasks, closed form, {label} tasks", printed, repeated))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
