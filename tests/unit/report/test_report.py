"""Reports: syrupy snapshots of every report file for a fixed hand-made suite, plus direct checks of the
numbers (hand-computed), unknown prices, spending from cache, recommendation thresholds and determinism."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from typing import Any

import pytest
from syrupy.assertion import SnapshotAssertion

from pytest_gauge._internal.analysis.elo import EloResult
from pytest_gauge._internal.analysis.gates import evaluate_gates, parse_gates
from pytest_gauge._internal.analysis.metrics import Estimate, SuiteMetrics, compute_metrics
from pytest_gauge._internal.options import GaugeOptions
from pytest_gauge._internal.records import CaseKey, CaseRecord, Judgment, LedgerRecord, SuiteMeta, Usage
from pytest_gauge._internal.records.prices import cost_of
from pytest_gauge._internal.report import (
    REPORT_FILES,
    RULES,
    ReportContext,
    recommendations,
    render_reports,
    render_summary,
    spent_this_run,
)
from tests.helpers import JSONTextSnapshot, MarkdownSnapshot

# --------------------------------------------------------------------------------------------------
# A fixed suite: 2 tasks x 3 pairs x 2 orders = 12 cases

SUITE = "demo"
RUN_ID = "run-7f3a9c2e41b0"
AGENTS = ("agent_x", "agent_y", "agent_z")
PAIRS = (("agent_x", "agent_y"), ("agent_x", "agent_z"), ("agent_y", "agent_z"))
TASKS = {"t1": "information_retrieval", "t2": "tool_call"}
MODELS = {"agent_x": "model-x", "agent_y": "model-y", "agent_z": "model-z"}
PRICES: tuple[tuple[str, float, float], ...] = (
    ("judge-m", 0.5, 2.0),
    ("model-x", 1.0, 4.0),
    ("model-y", 0.8, 3.2),
    ("model-z", 0.2, 0.8),
    ("user-m", 0.1, 0.4),
)

# (task, agent) -> (rule reward, task_success, user_satisfied, chars of the final reply)
FACTS: dict[tuple[str, str], tuple[float, bool, bool | None, int]] = {
    ("t1", "agent_x"): (1.0, True, True, 420),
    ("t1", "agent_y"): (0.5, False, True, 610),  # satisfied but failed
    ("t1", "agent_z"): (0.0, False, False, 150),
    ("t2", "agent_x"): (0.5, False, True, 380),  # satisfied but failed
    ("t2", "agent_y"): (1.0, True, True, 300),
    ("t2", "agent_z"): (0.0, False, True, 90),  # satisfied but failed
}
# mean rewards: x 0.75, y 0.75, z 0 -> x-vs-y close (gap 0), the other pairs distant (gap 0.75)

# (task, left, right, order) -> (slot choice, judge reward A, judge reward B, reason)
VERDICTS: dict[tuple[str, str, str, str], tuple[str, float | None, float | None, str]] = {
    ("t1", "agent_x", "agent_y", "AB"): ("B", 0.7, 0.8, "Response B is more detailed."),  # y: lower
    ("t1", "agent_x", "agent_y", "BA"): ("B", 0.6, 0.9, "Response B names all three tiers."),  # x
    ("t2", "agent_x", "agent_y", "AB"): (
        "A",
        0.8,
        0.7,
        "Response A has a better tone | and is longer.",
    ),  # x: lower
    ("t2", "agent_x", "agent_y", "BA"): ("A", 0.9, 0.5, "Response A calls the refund tool correctly."),  # y
    ("t1", "agent_x", "agent_z", "AB"): ("A", 0.9, 0.1, "Response A answers the question."),  # x
    ("t1", "agent_x", "agent_z", "BA"): ("B", 0.2, 0.9, "Response B answers the question."),  # x
    ("t2", "agent_x", "agent_z", "AB"): ("tie", 0.5, 0.5, "Both responses are equally incomplete."),
    ("t2", "agent_x", "agent_z", "BA"): ("B", 0.1, 0.6, "Response B at least looks the order up."),  # x
    ("t1", "agent_y", "agent_z", "AB"): ("A", 0.6, 0.2, "Response A is closer to the criteria."),  # y
    ("t1", "agent_y", "agent_z", "BA"): ("error", None, None, ""),
    ("t2", "agent_y", "agent_z", "AB"): ("A", 0.9, 0.1, "Response A issues the refund."),  # y
    ("t2", "agent_y", "agent_z", "BA"): ("A", 0.7, 0.4, "Response A is more polite."),  # z: lower
}
GATES = (
    "upper(lrs_close) <= 0.5; min_n=20",
    "flip_rate <= 0.9",
    "judge_error_rate <= 0.01",
    "cost_per_success <= 0.05",
)


def case_id(task: str, left: str, right: str, order: str) -> str:
    return f"{task}-{left}-vs-{right}-{order}"


def all_case_keys() -> list[tuple[str, str, str, str]]:
    """Collection order: task, pair, order."""
    return [(t, left, right, o) for t in TASKS for left, right in PAIRS for o in ("AB", "BA")]


def _rec(
    call_id: str,
    role: str,
    model: str,
    task: str,
    usage: Usage | None,
    prices: dict[str, tuple[float, float]],
    *,
    cached: bool,
    attempt: int = 1,
    status: str = "ok",
    usage_missing: bool = False,
    http_status: int | None = None,
) -> LedgerRecord:
    price = prices.get(model)
    cost = None
    if usage is not None and price is not None:
        cost = cost_of(usage.prompt_tokens, usage.completion_tokens, *price)
    return LedgerRecord(
        run_id=RUN_ID,
        call_id=call_id,
        attempt=attempt,
        status=status,
        suite=SUITE,
        task_id=task,
        role=role,  # type: ignore[arg-type]
        model=model,
        strategy="single",
        work=call_id.rpartition("#")[0],
        usage=usage,
        usage_missing=usage_missing,
        latency_s=0.25,
        finish_reason="stop" if status == "ok" else None,
        cache_hit=cached,
        cost=cost,
        http_status=http_status,
        error=None if status == "ok" else "rate limited",
        ts=1795942266.0,
    )


def build_ledger(
    prices: tuple[tuple[str, float, float], ...] = PRICES, all_cached: bool = False
) -> list[LedgerRecord]:
    """t1 answered from the cache, t2 live; a judge call retried after a 429; a user_sim call lacks usage."""
    table = {m: (i, o) for m, i, o in prices}
    out: list[LedgerRecord] = []
    for task in TASKS:
        cached = all_cached or task == "t1"
        for agent in AGENTS:
            work = f"transcript/{task}/{agent}/0"
            for n in (1, 2):
                out.append(
                    _rec(
                        f"{work}#{2 * n - 1}",
                        "agent",
                        MODELS[agent],
                        task,
                        Usage(400 + 50 * n, 120),
                        table,
                        cached=cached,
                    )
                )
                if (task, agent, n) == ("t2", "agent_z", 2):
                    out.append(
                        _rec(
                            f"{work}#{2 * n}",
                            "user_sim",
                            "user-m",
                            task,
                            None,
                            table,
                            cached=cached,
                            usage_missing=True,
                        )
                    )
                else:
                    out.append(
                        _rec(
                            f"{work}#{2 * n}",
                            "user_sim",
                            "user-m",
                            task,
                            Usage(300, 40),
                            table,
                            cached=cached,
                        )
                    )
    for task, left, right, order in all_case_keys():
        cached = all_cached or task == "t1"
        call = f"judge/{case_id(task, left, right, order)}/0/0#1"
        if (task, left, right, order) == ("t2", "agent_x", "agent_y", "AB"):
            out.append(
                _rec(
                    call,
                    "judge",
                    "judge-m",
                    task,
                    None,
                    table,
                    cached=cached,
                    status="error",
                    http_status=429,
                )
            )
            out.append(_rec(call, "judge", "judge-m", task, Usage(900, 60), table, cached=cached, attempt=2))
        else:
            out.append(_rec(call, "judge", "judge-m", task, Usage(900, 60), table, cached=cached))
    out.sort(key=LedgerRecord.sort_key)
    return out


def _case_spend(
    ledger: list[LedgerRecord], task: str, left: str, right: str, order: str
) -> tuple[int, int, float | None, int]:
    cid = case_id(task, left, right, order)
    works = {f"judge/{cid}/0/0", f"transcript/{task}/{left}/0", f"transcript/{task}/{right}/0"}
    recs = [x for x in ledger if x.work in works]
    tin = sum(x.usage.prompt_tokens for x in recs if x.usage)
    tout = sum(x.usage.completion_tokens for x in recs if x.usage)
    unknown = any(x.cost is None and x.usage is not None for x in recs)
    unpriced = sum(x.usage_missing for x in recs)
    cost = None if unknown else math.fsum(x.cost for x in recs if x.cost is not None)
    return tin, tout, cost, unpriced


def build_records(ledger: list[LedgerRecord], with_judgments: bool = False) -> list[CaseRecord]:
    """Case records (docs/protocol.md#case-record): selected_reward / lower_reward_selected derived from
    the slot choice."""
    out = []
    for task, left, right, order in all_case_keys():
        choice, ra, rb, reason = VERDICTS[(task, left, right, order)]
        rl, sl, ul, cl = FACTS[(task, left)]
        rr, sr, ur, cr = FACTS[(task, right)]
        blind = "A=left" if order == "AB" else "A=right"
        selected = lower = None
        if choice in ("A", "B"):
            picked_left = (choice == "A") == (blind == "A=left")
            selected = rl if picked_left else rr
            lower = selected < (rr if picked_left else rl)
        tin, tout, cost, unpriced = _case_spend(ledger, task, left, right, order)
        judgments = []
        if with_judgments and choice != "error":
            flip = {"A": "B", "B": "A", "tie": "A"}[choice]
            second = flip if (task, order) == ("t1", "BA") else choice
            judgments = [
                Judgment("judge-m", 0, choice, ra, rb, reason),  # type: ignore[arg-type]
                Judgment("judge-m", 1, second, ra, rb, reason),  # type: ignore[arg-type]
            ]
        out.append(
            CaseRecord(
                suite=SUITE,
                case_id=case_id(task, left, right, order),
                pair_id=f"{left}-vs-{right}",
                task_id=task,
                category=TASKS[task],
                agent_left=left,
                agent_right=right,
                order=order,  # type: ignore[arg-type]
                blind_order=blind,  # type: ignore[arg-type]
                sample=0,
                judge_choice=choice,  # type: ignore[arg-type]
                reward_left=rl,
                reward_right=rr,
                selected_reward=selected,
                lower_reward_selected=lower,
                task_success_left=sl,
                task_success_right=sr,
                user_sat_left=ul,
                user_sat_right=ur,
                input_tokens_incl_shared=tin,
                output_tokens_incl_shared=tout,
                est_cost_incl_shared=cost,
                judge_reward_a=ra,
                judge_reward_b=rb,
                judge_reason=reason,
                judge_raw='{"winner": "A", "reward_a": 0.7' if choice == "error" else None,
                judge_error="verdict truncated (finish_reason=length)" if choice == "error" else None,
                chars_left=cl,
                chars_right=cr,
                judgments=judgments,
                unpriced_calls=unpriced,
            )
        )
    return out


def build_meta() -> SuiteMeta:
    cases = tuple(CaseKey(case_id(*k), *k) for k in all_case_keys())
    return SuiteMeta(
        name=SUITE,
        folder="/repo/evals/demo",
        module_path="/repo/evals/demo/test_demo.py",
        nodeid_prefix="evals/demo/test_demo.py",
        tasks_file="/repo/evals/demo/tasks.jsonl",
        tasks=tuple({"task_id": t, "category": c, "task_prompt": f"prompt {t}"} for t, c in TASKS.items()),
        categories=dict(TASKS),
        agents=tuple(AGENTS),
        pairs=tuple(PAIRS),
        models={
            **{f"agent:{a}": m for a, m in MODELS.items()},
            "judge:0": "judge-m",
            "user_sim": "user-m",
        },
        judge_models=("judge-m",),
        judge_repeats=1,
        judge_format="json_schema",
        user_max_turns=4,
        orders="both",
        samples=1,
        gates=tuple(GATES),
        tools=(),
        cases=cases,
        families={},
        prompts={},
        selected=tuple(f"{SUITE}::{c.case_id}" for c in cases),
    )


def build_ctx(
    *,
    prices: tuple[tuple[str, float, float], ...] = PRICES,
    all_cached: bool = False,
    drop_case: str | None = None,
    with_judgments: bool = False,
    elo: EloResult | None = None,
) -> ReportContext:
    options = GaugeOptions(backend="sim", seed=7, bootstrap_rounds=1000, close_threshold=0.1, prices=prices)
    meta = build_meta()
    ledger = build_ledger(prices, all_cached)
    records = [r for r in build_records(ledger, with_judgments) if r.case_id != drop_case]
    metrics = compute_metrics(
        records,
        close_threshold=options.close_threshold,
        seed=options.seed,
        rounds=options.bootstrap_rounds,
        ledger=ledger,
        expected_cases=len(meta.selected),
    )
    gates = evaluate_gates(parse_gates(list(GATES)), metrics, missing_cases=12 - len(records))
    gates += evaluate_gates(parse_gates(["lrs_distant <= 0.5"]), metrics, partial_run=True)
    return ReportContext(
        meta=meta,
        records=records,
        ledger=ledger,
        metrics=metrics,
        gates=gates,
        elo=elo,
        seed=options.seed,
        backend=options.backend,
        prices=options.prices,
    )


@pytest.fixture(scope="module")
def reports() -> dict[str, str]:
    return render_reports(build_ctx())


@pytest.fixture(scope="module")
def metrics_doc(reports: dict[str, str]) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(reports["metrics.json"])
    return doc


# --------------------------------------------------------------------------------------------------
# Snapshots


@pytest.mark.parametrize("name", ["pairwise_table", "token_cost", "conclusion"])
def test_markdown_snapshot(name: str, reports: dict[str, str], snapshot: SnapshotAssertion) -> None:
    assert reports[f"{name}.md"] == snapshot(extension_class=MarkdownSnapshot)


def test_metrics_json_snapshot(reports: dict[str, str], snapshot: SnapshotAssertion) -> None:
    assert reports["metrics.json"] == snapshot(extension_class=JSONTextSnapshot)


def test_summary_snapshot(snapshot: SnapshotAssertion) -> None:
    assert render_summary(build_ctx()) == snapshot(extension_class=MarkdownSnapshot)


def test_people_sections_snapshot(snapshot: SnapshotAssertion) -> None:
    """conclusion.md's "The judge against people" (two labellers, sample weights, a label of a case not
    in the run) and "The simulated user audited" (flagged transcripts)."""
    from pytest_gauge._internal.records.labels import Label
    from pytest_gauge._internal.report.human import human_section
    from pytest_gauge._internal.report.user_audit import user_audit_section

    ctx = build_ctx()
    kinds: tuple[list[str], ...] = (["leaked_fact"], ["ended_early", "cooperative"], [])
    records = [dataclasses.replace(r, user_flags_left=kinds[i % 3]) for i, r in enumerate(ctx.records)]
    labels = [
        Label(r.suite, r.case_id, ("A", "B", "tie")[i % 3], "ada", weight=1.0 + i % 2)
        for i, r in enumerate(records)
    ]
    labels += [Label(r.suite, r.case_id, "A", "bob") for r in records[:4]]
    labels.append(Label(records[0].suite, "no-such-case", "A", "ada"))
    metrics = compute_metrics(records, seed=7, rounds=200, ledger=ctx.ledger, labels=labels)
    people = dataclasses.replace(ctx, records=records, metrics=metrics)
    text = "\n".join([*human_section(people), "", *user_audit_section(people)]) + "\n"
    assert text == snapshot(extension_class=MarkdownSnapshot)


# --------------------------------------------------------------------------------------------------
# Direct checks


def test_exactly_the_report_files(reports: dict[str, str]) -> None:
    assert (
        list(reports)
        == list(REPORT_FILES)
        == [
            "pairwise_table.md",
            "token_cost.md",
            "conclusion.md",
            "metrics.json",
            "elo.md",
            "elo.json",
            "elo.svg",
        ]
    )
    for text in reports.values():
        assert text.endswith("\n") and not text.endswith("\n\n")


def test_deterministic_and_free_of_run_ids_and_timestamps() -> None:
    ctx = build_ctx()
    first = render_reports(ctx)
    assert render_reports(ctx) == first
    assert render_reports(build_ctx()) == first  # a fresh, equal context gives the same bytes
    assert render_summary(ctx) == render_summary(build_ctx())
    for text in [*first.values(), render_summary(ctx)]:
        assert RUN_ID not in text
        assert "1795942266" not in text
        assert not re.search(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}", text)


def test_metrics_json_hand_computed_values(metrics_doc: dict[str, Any], reports: dict[str, str]) -> None:
    text = reports["metrics.json"]
    assert text == json.dumps(json.loads(text), sort_keys=True, indent=2, ensure_ascii=False) + "\n"
    assert not re.search(r"\d\.\d{7,}", text)  # floats rounded to 6 decimals
    m = metrics_doc["metrics"]
    for name in (
        "lrs",
        "lrs_close",
        "lrs_distant",
        "flip_rate",
        "position_bias",
        "sat_but_failed_rate",
        "judge_error_rate",
        "cost_per_success",
        "total_cost",
        "success_rate(agent_x)",
        "judge_cost_share",
        "verbosity_word_rate",
        "flip_rate(agent_x, agent_y)",
    ):
        assert {"value", "n", "low", "high"} <= set(m[name]), name
    # LRS: x-y (close) 4 unequal-reward verdicts, 2 lower; distant: 6 verdicts (tie and error out), 1 lower
    assert (m["lrs"]["value"], m["lrs"]["n"]) == (0.3, 10)
    assert (m["lrs_close"]["value"], m["lrs_close"]["n"]) == (0.5, 4)
    assert (m["lrs_distant"]["value"], m["lrs_distant"]["n"]) == (round(1 / 6, 6), 6)
    # flips: x-y t1, x-y t2, x-z t2 (tie vs x), y-z t2 out of 5 complete groups (y-z t1 has an error)
    assert (m["flip_rate"]["value"], m["flip_rate"]["n"]) == (0.8, 5)
    assert (m["position_bias"]["value"], m["position_bias"]["n"]) == (0.6, 10)
    assert (m["judge_error_rate"]["value"], m["judge_error_rate"]["n"]) == (round(1 / 12, 6), 12)
    assert (m["sat_but_failed_rate"]["value"], m["sat_but_failed_rate"]["n"]) == (0.5, 6)
    assert m["success_rate(agent_x)"]["value"] == 0.5
    assert m["flip_rate(agent_x, agent_y)"]["value"] == 1.0
    assert metrics_doc["cases"] == {"expected": 12, "recorded": 12, "missing": 0}
    assert metrics_doc["cost_includes_retries"] is True
    assert metrics_doc["format_version"] == 2 and metrics_doc["suite"] == SUITE
    # cost_per_success <= 0.05 is inconclusive: one user_sim call reported no usage (a lower bound)
    statuses = ["inconclusive", "pass", "fail", "inconclusive", "skipped"]
    assert [g["status"] for g in metrics_doc["gates"]] == statuses
    assert "1 call without usage" in metrics_doc["gates"][3]["message"]
    assert set(metrics_doc["gates"][0]) >= {"expr", "status", "value", "low", "high", "n"}


def _price(model: str) -> tuple[float, float]:
    return next((i, o) for m, i, o in PRICES if m == model)


def test_costs_and_spent_this_run_hand_computed(metrics_doc: dict[str, Any], reports: dict[str, str]) -> None:
    # per transcript: agent calls (450, 120) and (500, 120); user_sim (300, 40) twice (one lacks usage)
    agent = (
        sum(cost_of(450, 120, *_price(MODELS[a])) + cost_of(500, 120, *_price(MODELS[a])) for a in AGENTS) * 2
    )
    user = cost_of(300, 40, *_price("user-m")) * 11  # 12 user_sim calls, one without usage: not estimated
    judge = cost_of(900, 60, *_price("judge-m")) * 12  # the 429 attempt reported no usage
    total = agent + user + judge
    m = metrics_doc["metrics"]
    assert m["total_cost"]["value"] == pytest.approx(total, abs=1e-6)
    assert m["cost_per_success"]["value"] == pytest.approx(total / 2, abs=1e-6)  # 2 successful transcripts
    assert m["judge_cost_share"]["value"] == pytest.approx(judge / total, abs=1e-6)
    spent = metrics_doc["spent_this_run"]
    # t2 is live: 6 agent + 6 user_sim + 6 judge calls + 1 retried attempt = 19 attempts; t1 (18) cached
    assert (spent["live_calls"], spent["cached_calls"]) == (19, 18)
    # live t2: half the agent and judge cost, 5 of the 11 priced user_sim calls
    assert spent["spent_usd"] == pytest.approx(agent / 2 + user * 5 / 11 + judge / 2, abs=1e-6)
    assert spent["live_tokens"] == 3 * (570 + 620) + 5 * 340 + 6 * 960
    assert metrics_doc["usage_missing_calls"] == ["transcript/t2/agent_z/0#4"]
    costs = metrics_doc["costs"]
    assert (costs["usage_missing"], costs["lower_bound"]) == (1, True)
    text = costs["total_cost_text"]
    assert text.startswith("at least $") and text.endswith("(1 call without usage)")
    token = reports["token_cost.md"]
    assert "## Calls without usage (1)" in token and "`transcript/t2/agent_z/0#4`" not in token
    assert "| transcript/t2/agent_z/0#4 | 1 | user_sim | user-m | ok |" in token
    assert "retries and failed requests are included" in token
    assert "cached answers count at what they cost when they were made" in token
    assert "| judge | 12 | 13 | 1 | 10,800 | 720 | $0.5 in / $2 out per M (configured) |" in token


def test_unknown_price_shows_unknown_never_zero() -> None:
    prices = tuple(p for p in PRICES if p[0] != "user-m")
    ctx = build_ctx(prices=prices)
    out = render_reports(ctx)
    token = out["token_cost.md"]
    role_row = next(line for line in token.splitlines() if line.startswith("| user_sim |"))
    assert "no price (unknown)" in role_row and role_row.rstrip(" |").split("|")[-2].strip() == "unknown"
    assert "$0" not in role_row
    model_row = next(line for line in token.splitlines() if line.startswith("| user_sim | user-m |"))
    assert model_row.endswith("| no price (unknown) | unknown |")
    total_row = next(line for line in token.splitlines() if line.startswith("| **total** | 36 |"))
    assert "unknown (priced part $" in total_row
    assert "- Cost per success: unknown" in token
    assert "`user-m` (user_sim) has no configured price" in token
    doc = json.loads(out["metrics.json"])
    assert doc["metrics"]["total_cost"]["value"] is None
    assert doc["metrics"]["user_sim_cost"]["value"] is None
    assert doc["metrics"]["cost_per_success"]["value"] is None
    assert doc["spent_this_run"]["spent_usd"] is None  # live t2 user_sim calls have no price
    assert "Total cost: unknown (agent $" in out["conclusion.md"]
    assert "user_sim unknown" in out["conclusion.md"]
    summary = render_summary(ctx)
    user_line = next(line for line in summary.splitlines() if line.startswith("user_sim"))
    assert user_line.endswith("unknown") and "$0" not in user_line


def test_fully_cached_rerun_spends_zero() -> None:
    live, cached = build_ctx(), build_ctx(all_cached=True)
    out = render_reports(cached)
    doc = json.loads(out["metrics.json"])
    spent = doc["spent_this_run"]
    assert spent["spent_usd"] == 0.0 and spent["live_calls"] == 0 and spent["live_tokens"] == 0
    assert spent["cached_calls"] == len(cached.ledger) == 37
    # nominal costs are unchanged by caching
    assert (
        doc["metrics"]["total_cost"]
        == json.loads(render_reports(live)["metrics.json"])["metrics"]["total_cost"]
    )
    assert "Fully cached run: nothing was spent ($0)." in out["token_cost.md"]
    assert "| **total** | 0 | 37 | 0 |" in out["token_cost.md"]
    assert spent_this_run(cached.ledger).spent_usd == 0.0
    assert "spent this run $0.000000 (0 simulated, 37 cached calls)" in render_summary(cached)


def test_pairwise_table_rows(reports: dict[str, str]) -> None:
    lines = reports["pairwise_table.md"].splitlines()
    header = next(line for line in lines if line.startswith("| pair_id |"))
    cols = [c.strip() for c in header.strip("|").split("|")]
    assert cols[:17] == [
        "pair_id",
        "task_id",
        "agent_left",
        "agent_right",
        "blind_order",
        "judge_choice",
        "reward_left",
        "reward_right",
        "selected_reward",
        "lower_reward_selected",
        "task_success_left",
        "task_success_right",
        "user_sat_left",
        "user_sat_right",
        "input_tokens_incl_shared",
        "output_tokens_incl_shared",
        "est_cost_incl_shared",
    ]
    assert cols[17:] == ["judge_reward_a", "judge_reward_b", "judge_reason"]
    rows = [line for line in lines if line.startswith("| agent_")]
    assert len(rows) == 12
    tie = next(r for r in rows if "| t2 |" in r and "| tie |" in r)
    cells = [c.strip() for c in tie.strip("|").split("|")]
    assert cells[6:10] == ["0.500", "0.000", "–", "–"]
    err = next(r for r in rows if "| error |" in r)
    assert "error: verdict truncated (finish_reason=length)" in err
    assert "better tone \\| and is longer" in reports["pairwise_table.md"]  # pipes escaped in cells
    assert "Missing cases" not in reports["pairwise_table.md"]


def test_missing_case_listed_and_recommended() -> None:
    dropped = "t1-agent_y-vs-agent_z-AB"
    ctx = build_ctx(drop_case=dropped)
    out = render_reports(ctx)
    assert "## Missing cases (1)" in out["pairwise_table.md"] and f"- `{dropped}`" in out["pairwise_table.md"]
    doc = json.loads(out["metrics.json"])
    assert doc["cases"] == {"expected": 12, "recorded": 11, "missing": 1}
    assert doc["missing_case_ids"] == [dropped]
    assert "- missing cases = 1 > 0 → rerun the errored cases" in out["conclusion.md"]
    assert "11/12 cases recorded (1 missing)" in render_summary(ctx)


def _with(m: SuiteMetrics, **values: float) -> SuiteMetrics:
    """A copy of ``m`` with chosen numbers replaced (``<metric>_high``/``<metric>_value`` or judge_share)."""
    metrics = dict(m.metrics)
    costs = m.costs
    for key, v in values.items():
        if key == "judge_share":
            costs = dataclasses.replace(costs, judge_share=v)
            continue
        name, _, part = key.rpartition("_")
        e = metrics[name]
        metrics[name] = Estimate(
            v if part == "value" else e.value, e.n, e.low, v if part == "high" else e.high, e.method
        )
    return dataclasses.replace(m, metrics=metrics, costs=costs)


ABOVE = {
    "flip_rate_high": 0.21,
    "lrs_close_high": 0.31,
    "judge_share": 0.51,
    "sat_but_failed_rate_value": 0.11,
    "judge_error_rate_value": 0.03,
}
BELOW = {
    "flip_rate_high": 0.19,
    "lrs_close_high": 0.29,
    "judge_share": 0.49,
    "sat_but_failed_rate_value": 0.09,
    "judge_error_rate_value": 0.01,
}
RULE_OF = {
    "flip_rate_high": "flip_rate",
    "lrs_close_high": "lrs_close",
    "judge_share": "judge_cost_share",
    "sat_but_failed_rate_value": "sat_but_failed_rate",
    "judge_error_rate_value": "judge_error_rate",
}
LINES = {
    "flip_rate_high": "flip rate upper bound = 0.210 > 0.2 → judge both orders and report ties",
    "lrs_close_high": "LRS close upper bound = 0.310 > 0.3 → do not gate close pairs on a single judge run; "
    "add repeats or a second judge",
    "judge_share": "judge share of cost = 0.510 > 0.5 → consider a cheaper judge or caching",
    "sat_but_failed_rate_value": "sat-but-failed rate = 0.110 > 0.1 → do not use user satisfaction as the "
    "success signal",
    "judge_error_rate_value": "judge error rate = 0.030 > 0.02 → raise judge max_tokens / check the verdict "
    "format",
}


def test_recommendations_fire_above_thresholds_only() -> None:
    ctx = build_ctx()
    above = dataclasses.replace(ctx, metrics=_with(ctx.metrics, **ABOVE))
    below = dataclasses.replace(ctx, metrics=_with(ctx.metrics, **BELOW))
    text_above = render_reports(above)["conclusion.md"]
    text_below = render_reports(below)["conclusion.md"]
    for key, line in LINES.items():
        assert f"- {line}" in text_above, key
        assert f"- {line}" not in text_below, key
    assert "No recommendation rule fired." in text_below
    assert "No recommendation rule fired." not in text_above
    assert [r.fired for r in recommendations(below.metrics)] == [False] * len(RULES)
    assert [r.fired for r in recommendations(above.metrics)] == [True] * 5 + [
        False,
        False,
    ]  # no cheaper judge, no missing case
    # one at a time: each number above its threshold fires exactly its own rule
    for key in ABOVE:
        one = _with(ctx.metrics, **{**BELOW, key: ABOVE[key]})
        fired = [r.rule.key for r in recommendations(one) if r.fired]
        assert fired == [RULE_OF[key]], key
    # the fixed suite: flips, close LRS, sat-but-failed and judge errors are high; the judge share is not
    fixed = {r.rule.key for r in recommendations(ctx.metrics) if r.fired}
    assert fixed == {"flip_rate", "lrs_close", "sat_but_failed_rate", "judge_error_rate"}


def test_unmeasured_numbers_never_fire() -> None:
    ctx = build_ctx()
    none = dataclasses.replace(
        ctx.metrics,
        metrics={},
        missing_cases=None,
        costs=dataclasses.replace(ctx.metrics.costs, judge_share=None),
    )
    recs = recommendations(none)
    assert not any(r.fired for r in recs)
    assert all(r.value_text() == "not measured" for r in recs)


def test_judge_reliability_measured_or_said_not_measured(reports: dict[str, str]) -> None:
    assert "Judge reliability was not measured" in reports["conclusion.md"]
    out = render_reports(build_ctx(with_judgments=True))
    text = out["conclusion.md"]
    assert "Judge reliability was not measured" not in text
    assert "| Cohen's kappa (repeats) |" in text
    doc = json.loads(out["metrics.json"])
    # 11 non-error cases with 2 repeats; the 2 non-error t1/BA cases disagree -> agreement 9/11
    assert doc["metrics"]["judge_agreement(repeats)"]["value"] == round(9 / 11, 6)
    assert doc["metrics"]["judge_agreement(repeats)"]["n"] == 11


def test_elo_linked_only_when_present(reports: dict[str, str]) -> None:
    assert "elo.md" not in reports["conclusion.md"]

    elo = EloResult(
        agents=("best-of-1", "best-of-4"),
        elo={"best-of-1": 1000.0, "best-of-4": 1064.2},
        low={"best-of-1": 1000.0, "best-of-4": 1010.5},
        high={"best-of-1": 1000.0, "best-of-4": 1120.0},
        rank={"best-of-1": 2, "best-of-4": 1},
        per_task={},
        problems=[],
        rounds=0,
    )
    text = render_reports(build_ctx(elo=elo))["conclusion.md"]
    assert "[elo.md](elo.md)" in text and "(elo.svg)" in text
    assert "| best-of-4 | 1064.2 | [1010.5, 1120.0] | 1 |" in text


def test_conclusion_sections(reports: dict[str, str]) -> None:
    text = reports["conclusion.md"]
    for heading in (
        "## Task set",
        "## Agents and pairs",
        "## Blind protocol",
        "## Lower-reward-selected rate",
        "## Position effects",
        "## Judge errors and reliability",
        "## User satisfaction vs task success",
        "## Cost",
        "## Gates",
        "## Recommendations",
    ):
        assert heading in text
    assert "2 tasks in 2 categories" in text
    assert "| information_retrieval | 1 |" in text and "| tool_call | 1 |" in text
    assert "| agent_x-vs-agent_y | agent_x | agent_y | 0.000 | close |" in text
    assert "6 with A=left, 6 with A=right" in text
    # sat-but-failed examples: 3 of them, with task ids and agents
    assert "Examples (3 of 3):" in text
    assert "- task `t1`, agent `agent_y`" in text and "- task `t2`, agent `agent_z`" in text
    assert "| upper(lrs_close) <= 0.5; min_n=20 | INCONCLUSIVE |" in text
    assert "| lrs_distant <= 0.5 | SKIPPED |" in text


def test_summary_is_compact_and_complete() -> None:
    text = render_summary(build_ctx())
    lines = text.splitlines()
    assert len(lines) <= 30
    assert lines[0].startswith("suite demo: 12/12 cases recorded, 2 tasks, 3 pairs")
    for word in ("PASS", "FAIL", "INCONCLUSIVE", "SKIPPED", "lrs_close", "flip_rate", "judge", "user_sim"):
        assert word in text
    flip = next(line for line in lines if line.startswith("flip_rate"))
    assert flip.split()[1] == "0.800" and flip.split()[-1] == "5"


def test_run_with_no_records_and_no_ledger_renders() -> None:
    ctx = build_ctx()
    m = compute_metrics([], ledger=[], expected_cases=12, seed=7, rounds=100)
    empty = ReportContext(
        meta=ctx.meta, records=[], ledger=[], metrics=m, gates=[], seed=ctx.seed, backend=ctx.backend
    )
    out = render_reports(empty)
    assert "No case was recorded." in out["pairwise_table.md"]
    assert "## Missing cases (12)" in out["pairwise_table.md"]
    assert "| **total** | 0 | 0 | 0 | 0 | 0 |  | unknown | 0 |" in out["token_cost.md"]
    assert "No gates were declared for this suite." in out["conclusion.md"]
    assert "- missing cases = 12 > 0 → rerun the errored cases" in out["conclusion.md"]
    doc = json.loads(out["metrics.json"])
    assert doc["metrics"]["lrs"] == {"value": None, "n": 0, "low": None, "high": None, "method": "none"}
    assert doc["spent_this_run"]["spent_usd"] == 0.0 and doc["cases"]["missing"] == 12
    assert "0/12 cases recorded (12 missing)" in render_summary(empty)
