"""Adaptive runs, pure: the seeded looks of tasks, a look opened or not needed, the widening's degrees
of freedom, exact totals deciding as they grow."""

from __future__ import annotations

import threading

from pytest_gauge._internal.analysis.adaptive import decide_gates, gate_key, waits_for_last_look
from pytest_gauge._internal.analysis.gates import Term, parse_gate
from pytest_gauge._internal.analysis.metrics import Estimate
from pytest_gauge._internal.analysis.sequential import Look
from pytest_gauge._internal.run.looks import LookGate, LookState, plan_looks


def test_looks_take_every_task_once_in_a_seeded_order() -> None:
    tasks = {"a": [f"t{i}" for i in range(10) for _ in range(4)], "b": ["u1", "u2"]}
    plan = plan_looks(tasks, seed=3, look_size=3)
    assert [len(look) for look in plan.looks["a"]] == [3, 3, 3, 1]
    assert sorted(t for look in plan.looks["a"] for t in look) == sorted({f"t{i}" for i in range(10)})
    assert plan.planned == 4 and plan.fractions("a") == (0.3, 0.6, 0.9, 1.0)
    assert plan == plan_looks({k: list(reversed(v)) for k, v in tasks.items()}, seed=3, look_size=3)
    assert plan.looks["a"] != plan_looks(tasks, seed=4, look_size=3).looks["a"]
    assert plan.look_of("a", plan.looks["a"][2][0]) == 3 and plan.look_of("a", "nope") == 0
    assert plan.tasks_through("a", 2) == 6 and plan.total_tasks("b") == 2


def test_a_look_opens_or_is_not_needed() -> None:
    gate = LookGate(plan_looks({"a": ["t1", "t2"]}, seed=0, look_size=1))
    assert gate.state.allows(1) is True and gate.state.allows(2) is None
    answers: list[bool] = []
    waiter = threading.Thread(target=lambda: answers.append(gate.wait(2, poll=0.01)))
    waiter.start()
    gate.update(LookState(opened=2))
    waiter.join(timeout=30)
    assert answers == [True]
    gate.update(LookState(opened=2, stopped_after=2, reason="decided"))
    gate.update(LookState(opened=3))  # a late word never undoes a stop
    assert gate.wait(3) is False and gate.state.reason == "decided"


class _OneMetric:
    """A gate source with one metric, for the decision layer alone."""

    def __init__(self, estimate: Estimate) -> None:
        self.estimate = estimate

    def lookup(self, name: str, args: tuple[str, ...]) -> Estimate:
        return self.estimate

    def difference(self, left: Term, right: Term) -> Estimate:
        return self.estimate


def test_the_widening_uses_the_intervals_own_degrees_of_freedom() -> None:
    """A cluster interval on few effective df widens more at a look than one on many (same 95% bounds):
    the anytime-valid quantile keeps the t distribution the interval was built on."""
    gate = parse_gate("upper(lrs) <= 0.5")
    look = Look(1, 4, 25, 40, critical=2.8)
    bounds = {}
    for df in (3.0, 9.0):
        est = Estimate(0.3, 40, 0.2, 0.4, "cluster-wilson", df)
        decided = decide_gates([gate], _OneMetric(est), look, {})
        bounds[df] = decided[gate_key(gate)].high if decided else None
    assert bounds[9.0] is not None and bounds[9.0] <= 0.5  # decided pass on 9 df
    assert bounds[3.0] is None  # the same bounds on 3 df: too wide to decide at this look


def test_exact_totals_decide_as_they_grow_and_their_differences_wait() -> None:
    """A total cost only grows with the tasks run: exceeded, a '<=' gate fails at once; met, a '>='
    gate passes at once. A difference of totals need not grow: it waits for the last look."""
    look = Look(2, 4, 25, 40, critical=2.8)
    spent = _OneMetric(Estimate(0.6, 300, 0.6, 0.6, "exact"))

    def decided(text: str) -> str | None:
        gate = parse_gate(text)
        found = decide_gates([gate], spent, look, {})
        return found[gate_key(gate)].status if found else None

    assert decided("total_cost <= 0.5") == "fail"
    assert decided("total_cost <= 1.0") is None  # more tasks may still pass it
    assert decided("total_cost >= 0.5") == "pass"
    assert decided("judge_cost - agent_cost <= 0.5") is None
    gate = parse_gate("judge_cost - agent_cost <= 0.5")
    assert waits_for_last_look(gate, spent) == "a difference of exact totals is only known at the last look"
    assert waits_for_last_look(parse_gate("total_cost >= 0.5"), spent) is None
