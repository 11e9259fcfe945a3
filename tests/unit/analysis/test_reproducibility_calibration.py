"""Is "holds on ~X% of reruns" calibrated by bin, with thresholds fixed before the data? Runs binned by
the printed figure against the share of their reruns that repeat (docs/calibration.md)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import numpy as np
import pytest

from pytest_gauge._internal.analysis.gates import GateResult, parse_gate
from pytest_gauge._internal.analysis.intervals import cluster_wilson
from pytest_gauge._internal.analysis.repeat_figure import case_rate_figures

Array = np.ndarray
Process = Callable[[np.random.Generator, int, int], tuple[Array, Array]]
BINS = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1.01)
TOLERANCE = 5.0
"""Points a bin's mean printed figure may be off its share of repeating reruns."""
MAX_MC = 1.5
"""Points: a bin is held only where its share's Monte Carlo error is at most this (about 800 runs at
75%, 200 at 95%); at 16,000 runs per cell every bin from 60% up is held on the fresh tasks."""
RUNS = 16000


def _beta_tasks(rng: np.random.Generator, runs: int, tasks: int) -> tuple[Array, Array]:
    """Task heterogeneity: rates Beta(0.6, 1.4) (mean 0.3, U-leaning), 5 cases each."""
    return rng.beta(0.6, 1.4, (runs, tasks)), np.full((runs, tasks), 5.0)


def _flat(rng: np.random.Generator, runs: int, tasks: int) -> tuple[Array, Array]:
    """No task heterogeneity: every task at 0.35, 3 or 8 cases."""
    return np.full((runs, tasks), 0.35), rng.choice([3.0, 8.0], (runs, tasks))


def _mixed(rng: np.random.Generator, runs: int, tasks: int) -> tuple[Array, Array]:
    """Always 15% / never 55% of tasks, the rest Beta(2, 3); 2 to 10 cases (a near-deterministic
    agent with some tasks it is unsure on)."""
    u = rng.random((runs, tasks))
    rate = np.where(u < 0.15, 1.0, np.where(u < 0.7, 0.0, rng.beta(2.0, 3.0, (runs, tasks))))
    return rate, rng.integers(2, 11, (runs, tasks)).astype(float)


PROCESSES: dict[str, tuple[Process, str]] = {
    "beta(0.6, 1.4) tasks, 5 cases, upper": (_beta_tasks, "upper"),
    "all at 0.35, 3 or 8 cases, lower": (_flat, "lower"),
    "always 15% / never 55% / Beta(2, 3), 2-10 cases, upper": (_mixed, "upper"),
}


def _rows(process: Process, side: str, tasks: int, seed: int, runs: int = RUNS) -> tuple[Array, ...]:
    """(printed same, repeated same, printed fresh, repeated fresh) per run of ``upper(x) <= t`` (or
    ``lower(x) >= t``), ``t`` drawn before the run's data, uniformly within 3 sd of the compared bound's
    mean (a pilot of 2,000 runs); runs whose figure is withheld are left out."""
    rng = np.random.default_rng([seed, tasks])
    pick = 2 if side == "upper" else 1

    def bound(p: Array, n: Array) -> Array:
        return np.asarray(cluster_wilson(rng.binomial(n.astype(int), p).astype(float), n)[pick])

    pilot = bound(*process(rng, 2000, tasks))
    threshold = np.nanmean(pilot) + rng.uniform(-3.0, 3.0, runs) * np.nanstd(pilot)
    p, n = process(rng, runs, tasks)
    k = rng.binomial(n.astype(int), p).astype(float)
    now = np.asarray(cluster_wilson(k, n)[pick])
    passed = now <= threshold if side == "upper" else now >= threshold

    def verdict(b: Array) -> Array:
        return np.asarray(b <= threshold if side == "upper" else b >= threshold)

    same = verdict(bound(p, n)) == passed
    fresh = verdict(bound(*process(rng, runs, tasks))) == passed
    printed_same, printed_fresh = case_rate_figures(k, n, threshold, side)
    shown = np.isfinite(printed_fresh)
    return printed_same[shown], same[shown], printed_fresh[shown], fresh[shown]


def _misses(printed: Array, repeated: Array) -> list[str]:
    """Bins (with a Monte Carlo error of at most MAX_MC points) off by more than TOLERANCE points."""
    out = []
    for a, b in itertools.pairwise(BINS):
        m = (printed >= a) & (printed < b)
        if not m.any():
            continue
        pr, rp = 100 * float(printed[m].mean()), 100 * float(repeated[m].mean())
        se = 100 * math.sqrt(max(rp / 100 * (1 - rp / 100), 1e-4) / m.sum())
        if se <= MAX_MC and abs(pr - rp) > TOLERANCE:
            out.append(f"bin {100 * a:.0f}+: printed {pr:.1f}, repeated {rp:.1f} ±{se:.1f} (n {m.sum()})")
    return out


