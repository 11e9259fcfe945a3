"""Family-wise error over a run's gates: which gates inflate an unchanged system's
chance of failing, and Holm's step-down over them (``--gauge-familywise holm``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from pytest_gauge._internal.analysis.estimates import Estimate
from pytest_gauge._internal.analysis.familywise import (
    _holm_levels,
    apply_holm,
    confident_fail,
    family_of,
    inflation,
    one_sided_p,
)
from pytest_gauge._internal.analysis.gates import Term, evaluate_gates, parse_gate
from pytest_gauge._internal.analysis.intervals import cluster_wilson, t_quantile

Array = np.ndarray[Any, np.dtype[Any]]


class _Source:
    """A metric source holding one estimate per metric name."""

    def __init__(self, estimates: dict[str, Estimate]) -> None:
        self.estimates = estimates

    def lookup(self, name: str, args: tuple[str, ...]) -> Estimate:
        return self.estimates[name]

    def difference(self, left: Term, right: Term) -> Estimate:
        raise KeyError("unknown: no differences here")


def test_gate_kinds() -> None:
    """Fail-when-confident: an upper bound that must reach the threshold, a lower one that must stay
    under it; pass-when-confident gates, point gates and counts are not in the family."""
    kinds = {
        "upper(delta(success_rate(a))) >= 0": True,
        "lower(lrs) < 0.5": True,
        "upper(lrs) <= 0.5": False,
        "lower(elo(a) - elo(b)) >= 0": False,
        "flip_rate <= 0.2": False,
        "upper(regressions(a)) >= 1": False,  # an exact count
    }
    assert {g: confident_fail(parse_gate(g)) for g in kinds} == kinds
    family = family_of([parse_gate(g) for g in kinds], "per-gate")
    assert len(family.confident_fail) == 2 and len(family.confident_pass) == 2 and len(family.point) == 2
    assert inflation(6) == pytest.approx(1 - 0.975**6)
    assert "14.1%" in family_of([parse_gate("upper(x) >= 0")] * 6, "per-gate").sentence()
    assert "at most 2.5%" in family_of([parse_gate("upper(x) >= 0")] * 6, "holm").sentence()


def test_holm_steps_down() -> None:
    """The i-th smallest p at 0.025 / (m - i + 1), stopping at the first not rejected."""
    levels, rejected = _holm_levels([0.004, 0.03, 0.006, 0.0045])
    assert levels == pytest.approx([0.025 / 4, 0.025, 0.025 / 2, 0.025 / 3])
    assert rejected == [True, False, True, True]
    _, rejected = _holm_levels([0.01, 0.001])  # 0.001 <= 0.0125, then 0.01 <= 0.025
    assert rejected == [True, True]
    _, rejected = _holm_levels([0.02, 0.02])  # 0.02 > 0.0125: stops at once
    assert rejected == [False, False]


@pytest.mark.parametrize("method", ["cluster-t", "cluster-wilson", "bootstrap-tasks"])
def test_p_value_is_the_tail_at_which_the_bound_meets_the_threshold(method: str) -> None:
    """A confident-fail gate whose 95% bound sits on its threshold has p = 0.025, whatever the method."""
    df = 19.0 if method.startswith("cluster") else None
    source = _Source({"x": Estimate(0.2, 60, 0.1, 0.3, method, df)})
    assert one_sided_p(parse_gate("upper(x) >= 0.3"), source, 20) == pytest.approx(0.025, abs=1e-6)
    assert one_sided_p(parse_gate("lower(x) <= 0.1"), source, 20) == pytest.approx(0.025, abs=1e-6)
    assert one_sided_p(parse_gate("upper(x) >= 0.1"), source, 20) == 1.0  # the value passes it


RUNS = 1000  # Monte Carlo standard error: 1.1 points at a 14% failure rate, 0.5 at 2.5%
TASKS = 44


def _null_estimates(rng: np.random.Generator) -> list[dict[str, Estimate]]:
    """Per run, six quantities at their gates' thresholds (an unchanged system): three paired
    differences over tasks (cluster-t on tasks - 1 df, truth 0) and three case rates of 6 cases per task
    on Beta(2, 18) tasks (cluster-Wilson, truth 0.1)."""
    diffs = rng.normal(0.0, 0.3, (3, RUNS, TASKS))
    mean, se = diffs.mean(axis=-1), diffs.std(axis=-1, ddof=1) / np.sqrt(TASKS)
    half = float(t_quantile(TASKS - 1)) * se
    k = rng.binomial(6, rng.beta(2.0, 18.0, (3, RUNS, TASKS))).astype(np.float64)
    value, low, high = cluster_wilson(k, np.full_like(k, 6.0))
    df = TASKS - 1.0
    runs = []
    for r in range(RUNS):
        d = {f"d{i}": (mean[i, r], mean[i, r] - half[i, r], mean[i, r] + half[i, r]) for i in range(3)}
        row = {name: Estimate(v, TASKS, lo, hi, "cluster-t", df) for name, (v, lo, hi) in d.items()}
        for i in range(3):
            row[f"r{i}"] = Estimate(value[i, r], 6 * TASKS, low[i, r], high[i, r], "cluster-wilson", df)
        runs.append(row)
    return runs


def test_holm_keeps_an_unchanged_system_failing_at_most_five_percent() -> None:
    """Six fail-when-confident gates on an unchanged system (every truth at its threshold): the run
    fails when any gate fails, 10-14% of the time per gate (1 - 0.975^6 = 14.1% for exact one-sided
    tests); with Holm's step-down at most 5% (nominal 2.5%)."""
    gates = [parse_gate(f"upper(d{i}) >= 0") for i in range(3)]
    gates += [parse_gate(f"lower(r{i}) <= 0.1") for i in range(3)]
    per_gate = holm = 0
    for estimates in _null_estimates(np.random.default_rng(264)):
        source = _Source(estimates)
        results = evaluate_gates(gates, source)
        per_gate += any(r.status == "fail" for r in results)
        holm += any(r.status == "fail" for r in apply_holm(results, source, TASKS))
    assert per_gate / RUNS >= 0.09, per_gate / RUNS  # the inflation the docs state is real
    assert holm / RUNS <= 0.05, holm / RUNS


def test_holm_reports_each_gates_level() -> None:
    """A gate failing on its own interval but not at its Holm level passes, and says both."""
    source = _Source({
        "a": Estimate(-0.30, 44, -0.50, -0.10, "cluster-t", 43.0),  # p far below 0.025 / 2
        "b": Estimate(-0.10, 44, -0.19, -0.01, "cluster-t", 43.0),  # p about 0.015: under 0.025, over 0.0125
    })  # fmt: skip
    gates = [parse_gate("upper(a) >= 0"), parse_gate("upper(b) >= 0")]
    results = apply_holm(evaluate_gates(gates, source), source, 44)
    assert [r.holm_level for r in results] == pytest.approx([0.0125, 0.025])
    assert [r.status for r in results] == ["fail", "fail"]  # b is tested at 0.025 once a is rejected
    source.estimates["a"] = Estimate(-0.10, 44, -0.19, -0.01, "cluster-t", 43.0)
    results = apply_holm(evaluate_gates(gates, source), source, 44)
    assert [r.status for r in results] == ["pass", "pass"]
    assert "fail on its own 95% interval, pass under Holm" in results[0].message
    assert results[0].message.startswith("PASS upper(a) >= 0")
