"""The plugin's gateway speaking Anthropic Messages (``api="anthropic"``) to the loopback server: a judge's
verdict as the forced tool call, retries on 429 and 529 with every attempt on the ledger, malformed
Messages bodies retried, truncation, the key as a bearer token or ``x-api-key``, the cache, and a ledger
line whose cost is the hand computation with the cache's read and write prices."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_gauge._internal.gateway.errors import GatewayError, rejects_format
from pytest_gauge._internal.gateway.gateway import (
    CallContext,
    Gateway,
    GatewayResources,
    GatewaySettings,
    GatewayShared,
)
from pytest_gauge._internal.gateway.ledger import Ledger, read_ledger_file
from pytest_gauge._internal.gateway.limits import Budget, ConcurrencySlots, RateLimiter, SharedState
from pytest_gauge._internal.gateway.store import Store
from pytest_gauge._internal.gateway.transport import ModelClient
from pytest_gauge._internal.gateway.wire.anthropic import JSON_TOOL
from pytest_gauge._internal.records import Transcript, Turn
from pytest_gauge._internal.records.prices import Price, PriceTable
from pytest_gauge._internal.run.judge import Redactor, build_judge_messages, parse_verdict
from pytest_gauge._internal.suite.declare import MODEL_VARIABLES
from pytest_gauge._internal.suite.response_format import JSON_OBJECT, JSON_SCHEMA
from pytest_gauge._internal.suite.rules import parse_rules
from pytest_gauge._internal.suite.tasks import Task
from pytest_gauge.testing import FaultPlan, LoopbackServer, completion, scheduled_fault
from tests.e2e.test_gateway import run_closing

KEY = "sk-test-key"
MODEL = "claude-judge"
TASK = Task(
    task_id="t1",
    category="constraint",
    task_prompt="Say hi.",
    success_criteria=parse_rules([{"type": "contains_all", "phrases": ["hi"]}], field="success_criteria"),
    hard_constraints=(),
)


def gateway(
    tmp_path: Path,
    server: LoopbackServer,
    prices: PriceTable | None = None,
    base: str | None = None,
    **settings: Any,
) -> Gateway:
    """A gateway on the loopback server (as tests/e2e/test_gateway.py's, with settings to override)."""
    run = tmp_path / "run"
    shared = GatewayShared(
        GatewaySettings(
            run_id="run1",
            cache_mode=settings.pop("cache_mode", "off"),
            replay=False,
            max_retries=settings.pop("max_retries", 3),
            timeout=5.0,
            retry_after_cap=5.0,
            model_variables=MODEL_VARIABLES,
            backoff_base=settings.pop("backoff_base", 0.01),  # as make_gateway's: 10 ms, not the run's 0.25 s
            **settings,
        ),
        GatewayResources(
            ledger=Ledger(run, "main"),
            slots=ConcurrencySlots(run / "slots", 4),
            rate=RateLimiter(SharedState(run / "rate.json"), None, None),
            budget=Budget(SharedState(run / "budget.json"), None, None, None),
            prices=prices or PriceTable({}),
            cache=Store(tmp_path / "cache"),
        ),
    )
    client = ModelClient(base or server.base_url, KEY)
    return Gateway(suite="s", client_factory=lambda: client, backend_id=server.base_url, shared=shared)


def judge_body() -> dict[str, Any]:
    side = Transcript(
        "t1", "x", 0, [Turn("user", "Say hi."), Turn("assistant", "hi")], "hi", None, "user_done"
    )
    messages = build_judge_messages(TASK, side, side, Redactor([]))
    return {"messages": messages, "max_tokens": 300, "temperature": 0.0, "response_format": JSON_SCHEMA}


def chat(gw: Gateway, body: dict[str, Any], role: str = "judge", seq: int = 1) -> Any:
    ctx = CallContext("s", "t1", "judgment/t1/0")
    return run_closing(gw, gw.chat(ctx, seq, role, MODEL, body, api="anthropic"))


def ledger(tmp_path: Path) -> list[Any]:
    return read_ledger_file(tmp_path / "run" / "ledger-main.jsonl")


def seed_for(plan: FaultPlan, schedule: list[str | None]) -> FaultPlan:
    """The plan with the first seed whose first requests get ``schedule``'s faults (a bounded search)."""
    for seed in range(1000):
        seeded = FaultPlan(**{**plan.to_dict(), "seed": seed})
        if [scheduled_fault(seeded, n) for n in range(1, len(schedule) + 1)] == schedule:
            return seeded
    raise AssertionError(f"no seed below 1000 gives {schedule}")


def test_judge_verdict_over_messages_after_429_and_529(tmp_path: Path) -> None:
    plan = seed_for(
        FaultPlan(rate_429=0.3, rate_529=0.3, retry_after="0", judge_prefers="A"), ["429", "529", None]
    )
    with LoopbackServer(faults=plan) as srv:
        result = chat(gateway(tmp_path, srv), judge_body())
        sent, headers = srv.bodies[-1], srv.headers_seen[-1]
    verdict = parse_verdict(result.content, result.finish_reason)
    assert verdict.error is None and verdict.choice == "A" and result.finish_reason == "stop"
    rows = ledger(tmp_path)
    assert [r.status for r in rows] == ["http_429", "http_529", "ok"]
    assert {r.api for r in rows} == {"anthropic"} and {r.role for r in rows} == {"judge"}
    assert srv.by_path == {"/v1/messages": 3}
    assert sent["tool_choice"] == {"type": "tool", "name": JSON_TOOL} and sent["max_tokens"] == 300
    assert "temperature" not in sent and "response_format" not in sent and sent["system"]
    assert headers["authorization"] == f"Bearer {KEY}" and "x-api-key" not in headers
    assert headers["anthropic-version"]


def test_a_messages_ledger_line_costs_the_hand_computation(tmp_path: Path) -> None:
    plan = FaultPlan(cached_tokens=6000, cache_write_tokens=3000, cache_write_1h_tokens=1000)
    answer = completion("hi there", usage={"prompt_tokens": 10000, "completion_tokens": 500})
    price = Price(input=3.0, output=15.0, cached_input=0.3, cache_write=3.75, cache_write_1h=6.0)
    with LoopbackServer(lambda body: answer, faults=plan) as srv:
        result = chat(
            gateway(tmp_path, srv, PriceTable({MODEL: price})),
            {"messages": [{"role": "user", "content": "hi"}]},
            role="agent",
        )
    (row,) = ledger(tmp_path)
    assert row.usage is not None
    u = row.usage
    assert (
        u.input_tokens,
        u.cached_input_tokens,
        u.cache_write_tokens,
        u.cache_write_1h_tokens,
        u.output_tokens,
    ) == (
        1000,
        6000,
        3000,
        1000,
        500,
    )
    hand = (1000 * 3.0 + 6000 * 0.3 + 2000 * 3.75 + 1000 * 6.0 + 500 * 15.0) / 1e6
    assert row.cost == pytest.approx(hand) and result.cost == pytest.approx(hand)
    assert u.raw is not None and u.raw["cache_creation_input_tokens"] == 3000
    assert srv.bodies[0]["max_tokens"] == 4096  # Messages requires it: the default when the body has none


def test_malformed_messages_are_retried_and_truncation_is_length(tmp_path: Path) -> None:
    plan = seed_for(FaultPlan(rate_malformed=0.5, malformed="content_empty"), ["malformed", None])
    with LoopbackServer(faults=plan) as srv:
        result = chat(
            gateway(tmp_path, srv), {"messages": [{"role": "user", "content": "hello world"}]}, "agent"
        )
    assert result.content == "ok: hello world"
    assert [r.status for r in ledger(tmp_path)] == ["bad_response", "ok"]
    with LoopbackServer(faults=FaultPlan(truncate=True)) as srv:
        cut = chat(
            gateway(tmp_path / "cut", srv),
            {"messages": [{"role": "user", "content": "hello world"}]},
            "agent",
        )
    assert (cut.content, cut.finish_reason) == ("ok: hel", "length")


def test_a_repeat_is_answered_from_the_cache(tmp_path: Path) -> None:
    body = {"messages": [{"role": "user", "content": "hello world"}], "max_tokens": 20}
    with LoopbackServer(faults=FaultPlan(expected_key=KEY)) as srv:
        gw = gateway(tmp_path, srv, cache_mode="on")
        first = chat(gw, body, "agent")
        again = chat(gw, body, "agent")
        assert srv.requests_total == 1
    assert first.content == again.content == "ok: hello world"
    rows = ledger(tmp_path)
    assert [r.cache_hit for r in rows] == [False, True] and {r.api for r in rows} == {"anthropic"}
    assert [r.usage for r in rows] == [first.usage, first.usage] and first.usage is not None


def test_the_key_as_x_api_key(tmp_path: Path) -> None:
    with LoopbackServer(faults=FaultPlan(expected_key=KEY)) as srv:
        result = chat(
            gateway(tmp_path, srv, anthropic_auth="x-api-key"),
            {"messages": [{"role": "user", "content": "hi"}]},
        )
        headers = srv.headers_seen
    assert result.content == "ok: hi"
    assert headers[0]["x-api-key"] == KEY and "authorization" not in headers[0]


def test_a_refused_verdict_tool_is_a_format_refusal_and_json_object_is_the_prompt_alone(
    tmp_path: Path,
) -> None:
    """The judge's fallback over Messages: a server refusing the forced tool (here: the loopback server
    refusing the json_schema format it stands for) is a format refusal, not retried; the next step,
    json_object, has no Messages form and is answered."""
    plan = FaultPlan(reject_response_formats=frozenset({"json_schema"}), judge_prefers="B")
    with LoopbackServer(faults=plan) as srv:
        gw = gateway(tmp_path, srv)
        ctx = CallContext("s", "t1", "judgment/t1/0")

        async def both() -> tuple[BaseException | None, Any]:
            try:
                await gw.chat(ctx, 1, "judge", MODEL, judge_body(), api="anthropic")
            except GatewayError as exc:
                error: BaseException | None = exc
            else:
                error = None
            body = {**judge_body(), "response_format": JSON_OBJECT}
            return error, await gw.chat(ctx, 2, "judge", MODEL, body, api="anthropic")

        refused, fallback = run_closing(gw, both())
        bodies = srv.bodies
    assert isinstance(refused, GatewayError) and rejects_format(refused) and refused.status == 400
    assert [r.status for r in ledger(tmp_path)] == ["http_400", "ok"]  # the refusal is not retried
    assert bodies[0]["tool_choice"]["name"] == JSON_TOOL and "tools" not in bodies[1]
    assert parse_verdict(fallback.content, fallback.finish_reason).choice == "B"


@pytest.mark.parametrize("root", [True, False], ids=["base-without-v1", "base-with-v1"])
def test_messages_go_where_the_anthropic_sdk_sends_them_from_the_same_base(
    tmp_path: Path, root: bool
) -> None:
    """Claude Code and the Anthropic SDK call ``{root}/v1/messages``; the plugin's ``api="anthropic"``
    calls the same path whether the configured base URL ends in ``/v1`` or not."""
    from tests.sdks import ANTHROPIC_INSTALL, require_sdk, sdk_http

    anthropic = require_sdk("anthropic", ANTHROPIC_INSTALL)
    with LoopbackServer() as srv:
        sdk = anthropic.Anthropic(api_key=KEY, base_url=srv.root_url, http_client=sdk_http(anthropic))
        sdk.messages.create(model=MODEL, max_tokens=16, messages=[{"role": "user", "content": "hi"}])
        sdk_paths = dict(srv.by_path)
        gw = gateway(tmp_path, srv, base=srv.root_url if root else srv.base_url)
        chat(gw, {"messages": [{"role": "user", "content": "hi"}]})
        paths = dict(srv.by_path)
    assert sdk_paths == {"/v1/messages": 1}
    assert paths == {"/v1/messages": 2}  # the plugin's call at the SDK's path, not {root}/messages
