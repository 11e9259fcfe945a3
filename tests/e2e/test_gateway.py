"""The gateway's retry, diagnosis and accounting rules, one behaviour at a time, through the
package's own HTTP client (gateway/transport.py) against the fault-injecting loopback server."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest

from pytest_gauge._internal.gateway.errors import (
    BudgetExhausted,
    ConfigurationError,
    GatewayError,
    ReplayMiss,
)
from pytest_gauge._internal.gateway.gateway import (
    CallContext,
    Gateway,
    GatewayResources,
    GatewaySettings,
    GatewayShared,
)
from pytest_gauge._internal.gateway.ledger import Ledger, read_ledger_file
from pytest_gauge._internal.gateway.limits import (
    Budget,
    ConcurrencySlots,
    ModelPacer,
    RateLimiter,
    SharedState,
)
from pytest_gauge._internal.gateway.store import Store
from pytest_gauge._internal.gateway.transport import ModelClient
from pytest_gauge._internal.records.prices import Price, PriceTable
from pytest_gauge._internal.records.totals import ledger_totals
from pytest_gauge._internal.suite.declare import MODEL_VARIABLES
from pytest_gauge.testing import FaultPlan, LoopbackServer, ResponderError, completion

T = TypeVar("T")
KEY = "sk-test-key"
BODY: dict[str, Any] = {"messages": [{"role": "user", "content": "hello"}], "max_tokens": 16}


def make_gateway(
    tmp_path: Path,
    server: LoopbackServer,
    *,
    retries: int = 3,
    timeout: float = 5.0,
    cap: float = 5.0,
    cache: str = "off",
    prices: dict[str, Price | tuple[float, float]] | None = None,
    budget_usd: float | None = None,
    replay: bool = False,
    run_id: str = "run1",
    concurrency: int = 8,
    pacer: ModelPacer | None = None,
    backoff_base: float = 0.01,
) -> Gateway:
    """A gateway on ``server`` with its own ledger, limits and cache under ``tmp_path``; retries without a
    server-named wait back off from 10 ms, not the run's 0.25 s (the schedule is tests/unit's)."""
    shared = GatewayShared(
        GatewaySettings(
            run_id=run_id,
            cache_mode=cache,
            replay=replay,
            max_retries=retries,
            timeout=timeout,
            retry_after_cap=cap,
            model_variables=MODEL_VARIABLES,  # as the process wires it: where env_model read each model name
            backoff_base=backoff_base,
        ),
        GatewayResources(
            ledger=Ledger(tmp_path / "run", "main"),
            slots=ConcurrencySlots(tmp_path / "run" / "slots", concurrency),
            rate=RateLimiter(SharedState(tmp_path / "run" / "rate.json"), None, None),
            budget=Budget(SharedState(tmp_path / "run" / "budget.json"), budget_usd, None, None),
            prices=PriceTable(prices or {}),
            cache=Store(tmp_path / "cache") if cache != "off" or replay else None,
            pacer=pacer,
        ),
    )
    client = ModelClient(server.base_url, KEY)
    return Gateway(suite="s", client_factory=lambda: client, backend_id=server.base_url, shared=shared)


def run_closing(gw: Gateway, coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coro)``, then ``gw``'s connections closed in that same loop: none is left open for
    the garbage collector (aiohttp's "Unclosed connector")."""

    async def closing() -> T:
        try:
            return await coro
        finally:
            await gw.aclose()

    return asyncio.run(closing())


def call(
    gw: Gateway, work: str = "transcript/t1/a/0", model: str = "m", role: str = "agent", body: Any = None
) -> Any:
    return run_closing(gw, gw.chat(CallContext("s", "t1", work), 1, role, model, dict(body or BODY)))


def ledger(tmp_path: Path) -> list[Any]:
    return read_ledger_file(tmp_path / "run" / "ledger-main.jsonl")


@pytest.fixture
def server() -> Any:
    with LoopbackServer() as srv:
        yield srv


