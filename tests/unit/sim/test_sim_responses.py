"""The simulator over OpenAI's Responses API (``POST /v1/responses``), driven through the official
``openai`` SDK's ``client.responses.create`` (and ``stream=True``) on the simulator's mock transport.

Known truth: the same simulated world answers the same conversation identically over Chat Completions
(the simulator's reference format), so every Responses answer is compared with the chat answer to the
equivalent chat body, and whole dialogues (tool loops included) with the chat dialogue's transcript."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
from openai.types.responses import Response

from pytest_gauge._internal.gateway.wire import wire_format
from pytest_gauge._internal.gateway.wire.sse import parse_events
from pytest_gauge._internal.records import Transcript
from pytest_gauge._internal.run.dialogue import ChatResult, run_dialogue
from pytest_gauge._internal.sim import SimBackend
from pytest_gauge._internal.suite.tasks import Task

from .test_sim import AGENTS, CLARIFY, TEXT, TOOLS, FakeTools, agent_body, client_for, config, run, world
from .test_sim import caller as chat_caller

R = wire_format("responses")


async def ask(client: openai.AsyncOpenAI, chat_body: dict[str, Any], stream: bool = False) -> dict[str, Any]:
    """One Responses call for a chat body, read back as a chat completion: the whole response, or the
    response the stream's final event carries."""
    body = R.request_body(chat_body)
    if stream:
        events = [e async for e in await client.responses.create(**body, stream=True)]
        final = events[-1]
        assert final.type in ("response.completed", "response.incomplete")
        assert [e.sequence_number for e in events] == list(range(len(events)))
        return R.completion(final.response.model_dump())
    raw = await client.responses.with_raw_response.create(**body)
    typed = raw.parse()
    assert isinstance(typed, Response) and typed.object == "response"
    return R.completion(R.parse_response(raw.content))


def responses_caller(client: openai.AsyncOpenAI, stream: bool = False) -> Any:
    """The dialogue's model caller, speaking Responses to the simulator."""

    async def call(
        role: str,
        model: str,
        messages: list[dict[str, Any]],
        *,
        temperature: float,
        max_tokens: int,
        **kw: Any,
    ) -> ChatResult:
        body = {"model": model, "messages": messages, "temperature": temperature, "max_tokens": max_tokens}
        body.update({k: v for k, v in kw.items() if v is not None})
        out = await ask(client, body, stream)
        choice = out["choices"][0]
        return ChatResult(
            choice["message"]["content"] or "",
            tuple(choice["message"].get("tool_calls") or ()),
            choice["finish_reason"],
        )

    return call


def chat_answer(chat_body: dict[str, Any]) -> dict[str, Any]:
    status, payload = SimBackend(world()).respond(chat_body)
    assert status == 200
    return payload


def turns(tr: Transcript) -> list[tuple[str, str, list[tuple[str, str]]]]:
    return [(t.role, t.content, [(c.name, c.raw_arguments) for c in t.tool_calls]) for t in tr.turns]


@pytest.mark.parametrize("stream", [False, True])
def test_text_answer_is_the_chat_answer(stream: bool) -> None:
    body = agent_body(TEXT.task_prompt, model="m-perfect", seed=3)
    got = run(lambda: ask(client_for(world()), body, stream))
    want = chat_answer(body)
    assert got["choices"][0]["message"]["content"] == want["choices"][0]["message"]["content"]
    assert got["choices"][0]["finish_reason"] == "stop"
    assert got["usage"]["prompt_tokens"] == want["usage"]["prompt_tokens"]
    assert got["usage"]["completion_tokens"] == want["usage"]["completion_tokens"]


@pytest.mark.parametrize("stream", [False, True])
def test_function_call_items_carry_the_chat_tool_call(stream: bool) -> None:
    body = agent_body(TOOLS.task_prompt, model="m-perfect", tools=FakeTools.SCHEMAS)
    got = run(lambda: ask(client_for(world()), body, stream))["choices"][0]
    want = chat_answer(body)["choices"][0]
    assert got["finish_reason"] == "tool_calls" and got["message"]["content"] is None
    assert got["message"]["tool_calls"] == want["message"]["tool_calls"]
    assert json.loads(got["message"]["tool_calls"][0]["function"]["arguments"]) == {"order_id": "123"}


