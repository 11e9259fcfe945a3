"""Baselines, pure: the comparison of two runs by hand, added and removed tasks, the gate terms
(regressions, fixes, deltas, repeats, mean reward), needed n and a missing baseline named by its gates."""

from __future__ import annotations

import pytest

from pytest_gauge.analysis.baseline import (
    RunSide,
    compare_runs,
    mean_rewards,
    outcomes_from_records,
)
from pytest_gauge.analysis.elo import fit_elo
from pytest_gauge.analysis.elo_report import comparisons_from_records
from pytest_gauge.analysis.gate_precheck import SuiteShape, check_gates
from pytest_gauge.analysis.gate_source import GateSource
from pytest_gauge.analysis.gates import evaluate_gate, parse_gate, parse_gates
from pytest_gauge.analysis.metrics import compute_metrics
from pytest_gauge.analysis.power import with_needed_n
from pytest_gauge.analysis.repeats import counts_by_agent
from pytest_gauge.records import CaseRecord
from pytest_gauge.report.baseline import render_baseline_md
from tests.unit.analysis.test_metrics import case

TASKS = ("t1", "t2", "t3", "t4")


def _records(x_rewards: tuple[float, ...], choices: tuple[str, ...]) -> list[CaseRecord]:
    """Agent x vs agent y on four tasks, both orders; y always has reward 0.5 (never a success)."""
    out = []
    for t, rx, choice in zip(TASKS, x_rewards, choices, strict=True):
        for order in ("AB", "BA"):
            out.append(case(t, "p1", "x", "y", order, choice, rewards=(rx, 0.5)))
    return out


def _side(records: list[CaseRecord], tag: str, model: str = "m-x") -> RunSide:
    outcomes = outcomes_from_records(records)
    return RunSide(
        suite="s",
        tasks=TASKS,
        records=tuple(records),
        outcomes=outcomes,
        task_costs=dict.fromkeys(TASKS, 0.01),
        models={"agent:x": model, "agent:y": "m-y"},
        links={u: f"{tag}/agents/{u[1]}.jsonl#L{TASKS.index(u[0]) + 1}" for u in outcomes},
    )


def test_compare_runs_by_hand() -> None:
    before = _side(_records((1.0, 1.0, 0.0, 1.0), ("A", "A", "B", "A")), "base")
    now = _side(_records((1.0, 0.0, 0.0, 1.0), ("A", "B", "B", "A")), "cur", model="m-x2")
    comp = compare_runs(now, before, rounds=500, seed=1)
    x = comp.agents["x"]
    assert x.success_before == 0.75 and x.success_now == 0.5
    assert x.success_delta.value == pytest.approx(-0.25)
    assert x.reward_delta.value == pytest.approx(-0.25)
    assert x.success_delta.n == 4
    assert [f.task_id for f in x.regressions] == ["t2"] and x.fixes == ()
    assert x.regressions[0].link_before == "base/agents/x.jsonl#L2"
    assert x.regressions[0].link_now == "cur/agents/x.jsonl#L2"
    assert x.mcnemar_p == 1.0  # one discordant task: P = 2 * 1/2
    assert x.changed == ("model m-x -> m-x2",)
    assert comp.agents["y"].success_delta.value == 0.0
    # cost per success: 0.04 / 3 before, 0.04 / 2 now (y never succeeds)
    assert comp.cost_per_success.value == pytest.approx(0.04 / 2 - 0.04 / 3)
    # the same slot in both orders: every group flips, in both runs; one of each task's two verdicts picks
    # the lower reward (LRS 0.5 both); slot A won 6 of 8 verdicts before, 4 of 8 now
    assert comp.judge["flip_rate"].value == pytest.approx(0.0)
    assert comp.judge["lrs"].value == pytest.approx(0.0)
    assert comp.judge["position_bias"].value == pytest.approx(0.5 - 0.75)
    assert comp.judge["position_bias"].n == 8
    assert comp.elo_reference == "y"  # x's model changed: y is the unchanged reference
    fits = [fit_elo(comparisons_from_records(side.records), rounds=0) for side in (now, before)]
    expected = (fits[0].elo["x"] - fits[0].elo["y"]) - (fits[1].elo["x"] - fits[1].elo["y"])
    assert comp.elo["x"].value == pytest.approx(expected)
    md = render_baseline_md(comp, "base")
    assert (
        "`t2`: reward 1.000 → 0.000 ([before](base/agents/x.jsonl#L2) · [now](cur/agents/x.jsonl#L2))" in md
    )
    assert "x (model m-x -> m-x2)" in md