def test_429_retry_after_is_honoured_and_every_attempt_recorded(
    tmp_path: Path, server: LoopbackServer
) -> None:
    server.faults = FaultPlan(burst_5xx=0, rate_429=1.0, retry_after=None, retry_after_ms=50)
    gw = make_gateway(tmp_path, server, retries=2)
    with pytest.raises(GatewayError, match="429 rate limited") as info:
        call(gw)
    assert "--gauge-max-concurrency" in info.value.fix
    rows = ledger(tmp_path)
    assert [r.attempt for r in rows] == [1, 2, 3]
    assert {r.call_id for r in rows} == {"transcript/t1/a/0#1"}
    assert [r.status for r in rows] == ["http_429"] * 3
    assert server.requests_total == 3


def test_5xx_burst_then_success(tmp_path: Path, server: LoopbackServer) -> None:
    server.faults = FaultPlan(burst_5xx=2)
    gw = make_gateway(tmp_path, server, retries=3)
    result = call(gw)
    assert result.content.startswith("ok:")
    assert [r.status for r in ledger(tmp_path)] == ["http_503", "http_503", "ok"]


def test_retry_after_longer_than_the_cap_fails_fast(tmp_path: Path, server: LoopbackServer) -> None:
    server.faults = FaultPlan(rate_429=1.0, retry_after="120")
    gw = make_gateway(tmp_path, server, retries=5, cap=10)
    start = time.perf_counter()
    with pytest.raises(GatewayError, match="asks to wait 120s"):
        call(gw)
    assert time.perf_counter() - start < 5  # did not sleep 120 s
    assert server.requests_total == 1


def test_x_should_retry_false_is_honoured(tmp_path: Path, server: LoopbackServer) -> None:
    server.faults = FaultPlan(rate_503=1.0, should_retry_false=True)
    gw = make_gateway(tmp_path, server, retries=3)
    with pytest.raises(GatewayError, match="503"):
        call(gw)
    assert server.requests_total == 1


def test_timeouts_are_retried_and_flagged_possibly_billed(tmp_path: Path, server: LoopbackServer) -> None:
    server.faults = FaultPlan(slow_every=1, slow_seconds=1.0)
    gw = make_gateway(tmp_path, server, retries=1, timeout=0.2)
    with pytest.raises(GatewayError, match="timed out after 2 attempts") as info:
        call(gw)
    assert "--gauge-timeout" in info.value.fix
    rows = ledger(tmp_path)
    assert [r.status for r in rows] == ["timeout", "timeout"]
    assert all(r.possibly_billed for r in rows)


def test_connection_reset_is_retried(tmp_path: Path, server: LoopbackServer) -> None:
    server.faults = FaultPlan(reset_every=2)
    gw = make_gateway(tmp_path, server, retries=2)

    async def two_calls() -> None:  # one event loop: the client's connection pool belongs to it
        await gw.chat(CallContext("s", "t1", "w/1"), 1, "agent", "m", dict(BODY))
        await gw.chat(CallContext("s", "t1", "w/2"), 1, "agent", "m", dict(BODY))  # reset, retried

    run_closing(gw, two_calls())
    assert [r.status for r in ledger(tmp_path)] == ["ok", "connection_error", "ok"]