@pytest.mark.slow
@pytest.mark.parametrize("tasks", [20, 44])
@pytest.mark.parametrize("name", list(PROCESSES))
def test_case_rate_figure_is_within_five_points_in_every_bin(name: str, tasks: int) -> None:
    """Processes unlike the ones the method was chosen on (benchmarks/bench_calibration.py), thresholds
    fixed before the data, 16,000 runs: every bin whose Monte Carlo error is at most 1.5 points within
    5 points, on the same tasks and on fresh tasks (docs/calibration.md)."""
    process, side = PROCESSES[name]
    printed_same, same, printed_fresh, fresh = _rows(process, side, tasks, seed=71)
    assert len(printed_fresh) >= RUNS // 2, f"{name}: {len(printed_fresh)} figures of {RUNS}"
    misses = [f"same tasks {m}" for m in _misses(printed_same, same.astype(float))]
    misses += [f"fresh tasks {m}" for m in _misses(printed_fresh, fresh.astype(float))]
    assert not misses, f"{name}, {tasks} tasks: " + "; ".join(misses)


@pytest.mark.slow
def test_same_task_figure_where_always_never_tasks_carry_the_spread() -> None:
    """The mixture at 20 tasks on 30,000 runs (every bin from 50% up held on the same tasks): the
    crossing's binomial widening took the rerun's interval to move with its rate, which it barely does
    where always/never tasks carry the spread: 8.2 ± 1.4 points cautious (65.2% printed, 73.4%
    repeated); the bound propagated task by task is within 3.6 (docs/calibration.md)."""
    printed_same, same, _, _ = _rows(_mixed, "upper", 20, seed=71, runs=30000)
    misses = _misses(printed_same, same.astype(float))
    assert not misses, "same tasks " + "; ".join(misses)


Pair = tuple[Array, Array, Array, Array]
DifferenceProcess = Callable[[np.random.Generator, int, int], Pair]


def _beta_pair(rng: np.random.Generator, runs: int, tasks: int) -> Pair:
    """Task heterogeneity: the first rate Beta(0.6, 1.4), the second 0.7 times it, 5 cases each."""
    first = rng.beta(0.6, 1.4, (runs, tasks))
    n = np.full((runs, tasks), 5.0)
    return first, n, 0.7 * first, n


def _flat_pair(rng: np.random.Generator, runs: int, tasks: int) -> Pair:
    """No task heterogeneity: 0.5 against 0.42 on every task, 3 or 8 cases (both rates alike)."""
    n = rng.choice([3.0, 8.0], (runs, tasks))
    return np.full((runs, tasks), 0.5), n, np.full((runs, tasks), 0.42), n


def _deterministic_pair(rng: np.random.Generator, runs: int, tasks: int) -> Pair:
    """Near-deterministic agents: always 15% / never 55% / Beta(2, 3) for the first, the second the
    same but the other way on a tenth of its always and never tasks; 2 to 10 cases."""
    u = rng.random((runs, tasks))
    first = np.where(u < 0.15, 1.0, np.where(u < 0.7, 0.0, rng.beta(2.0, 3.0, (runs, tasks))))
    flip = (rng.random((runs, tasks)) < 0.1) & (u < 0.7)
    n = rng.integers(2, 11, (runs, tasks)).astype(float)
    return first, n, np.where(flip, 1.0 - first, first), n


DIFFERENCES: dict[str, tuple[DifferenceProcess, str]] = {
    "beta(0.6, 1.4) against 0.7 times it, lower": (_beta_pair, "lower"),
    "0.5 against 0.42, 3 or 8 cases, upper": (_flat_pair, "upper"),
    "always / never / Beta(2, 3), a tenth flipped, upper": (_deterministic_pair, "upper"),
}


@pytest.mark.slow
@pytest.mark.parametrize("tasks", [20, 44])
@pytest.mark.parametrize("name", list(DIFFERENCES))
def test_difference_figure_is_within_five_points_in_every_bin(name: str, tasks: int) -> None:
    """A difference of two rates over shared tasks (``difference_figures``, what the gate prints), on
    processes unlike benchmarks/bench_calibration_difference.py's, with the design of the case rate's
    test: thresholds fixed before the data, 16,000 runs, every bin with Monte Carlo error at most 1.5
    points within 5, same tasks and fresh. The simulated reruns it replaced were 7.2 points over on the
    same tasks of two close agents at 20 tasks; without the spread's covariance with the difference the
    near-deterministic pair at 20 was 5.3 cautious on fresh tasks (docs/calibration.md)."""
    from pytest_gauge._internal.analysis.intervals import cluster_difference  # deferred: this test only
    from pytest_gauge._internal.analysis.repeat_difference import difference_figures  # deferred: as above

    process, side = DIFFERENCES[name]
    rng = np.random.default_rng([73, tasks])
    pick = 2 if side == "upper" else 1

    def bound(p1: Array, n1: Array, p2: Array, n2: Array) -> Array:
        k1 = rng.binomial(n1.astype(int), p1).astype(float)
        k2 = rng.binomial(n2.astype(int), p2).astype(float)
        return np.asarray(cluster_difference(k1, n1, k2, n2)[pick])

    pilot = bound(*process(rng, 2000, tasks))
    threshold = np.nanmean(pilot) + rng.uniform(-3.0, 3.0, RUNS) * np.nanstd(pilot)
    p1, n1, p2, n2 = process(rng, RUNS, tasks)
    k1 = rng.binomial(n1.astype(int), p1).astype(float)
    k2 = rng.binomial(n2.astype(int), p2).astype(float)
    now = np.asarray(cluster_difference(k1, n1, k2, n2)[pick])

    def verdict(b: Array) -> Array:
        return np.asarray(b <= threshold if side == "upper" else b >= threshold)

    passed = verdict(now)
    same = verdict(bound(p1, n1, p2, n2)) == passed
    fresh = verdict(bound(*process(rng, RUNS, tasks))) == passed
    printed_same, printed_fresh = difference_figures(k1, n1, k2, n2, threshold, side)
    shown = np.isfinite(printed_fresh)
    assert shown.sum() >= RUNS // 2, f"{name}: {shown.sum()} figures of {RUNS}"
    misses = [f"same tasks {m}" for m in _misses(printed_same[shown], same[shown].astype(float))]
    misses += [f"fresh tasks {m}" for m in _misses(printed_fresh[shown], fresh[shown].astype(float))]
    assert not misses, f"{name}, {tasks} tasks: " + "; ".join(misses)


