"""Elo reports: comparisons and tokens from hand-made records (hand-computed), a 4-tier compute family
simulated from known strengths, gates on Elo terms, and syrupy snapshots of elo.md / elo.json / elo.svg."""

from __future__ import annotations

import json
import math
import re
import xml.etree.ElementTree as ET
from typing import Any

import numpy as np
import pytest
from syrupy.assertion import SnapshotAssertion

from pytest_gauge._internal.analysis.elo import Comparison, elo_difference
from pytest_gauge._internal.analysis.elo_report import (
    NO_ELO,
    EloReport,
    TokenStats,
    build_elo_report,
    comparisons_from_records,
    token_stats,
)
from pytest_gauge._internal.analysis.gate_source import GateSource
from pytest_gauge._internal.analysis.gates import NoData, Term, evaluate_gate, parse_gate
from pytest_gauge._internal.analysis.metrics import SuiteMetrics, compute_metrics
from pytest_gauge._internal.records import CaseRecord, LedgerRecord, Usage
from pytest_gauge._internal.report.elo import elo_json, render_elo_md
from pytest_gauge._internal.report.elo_svg import render_elo_svg
from tests.helpers import JSONTextSnapshot, MarkdownSnapshot, SVGSnapshot

SVG_NS = "{http://www.w3.org/2000/svg}"


# --------------------------------------------------------------------------------------------------
# Builders


def case(
    task: str,
    left: str,
    right: str,
    order: str,
    choice: str,
    *,
    sample: int = 0,
    case_id: str | None = None,
    suite: str = "demo",
) -> CaseRecord:
    """A judged case; only the fields Elo reads matter, the rest are plausible constants."""
    return CaseRecord(
        suite=suite,
        case_id=case_id or f"{task}-{left}-vs-{right}-{order}" + (f"-s{sample}" if sample else ""),
        pair_id=f"{left}-vs-{right}",
        task_id=task,
        category="general",
        agent_left=left,
        agent_right=right,
        order=order,  # type: ignore[arg-type]
        blind_order="A=left" if order == "AB" else "A=right",
        sample=sample,
        judge_choice=choice,  # type: ignore[arg-type]
        reward_left=1.0,
        reward_right=1.0,
        selected_reward=None,
        lower_reward_selected=None,
        task_success_left=True,
        task_success_right=True,
        user_sat_left=True,
        user_sat_right=True,
        input_tokens_incl_shared=0,
        output_tokens_incl_shared=0,
        est_cost_incl_shared=None,
        judge_reward_a=None,
        judge_reward_b=None,
        judge_reason="" if choice == "error" else "ok",
        judge_raw=None,
        judge_error="parse error" if choice == "error" else None,
        chars_left=100,
        chars_right=100,
    )


def slot_for(winner: str, left: str, order: str) -> str:
    """The slot letter the judge must name to prefer ``winner`` ('tie' passes through)."""
    if winner == "tie":
        return "tie"
    left_in_a = order == "AB"
    return "A" if (winner == left) == left_in_a else "B"