def test_an_error_inside_the_plugin_still_closes_its_attempt_in_the_ledger(
    tmp_path: Path, server: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug between the request and its outcome line leaves no open write-ahead line: the attempt gets
    one ``interrupted`` line naming the error, and the call is not sent again."""

    def broken(content: bytes, keys: Any) -> Any:
        raise ValueError("a bug in the body check")

    monkeypatch.setattr("pytest_gauge._internal.gateway.wire.chat.parse_completion", broken)
    gw = make_gateway(tmp_path, server)
    with pytest.raises(ValueError, match="a bug"):
        call(gw)
    lines = (tmp_path / "run" / "ledger-main.jsonl").read_text().splitlines()
    written = [json.loads(line) for line in lines]
    assert [r["status"] for r in written] == ["sent", "interrupted"]
    assert "error inside pytest-gauge (ValueError)" in written[1]["error"]
    assert server.requests_total == 1


def test_401_is_fatal_names_the_variable_and_stops_further_calls(
    tmp_path: Path, server: LoopbackServer
) -> None:
    server.faults = FaultPlan(status_401=True)
    gw = make_gateway(tmp_path, server)
    with pytest.raises(ConfigurationError) as info:
        call(gw)
    assert "TAOTOKEN_API_KEY" in str(info.value) and KEY not in str(info.value)
    with pytest.raises(ConfigurationError):
        call(gw, work="other")
    assert server.requests_total == 1


def test_400_names_the_model_and_role(tmp_path: Path, server: LoopbackServer) -> None:
    server.faults = FaultPlan(status_400_models=frozenset({"no-such-model"}))
    gw = make_gateway(tmp_path, server)
    with pytest.raises(GatewayError) as info:
        call(gw, model="no-such-model", role="judge")
    message = str(info.value)
    assert "400" in message and "no-such-model" in message and "role judge" in message
    assert not info.value.fatal


def test_context_too_long_says_what_to_cut(tmp_path: Path) -> None:
    def responder(body: dict[str, Any]) -> dict[str, Any]:
        raise ResponderError(
            400, "This model's maximum context length is 8192 tokens", code="context_length_exceeded"
        )

    with LoopbackServer(responder) as srv:
        gw = make_gateway(tmp_path, srv)
        with pytest.raises(GatewayError, match="context too long") as info:
            call(gw)
    assert "max_turns" in info.value.fix


def test_missing_usage_is_flagged_and_priced_as_unknown(tmp_path: Path, server: LoopbackServer) -> None:
    server.faults = FaultPlan(no_usage=True)
    gw = make_gateway(tmp_path, server, prices={"m": (1.0, 2.0)})
    result = call(gw)
    assert result.usage is None and result.cost is None
    (row,) = ledger(tmp_path)
    assert row.usage_missing and row.cost is None


def test_cost_is_computed_from_configured_prices(tmp_path: Path) -> None:
    def responder(body: dict[str, Any]) -> dict[str, Any]:
        return completion("hi", usage={"prompt_tokens": 1000, "completion_tokens": 500})

    with LoopbackServer(responder) as srv:
        gw = make_gateway(tmp_path, srv, prices={"m": (2.0, 8.0)})
        result = call(gw)
    assert result.cost == pytest.approx(1000 / 1e6 * 2.0 + 500 / 1e6 * 8.0)


def test_cache_hit_is_recorded_with_nominal_cost_and_truncated_answers_are_kept(
    tmp_path: Path, server: LoopbackServer
) -> None:
    gw = make_gateway(tmp_path, server, cache="use", prices={"m": (1.0, 1.0)})
    first = call(gw)
    second = call(gw)
    assert first == second and server.requests_total == 1
    rows = ledger(tmp_path)
    assert [r.cache_hit for r in rows] == [False, True] and rows[0].cost == rows[1].cost
    # a new run: the persisted entry is used
    gw2 = make_gateway(tmp_path, server, cache="use", run_id="run2")
    call(gw2)
    assert server.requests_total == 1
    # refresh: call again and overwrite
    gw3 = make_gateway(tmp_path, server, cache="refresh", run_id="run3")
    call(gw3)
    assert server.requests_total == 2
    # truncated answers (finish_reason "length") are ordinary outcomes: kept across runs like any other
    server.faults = FaultPlan(truncate=True)
    gw4 = make_gateway(tmp_path, server, cache="use", run_id="run4")
    assert call(gw4, work="trunc").finish_reason == "length"
    call(gw4, work="trunc")
    assert server.requests_total == 3
    gw5 = make_gateway(tmp_path, server, cache="use", run_id="run5")
    assert call(gw5, work="trunc").finish_reason == "length"
    assert server.requests_total == 3


def test_replay_miss_names_the_request_and_sends_nothing(tmp_path: Path, server: LoopbackServer) -> None:
    gw = make_gateway(tmp_path, server, replay=True)
    with pytest.raises(ReplayMiss) as info:
        call(gw, work="judge/t1-a-vs-b-AB/0/0", role="judge", model="judge-model")
    message = str(info.value)
    assert (
        "judge" in message
        and "judge-model" in message
        and "t1-a-vs-b-AB" in message
        and "record it" in message
    )
    assert server.requests_total == 0


def test_budget_refuses_calls_that_would_pass_it(tmp_path: Path) -> None:
    def responder(body: dict[str, Any]) -> dict[str, Any]:
        return completion("hi", usage={"prompt_tokens": 100, "completion_tokens": 16})

    with LoopbackServer(responder) as srv:
        # worst case per call: (chars/4+1 + 16 max_tokens) input + 16 output at $1/M each -> ~3.5e-5
        gw = make_gateway(tmp_path, srv, prices={"m": (1.0, 1.0)}, budget_usd=1e-4)
        sent = 0
        with pytest.raises(BudgetExhausted, match="budget exhausted") as info:
            for i in range(10):
                call(gw, work=f"w/{i}")
                sent += 1
        assert srv.requests_total == sent < 10
    assert "spent $" in str(info.value)


def test_first_call_goes_out_alone(tmp_path: Path) -> None:
    answered: list[float] = []

    def responder(body: dict[str, Any]) -> dict[str, Any]:
        answered.append(time.monotonic())  # the server applies its latency before calling this
        return completion("ok")

    with LoopbackServer(responder, latency=0.1) as srv:
        gw = make_gateway(tmp_path, srv)

        async def many() -> None:
            await asyncio.gather(
                *(gw.chat(CallContext("s", "t", f"w/{i}"), 1, "agent", "m", dict(BODY)) for i in range(8))
            )

        run_closing(gw, many())
    assert srv.requests_total == 8 and srv.max_in_flight > 1  # later calls did run concurrently
    # the others were sent only after the first answer came back: at least one latency later
    assert min(answered[1:]) - answered[0] >= 0.09


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({"x-litellm-attempted-retries": "3"}, "litellm.InternalServerError: upstream failed"),
        ({}, "litellm.InternalServerError: upstream failed LiteLLM Retried: 3 times, LiteLLM Max Retries: 3"),
    ],
    ids=["header", "message"],
)
def test_a_proxys_retries_behind_an_error_are_counted_on_its_line(
    tmp_path: Path, headers: dict[str, str], message: str
) -> None:
    """A proxy's upstream retries behind an attempt that ended in a 500, where the proxy says them (the
    header, or the message older LiteLLM versions end with), count as possibly billed attempts."""

    def responder(body: dict[str, Any]) -> dict[str, Any]:
        raise ResponderError(500, message, type="internal_server_error", headers=headers)

    with LoopbackServer(responder) as srv:
        gw = make_gateway(tmp_path, srv, retries=0)
        with pytest.raises(GatewayError):
            call(gw)
    (row,) = ledger(tmp_path)
    assert (row.status, row.gateway_retries) == ("http_500", 3)
    assert ledger_totals([row]).possibly_billed == 3


def test_a_proxys_retries_said_on_failed_attempts_add_up_with_those_of_the_success(tmp_path: Path) -> None:
    """Two 5xx from a proxy that says 2 upstream retries behind each, then a success it says 1 behind:
    every attempt's line carries its own count and the totals add them all (2 + 2 + 1)."""
    plan = FaultPlan(burst_5xx=2, error_attempted_retries=2, attempted_retries=1)
    with LoopbackServer(faults=plan) as srv:
        gw = make_gateway(tmp_path, srv, retries=3)
        call(gw)
    rows = sorted(ledger(tmp_path), key=lambda r: r.attempt)
    assert [(r.status, r.gateway_retries) for r in rows] == [("http_503", 2), ("http_503", 2), ("ok", 1)]
    assert ledger_totals(rows).possibly_billed == 5
