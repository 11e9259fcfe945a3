"""The judge against the rules: accuracy, rank correlation, calibration, the panel's
majority and the cheaper-judge recommendation, against the simulated judge's known decision rule."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from pytest_gauge.analysis.gate_precheck import SuiteShape, check_gate
from pytest_gauge.analysis.gates import parse_gate
from pytest_gauge.analysis.judge_rules import RewardPoint, average_ranks, calibration, panel_choice
from pytest_gauge.analysis.metrics import compute_metrics
from pytest_gauge.records import CaseRecord, Judgment, LedgerRecord, Usage
from pytest_gauge.sim.judge import decide
from pytest_gauge.suite.sim_profiles import SimJudge
from tests.unit.analysis.test_metrics import case

NOISE = {"sharp": 0.25, "cheap": 0.25, "blurry": 0.8}
TIE = 0.02
# (pair, left reward, right reward): a close pair and a distant pair
PAIRS = (("close", "y", 0.55, 0.45), ("distant", "z", 0.7, 0.4))


def _phi(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def implied_accuracy(noise: float, gaps: list[float]) -> float:
    """The simulated judge's accuracy on cases of these rule-reward gaps, from its decision rule
    d = q_a - q_b + N(0, noise), tie within TIE: E[correct non-tie] / E[non-tie]."""
    right = sum(_phi((g - TIE) / noise) for g in gaps)
    wrong = sum(_phi((-g - TIE) / noise) for g in gaps)
    return right / (right + wrong)


def simulated_records(n_tasks: int, seed: int) -> list[CaseRecord]:
    """Both orders of both pairs on every task, each judged by every model of NOISE through the
    simulator's own ``decide`` (no position, length or tone bias; quality read = rule reward)."""
    records = []
    for t in range(n_tasks):
        for pair, right, rl, rr in PAIRS:
            for order in ("AB", "BA"):
                q_a, q_b = (rl, rr) if order == "AB" else (rr, rl)
                judgments = []
                for model, noise in NOISE.items():
                    profile = SimJudge(noise=noise, tie_margin=TIE)
                    d = decide(profile, q_a, q_b, 100, 100, False, (seed, t, pair, order, model))
                    verdict = Judgment(model, 0, d.winner, d.reward_a, d.reward_b, d.reason)  # type: ignore[arg-type]
                    judgments.append(verdict)
                choice = judgments[0].choice
                rec = case(f"t{t}", pair, "x", right, order, choice, rewards=(rl, rr), judgments=judgments)
                records.append(replace(rec, category="even" if t % 2 == 0 else "odd"))
    return records


def _ledger(model: str, n: int, cost: float) -> list[LedgerRecord]:
    return [
        LedgerRecord(
            run_id="r", call_id=f"judge/c{i}/{model}/0#1", attempt=1, status="ok", suite="s",
            task_id="t0", role="judge", model=model, strategy="single", work=f"judge/c{i}/{model}/0",
            usage=Usage(10, 5),
            usage_missing=False, latency_s=0.1, finish_reason="stop", cache_hit=False, cost=cost,
        )
        for i in range(n)
    ]  # fmt: skip