def entry(
    work: str,
    role: str,
    tokens: int | None,
    *,
    n: int = 1,
    attempt: int = 1,
    cached: bool = False,
    status: str = "ok",
) -> LedgerRecord:
    parts = work.split("/")
    task = parts[1] if parts[0] == "transcript" else parts[1].split("-")[0]
    return LedgerRecord(
        run_id="run-1",
        call_id=f"{work}#{n}",
        attempt=attempt,
        status=status,
        suite="demo",
        task_id=task,
        role=role,  # type: ignore[arg-type]
        model=f"{role}-model",
        strategy="single",
        work=work,
        usage=None if tokens is None else Usage(tokens // 2, tokens - tokens // 2),
        usage_missing=tokens is None,
        latency_s=0.1,
        finish_reason="stop",
        cache_hit=cached,
        cost=None,
    )


# --------------------------------------------------------------------------------------------------
# comparisons_from_records


def test_comparisons_orientation_ties_and_errors() -> None:
    records = [
        case("t1", "x", "y", "AB", "A"),  # A = left = x preferred
        case("t1", "x", "y", "BA", "A"),  # A = right = y preferred
        case("t1", "x", "y", "BA", "B"),  # B = left = x preferred
        case("t1", "x", "y", "AB", "B"),  # B = right = y preferred
        case("t2", "x", "z", "AB", "tie"),
        case("t2", "x", "z", "BA", "error"),  # skipped
        case("t2", "y", "z", "BA", "tie"),
        case("t3", "y", "z", "AB", "error"),  # skipped
    ]
    assert comparisons_from_records(records) == [
        Comparison("t1", "x", "y", 1.0),
        Comparison("t1", "x", "y", 0.0),
        Comparison("t1", "x", "y", 1.0),
        Comparison("t1", "x", "y", 0.0),
        Comparison("t2", "x", "z", 0.5),
        Comparison("t2", "y", "z", 0.5),
    ]


def test_comparisons_agree_with_preferred_agent_in_both_orders() -> None:
    for order in ("AB", "BA"):
        for winner in ("p", "q"):
            rec = case("t", "p", "q", order, slot_for(winner, "p", order))
            assert rec.preferred_agent == winner
            (c,) = comparisons_from_records([rec])
            assert (c.a, c.b, c.score_a) == ("p", "q", 1.0 if winner == "p" else 0.0)


# --------------------------------------------------------------------------------------------------
# token_stats


def test_token_stats_by_hand() -> None:
    records = [
        case("t1", "x", "y", "AB", "A", case_id="c1"),
        case("t1", "x", "y", "BA", "B", case_id="c2"),
        case("t2", "x", "z", "AB", "tie", case_id="c3"),
        case("t2", "x", "z", "BA", "error", case_id="c4"),  # an error verdict still spent judge tokens
    ]
    ledger = [
        entry("transcript/t1/x/0", "agent", 100, n=1),
        entry("transcript/t1/x/0", "user_sim", 40, n=2),
        entry("transcript/t1/x/0", "agent", 60, n=3, cached=True),  # cache hit: nominal, counts
        entry("transcript/t1/y/0", "agent", 200, n=1),
        entry("transcript/t1/y/0", "user_sim", 50, n=2),
        entry("transcript/t2/x/0", "agent", None, n=1, attempt=1, status="error"),  # no usage: nothing
        entry("transcript/t2/x/0", "agent", 300, n=1, attempt=2),
        entry("transcript/t2/x/0", "user_sim", None, n=2),  # usage missing
        entry("transcript/t2/z/0", "agent", 10, n=1),
        entry("transcript/t2/z/0", "user_sim", 20, n=2),
        entry("judge/c1/0/0", "judge", 1000),
        entry("judge/c1/0/1", "judge", 100),  # a second repeat
        entry("judge/c2/0/0", "judge", 80, attempt=1, status="error"),  # failed attempt with usage counts
        entry("judge/c2/0/0", "judge", 800, attempt=2),
        entry("judge/c3/1/0", "judge", 600),  # second judge model
        entry("judge/c4/0/0", "judge", 400),
        entry("judge/t9-ghost/0/0", "judge", 999),  # no record: cannot be attributed
    ]
    # x: t1 = 100 + 40 + 60 + (1000 + 100)/2 + (80 + 800)/2 = 1190; t2 = 300 + 600/2 + 400/2 = 800
    # y: t1 = 200 + 50 + 550 + 440 = 1240; z: t2 = 10 + 20 + 300 + 200 = 530
    assert token_stats(ledger, records) == {
        "x": TokenStats(tokens_per_task=(1190 + 800) / 2, agent_tokens_per_task=(160 + 300) / 2, tasks=2),
        "y": TokenStats(tokens_per_task=1240.0, agent_tokens_per_task=200.0, tasks=1),
        "z": TokenStats(tokens_per_task=530.0, agent_tokens_per_task=10.0, tasks=1),
    }


def test_token_stats_counts_tasks_without_usage_and_agents_without_records() -> None:
    """A task whose calls reported no usage still counts as one of the agent's tasks (it lowers the mean)."""
    records = [case("t1", "x", "y", "AB", "A", case_id="c1")]
    ledger = [
        entry("transcript/t1/x/0", "agent", 100),
        entry("transcript/t2/x/0", "agent", None),
        entry("transcript/t1/w@bo2/1", "agent", 70),  # not in any case record
    ]
    stats = token_stats(ledger, records)
    assert stats["x"] == TokenStats(50.0, 50.0, 2)
    assert stats["y"] == TokenStats(0.0, 0.0, 1)
    assert stats["w@bo2"] == TokenStats(70.0, 70.0, 1)


# --------------------------------------------------------------------------------------------------
# A 4-tier family simulated from known strengths

TRUE_ELO = {"a@bo1": 1000.0, "a@bo2": 1080.0, "a@bo4": 1120.0, "a@bo8": 1135.0}
TOKENS = {"a@bo1": 2000.0, "a@bo2": 4000.0, "a@bo4": 8000.0, "a@bo8": 16000.0}  # all roles, per task
FAMILY = {"a": [("bo1", "a@bo1"), ("bo2", "a@bo2"), ("bo4", "a@bo4"), ("bo8", "a@bo8")]}
N_TASKS = 160
JUDGE_TOKENS = 600  # per case; each agent is judged in 3 pairs x 2 orders per task -> 1800 per task
USER_TOKENS = 100  # per transcript


def simulate_family(seed: int = 0) -> tuple[list[CaseRecord], list[LedgerRecord]]:
    """Every pair of tiers on every task in both blind orders; outcomes from the Bradley-Terry win
    probabilities of TRUE_ELO. Each pair wins exactly round(p * n) of its n cases, shuffled over tasks and
    orders (stratified, so point estimates sit near the truth and the test does not hinge on a lucky seed;
    per-task outcomes are still random, which is what the task bootstrap measures)."""
    rng = np.random.default_rng(seed)
    names = list(TRUE_ELO)
    records: list[CaseRecord] = []
    ledger: list[LedgerRecord] = []
    for i, left in enumerate(names):
        for right in names[i + 1 :]:
            p = 1.0 / (1.0 + 10.0 ** ((TRUE_ELO[right] - TRUE_ELO[left]) / 400.0))
            n = 2 * N_TASKS
            outcome = np.zeros(n, dtype=bool)
            outcome[: round(p * n)] = True
            rng.shuffle(outcome)
            for k in range(n):
                task, order = f"t{k // 2:03d}", ("AB", "BA")[k % 2]
                winner = left if outcome[k] else right
                rec = case(task, left, right, order, slot_for(winner, left, order))
                records.append(rec)
                ledger.append(entry(f"judge/{rec.case_id}/0/0", "judge", JUDGE_TOKENS))
    for t in range(N_TASKS):
        for agent in names:
            work = f"transcript/t{t:03d}/{agent}/0"
            own = int(TOKENS[agent]) - 6 * JUDGE_TOKENS // 2 - USER_TOKENS
            ledger.append(entry(work, "agent", own // 2, n=1))
            ledger.append(entry(work, "user_sim", USER_TOKENS, n=2))
            ledger.append(entry(work, "agent", own - own // 2, n=3))
    return records, ledger


@pytest.fixture(scope="module")
def family() -> tuple[list[CaseRecord], list[LedgerRecord], EloReport]:
    records, ledger = simulate_family()
    report = build_elo_report(records, ledger, families=FAMILY, seed=1, rounds=1000)
    assert report is not None
    return records, ledger, report


def test_family_tokens_are_the_designed_ones(
    family: tuple[list[CaseRecord], list[LedgerRecord], EloReport],
) -> None:
    _, _, report = family
    for agent, tokens in TOKENS.items():
        own = tokens - 3 * JUDGE_TOKENS - USER_TOKENS
        assert report.tokens[agent] == TokenStats(tokens, own, N_TASKS)
    assert report.judged_tasks == dict.fromkeys(TRUE_ELO, N_TASKS)


def test_family_elo_rises_and_returns_diminish(
    family: tuple[list[CaseRecord], list[LedgerRecord], EloReport],
) -> None:
    _, _, report = family
    rows = report.tiers
    assert [r["tier"] for r in rows] == ["bo1", "bo2", "bo4", "bo8"]
    assert [r["verdict"] for r in rows] == [
        "baseline",
        "improves",
        "diminishing returns",
        "no measurable gain",
    ]
    elos = [r["elo"] for r in rows]
    assert elos == sorted(elos) and len(set(elos)) == 4
    # differences recovered (the anchor is the mean, so compare steps, not levels)
    true_steps = [80.0, 40.0, 15.0]
    for r, step in zip(rows[1:], true_steps, strict=True):
        assert abs(r["delta_elo"] - step) < 8.0, r
        # true step inside the bootstrap interval
        assert r["delta_low"] <= step <= r["delta_high"], r
    rates = [r["delta_elo_per_1k_tokens"] for r in rows[1:]]
    assert rates == sorted(rates, reverse=True)
    for r, prev in zip(rows[1:], rows, strict=False):
        dt = (TOKENS[r["agent"]] - TOKENS[prev["agent"]]) / 1000.0
        assert r["delta_elo_per_1k_tokens"] == pytest.approx(r["delta_elo"] / dt, rel=1e-12)
    # bo2 and bo4 gains are measurable; bo8's ΔElo interval includes 0
    assert rows[1]["delta_low"] > 0 and rows[2]["delta_low"] > 0
    assert rows[3]["delta_low"] < 0 < rows[3]["delta_high"]


def test_family_markdown_reading(family: tuple[list[CaseRecord], list[LedgerRecord], EloReport]) -> None:
    _, _, report = family
    md = render_elo_md(report)
    r = report.tiers
    assert "![Elo vs tokens](elo.svg)" in md
    assert (
        f"Elo rises from {r[0]['elo']:.1f} (bo1) to {r[3]['elo']:.1f} (bo8) while ΔElo per 1k tokens falls "
        f"from {r[1]['delta_elo_per_1k_tokens']:.2f} (bo2) to {r[3]['delta_elo_per_1k_tokens']:.2f} (bo8): "
        "diminishing returns from tier bo4." in md
    )
    assert (
        f"Tier bo8's ΔElo interval [{r[3]['delta_low']:+.1f}, +{r[3]['delta_high']:.1f}] includes 0: "
        "over bo4 it buys nothing measurable for +8,000 tokens per task." in md
    )
    assert "No tier above bo4 adds measurable Elo" in md
    assert "| bo8 | a@bo8 | 16,000 |" in md
    assert "- None with the fit:" in md
    # per-task table: one row per task with a finite within-task fit, no more
    per_task_rows = [line for line in md.splitlines() if re.match(r"\| t\d{3} \|", line)]
    assert len(per_task_rows) == len(report.result.per_task)


def test_family_json(family: tuple[list[CaseRecord], list[LedgerRecord], EloReport]) -> None:
    _, _, report = family
    doc = elo_json(report)
    json.dumps(doc, allow_nan=False)
    assert doc["format_version"] == 1 and doc["rounds"] == 1000
    a8 = doc["agents"]["a@bo8"]
    assert a8["elo"] == round(report.result.elo["a@bo8"], 6)
    assert a8["tokens_per_task"] == 16000.0
    assert a8["agent_tokens_per_task"] == 16000.0 - 1900.0
    assert set(a8) >= {"elo", "low", "high", "rank", "tokens_per_task", "agent_tokens_per_task"}
    row = doc["tiers"][3]
    assert set(row) == {
        "family", "tier", "agent", "tokens_per_task", "elo", "low", "high",
        "delta_elo", "delta_low", "delta_high", "delta_elo_per_1k_tokens", "verdict",
    }  # fmt: skip
    assert row["verdict"] == "no measurable gain"
    assert row["delta_elo_per_1k_tokens"] == round(report.tiers[3]["delta_elo_per_1k_tokens"], 6)
    assert doc["problems"] == []


def test_family_svg(family: tuple[list[CaseRecord], list[LedgerRecord], EloReport]) -> None:
    _, _, report = family
    svg = render_elo_svg(report)
    root = ET.fromstring(svg)
    series = [p for p in root.iter(f"{SVG_NS}path") if p.get("class") == "series"]
    assert [p.get("data-family") for p in series] == ["a"]
    points = [tuple(map(float, seg.split()[1:])) for seg in _segments(series[0].get("d", ""))]
    assert len(points) == 4
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    # tokens double per tier: equal steps on a log axis; higher Elo is drawn higher (smaller y)
    steps = np.diff(xs)
    assert (steps > 0).all() and np.ptp(steps) < 0.2
    assert ys == sorted(ys, reverse=True)
    assert len(list(root.iter(f"{SVG_NS}circle"))) == 4
    assert len([ln for ln in root.iter(f"{SVG_NS}line") if ln.get("class") == "ci"]) == 4


def _segments(d: str) -> list[str]:
    out: list[str] = []
    for token in d.split():
        if token in ("M", "L"):
            out.append(token)
        else:
            out[-1] += " " + token
    return out


# --------------------------------------------------------------------------------------------------
# Gates


def simulate_three(seed: int = 3, n_tasks: int = 30) -> list[CaseRecord]:
    """'better' beats 'a' 80% of the time, 'worse' loses to 'a' 80% of the time (random, 2 orders/task)."""
    rng = np.random.default_rng(seed)
    p_left = {("a", "better"): 0.2, ("a", "worse"): 0.8, ("better", "worse"): 0.94}
    out = []
    for t in range(n_tasks):
        for (left, right), p in p_left.items():
            for order in ("AB", "BA"):
                winner = left if rng.random() < p else right
                out.append(case(f"t{t:02d}", left, right, order, slot_for(winner, left, order)))
    return out


@pytest.fixture(scope="module")
def three() -> tuple[SuiteMetrics, EloReport]:
    records = simulate_three()
    report = build_elo_report(records, [], seed=0, rounds=400)
    assert report is not None
    return compute_metrics(records, rounds=200), report


def test_gate_lower_elo_difference(three: tuple[SuiteMetrics, EloReport]) -> None:
    metrics, report = three
    source = GateSource(metrics, report)
    good = evaluate_gate(parse_gate("lower(elo(better) - elo(a)) >= -20"), source)
    bad = evaluate_gate(parse_gate("lower(elo(worse) - elo(a)) >= -20"), source)
    assert good.status == "pass", good.message
    assert bad.status == "fail", bad.message
    ref = elo_difference(report.result, "better", "a")
    assert (good.value, good.low, good.high) == (ref.value, ref.low, ref.high)
    assert good.low is not None and good.low > 100  # 80% wins ~ +240 Elo
    assert bad.high is not None and bad.high < -100
    assert good.n == 30  # tasks, not comparisons


def test_gate_elo_lookup(three: tuple[SuiteMetrics, EloReport]) -> None:
    metrics, report = three
    est = GateSource(metrics, report).lookup("elo", ("better",))
    res = report.result
    assert (est.value, est.low, est.high, est.n) == (
        res.elo["better"],
        res.low["better"],
        res.high["better"],
        30,
    )
    assert (
        evaluate_gate(parse_gate("lower(elo(better)) >= 1000; min_n=30"), GateSource(metrics, report)).status
        == "pass"
    )


def test_gate_unknown_agent_and_no_elo(three: tuple[SuiteMetrics, EloReport]) -> None:
    metrics, report = three
    source = GateSource(metrics, report)
    # collection refused undeclared names: an agent missing from the fit had no judged case
    with pytest.raises(NoData, match=r"'nobody' had no judged case in this run .* fit: a, better, worse"):
        source.lookup("elo", ("nobody",))
    with pytest.raises(NoData, match="'nobody' had no judged case"):
        source.difference(Term("elo", ("nobody",)), Term("elo", ("a",)))
    with pytest.raises(KeyError, match="takes one agent"):
        source.lookup("elo", ())
    with pytest.raises(KeyError, match="no compute family"):
        source.lookup("delta_elo", ("a",))
    missing = evaluate_gate(parse_gate("elo(nobody) >= 900"), source)
    assert missing.status == "inconclusive" and "agents in the fit: a, better, worse" in missing.message
    assert "unknown agent" not in missing.message
    bare = GateSource(metrics, None)
    with pytest.raises(KeyError) as err:
        bare.lookup("elo", ("a",))
    assert err.value.args[0] == NO_ELO == "elo needs at least two agents with judged cases"
    assert bare.lookup("flip_rate", ()) == metrics.lookup("flip_rate", ())


def test_gate_delegates_to_metrics(three: tuple[SuiteMetrics, EloReport]) -> None:
    metrics, report = three
    source = GateSource(metrics, report)
    assert source.lookup("flip_rate", ()) == metrics.lookup("flip_rate", ())
    assert source.lookup("position_bias", ("a", "better")) == metrics.lookup("position_bias", ("a", "better"))
    left, right = Term("flip_rate"), Term("judge_error_rate")
    assert source.difference(left, right) == metrics.difference(left, right)
    assert source.drivers("flip_rate", ()) == metrics.drivers("flip_rate", ()) != []
    # an Elo term's drivers are the agent's tasks, weakest per-task Elo first
    per_task = {t: v["a"] for t, v in report.result.per_task.items() if "a" in v and np.isfinite(v["a"])}
    drivers = source.drivers("elo", ("a",))
    assert len(drivers) == len(per_task) > 0
    weakest = min(per_task, key=lambda t: (per_task[t], t))
    assert drivers[0] == f"{weakest} (Elo {per_task[weakest]:.0f})"
    with pytest.raises(KeyError, match="cannot subtract"):
        source.difference(Term("elo", ("a",)), Term("flip_rate"))
    with pytest.raises(KeyError, match=r"unknown metric 'nonsense'.*elo\(agent\)"):
        source.lookup("nonsense", ())
    gate = evaluate_gate(parse_gate("flip_rate <= 1"), source)
    assert gate.status == "pass" and gate.value == metrics.lookup("flip_rate", ()).value


def test_gate_tier_terms(family: tuple[list[CaseRecord], list[LedgerRecord], EloReport]) -> None:
    records, ledger, report = family
    source = GateSource(compute_metrics(records[:24], rounds=50, ledger=ledger[:10]), report)
    row = report.tiers[2]  # bo4: +4000 tokens per task over bo2
    est = source.lookup("elo_per_1k_tokens", ("a@bo4",))
    assert est.value == row["delta_elo_per_1k_tokens"]
    assert est.low == pytest.approx(row["delta_low"] / 4.0, rel=1e-12)
    assert est.high == pytest.approx(row["delta_high"] / 4.0, rel=1e-12)
    assert est.n == N_TASKS
    delta = source.lookup("delta_elo", ("a@bo4",))
    assert (delta.value, delta.low, delta.high) == (row["delta_elo"], row["delta_low"], row["delta_high"])
    base = source.lookup("elo_per_1k_tokens", ("a@bo1",))
    assert base.value is None and base.low is None
    assert evaluate_gate(parse_gate("elo_per_1k_tokens(a@bo1) >= 1"), source).status == "inconclusive"
    gate = evaluate_gate(parse_gate("lower(elo_per_1k_tokens(a@bo8)) >= 0"), source)
    assert gate.status == "fail"  # bo8's ΔElo interval includes 0
    assert evaluate_gate(parse_gate("lower(delta_elo(a@bo2)) > 0"), source).status == "pass"
    # difference of two tier terms: one linear combination of the same fit's cluster-robust covariance
    diff = source.difference(Term("delta_elo", ("a@bo2",)), Term("delta_elo", ("a@bo4",)))
    res = report.result
    coef = np.zeros(len(res.agents))
    for agent, c in (("a@bo2", 2.0), ("a@bo1", -1.0), ("a@bo4", -1.0)):
        coef[res.agents.index(agent)] = c
    from scipy.stats import t as student_t  # here: scipy.stats costs a worker about 1 s

    half = student_t.ppf(0.975, res.n_tasks - 1) * float(np.sqrt(coef @ res.cov @ coef))
    assert diff.value == pytest.approx(report.tiers[1]["delta_elo"] - row["delta_elo"], abs=1e-9)
    assert (diff.low, diff.high) == pytest.approx((diff.value - half, diff.value + half), rel=1e-4)
    assert diff.method == "cluster-t"


# --------------------------------------------------------------------------------------------------
# Edge cases


def test_none_without_two_judged_agents() -> None:
    assert build_elo_report([], []) is None
    only_errors = [case("t1", "x", "y", "AB", "error"), case("t1", "x", "y", "BA", "error")]
    assert build_elo_report(only_errors, []) is None
    report = build_elo_report([case("t1", "x", "y", "AB", "A")], [], rounds=20)
    assert report is not None and report.result.problems  # x never lost: reported, not hidden


def test_dropped_tiers_and_missing_tokens_are_said() -> None:
    records = [case("t1", "x", "y", o, c) for o, c in (("AB", "A"), ("BA", "A"), ("AB", "tie"))]
    report = build_elo_report(records, [], families={"f": [("one", "x"), ("two", "y"), ("four", "ghost")]})
    assert report is not None
    assert report.families == {"f": [("one", "x"), ("two", "y")]}
    assert any("four (ghost)" in n for n in report.notes)
    md = render_elo_md(report)
    assert "four (ghost)" in md
    assert "Tier two has no token data, so two's ΔElo per 1k tokens is undefined." in md
    assert [r["tokens_per_task"] for r in report.tiers] == [None, None]
    assert report.tokens["x"] == TokenStats(0.0, 0.0, 1)
    svg = render_elo_svg(report)
    ET.fromstring(svg)
    assert "no token data" in svg


# --------------------------------------------------------------------------------------------------
# Snapshots of a small fixed report

SNAP_TRUE = {"base@bo1": 0.0, "base@bo2": 1.2, "base@bo4": 1.5, "solo": 0.4}  # Bradley-Terry theta
SNAP_TOKENS = {"base@bo1": 900, "base@bo2": 2100, "base@bo4": 4500, "solo": 1300}  # agent role per task


def snapshot_inputs() -> tuple[list[CaseRecord], list[LedgerRecord]]:
    """6 tasks x 6 pairs x 2 orders, seeded outcomes, one judge error and ties; per-task transcripts."""
    rng = np.random.default_rng(11)
    names = list(SNAP_TRUE)
    records: list[CaseRecord] = []
    ledger: list[LedgerRecord] = []
    for t in range(6):
        task = f"t{t + 1}"
        for i, left in enumerate(names):
            for right in names[i + 1 :]:
                p = 1.0 / (1.0 + math.exp(SNAP_TRUE[right] - SNAP_TRUE[left]))
                for order in ("AB", "BA"):
                    u = rng.random()
                    winner = "tie" if abs(u - p) < 0.05 else (left if u < p else right)
                    choice = slot_for(winner, left, order)
                    if (task, left, right, order) == ("t2", "base@bo1", "solo", "BA"):
                        choice = "error"
                    rec = case(task, left, right, order, choice)
                    records.append(rec)
                    ledger.append(entry(f"judge/{rec.case_id}/0/0", "judge", 500 + 10 * t))
        for agent in names:
            work = f"transcript/{task}/{agent}/0"
            ledger.append(entry(work, "agent", SNAP_TOKENS[agent] + 20 * t, n=1, cached=t == 0))
            ledger.append(entry(work, "user_sim", 150, n=2))
    return records, ledger


SNAP_FAMILIES = {"base": [("bo1", "base@bo1"), ("bo2", "base@bo2"), ("bo4", "base@bo4"), ("bo8", "base@bo8")]}


@pytest.fixture(scope="module")
def snap_report() -> EloReport:
    records, ledger = snapshot_inputs()
    report = build_elo_report(records, ledger, families=SNAP_FAMILIES, seed=5, rounds=300)
    assert report is not None
    return report


def test_snapshot_md(snap_report: EloReport, snapshot: SnapshotAssertion) -> None:
    assert render_elo_md(snap_report) == snapshot(extension_class=MarkdownSnapshot)


def test_snapshot_json(snap_report: EloReport, snapshot: SnapshotAssertion) -> None:
    text = json.dumps(elo_json(snap_report), indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    assert text == snapshot(extension_class=JSONTextSnapshot)


def test_snapshot_svg(snap_report: EloReport, snapshot: SnapshotAssertion) -> None:
    svg = render_elo_svg(snap_report)
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG_NS}svg"
    series = [p for p in root.iter(f"{SVG_NS}path") if p.get("class") == "series"]
    assert [p.get("data-family") for p in series] == list(snap_report.families)
    assert svg == snapshot(extension_class=SVGSnapshot)


def test_deterministic(snap_report: EloReport) -> None:
    records, ledger = snapshot_inputs()
    again = build_elo_report(records, ledger, families=SNAP_FAMILIES, seed=5, rounds=300)
    assert again is not None
    assert render_elo_md(again) == render_elo_md(snap_report)
    assert render_elo_svg(again) == render_elo_svg(snap_report)
    assert elo_json(again) == elo_json(snap_report)


def _tokens_all_roles(records: list[CaseRecord], ledger: list[LedgerRecord], agent: str) -> float:
    """Independent recomputation for the snapshot suite: per task, transcript tokens + half of each judged
    case's judge tokens, averaged over tasks."""
    per_task: dict[str, float] = {}
    by_case = {r.case_id: r for r in records}
    for x in ledger:
        assert x.usage is not None
        if x.work.startswith(f"transcript/{x.task_id}/{agent}/"):
            per_task[x.task_id] = per_task.get(x.task_id, 0.0) + x.usage.total_tokens
        elif x.work.startswith("judge/"):
            r = by_case[x.work.split("/")[1]]
            if agent in (r.agent_left, r.agent_right):
                per_task[r.task_id] = per_task.get(r.task_id, 0.0) + x.usage.total_tokens / 2
    return sum(per_task.values()) / len(per_task)


def test_snapshot_tokens_independently(snap_report: EloReport) -> None:
    records, ledger = snapshot_inputs()
    for agent in SNAP_TRUE:
        expected: Any = _tokens_all_roles(records, ledger, agent)
        assert snap_report.tokens[agent].tokens_per_task == pytest.approx(expected, rel=1e-12)


def test_an_intransitive_triple_is_flagged_and_its_elo_gates_are_inconclusive() -> None:
    """a beats b, b beats c and c beats a, each 75% of the time: one strength each cannot say so (the fit
    is about A = B = C); the fit check names the pairs beside the table and an Elo gate on them is
    inconclusive with the reason, not a pass on equal strengths."""
    rng = np.random.default_rng(11)
    p_left = {("a", "b"): 0.75, ("b", "c"): 0.75, ("c", "a"): 0.75}
    records = []
    for t in range(40):
        for (left, right), p in p_left.items():
            for order in ("AB", "BA"):
                winner = left if rng.random() < p else right
                records.append(case(f"t{t:02d}", left, right, order, slot_for(winner, left, order)))
    report = build_elo_report(records, [], seed=0, rounds=50)
    assert report is not None and report.result.fit_check is not None
    assert report.result.fit_check.poorly_fitted == ("a", "b", "c")
    assert max(report.result.elo.values()) - min(report.result.elo.values()) < 60  # "A = B = C"
    md = render_elo_md(report)
    assert "- Poor fit: a beat b in" in md and "Elo gates on them are inconclusive" in md
    assert elo_json(report)["fit_check"]["poorly_fitted"] == ["a", "b", "c"]
    result = evaluate_gate(parse_gate("lower(elo(a)) >= 900"), GateSource(compute_metrics(records), report))
    assert result.status == "inconclusive"
    assert "the Elo model fits a poorly" in result.message and "a beat b in" in result.message


def test_a_transitive_suite_has_no_misfit(three: tuple[SuiteMetrics, EloReport]) -> None:
    _, report = three
    check = report.result.fit_check
    assert check is not None and check.misfits == () and check.pairs_checked == 3
    assert "Poor fit" not in render_elo_md(report)
