"""Usage you can bill from and waits the gateway asks for: zero prompt tokens
are missing usage (never $0), another model served is recorded and priced as served, a proxy's upstream
retries and reported cost are recorded, and every common wait header is honoured and recorded."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pytest_gauge._internal.gateway.gateway import CallContext, retry_delay, served_model
from pytest_gauge._internal.records import LedgerRecord
from pytest_gauge._internal.records.totals import ledger_totals
from pytest_gauge._internal.report.costs import served_warnings
from pytest_gauge.testing import FaultPlan, LoopbackServer
from tests.e2e.test_gateway import BODY, call, ledger, make_gateway, run_closing


@pytest.mark.parametrize(
    ("headers", "wait"),
    [
        ({"llm_provider-retry-after": "60"}, 60.0),
        ({"Retry-After": "2"}, 2.0),
        ({"retry-after-ms": "1500"}, 1.5),
        ({"x-ms-retry-after-ms": "250"}, 0.25),
        ({"x-ratelimit-reset-requests": "6m0s", "x-ratelimit-reset-tokens": "20ms"}, 360.0),
        ({"x-ratelimit-reset-tokens": "1.5s"}, 1.5),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_every_common_wait_header_is_read(headers: dict[str, str], wait: float | None) -> None:
    assert retry_delay(headers, 1, random.Random(0)) == wait


def test_a_dated_or_prefixed_name_is_the_same_model() -> None:
    assert served_model("gpt-4o", "gpt-4o-2024-08-06") is None
    assert served_model("openai/gpt-4o", "gpt-4o") is None
    assert served_model("m", None) is None and served_model("m", "m") is None
    assert served_model("big-model", "small-model") == "small-model"


def test_zero_prompt_tokens_are_missing_usage_never_zero_cost(tmp_path: Path) -> None:
    with LoopbackServer(faults=FaultPlan(zero_usage=True)) as srv:
        gw = make_gateway(tmp_path, srv, prices={"m": (1.0, 1.0)})
        result = call(gw)
    assert result.cost is None and result.usage is None
    (row,) = ledger(tmp_path)
    assert row.usage_missing and row.cost is None
    assert ledger_totals([row]).usage_missing == 1


def test_a_fallback_model_is_recorded_and_priced_as_served(tmp_path: Path) -> None:
    faults = FaultPlan(served_model="cheap", attempted_retries=2, response_cost=0.5)
    with LoopbackServer(faults=faults) as srv:
        gw = make_gateway(tmp_path, srv, prices={"m": (16.0, 16.0), "cheap": (1.0, 1.0)})

        async def two() -> Any:
            first = await gw.chat(CallContext("s", "t1", "transcript/t1/a/0"), 1, "agent", "m", dict(BODY))
            await gw.chat(CallContext("s", "t1", "transcript/t1/a/1"), 1, "agent", "m", dict(BODY))
            return first

        result = run_closing(gw, two())
    rows = ledger(tmp_path)
    assert [r.served_model for r in rows] == ["cheap", "cheap"] and rows[0].model == "m"
    assert result.usage is not None
    tokens = result.usage.prompt_tokens + result.usage.completion_tokens
    assert result.cost == pytest.approx(tokens / 1e6)  # the served model's price, not 16x that
    assert [r.gateway_retries for r in rows] == [2, 2] and rows[0].gateway_cost == 0.5
    assert ledger_totals(rows).possibly_billed == 4  # the proxy's upstream retries may have been billed
    (warning,) = served_warnings(rows)  # one per (requested, served) pair
    assert "'m' with the model 'cheap' (2 attempts)" in warning
    assert "served_model" in rows[0].to_json() and "served_model" not in _plain(tmp_path)


def _plain(tmp_path: Path) -> dict[str, Any]:
    """A ledger line of an ordinary answer: the gateway's optional reports are not written at all."""
    with LoopbackServer() as srv:
        call(make_gateway(tmp_path / "plain", srv))
    row: LedgerRecord = ledger(tmp_path / "plain")[0]
    return row.to_json()


def test_a_provider_prefixed_wait_is_honoured_and_recorded(tmp_path: Path) -> None:
    faults = FaultPlan(rate_429=1.0, retry_after="0.05", retry_after_header="llm_provider-retry-after")
    with LoopbackServer(faults=faults) as srv:
        gw = make_gateway(tmp_path, srv, retries=1)
        with pytest.raises(Exception, match="429"):
            call(gw)
    rows = ledger(tmp_path)
    assert [r.status for r in rows] == ["http_429", "http_429"]
    assert [r.retry_after for r in rows] == [0.05, 0.05]


def test_a_wait_past_the_cap_fails_fast_naming_it(tmp_path: Path) -> None:
    faults = FaultPlan(rate_429=1.0, retry_after="60", retry_after_header="llm_provider-retry-after")
    with LoopbackServer(faults=faults) as srv:
        gw = make_gateway(tmp_path, srv, retries=3, cap=5.0)
        with pytest.raises(Exception, match="asks to wait 60s"):
            call(gw)
        assert srv.requests_total == 1
    assert ledger(tmp_path)[0].retry_after == 60.0


def test_each_role_sends_its_own_key_and_the_ledger_names_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_gauge._internal.gateway.gateway import live_keys

    env = {"TAOTOKEN_API_KEY": "sk-run-key-0001", "TAOTOKEN_JUDGE_API_KEY": "sk-judge-key-0002"}
    with LoopbackServer() as srv:
        gw = make_gateway(tmp_path, srv)
        settings = replace(gw.shared.settings, **live_keys("live", env))
        gw.shared = replace(gw.shared, settings=settings)

        async def both() -> None:
            await gw.chat(CallContext("s", "t1", "transcript/t1/a/0"), 1, "agent", "m", dict(BODY))
            await gw.chat(CallContext("s", "t1", "judge/c/j/0"), 1, "judge", "m", dict(BODY))

        run_closing(gw, both())
        sent = [r.headers.get("authorization") for r in srv.log]
    assert sent == ["Bearer sk-test-key", "Bearer sk-judge-key-0002"]  # the agent falls back to the run's
    rows = ledger(tmp_path)
    assert [r.key_variable for r in rows] == ["TAOTOKEN_API_KEY", "TAOTOKEN_JUDGE_API_KEY"]
    text = (tmp_path / "run" / "ledger-main.jsonl").read_text()
    assert "sk-judge-key" not in text and "sk-run-key" not in text
    assert live_keys("sim", env) == {}