def test_judge_accuracy_interval_contains_the_accuracy_the_simulation_implies() -> None:
    m = compute_metrics(simulated_records(60, seed=1), close_threshold=0.2, rounds=1000)
    rules = m.judge_rules
    assert rules.main == "sharp"
    gaps = {"close": [0.1], "distant": [0.3], "all": [0.1, 0.3]}
    for model in ("sharp", "blurry"):
        for cls, g in gaps.items():
            e = rules.accuracy[model][cls]
            truth = implied_accuracy(NOISE[model], g)
            assert e.low is not None and e.high is not None
            assert e.low <= truth <= e.high, (model, cls, e, truth)
    # the gate names: the main verdict overall and by class, a model, the panel
    main = m.lookup("judge_accuracy")
    assert main == rules.accuracy["main"]["all"] == m.metrics["judge_accuracy"]
    assert main.value == pytest.approx(1.0 - m.metrics["lrs"].value)  # type: ignore[operator]
    assert m.lookup("judge_accuracy", ("close",)) == rules.accuracy["main"]["close"]
    assert m.lookup("judge_accuracy", ("blurry", "distant")) == rules.accuracy["blurry"]["distant"]
    assert m.lookup("judge_accuracy", ("panel",)).n > 0
    assert set(rules.accuracy["main"]) >= {"category:even", "category:odd"}
    with pytest.raises(KeyError, match="unknown judge"):
        m.lookup("judge_accuracy", ("nobody",))
    # rewards track the rule rewards: the sharp judge's ranks better than the blurry one's
    sharp, blurry = m.lookup("judge_rank_corr", ("sharp",)), m.lookup("judge_rank_corr", ("blurry",))
    assert sharp.value is not None and blurry.value is not None and sharp.value > blurry.value > 0.5
    assert m.lookup("judge_rank_corr") == sharp  # no argument: the main judge
    bins = rules.calibration["sharp"]
    filled = [b.mean_rule_reward for b in bins if b.mean_rule_reward is not None]
    assert filled == sorted(filled) and sum(b.n for b in bins) == 2 * len(m.pairs) * 2 * 60


def test_cheaper_panel_model_recommended_only_when_as_accurate() -> None:
    records = simulated_records(60, seed=2)
    ledger = [*_ledger("sharp", 10, 0.01), *_ledger("cheap", 10, 0.002), *_ledger("blurry", 10, 0.001)]
    rules = compute_metrics(records, close_threshold=0.2, rounds=1000, ledger=ledger).judge_rules
    assert rules.cost_per_call == {"blurry": 0.001, "cheap": 0.002, "sharp": 0.01}
    assert rules.cheaper is not None and rules.cheaper.model == "cheap"  # blurry is cheaper but worse
    assert rules.cheaper.cost_ratio == pytest.approx(0.2)
    no_cheap = [r for r in records]
    for r in no_cheap:
        r.judgments = [j for j in r.judgments if j.judge != "cheap"]
    alone = compute_metrics(no_cheap, close_threshold=0.2, rounds=1000, ledger=ledger).judge_rules
    assert alone.cheaper is None


def test_panel_majority_ranks_and_calibration_by_hand() -> None:
    def j(judge: str, choice: str, repeat: int = 0) -> Judgment:
        return Judgment(judge, repeat, choice, 0.5, 0.5, "")  # type: ignore[arg-type]

    assert panel_choice([j("a", "A"), j("b", "A"), j("c", "B")]) == "A"
    assert panel_choice([j("a", "A"), j("b", "B")]) is None  # no strict majority
    assert panel_choice([j("a", "A"), j("a", "B", 1)]) is None  # one model is no panel
    assert panel_choice([j("a", "B", 1), j("a", "A"), j("b", "A"), j("c", "error")]) == "A"  # first repeats
    assert average_ranks(np.array([3.0, 1.0, 3.0, 2.0])).tolist() == [3.5, 1.0, 3.5, 2.0]
    pts = [
        RewardPoint(0, 0.1, 0.0),
        RewardPoint(0, 0.15, 0.5),
        RewardPoint(0, 1.0, 1.0),
        RewardPoint(0, 0.5, 0.2),
    ]
    bins = calibration(pts)
    assert [(b.n, b.mean_rule_reward) for b in bins] == [(2, 0.25), (0, None), (1, 0.2), (0, None), (1, 1.0)]


def test_gate_names_checked_at_collection() -> None:
    shape = SuiteShape("s", ("x", "y"), (("x", "y"),), (), ("sharp", "cheap"))
    for text in ("judge_accuracy >= 0.8", "judge_accuracy(close) >= 0.7", "judge_accuracy(panel) >= 0.8",
                 "judge_accuracy(cheap, distant) >= 0.9", "judge_rank_corr(sharp) >= 0.5"):  # fmt: skip
        assert check_gate(parse_gate(text), shape) is None, text
    problem = check_gate(parse_gate("judge_accuracy(sharpp, close) >= 0.8"), shape)
    assert problem is not None and "did you mean 'sharp'" in problem
