"""Is "holds on ~X% of reruns" calibrated for thresholds fixed before the data? Per-bin figures.

Run: ``python benchmarks/bench_calibration.py`` (``--runs 10000``). For each simulated process (per-task
rates and cases of a case-rate gate) and suite size, the bound's sampling distribution is found first
(a pilot of 2,000 runs); each run's threshold is then drawn uniformly within 3 of its standard
deviations of its mean, before that run's data, as a user sets a threshold without seeing the run (the
validation design of docs/calibration.md). Each run prints its figure (``case_rate_figures``, what the
gate prints, all runs at once) and is rerun once on the same tasks (the tasks' true rates, new cases)
and once on fresh tasks; runs are binned by the printed figure (50-60, 60-70, 70-80, 80-90, 90-95,
95-99, >99%) and each bin's mean printed figure is set against the share of its reruns that repeated
the verdict (target: within 5 points in every bin). Bins whose share has a Monte Carlo error above
1.5 points are not held; runs the figure withholds (too few tasks with the rarer outcome) are counted.
Below ``MIN_RATE_TASKS`` tasks (``--sizes 12 16``) every case rate's figure is withheld by the gate:
what it would print is shown, as the reason. About 10 seconds of CPU.
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_gauge._internal.analysis.intervals import cluster_wilson
from pytest_gauge._internal.analysis.repeat_figure import case_rate_figures
from pytest_gauge._internal.analysis.reproducibility import MIN_RATE_TASKS

Array = np.ndarray
Process = Callable[[np.random.Generator, int, int], tuple[Array, Array]]
BINS = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1.01)
MAX_MC = 1.5
"""Points: a bin is held only where its share's Monte Carlo error is at most this."""


def _expit(x: Array) -> Array:
    return np.asarray(1.0 / (1.0 + np.exp(-x)))


def always(rng: np.random.Generator, runs: int, tasks: int) -> tuple[Array, Array]:
    """Always 30% / never 70% of tasks, 4 cases each (no heterogeneity within a task)."""
    return (rng.random((runs, tasks)) < 0.3).astype(float), np.full((runs, tasks), 4.0)


def unequal(rng: np.random.Generator, runs: int, tasks: int) -> tuple[Array, Array]:
    """Logit-normal rates, sd 2 around 0.1, 4 or 12 cases: skewed, unequal clusters."""
    logits = np.log(0.1 / 0.9) + rng.normal(0.0, 2.0, (runs, tasks))
    return _expit(logits), rng.choice([4.0, 12.0], (runs, tasks))


def temperature_zero(rng: np.random.Generator, runs: int, tasks: int) -> tuple[Array, Array]:
    """85% of tasks at 0.01 or 0.99, the rest uniform in 0.2-0.8, 4 cases."""
    u = rng.random((runs, tasks))
    middle = rng.uniform(0.2, 0.8, (runs, tasks))
    return np.where(u < 0.425, 0.01, np.where(u < 0.85, 0.99, middle)), np.full((runs, tasks), 4.0)


def homogeneous(rng: np.random.Generator, runs: int, tasks: int) -> tuple[Array, Array]:
    """Every task at 0.2, 6 cases: no task heterogeneity."""
    return np.full((runs, tasks), 0.2), np.full((runs, tasks), 6.0)


PROCESSES: dict[str, Process] = {
    "always 30% / never 70%": always,
    "logit-normal sd 2, unequal": unequal,
    "temperature 0": temperature_zero,
    "homogeneous 0.2": homogeneous,
}


def upper_bounds(p: Array, n: Array, rng: np.random.Generator) -> Array:
    """The cluster-Wilson upper bound of one draw of cases at the tasks' rates, per run."""
    return np.asarray(cluster_wilson(rng.binomial(n.astype(int), p).astype(float), n)[2])