def test_sdk_objects_over_the_wire() -> None:
    async def go() -> tuple[Response, list[Any]]:
        c = client_for(world())
        body = R.request_body(agent_body(TOOLS.task_prompt, model="m-perfect", tools=FakeTools.SCHEMAS))
        whole = await c.responses.create(**body)
        events = [e async for e in await c.responses.create(**body, stream=True)]
        return whole, events

    whole, events = run(go)
    (item,) = whole.output
    assert item.type == "function_call" and item.name == "lookup" and item.call_id == "call_0"
    assert whole.status == "completed" and whole.usage is not None and whole.usage.input_tokens > 0
    assert [e.type for e in events][:3] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
    ]
    assert events[-1].type == "response.completed" and events[-1].response == whole


@pytest.mark.parametrize("task", [TEXT, CLARIFY, TOOLS], ids=lambda t: t.task_id)
def test_a_dialogue_over_responses_is_the_chat_dialogue(task: Task) -> None:
    name = AGENTS["m-perfect"][0]

    async def go(caller: Any) -> Transcript:
        tools = FakeTools() if task.tools else None
        return await run_dialogue(task, 0, config(name, "m-perfect", 2), caller, tools)

    chat = run(lambda: go(chat_caller(client_for(world()))))
    plain = run(lambda: go(responses_caller(client_for(world()))))
    streamed = run(lambda: go(responses_caller(client_for(world()), stream=True)))
    assert turns(plain) == turns(chat) == turns(streamed)
    if task is TOOLS:
        assert [c.name for c in plain.tool_calls()] == ["lookup", "refund"]


def test_a_cut_answer_is_incomplete_at_max_output_tokens() -> None:
    async def go() -> tuple[Response, list[Any]]:
        c = client_for(world())
        whole = await c.responses.create(model="m-perfect", input=TEXT.task_prompt, max_output_tokens=4)
        events = [
            e
            async for e in await c.responses.create(
                model="m-perfect", input=TEXT.task_prompt, max_output_tokens=4, stream=True
            )
        ]
        return whole, events

    whole, events = run(go)
    assert whole.status == "incomplete" and whole.incomplete_details is not None
    assert whole.incomplete_details.reason == "max_output_tokens"
    assert whole.usage is not None and whole.usage.output_tokens == 4
    assert events[-1].type == "response.incomplete" and events[-1].response.output_text == whole.output_text
    assert R.completion(whole.model_dump())["choices"][0]["finish_reason"] == "length"


def test_the_seed_travels_in_metadata() -> None:
    backend = SimBackend(world())
    answers = set()
    for seed in (1, 2, 3, 4):
        body = agent_body(TEXT.task_prompt, model="m-mid", seed=seed)
        status, payload = backend.handle("POST", "/v1/responses", json.dumps(R.request_body(body)).encode())
        assert status == 200
        text = R.completion(payload)["choices"][0]["message"]["content"]
        assert text == backend.respond(body)[1]["choices"][0]["message"]["content"]
        answers.add(text)
    assert len(answers) > 1


def test_serve_streams_events_and_answers_the_same_bytes() -> None:
    backend = SimBackend(world())
    raw = json.dumps(R.request_body(agent_body(TEXT.task_prompt, model="m-perfect"))).encode()
    status, kind, body = backend.serve("POST", "/v1/responses", raw)
    assert (status, kind) == (200, "application/json")
    assert backend.serve("POST", "/v1/responses", raw) == (status, kind, body)
    streamed = json.dumps({**json.loads(raw), "stream": True}).encode()
    status, kind, sse = backend.serve("POST", "/v1/responses", streamed)
    assert (status, kind) == (200, "text/event-stream") and b"data: [DONE]" not in sse
    assert R.from_stream(parse_events(sse)) == json.loads(body)


@pytest.mark.parametrize(
    ("body", "error", "says"),
    [
        ({"model": "no-such-model", "input": "hi"}, openai.NotFoundError, "does not exist"),
        (
            {"model": "m-perfect", "input": "hi", "previous_response_id": "resp_1"},
            openai.BadRequestError,
            "keeps none",
        ),
        (
            {"model": "m-perfect", "input": [{"type": "item_reference", "id": "x"}]},
            openai.BadRequestError,
            "item_reference",
        ),
    ],
)
def test_errors_are_the_sdks_typed_errors(body: dict[str, Any], error: type[Exception], says: str) -> None:
    with pytest.raises(error) as exc:
        run(lambda: client_for(world()).responses.create(**body))
    assert says in str(exc.value)
