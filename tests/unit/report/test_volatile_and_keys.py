"""What the method asks to watch per role and model beside the stable figures: p50/p95 latency of
successful attempts (volatile, in the reports' marked sections, which run comparisons ignore) and the
cost grouped by the key variable each attempt's key came from."""

from __future__ import annotations

import json
from dataclasses import replace

from pytest_gauge._internal.report import render_reports
from pytest_gauge._internal.report.costs import key_variable_costs, latency_figures
from pytest_gauge._internal.report.format import VOLATILE_BEGIN, VOLATILE_END, without_volatile
from tests.unit.report.test_report import build_ctx


def test_latency_percentiles_are_nearest_rank_over_successful_live_attempts() -> None:
    ctx = build_ctx()
    ledger = [replace(x, latency_s=0.01 * (i + 1)) for i, x in enumerate(ctx.ledger)]
    judge = [x for x in ledger if x.role == "judge" and x.status == "ok" and not x.cache_hit]
    values = sorted(float(x.latency_s or 0) for x in judge)
    (fig,) = [f for f in latency_figures(ledger) if f.role == "judge"]
    assert fig.attempts == len(values) == 6  # the 429 and the cache hits are left out
    assert fig.p50 == round(values[2], 3) and fig.p95 == round(values[5], 3)


def test_the_latencies_vary_only_inside_the_volatile_parts() -> None:
    ctx = build_ctx()
    slower = replace(ctx, ledger=[replace(x, latency_s=9.5) for x in ctx.ledger])
    a, b = render_reports(ctx), render_reports(slower)
    assert a["token_cost.md"] != b["token_cost.md"] and "| 9.500 | 9.500 |" in b["token_cost.md"]
    assert b["token_cost.md"].rstrip().endswith(VOLATILE_END) and VOLATILE_BEGIN in b["token_cost.md"]
    assert without_volatile(a["token_cost.md"]) == without_volatile(b["token_cost.md"])
    assert json.loads(b["metrics.json"])["volatile"]["latency_s"][0]["p95"] == 9.5
    assert without_volatile(a["metrics.json"], json_doc=True) == without_volatile(
        b["metrics.json"], json_doc=True
    )
    for name in set(a) - {"token_cost.md", "metrics.json"}:
        assert a[name] == b[name], name  # no other report shows a latency


def test_costs_are_grouped_by_the_key_variable_each_key_came_from() -> None:
    ctx = build_ctx()
    variable = {
        "agent": "TAOTOKEN_API_KEY",
        "user_sim": "TAOTOKEN_API_KEY",
        "judge": "TAOTOKEN_JUDGE_API_KEY",
    }
    ledger = [replace(x, key_variable=variable[x.role]) for x in ctx.ledger]
    keys = {k.key_variable: k for k in key_variable_costs(ledger)}
    assert keys["TAOTOKEN_JUDGE_API_KEY"].roles == ("judge",)
    assert keys["TAOTOKEN_API_KEY"].roles == ("agent", "user_sim")
    assert sum(k.attempts for k in keys.values()) == sum(not x.cache_hit for x in ledger)  # live ones only
    reports = render_reports(replace(ctx, ledger=ledger))
    assert "## Spent this run by key variable" in reports["token_cost.md"]
    assert "| TAOTOKEN_JUDGE_API_KEY | judge |" in reports["token_cost.md"]
    doc = json.loads(reports["metrics.json"])["spent_this_run"]["per_key_variable"]
    assert set(doc) == set(keys) and doc["TAOTOKEN_JUDGE_API_KEY"]["roles"] == ["judge"]
    assert "by key variable" not in render_reports(ctx)["token_cost.md"]  # no keys (the simulator)
