"""The simulator over Anthropic's Messages API, driven through the official ``anthropic`` SDK on the
simulator's mock transport: plain and streamed answers, tool use, a whole dialogue, the judge's verdict
as the forced tool call, and errors in Messages' shapes as the SDK's typed errors."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx2

from pytest_gauge._internal.gateway.wire.anthropic import JSON_TOOL, MESSAGES
from pytest_gauge._internal.records import Transcript
from pytest_gauge._internal.run.dialogue import ChatResult, run_dialogue
from pytest_gauge._internal.run.judge import Redactor, build_judge_messages, parse_verdict
from pytest_gauge._internal.sim import SimBackend, SimJudge
from pytest_gauge._internal.suite.response_format import JSON_SCHEMA
from tests.sdks import ANTHROPIC_INSTALL, LazySDK
from tests.unit.sim.test_sim import (
    AGENTS,
    GRID,
    TOOLS,
    FakeTools,
    agent_body,
    caller,
    client_for,
    config,
    side,
    world,
)

anthropic = LazySDK("anthropic", ANTHROPIC_INSTALL)  # imported by the first test that uses it


def sdk(backend: SimBackend) -> Any:
    """The official async client on the simulator (base URL without /v1: the SDK adds /v1/messages)."""
    transport = backend.transport()
    return anthropic.AsyncAnthropic(
        api_key="sim",
        base_url="http://gauge-sim.invalid",
        http_client=httpx2.AsyncClient(transport=transport),
        max_retries=0,
    )


def tool_body() -> dict[str, Any]:
    return MESSAGES.request_body(agent_body(TOOLS.task_prompt, model="m-perfect", tools=FakeTools.SCHEMAS))


def test_tool_use_plain_and_streamed_are_one_message() -> None:
    async def go() -> tuple[Any, Any, list[str]]:
        c = sdk(SimBackend(world()))
        plain = await c.messages.create(**tool_body())
        async with c.messages.stream(**tool_body()) as stream:
            kinds = [event.type async for event in stream]
            final = await stream.get_final_message()
        return plain, final, kinds

    plain, final, kinds = asyncio.run(go())
    assert plain.stop_reason == "tool_use" and plain.type == "message" and plain.id.startswith("msg_")
    (use,) = plain.content
    assert (use.type, use.name, use.input) == ("tool_use", "lookup", {"order_id": "123"})
    assert plain.usage.input_tokens > 0 and plain.usage.output_tokens > 0
    assert plain.usage.cache_read_input_tokens == 0
    assert final.model_dump() == plain.model_dump()
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop" and "input_json" in kinds


def test_text_answer_streams_its_text() -> None:
    body = MESSAGES.request_body(
        agent_body("Summarise our plans in under 80 words.", model="m-perfect", max_tokens=5)
    )

    async def go() -> tuple[Any, str]:
        c = sdk(SimBackend(world()))
        plain = await c.messages.create(**body)
        async with c.messages.stream(**body) as stream:
            text = "".join([t async for t in stream.text_stream])
        return plain, text

    plain, text = asyncio.run(go())
    assert plain.stop_reason == "max_tokens" and plain.usage.output_tokens <= 5
    assert text == plain.content[0].text != ""


def messages_caller(client: Any) -> Any:
    """The dialogue's model call over Messages: the chat body translated, the Message read back."""

    async def call(role: str, model: str, messages: list[dict[str, Any]], **kw: Any) -> ChatResult:
        chat = {"model": model, "messages": messages, **{k: v for k, v in kw.items() if v is not None}}
        resp = await client.messages.create(**MESSAGES.request_body(chat))
        choice = MESSAGES.completion(resp.model_dump())["choices"][0]
        calls = tuple(choice["message"].get("tool_calls") or ())
        return ChatResult(choice["message"]["content"] or "", calls, choice["finish_reason"])

    return call


def test_a_dialogue_over_messages_is_the_dialogue_over_chat() -> None:
    def dialogue(call: Any) -> Transcript:
        return asyncio.run(
            run_dialogue(TOOLS, 0, config(AGENTS["m-perfect"][0], "m-perfect"), call, FakeTools())
        )

    over_messages = dialogue(messages_caller(sdk(SimBackend(world()))))
    over_chat = dialogue(caller(client_for(world())))
    assert [(c.name, c.arguments) for c in over_messages.tool_calls()] == [
        ("lookup", {"order_id": "123"}),
        ("refund", {"order_id": "123"}),
    ]
    assert over_messages.final_reply == over_chat.final_reply
    assert [t.content for t in over_messages.turns] == [t.content for t in over_chat.turns]


def test_the_judge_verdict_is_the_forced_tool_call() -> None:
    messages = build_judge_messages(GRID, side(9), side(2), Redactor(["x"]))
    chat = {"model": "judge-m", "messages": messages, "max_tokens": 400, "response_format": JSON_SCHEMA}
    backend = SimBackend(world(judges={"judge-m": SimJudge()}, tasks=(GRID,)))

    async def go() -> Any:
        return await sdk(backend).messages.create(**MESSAGES.request_body(chat))

    resp = asyncio.run(go())
    assert resp.stop_reason == "tool_use"
    (use,) = resp.content
    assert use.name == JSON_TOOL and use.input["winner"] == "A"
    choice = MESSAGES.completion(resp.model_dump())["choices"][0]
    verdict = parse_verdict(choice["message"]["content"], choice["finish_reason"])
    assert verdict.error is None and verdict.choice == "A"
    status, payload = backend.respond(chat)  # the same verdict over chat
    assert status == 200 and json.loads(payload["choices"][0]["message"]["content"]) == use.input


def test_errors_are_the_sdks_typed_errors() -> None:
    async def go(body: dict[str, Any]) -> Any:
        try:
            await sdk(SimBackend(world())).messages.create(**body)
        except anthropic.APIStatusError as exc:
            return exc
        raise AssertionError("no error")

    unknown = asyncio.run(go(MESSAGES.request_body(agent_body("hi", model="nobody"))))
    assert isinstance(unknown, anthropic.NotFoundError)
    assert unknown.body["error"]["type"] == "not_found_error"
    status, kind, raw = SimBackend(world()).serve(
        "POST", "/v1/messages", b'{"model": "m-perfect", "messages": []}'
    )
    error = json.loads(raw)
    assert (status, kind, error["type"], error["error"]["type"]) == (
        400,
        "application/json",
        "error",
        "invalid_request_error",
    )
    assert "max_tokens" in error["error"]["message"]
