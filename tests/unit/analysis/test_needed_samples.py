"""The samples-per-task alternative to "about N tasks would decide it", from a
one-way variance-components decomposition, and count gates shown as counts. Pure, hand-computed cases."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from pytest_gauge._internal.analysis.gates import GateResult, Quantity, Term, evaluate_gate, parse_gate
from pytest_gauge._internal.analysis.intervals import cluster_wilson
from pytest_gauge._internal.analysis.power import (
    VarianceComponents,
    gate_needed_n,
    needed_samples,
    spread_by_agent,
    variance_components,
    with_needed_n,
)
from pytest_gauge._internal.report.baseline import gate_ci, gate_value

Array = np.ndarray[Any, np.dtype[Any]]

Z_SUM = 1.959964 + 0.841621  # z(0.975) + z(0.8), from the normal table


def test_variance_components_by_hand() -> None:
    # tasks [1, 0], [1, 1], [0, 0]: task means .5, 1, 0, grand mean .5
    # SSW = .25 + .25 = .5 over N - T = 3 -> MSW = 1/6; MSB = 2 * (0 + .25 + .25) / 2 = .5; n0 = 2
    # s2_b = (.5 - 1/6) / 2 = 1/6
    vc = variance_components([[1, 0], [1, 1], [0, 0]])
    assert vc is not None
    assert vc.within == pytest.approx(1 / 6) and vc.between == pytest.approx(1 / 6)
    assert (vc.tasks, vc.samples) == (3, 2.0)
    # unbalanced: [0, 1, 1] and [4]: N=4, T=2, means 2/3 and 4, grand 6/4 = 1.5
    # SSW = 4/9 + 1/9 + 1/9 = 2/3 over 2 -> 1/3; MSB = 3 * (5/6)^2 + (2.5)^2 = 25/12 + 75/12 = 25/3
    # n0 = (4 - 10/4) / 1 = 1.5; s2_b = (25/3 - 1/3) / 1.5 = 16/3
    vc = variance_components([[0, 1, 1], [4]])
    assert vc is not None
    assert vc.within == pytest.approx(1 / 3) and vc.between == pytest.approx(16 / 3)
    # identical tasks: MSB < MSW gives s2_b clamped at 0
    vc = variance_components([[0, 1], [1, 0]])
    assert vc is not None and vc.between == 0.0 and vc.within == pytest.approx(0.5)


def test_variance_components_need_two_tasks_and_a_repeat() -> None:
    assert variance_components([[1], [0], [1]]) is None  # one sample per task: not identifiable
    assert variance_components([[1, 0, 1]]) is None  # one task
    assert variance_components([[], [1]]) is None
    spread = spread_by_agent(
        {("t1", "a", 0): 1.0, ("t1", "a", 1): 0.0, ("t2", "a", 0): 1.0, ("t2", "b", 0): 1.0}
    )
    assert list(spread) == ["a"]  # b has one task only
    assert spread["a"].tasks == 2 and spread["a"].samples == 1.5


def test_needed_samples_when_samples_help() -> None:
    # target SE^2 = 0.001 at 80% power / 95%: effect = (z + z_power) * sqrt(0.001)
    # k >= s2_w / (n * SE^2 - s2_b) = 0.24 / (24 * 0.001 - 0.01) = 17.14 -> 18
    effect = Z_SUM * math.sqrt(0.001)
    assert needed_samples(0.01, 0.24, 24, effect) == 18
    assert needed_samples(0.01, 0.24, 24, -effect) == 18  # the sign of the effect does not matter
    # no between-task spread: the samples simply multiply the tasks, 0.24 / 0.024 = 10
    assert needed_samples(0.0, 0.24, 24, effect * 1.0001) == 10


def test_needed_samples_when_samples_cannot_help() -> None:
    effect = Z_SUM * math.sqrt(0.001)
    # s2_b / n = 0.03 / 24 = 0.00125 > 0.001 = the needed SE^2: no k reaches it
    assert needed_samples(0.03, 0.24, 24, effect) is None
    assert needed_samples(0.024 + 1e-9, 0.24, 24, effect) is None  # the boundary: infinitely many
    assert needed_samples(0.01, 0.24, 24, 0.0) is None
    assert needed_samples(0.01, 0.24, 0, effect) is None


def _crossing() -> GateResult:
    # mean_reward 0.55, interval [0.45, 0.65] at 24 tasks across the threshold 0.5: effect 0.05,
    # needed SE^2 = (0.05 / 2.8016)^2 = 3.185e-4, n * SE^2 = 0.007644
    gate = parse_gate("lower(mean_reward(x)) >= 0.5")
    return GateResult(gate, "fail", 0.55, 0.45, 0.65, 24, "FAIL ...")


def test_with_needed_n_adds_the_samples_alternative() -> None:
    base = _crossing()
    tasks = gate_needed_n(0.55, 0.45, 0.65, 24, 0.5).n
    # k = 0.06 / (0.007644 - 0.002) = 10.6 -> 11 (current 2 samples per task)
    got = with_needed_n(base, VarianceComponents(0.002, 0.06, 24, 2.0))
    assert got.needed_n == tasks and got.needed_samples == 11
    lo, hi = got.needed_range
    assert tasks is not None and lo is not None and hi is not None and lo < tasks < hi
    assert got.needed.endswith(
        f"about {tasks} tasks ({lo}-{hi}), or 11 samples per task (4 or more), would decide it"
    )
    assert got.to_json()["needed_samples"] == 11


def test_with_needed_n_says_only_tasks_when_samples_cannot_or_do_not_exist() -> None:
    base = _crossing()
    tasks = gate_needed_n(0.55, 0.45, 0.65, 24, 0.5).n
    only = f"about {tasks} tasks (69-2019) would decide it"  # the sizes at the effect's 50% interval ends
    cannot = with_needed_n(base, VarianceComponents(0.01, 0.06, 24, 2.0))  # 0.01 > 0.007644
    assert cannot.needed_samples is None and cannot.needed.endswith(only)
    assert with_needed_n(base).needed.endswith(only)  # one sample per task: no components
    # components of another task set, or saying the current samples already suffice: no advice
    assert with_needed_n(base, VarianceComponents(0.002, 0.06, 30, 2.0)).needed_samples is None
    assert with_needed_n(base, VarianceComponents(0.002, 0.06, 24, 12.0)).needed_samples is None


class _Counts:
    def lookup(self, name: str, args: tuple[str, ...]) -> Quantity:
        return Quantity(17.0, 24, 17.0, 17.0)  # what the baseline comparison serves for regressions

    def difference(self, left: Term, right: Term) -> Quantity:
        raise KeyError("unknown metric")


@pytest.mark.parametrize("text", ["regressions(x) <= 2", "upper(fixes(x)) >= 3"])
def test_count_gates_show_a_count_without_an_interval(text: str) -> None:
    result = evaluate_gate(parse_gate(text), _Counts())
    assert "count 17 (n=24; noise alone: about 17 of 34 flips, up to 23)" in result.message  # 17 + 17 flips
    assert "CI" not in result.message and "17.000" not in result.message
    assert gate_ci(result) == "count" and gate_value(result) == "17"
    short = evaluate_gate(parse_gate(f"{text}; min_n=30"), _Counts())
    assert short.status == "inconclusive" and "(count 17, n=24)" in short.message


def test_a_rate_gate_keeps_its_interval() -> None:
    class Rate(_Counts):
        def lookup(self, name: str, args: tuple[str, ...]) -> Quantity:
            return Quantity(0.5, 24, 0.3, 0.7)

    result = evaluate_gate(parse_gate("lower(success_rate(x)) >= 0.2"), Rate())
    assert "95% CI 0.300–0.700" in result.message and gate_ci(result) == "[0.300, 0.700]"
    assert gate_value(result) == "0.500"


def test_needed_n_of_a_case_rate_counts_tasks_not_cases() -> None:
    """A case-level rate over 24 tasks x 4 cases has n = 96: the size that would decide it is read from
    its interval as one over 24 tasks (a count of cases would overstate the tasks 4-fold), and a
    ``min_n`` in cases becomes its share of tasks."""
    gate = parse_gate("upper(lrs_distant) <= 0.2; min_n=120")
    result = GateResult(gate, "fail", 0.15, 0.08, 0.26, 96, "FAIL ...")
    per_task = gate_needed_n(0.15, 0.08, 0.26, 24, 0.2).n
    per_case = gate_needed_n(0.15, 0.08, 0.26, 96, 0.2).n
    assert per_task is not None and per_case is not None and per_case > 3 * per_task
    got = with_needed_n(result, tasks=24)
    assert got.needed_n == max(per_task, 30)  # min_n=120 cases of 96 over 24 tasks -> 30 tasks
    assert got.needed.endswith(f"about {got.needed_n} tasks (61-1098) would decide it")
    assert with_needed_n(result).needed_n == max(per_case, 120)  # without the task count: as before


@pytest.mark.slow
def test_needed_n_of_a_case_rate_decides_the_gate_60_to_90_percent() -> None:
    """Pilots of 24 tasks x 4 cases (Beta(0.5, 1.5) task rates, mean 0.25; cluster-Wilson intervals) of
    ``upper(rate) <= 0.3`` whose interval crosses the threshold state a needed_n in tasks; suites of that
    many tasks x 4 cases whose true rate is the pilot's observed rate decide the gate in 60-90% of runs,
    pooled over 30 pilots (200 suites each: Monte Carlo error of the pooled share under 1 point; the
    pilots' own spread dominates). Counting cases instead made every such suite decide it (89-100%)."""
    rng = np.random.default_rng(2602)
    threshold, cases = 0.3, 4

    def suites(rate: float, tasks: int, runs: int) -> tuple[Array, Array, Array]:
        p = rng.beta(rate * 2, (1 - rate) * 2, size=(runs, tasks))
        k = rng.binomial(cases, p).astype(np.float64)
        return cluster_wilson(k, np.full_like(k, float(cases)))

    value, low, high = suites(0.25, 24, 400)
    decided: list[float] = []
    inside = 0
    for v, lo, hi in zip(value, low, high, strict=True):
        if not (lo < threshold < hi) or abs(v - threshold) < 0.04 or len(decided) == 30:
            continue
        gate = parse_gate("upper(rate) <= 0.3")
        result = with_needed_n(GateResult(gate, "fail", float(v), float(lo), float(hi), 96, ""), tasks=24)
        size = result.needed_n
        assert size is not None and "tasks (" in result.needed
        if size > 400:
            continue
        _, low_n, high_n = suites(float(v), size, 200)
        decided.append(float(np.mean((high_n <= threshold) | (low_n > threshold))))
        inside += result.needed_range[0] is not None
    assert len(decided) == 30 and inside == 30
    assert 0.60 <= float(np.mean(decided)) <= 0.90, decided


def test_an_undecided_gate_is_never_told_fewer_tasks_than_it_has() -> None:
    """A skewed interval across the threshold (a rare rate's Wilson bound): the normal extrapolation
    from its width says about 39 tasks, fewer than the 44 that left it undecided; the sentence says what
    would help instead, and no size below the suite's is proposed."""
    gate = parse_gate("upper(x) <= 0.1")
    result = GateResult(gate, "fail", 0.02, 0.005, 0.11, 44, "FAIL ...")
    assert gate_needed_n(0.02, 0.005, 0.11, 44, 0.1).n == 39  # what it said before
    got = with_needed_n(result)
    assert got.needed_n is None
    assert "more tasks than its 44" in got.needed and "more samples per task or a wider margin" in got.needed
    decided_later = with_needed_n(_crossing())  # a symmetric interval: more tasks than it has
    assert decided_later.needed_n is not None and decided_later.needed_n > 24
