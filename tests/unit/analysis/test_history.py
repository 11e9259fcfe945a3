"""Flake rates and gate records from the verdict history: flaky on evidence, under the same key only."""

from __future__ import annotations

import pytest

from pytest_gauge._internal.analysis.estimates import wilson
from pytest_gauge._internal.analysis.history import gate_records, history_view, task_flakes
from pytest_gauge._internal.records.history import GateOutcome, HistoryRun, TaskOutcome


def run(
    run_id: str, outcomes: dict[str, str], key: str = "k", gates: dict[str, str] | None = None
) -> HistoryRun:
    tasks = tuple(TaskOutcome(t, "t", "r", "a", "j", f"{key}:{t}", o) for t, o in outcomes.items())
    gate_rows = tuple(GateOutcome(e, s, None, None, None, 0) for e, s in (gates or {}).items())
    return HistoryRun(run_id, "mini", "", run_id, 0, "sim", None, (), tasks, (), gate_rows)


def test_a_task_is_flaky_when_the_same_key_gave_two_outcomes() -> None:
    runs = [
        run("1", {"m1": "a", "m2": "a"}),
        run("2", {"m1": "a", "m2": "b"}),
        run("3", {"m1": "a", "m2": "a"}),
    ]
    flakes = {f.task_id: f for f in task_flakes(runs, "mini")}
    assert not flakes["m1"].flaky and flakes["m1"].rate == 0.0
    m2 = flakes["m2"]
    assert m2.flaky and (m2.runs, m2.differing, m2.outcomes) == (3, 1, 2)
    assert m2.rate == pytest.approx(1 / 3)
    assert (m2.low, m2.high) == pytest.approx(wilson(1, 3))


def test_a_changed_key_is_a_new_record_not_a_flake() -> None:
    runs = [run("1", {"m1": "a"}, key="old"), run("2", {"m1": "b"}, key="new")]
    assert [f.flaky for f in task_flakes(runs, "mini")] == [False, False]
    view = history_view(runs[:1], runs[1])
    assert [(f.key, f.runs) for f in view.flakes] == [("new:m1", 1)]


def test_other_suites_do_not_count() -> None:
    other = run("1", {"m1": "b"})
    other = HistoryRun(other.run_id, "other", "", "1", 0, "sim", None, (), other.tasks)
    assert not history_view([other], run("2", {"m1": "a"})).flaky


def test_gate_record_shows_the_last_runs_oldest_first() -> None:
    runs = [run(str(i), {}, gates={"g": "pass" if i % 3 else "fail"}) for i in range(1, 8)]
    (record,) = gate_records(runs, "mini", ["g"], last=4)
    assert record.statuses == ("pass", "pass", "fail", "pass")  # runs 4-7
    assert record.count("pass") == 3
    view = history_view(runs[:-1], runs[-1], last=3)
    assert view.runs == 7 and view.gates[0].statuses == ("pass", "fail", "pass")
