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
from pytest_gauge._internal.analysis.reproducibility import case_rate_reproducibility

Array = np.ndarray
Process = Callable[[np.random.Generator, int], tuple[Array, Array]]
BINS = (0.5, 0.7, 0.9, 0.99, 1.01)
TOLERANCE = 5.0
"""Points a bin's mean printed figure may be off its share of repeating reruns, plus two Monte Carlo
standard errors of that share, ``200 sqrt(p (1 - p) / n)`` over the bin's ``n`` runs (bins under 40
runs are not held)."""
RUNS = 400


def _beta_tasks(rng: np.random.Generator, tasks: int) -> tuple[Array, Array]:
    """Task heterogeneity: rates Beta(0.6, 1.4) (mean 0.3, U-leaning), 5 cases each."""
    return rng.beta(0.6, 1.4, tasks), np.full(tasks, 5.0)


def _two_point(rng: np.random.Generator, tasks: int) -> tuple[Array, Array]:
    """No task heterogeneity: every task at 0.35, 3 or 8 cases."""
    return np.full(tasks, 0.35), rng.choice([3.0, 8.0], tasks)


PROCESSES: dict[str, Process] = {"beta(0.6, 1.4) tasks, 5 cases": _beta_tasks, "all at 0.35": _two_point}


def _bound(p: Array, n: Array, rng: np.random.Generator) -> float:
    return float(cluster_wilson(rng.binomial(n.astype(int), p).astype(float), n)[2])


def _rows(process: Process, tasks: int, seed: int) -> Array:
    """(printed same, repeated same, printed fresh, repeated fresh) per run of ``upper(x) <= t``, ``t``
    drawn before the run's data, uniformly within 3 sd of the bound's mean (a pilot of 150 runs)."""
    rng = np.random.default_rng([seed, tasks])
    pilot = [_bound(*process(rng, tasks), rng) for _ in range(150)]
    centre, spread = float(np.mean(pilot)), float(np.std(pilot))
    rows = []
    for run in range(RUNS):
        threshold = float(centre + rng.uniform(-3.0, 3.0) * spread)
        p, n = process(rng, tasks)
        k = rng.binomial(n.astype(int), p).astype(float)
        value, low, high = (float(x) for x in cluster_wilson(k, n))
        passed = high <= threshold
        gate = parse_gate(f"upper(x{run}) <= {threshold!r}")
        rep = case_rate_reproducibility(
            GateResult(gate, "pass" if passed else "fail", value, low, high, int(n.sum()), ""), (k, n)
        )
        assert rep is not None
        same = (_bound(p, n, rng) <= threshold) == passed
        fresh = (_bound(*process(rng, tasks), rng) <= threshold) == passed
        rows.append((rep.same_tasks, same, rep.fresh_tasks, fresh))
    return np.array(rows, dtype=float)


def _misses(printed: Array, repeated: Array) -> list[str]:
    out = []
    for a, b in itertools.pairwise(BINS):
        m = (printed >= a) & (printed < b)
        if m.sum() < 40:
            continue
        pr, rp = 100 * float(printed[m].mean()), 100 * float(repeated[m].mean())
        se = 100 * math.sqrt(max(rp / 100 * (1 - rp / 100), 0.01) / m.sum())
        if abs(pr - rp) > TOLERANCE + 2 * se:
            out.append(f"bin {100 * a:.0f}+: printed {pr:.1f}, repeated {rp:.1f} ±{se:.1f} (n {m.sum()})")
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", list(PROCESSES))
def test_case_rate_figure_is_off_by_no_more_than_five_points_plus_two_mc_errors_per_bin(name: str) -> None:
    """Processes unlike the ones the method was chosen on (benchmarks/bench_calibration.py), 30 tasks:
    each bin within 5 points plus two Monte Carlo errors (14-19 points with 400 runs), on the same tasks
    and on fresh tasks. A coarse guard against gross miscalibration only: the 5-point target itself is
    measured by the benchmark, with more runs."""
    rows = _rows(PROCESSES[name], 30, seed=71)
    misses = [f"same tasks {m}" for m in _misses(rows[:, 0], rows[:, 1])]
    misses += [f"fresh tasks {m}" for m in _misses(rows[:, 2], rows[:, 3])]
    assert not misses, f"{name}: " + "; ".join(misses)


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