def test_added_and_removed_tasks_are_listed_not_mixed() -> None:
    before = _side(_records((1.0, 1.0, 0.0, 1.0), ("A",) * 4), "b")
    now_records = [r for r in _records((1.0, 1.0, 0.0, 1.0), ("A",) * 4) if r.task_id != "t4"]
    now = RunSide("s", ("t1", "t2", "t3", "t9"), tuple(now_records), outcomes_from_records(now_records), {})
    comp = compare_runs(now, before, rounds=200)
    assert comp.removed_tasks == ("t4",) and comp.added_tasks == ("t9",)
    assert comp.shared_tasks == ("t1", "t2", "t3")
    assert comp.agents["x"].success_delta.n == 3


def _source(now: list[CaseRecord], before: list[CaseRecord] | None) -> GateSource:
    metrics = compute_metrics(now, rounds=300)
    comp = compare_runs(_side(now, "c"), _side(before, "b"), rounds=300) if before is not None else None
    repeats = counts_by_agent({u: o.success for u, o in outcomes_from_records(now).items()})
    rewards = mean_rewards(outcomes_from_records(now), rounds=300)
    return GateSource(metrics, None, baseline=comp, repeats=repeats, rewards=rewards)


def test_gate_terms_regressions_fixes_and_delta() -> None:
    before = _records((1.0, 1.0, 0.0, 1.0), ("A",) * 4)
    now = _records((1.0, 0.0, 1.0, 0.0), ("A",) * 4)
    src = _source(now, before)
    res = evaluate_gate(
        parse_gate("regressions(x) <= 1"), src, drivers=lambda g: src.drivers(g.left.name, g.left.args)
    )
    assert res.status == "fail" and res.value == 2
    assert "t2 (reward 1.00 -> 0.00)" in res.message and "t4" in res.message
    assert "count 2 (n=4; noise alone: about 1.5 of 3 flips, up to 3)" in res.message  # 2 regressed, 1 fixed
    assert evaluate_gate(parse_gate("fixes(x) == 1"), src).status == "pass"
    delta = evaluate_gate(parse_gate("delta(success_rate(x)) >= -0.25"), src)
    assert delta.status == "pass" and delta.value == pytest.approx(-0.25)
    unknown = evaluate_gate(parse_gate("delta(judge_kappa) >= 0"), src)
    assert unknown.status == "fail" and "delta(...) takes lrs, lrs_close" in unknown.message
    without = evaluate_gate(parse_gate("delta(success_rate(x)) >= 0"), _source(now, None))
    assert without.status == "fail" and "--gauge-baseline" in without.message


def test_repeat_terms_in_gates_need_enough_samples() -> None:
    src = _source(_records((1.0, 1.0, 0.0, 1.0), ("A",) * 4), None)
    assert evaluate_gate(parse_gate("flaky_tasks(x) == 0"), src).status == "inconclusive"  # 1 sample
    res = evaluate_gate(parse_gate("pass_at_k(x, 2) >= 0.5"), src)
    assert res.status == "fail" and "needs samples >= 2 per task; this suite has 1" in res.message
    at1 = src.lookup("pass_at_k", ("x", "1"))
    assert at1.value == pytest.approx(0.75) and at1.n == 4


def test_mean_reward_term_and_collection_checks() -> None:
    src = _source(_records((1.0, 0.5, 0.0, 1.0), ("A",) * 4), None)
    reward = src.lookup("mean_reward", ("x",))
    assert reward.value == pytest.approx(0.625) and reward.n == 4
    assert reward.low is not None and reward.high is not None and reward.low < 0.625 < reward.high
    shape = SuiteShape("s", ("x", "y"), (("x", "y"),), (), ("j",))
    ok = [
        "pass_at_k(x, 3) >= 0.9",
        "flaky_tasks(y) == 0",
        "lower(delta(mean_reward(x))) >= -0.1",
        "fixes(x) >= 0",
    ]
    assert check_gates(parse_gates(ok), shape) == []
    bad = check_gates(
        parse_gates(["pass_at_k(x, k) >= 0.9", "delta(judge_kappa) >= 0", "regressions(q) <= 1"]), shape
    )
    assert "k must be a whole number >= 1, got 'k'" in bad[0]
    assert "delta(...) takes lrs, lrs_close" in bad[1]
    assert "unknown agent 'q'" in bad[2]


def test_needed_n_is_attached_to_gates_across_their_threshold() -> None:
    src = _source(_records((1.0, 1.0, 0.0, 1.0), ("A",) * 4), None)
    res = with_needed_n(evaluate_gate(parse_gate("upper(success_rate(x)) <= 0.7"), src))
    assert res.low is not None and res.low <= 0.7  # Wilson interval of 3/4 crosses 0.7
    assert res.needed_n is not None and res.needed_n > res.n
    assert res.needed.startswith("upper(success_rate(x)) <= 0.7: fail, interval across the threshold at n=")
    clear = with_needed_n(evaluate_gate(parse_gate("success_rate(x) >= 0"), src))
    assert clear.needed_n is None and clear.needed == ""