def _mean_bounds(x: Array, tasks: int) -> tuple[Array, Array, Array]:
    """Per run (rows of ``x``: runs x tasks x samples): the mean over tasks, its upper t bound, its se."""
    from pytest_gauge._internal.analysis.intervals import t_quantile  # deferred: only this test needs it

    means = x.mean(axis=2)
    value = means.mean(axis=1)
    se = means.std(axis=1, ddof=1) / math.sqrt(tasks)
    return value, value + float(t_quantile(tasks - 1)) * se, se


EDGE = pytest.mark.xfail(
    reason="a known miss at the edge of its allowance: same tasks, 70-90% bin, 81.1% printed and 73.9%"
    " repeated (7.2 points, allowance 7.2): the within share reads the task means' chance spread as"
    " task effects"
)


@pytest.mark.parametrize(
    ("tasks", "heterogeneous"),
    [(12, True), pytest.param(12, False, marks=EDGE), (30, True), (30, False)],
)
def test_the_normal_path_is_calibrated_by_bin(tasks: int, heterogeneous: bool) -> None:
    """The normal path (a mean over tasks of 3 samples, heavy-tailed t(4) noise within tasks, task
    effects sd 0.2 or none), 6,000 runs: each bin's mean printed figure within 5 points plus two Monte
    Carlo errors of its share of reruns that repeat, same tasks and fresh. The normal tail (no t on the
    interval's df) was 7.5 points over on the same tasks at 12 tasks without task effects; a plug-in
    figure (no sqrt(2)) is 8-12 points over."""
    from pytest_gauge._internal.analysis.power import variance_components  # deferred: only this test needs it
    from pytest_gauge._internal.analysis.reproducibility import (
        components_within_share,
        gate_reproducibility,
    )  # deferred: as above

    rng = np.random.default_rng([83, tasks, heterogeneous])
    runs, spread = 6000, 0.2 if heterogeneous else 0.0

    def draw(mu: Array) -> Array:
        return mu[..., None] + rng.standard_t(4, (runs, tasks, 3)) * 0.2 / math.sqrt(2.0)

    def tasks_now() -> Array:
        return 0.5 + rng.normal(0.0, spread, (runs, tasks)) if spread else np.full((runs, tasks), 0.5)

    pilot = _mean_bounds(draw(tasks_now()), tasks)[1]
    threshold = pilot.mean() + rng.uniform(-3.0, 3.0, runs) * pilot.std()  # fixed before the data
    mu = tasks_now()
    x = draw(mu)
    value, high, _ = _mean_bounds(x, tasks)
    passed = high <= threshold
    same = (_mean_bounds(draw(mu), tasks)[1] <= threshold) == passed
    fresh = (_mean_bounds(draw(tasks_now()), tasks)[1] <= threshold) == passed
    printed = []
    for i in range(runs):
        gate = parse_gate(f"upper(mean_reward(a)) <= {float(threshold[i])!r}")
        status = "pass" if passed[i] else "fail"
        low = 2 * value[i] - high[i]
        result = GateResult(gate, status, float(value[i]), float(low), float(high[i]), tasks, "")  # type: ignore[arg-type]
        within = components_within_share(variance_components([list(r) for r in x[i]]))
        rep = gate_reproducibility(result, df=tasks - 1, within=within)
        assert rep is not None
        printed.append((rep.same_tasks, rep.fresh_tasks))
    shown = np.array(printed)
    misses = [f"same tasks {m}" for m in _misses(shown[:, 0], same.astype(float))]
    misses += [f"fresh tasks {m}" for m in _misses(shown[:, 1], fresh.astype(float))]
    assert not misses, f"{tasks} tasks, heterogeneous {heterogeneous}: " + "; ".join(misses)