def simulate(process: Process, tasks: int, runs: int, seed: int) -> dict[str, Array]:
    """Runs of ``upper(x) <= t`` with ``t`` drawn before each run's data: counts, thresholds, verdicts,
    and whether a same-task and a fresh-task rerun repeated each verdict."""
    rng = np.random.default_rng([seed, tasks])
    pilot = upper_bounds(*process(rng, 2000, tasks), rng)
    centre, spread = float(np.nanmean(pilot)), float(np.nanstd(pilot))
    threshold = centre + rng.uniform(-3.0, 3.0, runs) * spread
    p, n = process(rng, runs, tasks)
    k = rng.binomial(n.astype(int), p).astype(float)
    passed = cluster_wilson(k, n)[2] <= threshold
    same = (upper_bounds(p, n, rng) <= threshold) == passed
    fresh = (upper_bounds(*process(rng, runs, tasks), rng) <= threshold) == passed
    return {"k": k, "n": n, "threshold": threshold, "passed": passed, "same": same, "fresh": fresh}


def bins(printed: Array, repeated: Array) -> list[tuple[float, float, float, float, int]]:
    """(bin start, mean printed, share repeated, Monte Carlo error, runs) in points, per bin with runs;
    runs with no figure (NaN) left out."""
    out = []
    for a, b in itertools.pairwise(BINS):
        m = (printed >= a) & (printed < b)
        count = int(m.sum())
        if count == 0:
            continue
        pr, rp = 100 * float(printed[m].mean()), 100 * float(repeated[m].mean())
        se = 100 * math.sqrt(max(rp / 100 * (1 - rp / 100), 1e-4) / count)
        out.append((100 * a, pr, rp, se, count))
    return out


def worst(rows: list[tuple[float, float, float, float, int]]) -> tuple[float, float, float]:
    """(printed - repeated of the bin where it is largest, that bin's Monte Carlo error, its start) over
    the bins held: positive where the figure was too sure, negative where too cautious."""
    held = [r for r in rows if r[3] <= MAX_MC]
    if not held:
        return math.nan, math.nan, math.nan
    row = max(held, key=lambda r: abs(r[1] - r[2]))
    return row[1] - row[2], row[3], row[0]


def pooled(process: Process, tasks: int, runs: int, seed: int) -> tuple[Array, Array, Array, Array]:
    """(same-task figure, fresh-task figure, same-task repeated, fresh-task repeated) of ``runs`` runs."""
    run = simulate(process, tasks, runs, seed=seed)
    same, fresh = case_rate_figures(run["k"], run["n"], run["threshold"], "upper")
    return same, fresh, run["same"], run["fresh"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10000)
    parser.add_argument("--sizes", type=int, nargs="+", default=[20, 44])
    parser.add_argument("--seed", type=int, default=46)
    parser.add_argument("--seeds", type=int, default=1, help="pool this many seeds from --seed on")
    args = parser.parse_args()
    for name, process in PROCESSES.items():
        for tasks in args.sizes:
            figures = [
                pooled(process, tasks, args.runs, seed) for seed in range(args.seed, args.seed + args.seeds)
            ]
            same, fresh, same_repeated, fresh_repeated = (
                np.concatenate(part) for part in zip(*figures, strict=True)
            )
            shown = np.isfinite(fresh)
            small = (
                "" if tasks >= MIN_RATE_TASKS else f" (under {MIN_RATE_TASKS} tasks: withheld, would print)"
            )
            for label, printed, repeated in (("same", same, same_repeated), ("fresh", fresh, fresh_repeated)):
                rows = bins(printed[shown], repeated[shown].astype(float))
                gap, se, at = worst(rows)
                text = "; ".join(f"{a:.0f}+: {pr:.1f}/{rp:.1f} ±{e:.1f} (n {c})" for a, pr, rp, e, c in rows)
                head = f"{name}, {tasks} tasks{small}, {label} tasks"
                print(
                    f"{head}: worst bin {gap:+.1f} ±{se:.1f} ({at:.0f}+),"
                    f" withheld {100 * (1 - shown.mean()):.1f}%: {text}"
                )


if __name__ == "__main__":
    main()
