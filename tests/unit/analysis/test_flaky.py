"""``exclude_flaky``: which tasks a gate leaves out, and what its message says, with a stand-in evaluator."""

from __future__ import annotations

import pytest

from pytest_gauge._internal.analysis.flaky import (
    NO_HISTORY,
    apply_exclusions,
    decidable_difference,
    flaky_above,
)
from pytest_gauge._internal.analysis.gates import Gate, GateResult, GateSyntaxError, parse_gate

TASKS = ("t1", "t2", "t3", "t4")


def _result(gate: Gate, low: float = 0.4, high: float = 0.8, n: int = 4, status: str = "pass") -> GateResult:
    return GateResult(gate, status, (low + high) / 2, low, high, n, f"{status.upper()} {gate.expression()}")  # type: ignore[arg-type]


def test_the_option_parses_round_trips_and_refuses_a_rate_out_of_range() -> None:
    gate = parse_gate("upper(flip_rate) <= 0.2; exclude_flaky=0.25; min_n=3")
    assert gate.exclude_flaky == 0.25 and parse_gate(gate.canonical()) == gate
    assert gate.canonical() == "upper(flip_rate) <= 0.2; min_n=3; exclude_flaky=0.25"
    for bad in ("lrs <= 1; exclude_flaky", "lrs <= 1; exclude_flaky=1", "lrs <= 1; exclude_flaky=-0.1"):
        with pytest.raises(GateSyntaxError, match="exclude_flaky needs"):
            parse_gate(bad)


def test_tasks_strictly_above_the_bound_are_left_out_and_unknown_tasks_kept() -> None:
    rates = {"t1": 0.5, "t2": 0.3, "t3": 0.0}
    assert flaky_above(rates, TASKS, 0.3) == ("t1",)
    assert flaky_above(rates, TASKS, 0.0) == ("t1", "t2")


def test_the_gate_is_evaluated_on_the_kept_tasks_and_says_what_it_cost() -> None:
    gate = parse_gate("success_rate(a) >= 0.5; exclude_flaky=0.2")
    other = parse_gate("lrs <= 1")
    seen: list[frozenset[str]] = []

    def evaluate(g: Gate, kept: frozenset[str]) -> GateResult:
        seen.append(kept)
        return _result(g, 0.2, 0.9, len(kept))

    rates = {"t2": 0.4, "t4": 1 / 3}
    results, found = apply_exclusions([_result(gate), _result(other)], TASKS, rates, evaluate)
    assert seen == [frozenset({"t1", "t3"})]
    assert results[1] == _result(other)  # a gate without the option is untouched
    ex = found[gate.canonical()]
    assert ex.excluded == ("t2", "t4") and ex.tasks == 4
    assert ex.without is not None and ex.with_all is not None and ex.without > ex.with_all
    assert (results[0].low, results[0].high, results[0].n) == (0.2, 0.9, 2)
    assert "2 of 4 tasks left out as flaky (t2, t4)" in results[0].message
    assert (
        f"decidable difference {ex.with_all:.3g} with every task, {ex.without:.3g} without them"
        in results[0].message
    )


def test_every_task_flaky_is_inconclusive_and_no_history_keeps_every_task() -> None:
    gate = parse_gate("success_rate(a) >= 0.5; exclude_flaky=0.1")
    results, _ = apply_exclusions([_result(gate)], TASKS, dict.fromkeys(TASKS, 0.5), lambda g, k: _result(g))
    assert results[0].status == "inconclusive" and "every task is flaky" in results[0].message
    results, found = apply_exclusions([_result(gate)], TASKS, None, lambda g, k: pytest.fail("not evaluated"))
    assert results[0].status == "pass" and NO_HISTORY in results[0].message and not found


def test_the_decidable_difference_is_the_half_width_scaled_to_80_percent_power() -> None:
    gate = parse_gate("lrs <= 1")
    wide = decidable_difference(_result(gate, 0.3, 0.7, 4))
    narrow = decidable_difference(_result(gate, 0.4, 0.6, 16))
    assert wide is not None and narrow is not None
    assert wide == pytest.approx(0.2 * (1.959964 + 0.841621) / 1.959964, rel=1e-4)
    assert narrow == pytest.approx(wide / 2, rel=1e-9)  # whatever n: the interval already holds it
    assert decidable_difference(GateResult(gate, "inconclusive", None, None, None, 0, "")) is None
