"""The gateway's one path for an OpenAI Responses call (``Gateway.call(api="responses")``) against the
loopback server's ``/v1/responses``: retried on a 429 with its wait, the ledger's usage in the one
convention with cached and reasoning tokens, the format on the ledger line, a cut answer as ``length``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_gauge._internal.gateway.errors import GatewayError, rejects_format
from pytest_gauge._internal.gateway.gateway import CallContext
from pytest_gauge._internal.gateway.wire import wire_format
from pytest_gauge._internal.records import Transcript, Turn
from pytest_gauge._internal.records.prices import Price
from pytest_gauge._internal.run.judge import (
    JUDGE_SYSTEM_PROMPT,
    Redactor,
    build_judge_messages,
    parse_verdict,
)
from pytest_gauge._internal.suite.response_format import JSON_SCHEMA
from pytest_gauge._internal.suite.rules import parse_rules
from pytest_gauge._internal.suite.tasks import Task
from pytest_gauge.testing import FaultPlan, LoopbackServer, scheduled_fault

from .test_gateway import ledger, make_gateway, run_closing

R = wire_format("responses")
CHAT_BODY: dict[str, Any] = {
    "model": "m",
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hello there, gateway"},
    ],
    "max_tokens": 64,
}


def first_429_then_ok() -> FaultPlan:
    """A seeded plan whose first request draws a 429 and whose second draws nothing."""
    for seed in range(200):
        plan = FaultPlan(
            rate_429=0.5, retry_after=None, retry_after_ms=20, cached_tokens=3, reasoning_tokens=2, seed=seed
        )
        if scheduled_fault(plan, 1) == "429" and scheduled_fault(plan, 2) is None:
            return plan
    raise AssertionError("no seed below 200 gives 429 then ok")


def test_a_responses_call_is_retried_and_ledgered(tmp_path: Path) -> None:
    with LoopbackServer(faults=first_429_then_ok()) as srv:
        gw = make_gateway(tmp_path, srv, retries=2, prices={"m": Price(2.0, 8.0, cached_input=0.5)})
        reply = run_closing(
            gw,
            gw.call(
                CallContext("s", "t1", "transcript/t1/a/0"),
                1,
                "agent",
                "m",
                "responses",
                R.request_body(CHAT_BODY),
            ),
        )
        assert srv.by_path == {"/v1/responses": 2} and srv.statuses == [429, 200]
        sent = srv.bodies[-1]
    assert sent["instructions"] == "Be brief." and sent["store"] is False and "messages" not in sent
    assert reply.response["object"] == "response" and reply.response["status"] == "completed"
    assert reply.result.content == "ok: hello there, gateway" and reply.result.finish_reason == "stop"
    rows = ledger(tmp_path)
    assert [r.status for r in rows] == ["http_429", "ok"] and {r.api for r in rows} == {"responses"}
    usage = rows[-1].usage
    raw = reply.response["usage"]
    assert usage is not None and usage.raw == raw
    assert usage.cached_input_tokens == 3 and usage.input_tokens == raw["input_tokens"] - 3
    assert usage.output_tokens == raw["output_tokens"] and usage.reasoning_tokens == 2
    assert usage.cache_write_tokens == 0 and reply.result.usage == usage
    hand = (usage.input_tokens * 2.0 + 3 * 0.5 + usage.output_tokens * 8.0) / 1e6
    assert rows[-1].cost == pytest.approx(hand) and rows[0].cost in (None, 0)


def test_a_cut_responses_answer_is_length(tmp_path: Path) -> None:
    with LoopbackServer(faults=FaultPlan(truncate=True)) as srv:
        gw = make_gateway(tmp_path, srv)
        reply = run_closing(
            gw,
            gw.call(
                CallContext("s", "t1", "transcript/t1/a/0"),
                1,
                "agent",
                "m",
                "responses",
                R.request_body(CHAT_BODY),
            ),
        )
    assert reply.response["status"] == "incomplete" and reply.result.finish_reason == "length"
    assert reply.result.content == "ok: hello there, gateway"[: len("ok: hello there, gateway") // 2]


def judge_body() -> dict[str, Any]:
    side = Transcript(
        "t1", "x", 0, [Turn("user", "Say hi."), Turn("assistant", "hi")], "hi", None, "user_done"
    )
    task = Task(
        task_id="t1",
        category="constraint",
        task_prompt="Say hi.",
        success_criteria=parse_rules([{"type": "contains_all", "phrases": ["hi"]}], field="success_criteria"),
        hard_constraints=(),
    )
    messages = build_judge_messages(task, side, side, Redactor([]))
    return {"messages": messages, "max_tokens": 300, "temperature": 0.0, "response_format": JSON_SCHEMA}


def judge(gw: Any) -> Any:
    return run_closing(
        gw, gw.chat(CallContext("s", "t1", "judgment/t1/0"), 1, "judge", "m", judge_body(), api="responses")
    )


def test_a_judge_verdict_over_responses_and_its_format_refusal(tmp_path: Path) -> None:
    with LoopbackServer(faults=FaultPlan(judge_prefers="B")) as srv:
        result = judge(make_gateway(tmp_path, srv))
        sent = srv.bodies[-1]
    verdict = parse_verdict(result.content, result.finish_reason)
    assert verdict.error is None and verdict.choice == "B"
    assert sent["text"]["format"]["type"] == "json_schema" and "response_format" not in sent
    assert sent["instructions"] == JUDGE_SYSTEM_PROMPT
    refusing = FaultPlan(reject_response_formats=frozenset({"json_schema"}))
    with LoopbackServer(faults=refusing) as srv, pytest.raises(GatewayError) as exc:
        judge(make_gateway(tmp_path / "refused", srv))
    assert rejects_format(exc.value)  # the judge's chain falls back to json_object, then to plain text
