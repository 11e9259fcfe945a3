"""OpenAI Responses, both directions (gateway/wire/responses.py): every mapping of a chat body to a
Responses request and back, the checks of a response, its chat-completion view and usage, and the
server side's response objects and stream events, validated against the ``openai`` SDK's own types."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from pytest_gauge._internal.gateway.errors import names_format
from pytest_gauge._internal.gateway.response import BadResponse
from pytest_gauge._internal.gateway.wire import format_for_path, wire_format
from pytest_gauge._internal.gateway.wire.sse import encode_events, parse_events

R = wire_format("responses")
EVENT: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)

LOOKUP: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "lookup",
        "description": "Find an order.",
        "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}},
    },
}
SCHEMA: dict[str, Any] = {
    "name": "verdict",
    "schema": {"type": "object", "properties": {"w": {"type": "string"}}},
    "strict": True,
}
CALL: dict[str, Any] = {
    "id": "call_7",
    "type": "function",
    "function": {"name": "lookup", "arguments": '{"order_id": "1"}'},
}


def chat_body(**extra: Any) -> dict[str, Any]:
    """A chat body with every message kind: system, user, an assistant tool call, its result, a reply."""
    body: dict[str, Any] = {
        "model": "gpt-x",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Where is order 1?"},
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "call_7", "content": '{"status": "shipped"}'},
            {"role": "assistant", "content": "It shipped."},
            {"role": "user", "content": "Thanks."},
        ],
        "tools": [LOOKUP],
        "tool_choice": "auto",
        "max_tokens": 300,
        "temperature": 0.2,
        "top_p": 0.9,
        "seed": 4,
    }
    body.update(extra)
    return body


def completion(
    content: str | None, calls: list[dict[str, Any]] | None = None, finish: str = "stop"
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": "chatcmpl-abc123",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "gpt-x",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": 120,
            "completion_tokens": 40,
            "total_tokens": 160,
            "prompt_tokens_details": {"cached_tokens": 100},
            "completion_tokens_details": {"reasoning_tokens": 30},
        },
    }


def dumped(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload).encode()


# -- client side: the request --------------------------------------------------------------------


def test_request_body_maps_every_chat_field() -> None:
    body = R.request_body(
        chat_body(response_format={"type": "json_schema", "json_schema": SCHEMA}, stream=True)
    )
    assert body["instructions"] == "Be brief."
    assert body["input"] == [
        {"type": "message", "role": "user", "content": "Where is order 1?"},
        {"type": "function_call", "call_id": "call_7", "name": "lookup", "arguments": '{"order_id": "1"}'},
        {"type": "function_call_output", "call_id": "call_7", "output": '{"status": "shipped"}'},
        {"type": "message", "role": "assistant", "content": "It shipped."},
        {"type": "message", "role": "user", "content": "Thanks."},
    ]
    fn = LOOKUP["function"]
    assert body["tools"] == [
        {
            "type": "function",
            "name": "lookup",
            "description": fn["description"],
            "parameters": fn["parameters"],
            "strict": False,
        }
    ]
    assert body["tool_choice"] == "auto"
    assert body["max_output_tokens"] == 300 and "max_tokens" not in body
    assert body["text"] == {"format": {"type": "json_schema", **SCHEMA}}
    assert (body["temperature"], body["top_p"]) == (0.2, 0.9)
    assert body["metadata"] == {"seed": "4"} and "seed" not in body
    assert body["store"] is False and "stream" not in body and "messages" not in body


def test_request_body_forced_tool_json_object_reasoning_and_later_system_message() -> None:
    body = R.request_body(
        {
            "model": "m",
            "messages": [{"role": "user", "content": "hi"}, {"role": "system", "content": "late"}],
            "tools": [{**LOOKUP, "function": {**LOOKUP["function"], "strict": True}}],
            "tool_choice": {"type": "function", "function": {"name": "lookup"}},
            "response_format": {"type": "json_object"},
            "reasoning_effort": "low",
            "max_completion_tokens": 9,
        }
    )
    assert "instructions" not in body
    assert body["input"][1] == {"type": "message", "role": "system", "content": "late"}
    assert body["tools"][0]["strict"] is True
    assert body["tool_choice"] == {"type": "function", "name": "lookup"}
    assert body["text"] == {"format": {"type": "json_object"}}
    assert body["reasoning"] == {"effort": "low"} and body["max_output_tokens"] == 9
    assert "metadata" not in body


def test_multipart_content_becomes_input_parts() -> None:
    content = [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": "data:x", "detail": "low"}},
    ]
    (item,) = R.request_body({"model": "m", "messages": [{"role": "user", "content": content}]})["input"]
    assert item["content"] == [
        {"type": "input_text", "text": "look"},
        {"type": "input_image", "image_url": "data:x", "detail": "low"},
    ]
    assert R.chat_request({"model": "m", "input": [item]})["messages"][0]["content"] == content


def test_chat_request_inverts_request_body() -> None:
    for extra in (
        {},
        {"response_format": {"type": "json_schema", "json_schema": SCHEMA}},
        {"tool_choice": "required"},
    ):
        body = chat_body(**extra)
        assert R.chat_request(R.request_body(body)) == body


def test_chat_request_reads_plain_input_and_loose_items() -> None:
    assert R.chat_request({"model": "m", "input": "hello", "instructions": "sys"})["messages"] == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "hello"},
    ]
    chat = R.chat_request(
        {
            "model": "m",
            "input": [
                {
                    "role": "user",
                    "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}],
                },
                {"type": "reasoning", "id": "rs_1", "summary": []},
                {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
                {"type": "function_call", "call_id": "c2", "name": "g", "arguments": "{}"},
                {
                    "type": "function_call_output",
                    "call_id": "c1",
                    "output": [{"type": "input_text", "text": "ok"}],
                },
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "done"}],
                },
            ],
            "tools": [
                {"type": "web_search"},
                {"type": "function", "name": "f", "parameters": {"type": "object"}, "strict": False},
            ],
            "text": {"format": {"type": "text"}},
            "metadata": {"seed": "not-a-number"},
        }
    )
    assert chat["messages"][0] == {"role": "user", "content": "ab"}
    assert [c["id"] for c in chat["messages"][1]["tool_calls"]] == ["c1", "c2"]
    assert chat["messages"][1]["content"] is None
    assert chat["messages"][2] == {"role": "tool", "tool_call_id": "c1", "content": "ok"}
    assert chat["messages"][3] == {"role": "assistant", "content": "done"}
    assert chat["tools"] == [
        {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    ]
    assert "response_format" not in chat and "seed" not in chat


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"model": "m", "input": "hi", "previous_response_id": "resp_1"}, "keeps none"),
        ({"model": "m", "input": [{"type": "item_reference", "id": "msg_1"}]}, "item_reference"),
        ({"model": "m"}, "'input' is required"),
        ({"model": "m", "input": 3}, "a string or an array"),
        ({"model": "m", "input": ["x"]}, "'input[0]' is not an object"),
        ({"model": "m", "input": [{"type": "computer_call_output"}]}, "'computer_call_output'"),
        ({"model": "m", "input": [{"role": "tool", "content": "x"}]}, "must be user, assistant"),
    ],
)
def test_chat_request_refuses_what_it_cannot_answer(body: dict[str, Any], says: str) -> None:
    with pytest.raises(ValueError, match=re.escape(says)):
        R.chat_request(body)


def test_cache_material_keeps_the_answer_deciding_fields_only() -> None:
    body = R.request_body(chat_body())
    material = R.cache_material({**body, "stream": True, "prompt_cache_key": "session-9", "user": "u"})
    assert material["seed"] == "4" and material["input"] == body["input"]
    assert not {"stream", "store", "prompt_cache_key", "user", "metadata"} & set(material)
    other = R.cache_material(R.request_body(chat_body(seed=5)))
    assert other != material and R.cache_material(body) == material


def test_format_is_routed_by_path() -> None:
    assert format_for_path("/v1/responses") is R and R.path == "/responses" and R.api == "responses"


# -- client side: the response ---------------------------------------------------------------------


def response(**extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": "resp_1",
        "object": "response",
        "created_at": 5,
        "status": "completed",
        "model": "gpt-x",
        "output": [
            {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "thinking"}]},
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [
                    {"type": "output_text", "text": "Hello ", "annotations": []},
                    {"type": "output_text", "text": "there."},
                ],
            },
        ],
        "usage": {
            "input_tokens": 50,
            "input_tokens_details": {"cached_tokens": 20},
            "output_tokens": 12,
            "output_tokens_details": {"reasoning_tokens": 7},
            "total_tokens": 62,
        },
    }
    out.update(extra)
    return out


def test_completion_joins_text_and_ignores_reasoning() -> None:
    view = R.completion(R.parse_response(dumped(response())))
    choice = view["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": "Hello there."}
    assert choice["finish_reason"] == "stop" and view["model"] == "gpt-x" and view["id"] == "resp_1"


def test_function_calls_become_tool_calls_with_the_call_id() -> None:
    calls = [
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_a",
            "name": "lookup",
            "arguments": '{"x": 1}',
        },
        {"type": "function_call", "id": "fc_2", "call_id": "call_b", "name": "refund", "arguments": "{}"},
    ]
    choice = R.completion(R.parse_response(dumped(response(output=calls))))["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
    assert choice["message"]["tool_calls"] == [
        {"id": "call_a", "type": "function", "function": {"name": "lookup", "arguments": '{"x": 1}'}},
        {"id": "call_b", "type": "function", "function": {"name": "refund", "arguments": "{}"}},
    ]


@pytest.mark.parametrize(
    ("details", "finish"),
    [
        ({"reason": "max_output_tokens"}, "length"),
        ({"reason": "content_filter"}, "content_filter"),
        (None, "length"),
    ],
)
def test_incomplete_is_a_truncation(details: dict[str, Any] | None, finish: str) -> None:
    got = R.completion(response(status="incomplete", incomplete_details=details))
    assert got["choices"][0]["finish_reason"] == finish


def test_incomplete_with_only_reasoning_is_an_empty_truncated_answer() -> None:
    only = response(
        status="incomplete",
        incomplete_details={"reason": "max_output_tokens"},
        output=[{"type": "reasoning", "id": "r", "summary": []}],
    )
    choice = R.completion(R.parse_response(dumped(only)))["choices"][0]
    assert choice["message"]["content"] == "" and choice["finish_reason"] == "length"


def test_usage_is_the_ledger_convention_with_the_raw_object() -> None:
    raw = response()["usage"]
    usage = R.usage(response())
    assert usage is not None and usage.raw == raw
    assert (usage.input_tokens, usage.cached_input_tokens, usage.cache_write_tokens) == (30, 20, None)
    assert (usage.output_tokens, usage.reasoning_tokens, usage.cache_write_1h_tokens) == (12, 7, None)
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (50, 12, 62)
    assert R.usage(response(usage=None)) is None
    assert R.usage(response(usage={"input_tokens": 0, "output_tokens": 0, "total_tokens": 0})) is None


def test_usage_cache_writes_are_part_of_the_input() -> None:
    details = {"cached_tokens": 100, "cache_write_tokens": 300}
    usage = R.usage(
        response(usage={"input_tokens": 1000, "input_tokens_details": details, "output_tokens": 5})
    )
    assert usage is not None
    assert (usage.input_tokens, usage.cached_input_tokens, usage.cache_write_tokens) == (600, 100, 300)
    assert usage.prompt_tokens == 1000 and usage.reasoning_tokens is None
    bare = R.usage(response(usage={"input_tokens": 9, "output_tokens": 2}))
    assert bare is not None and (bare.input_tokens, bare.cached_input_tokens, bare.output_tokens) == (
        9,
        None,
        2,
    )
    odd = R.usage(
        response(usage={"input_tokens": 5, "input_tokens_details": {"cached_tokens": 50}, "output_tokens": 1})
    )
    assert odd is not None and (odd.input_tokens, odd.cached_input_tokens) == (0, 5)  # never negative


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b"", "the body is empty"),
        (b"<html>login</html>", "the body is not JSON"),
        (b"[1]", "a JSON list, not an object"),
        (dumped({"id": "x", "object": "response"}), "no 'output'"),
        (dumped(response(output={"a": 1})), "'output' is dict, not a list"),
        (dumped(response(output=["x"])), "'output[0]' is not an object"),
        (
            dumped(response(output=[{"type": "message", "content": "hi"}])),
            "'output[0].content' is not a list",
        ),
        (
            dumped(response(output=[{"type": "message", "content": [{"type": "output_text", "text": 3}]}])),
            "content[0].text",
        ),
        (
            dumped(
                response(output=[{"type": "function_call", "call_id": "c", "name": "f", "arguments": {}}])
            ),
            "'output[0].arguments'",
        ),
        (dumped(response(output=[])), "no message and no function call"),
        (dumped(response(status="failed", error={"message": "server melted"})), "failed (server melted)"),
        (dumped(response(status="queued")), "still queued"),
        (dumped(response(usage="lots")), "'usage' is str"),
        (dumped(response(usage={"input_tokens": "many"})), "'usage.input_tokens' is str"),
        (
            dumped(response(usage={"input_tokens": 1, "input_tokens_details": 5})),
            "'usage.input_tokens_details'",
        ),
    ],
)
def test_parse_response_names_the_problem(body: bytes, problem: str) -> None:
    with pytest.raises(BadResponse) as err:
        R.parse_response(body)
    assert problem in err.value.problem


def test_parse_response_removes_known_secrets() -> None:
    key = "sk-resp27-secret-0123456789abcdef"
    said = response(
        output=[{"type": "message", "content": [{"type": "output_text", "text": f"your key {key}"}]}]
    )
    got = R.parse_response(dumped(said), (key,))
    assert key not in json.dumps(got)
    with pytest.raises(BadResponse) as err:
        R.parse_response(dumped({"object": "response", "note": key}), (key,))
    assert key not in err.value.snippet


# -- server side -------------------------------------------------------------------------------------


def request(**extra: Any) -> dict[str, Any]:
    return R.request_body(chat_body(**extra))


def test_from_completion_is_an_sdk_response() -> None:
    out = R.from_completion(completion("It shipped."), request())
    typed = Response.model_validate(out)
    assert typed.id == "resp_abc123" and typed.status == "completed" and typed.output_text == "It shipped."
    assert typed.incomplete_details is None and typed.instructions == "Be brief." and typed.model == "gpt-x"
    assert typed.usage is not None and typed.usage.input_tokens == 120 and typed.usage.output_tokens == 40
    assert typed.usage.input_tokens_details.cached_tokens == 100
    assert typed.usage.output_tokens_details.reasoning_tokens == 30
    assert out["output"][0]["id"] == "msg_abc123" and out["store"] is False


def test_from_completion_function_calls_and_truncation() -> None:
    out = R.from_completion(completion(None, [CALL], "tool_calls"), request())
    (item,) = Response.model_validate(out).output
    assert item.type == "function_call" and item.call_id == "call_7" and item.name == "lookup"
    assert item.arguments == '{"order_id": "1"}' and item.id == "fc_abc123_0"
    cut = Response.model_validate(R.from_completion(completion("Half an ans", finish="length"), request()))
    assert cut.status == "incomplete" and cut.incomplete_details is not None
    assert cut.incomplete_details.reason == "max_output_tokens" and cut.output_text == "Half an ans"
    assert R.completion(cut.model_dump())["choices"][0]["finish_reason"] == "length"


def test_from_completion_without_usage_has_none() -> None:
    bare = completion("hi")
    del bare["usage"]
    out = R.from_completion(bare, request())
    assert "usage" not in out and R.usage(out) is None


@pytest.mark.parametrize(
    "chat",
    [
        completion("It shipped, and " * 20),
        completion(None, [CALL, {**CALL, "id": "call_8"}], "tool_calls"),
        completion("Let me check.", [CALL], "tool_calls"),
        completion("Cut he", finish="length"),
    ],
)
def test_completion_round_trips_through_a_response(chat: dict[str, Any]) -> None:
    out = R.completion(R.parse_response(dumped(R.from_completion(chat, request()))))
    assert out["choices"][0]["message"] == chat["choices"][0]["message"]
    assert out["choices"][0]["finish_reason"] == chat["choices"][0]["finish_reason"]
    assert out["usage"] == chat["usage"]


def test_stream_events_are_the_sdk_events_in_order() -> None:
    resp = R.from_completion(
        completion("Let me look that order up for you now please.", [CALL], "tool_calls"), request()
    )
    events = R.stream_events(resp)
    names = [name for name, _ in events]
    assert names == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    typed = [EVENT.validate_python(data) for _, data in events]
    assert [e.type for e in typed] == names
    assert [e.sequence_number for e in typed] == list(range(len(events)))
    assert events[0][1]["response"]["status"] == "in_progress" and events[0][1]["response"]["output"] == []
    deltas = "".join(d["delta"] for n, d in events if n == "response.output_text.delta")
    assert deltas == "Let me look that order up for you now please."
    assert events[-1][1]["response"] == resp


def test_a_truncated_stream_ends_incomplete() -> None:
    resp = R.from_completion(completion("Cut he", finish="length"), request())
    last = R.stream_events(resp)[-1]
    assert last[0] == "response.incomplete" and EVENT.validate_python(last[1]).type == "response.incomplete"


def test_from_stream_inverts_stream_events_through_sse() -> None:
    for chat in (
        completion("word " * 30),
        completion(None, [CALL], "tool_calls"),
        completion("Cut", finish="length"),
    ):
        resp = R.from_completion(chat, request())
        assert R.from_stream(parse_events(encode_events(R.stream_events(resp)))) == resp


def test_from_stream_rebuilds_a_cut_stream_from_its_deltas() -> None:
    resp = R.from_completion(completion("Some long answer " * 5, [CALL], "tool_calls"), request())
    events = [
        e for e in R.stream_events(resp) if e[0] not in ("response.output_item.done", "response.completed")
    ]
    rebuilt = R.from_stream(events)
    view = R.completion(rebuilt)["choices"][0]["message"]
    assert view["content"] == "Some long answer " * 5 and view["tool_calls"] == [CALL]


@pytest.mark.parametrize(
    ("status", "kind", "type_"),
    [
        (429, "rate_limit", "rate_limit_exceeded"),
        (401, "authentication", "authentication_error"),
        (500, "server", "server_error"),
    ],
)
def test_error_body_is_openais_shape(status: int, kind: str, type_: str) -> None:
    body = R.error_body(status, "nope", kind)
    assert body["error"]["message"] == "nope" and body["error"]["type"] == type_
    assert set(body["error"]) == {"message", "type", "param", "code"}


def test_a_refused_text_format_reads_as_a_format_refusal() -> None:
    assert names_format("Unsupported parameter: 'text.format' is not supported with this model.")
