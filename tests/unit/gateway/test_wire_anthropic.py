"""Anthropic Messages both ways (gateway/wire/anthropic.py): every mapping of a chat body to a Messages
request and back, the response checks, the chat view of a Message, usage with the cache's reads and
writes, the server side's Message from a completion, its stream events and the errors."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_gauge._internal.gateway.response import BadResponse
from pytest_gauge._internal.gateway.wire import format_for_path, wire_format
from pytest_gauge._internal.gateway.wire.anthropic import (
    DEFAULT_MAX_TOKENS,
    JSON_TOOL,
    MESSAGES,
    usage_counts,
)
from pytest_gauge._internal.gateway.wire.sse import encode_events, parse_events
from pytest_gauge._internal.suite.response_format import JSON_OBJECT, JSON_SCHEMA, VERDICT_SCHEMA
from pytest_gauge.testing.faults import MALFORMED_BY_API

LOOKUP: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "lookup",
        "description": "Find an order.",
        "parameters": {
            "type": "object",
            "properties": {"order_id": {"type": "string"}},
            "required": ["order_id"],
        },
    },
}
CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "lookup", "arguments": json.dumps({"order_id": "123"})},
}
CHAT_BODY: dict[str, Any] = {
    "model": "claude-x",
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Refund order 123."},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"ok": true}'},
        {"role": "assistant", "content": "Done."},
        {"role": "user", "content": "Thanks."},
    ],
    "max_tokens": 300,
    "temperature": 0.0,
    "top_p": 0.9,
    "stop": ["END"],
    "tools": [LOOKUP],
    "tool_choice": "auto",
}


def message(content: list[dict[str, Any]], stop: str = "end_turn", **usage: Any) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5, **usage},
    }


def test_the_registry_names_it() -> None:
    assert wire_format("anthropic") is MESSAGES
    assert format_for_path("/api/v1/messages?beta=true") is MESSAGES


def test_request_body_maps_every_part() -> None:
    body = MESSAGES.request_body({**CHAT_BODY, "seed": 7, "stream": True})
    assert body == {
        "model": "claude-x",
        "max_tokens": 300,
        "system": "Be brief.",
        "messages": [
            {"role": "user", "content": "Refund order 123."},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "call_1", "name": "lookup", "input": {"order_id": "123"}}
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": '{"ok": true}'}],
            },
            {"role": "assistant", "content": "Done."},
            {"role": "user", "content": "Thanks."},
        ],
        "stop_sequences": ["END"],
        "tools": [
            {
                "name": "lookup",
                "description": "Find an order.",
                "input_schema": LOOKUP["function"]["parameters"],
            }
        ],
        "tool_choice": {"type": "auto"},
        "metadata": {"user_id": "gauge-seed-7"},
    }


def test_the_seed_travels_as_metadata_user_id() -> None:
    body = MESSAGES.request_body({**CHAT_BODY, "seed": 3})
    assert MESSAGES.chat_request(body)["seed"] == 3
    assert MESSAGES.cache_material(body) != MESSAGES.cache_material(
        MESSAGES.request_body({**CHAT_BODY, "seed": 4})
    )
    claude_code = {**body, "metadata": {"user_id": '{"device_id": "d1", "session_id": "s1"}'}}
    assert "seed" not in MESSAGES.chat_request(claude_code)
    other_session = {**body, "metadata": {"user_id": '{"device_id": "d2", "session_id": "s2"}'}}
    assert MESSAGES.cache_material(claude_code) == MESSAGES.cache_material(other_session)
    assert "metadata" not in MESSAGES.request_body(CHAT_BODY)


def test_cache_material_leaves_out_an_agent_programs_dates() -> None:
    def dated(day: str) -> dict[str, Any]:
        return {**MESSAGES.request_body(CHAT_BODY), "system": f"You are Claude Code. Today's date is {day}."}

    assert MESSAGES.cache_material(dated("2026-12-01")) == MESSAGES.cache_material(dated("2026-12-02"))
    assert MESSAGES.cache_material(dated("2026-12-01")) != MESSAGES.cache_material(
        MESSAGES.request_body(CHAT_BODY)
    )


def test_consecutive_roles_merge_and_systems_join() -> None:
    chat = {
        "model": "m",
        "messages": [
            {"role": "system", "content": "One."},
            {"role": "user", "content": "a"},
            {"role": "system", "content": [{"type": "text", "text": "Two."}]},
            {"role": "user", "content": [{"type": "text", "text": "b"}]},
            {"role": "assistant", "content": "x", "tool_calls": [CALL, {**CALL, "id": "call_2"}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "r1"},
            {"role": "tool", "tool_call_id": "call_2", "content": "r2"},
            {"role": "user", "content": "c"},
        ],
    }
    body = MESSAGES.request_body(chat)
    assert body["system"] == "One.\n\nTwo."
    assert body["max_tokens"] == DEFAULT_MAX_TOKENS
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][0]["content"] == [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    assert [b["type"] for b in body["messages"][1]["content"]] == ["text", "tool_use", "tool_use"]
    assert body["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "call_1", "content": "r1"},
        {"type": "tool_result", "tool_use_id": "call_2", "content": "r2"},
        {"type": "text", "text": "c"},
    ]
    assert "tools" not in body and "tool_choice" not in body


def test_empty_messages_are_left_out() -> None:
    chat = {
        "model": "m",
        "messages": [
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": ""},
            {"role": "user", "content": [{"type": "text", "text": ""}]},
            {"role": "user", "content": "b"},
        ],
    }
    assert MESSAGES.request_body(chat)["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
    ]


@pytest.mark.parametrize(
    ("choice", "parallel", "expected"),
    [
        ("auto", None, {"type": "auto"}),
        ("none", None, {"type": "none"}),
        ("required", None, {"type": "any"}),
        ({"type": "function", "function": {"name": "lookup"}}, None, {"type": "tool", "name": "lookup"}),
        (None, False, {"type": "auto", "disable_parallel_tool_use": True}),
        ("required", False, {"type": "any", "disable_parallel_tool_use": True}),
        (None, None, None),
    ],
)
def test_tool_choice_mapping_both_ways(choice: Any, parallel: Any, expected: Any) -> None:
    chat = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": [LOOKUP]}
    if choice is not None:
        chat["tool_choice"] = choice
    if parallel is not None:
        chat["parallel_tool_calls"] = parallel
    body = MESSAGES.request_body(chat)
    assert body.get("tool_choice") == expected
    back = MESSAGES.chat_request(body)
    assert back.get("tool_choice") == (choice if choice is not None or expected is None else "auto")
    assert back.get("parallel_tool_calls") == parallel


def test_max_tokens_stop_and_images() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    chat = {
        "model": "m",
        "max_completion_tokens": 77,
        "stop": "STOP",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "see"}, image]}],
    }
    body = MESSAGES.request_body(chat)
    assert body["max_tokens"] == 77 and body["stop_sequences"] == ["STOP"]
    assert body["messages"][0]["content"][1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"},
    }
    assert MESSAGES.chat_request(body)["messages"][0]["content"] == [{"type": "text", "text": "see"}, image]


def test_chat_request_inverts_request_body() -> None:
    """All but the sampling settings, which current Messages refuses (an old client's are read)."""
    back = MESSAGES.chat_request(MESSAGES.request_body(CHAT_BODY))
    assert back == {k: v for k, v in CHAT_BODY.items() if k not in ("temperature", "top_p")}
    old_client = MESSAGES.chat_request({**MESSAGES.request_body(CHAT_BODY), "temperature": 0.5, "top_p": 0.9})
    assert (old_client["temperature"], old_client["top_p"]) == (0.5, 0.9)


def test_chat_request_refuses_what_messages_refuses() -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        MESSAGES.chat_request({"model": "m", "messages": []})
    with pytest.raises(ValueError, match="messages"):
        MESSAGES.chat_request({"model": "m", "max_tokens": 5})
    # a system message inside messages is read (Claude Code 2.1 sends its MCP instructions so)
    with pytest.raises(ValueError, match="role 'tool'"):
        MESSAGES.chat_request({"model": "m", "max_tokens": 5, "messages": [{"role": "tool", "content": "x"}]})


def test_chat_request_reads_system_blocks_and_drops_thinking() -> None:
    body = {
        "model": "m",
        "max_tokens": 5,
        "system": [{"type": "text", "text": "Sys.", "cache_control": {"type": "ephemeral"}}],
        "metadata": {"user_id": "session-1"},
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "q", "cache_control": {"type": "ephemeral"}}],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "s"},
                    {"type": "text", "text": "a"},
                ],
            },
        ],
    }
    assert MESSAGES.chat_request(body)["messages"] == [
        {"role": "system", "content": "Sys."},
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a"},
    ]
    assert MESSAGES.cache_material(body) == MESSAGES.cache_material(
        {**body, "metadata": {"user_id": "other"}}
    )
    assert "stream" not in MESSAGES.cache_material({**body, "stream": True})


# ------------------------------------------------------------------------------ the forced-tool verdict


def test_json_schema_becomes_the_forced_json_tool_and_back() -> None:
    chat = {"model": "m", "messages": [{"role": "user", "content": "judge"}], "response_format": JSON_SCHEMA}
    body = MESSAGES.request_body(chat)
    (tool,) = body["tools"]
    assert tool["name"] == JSON_TOOL
    assert tool["input_schema"] == {**VERDICT_SCHEMA, "title": "judge_verdict"}
    assert body["tool_choice"] == {"type": "tool", "name": JSON_TOOL}
    back = MESSAGES.chat_request(body)
    assert back["response_format"] == JSON_SCHEMA and "tools" not in back and "tool_choice" not in back


def test_json_object_has_no_messages_form() -> None:
    chat = {"model": "m", "messages": [{"role": "user", "content": "judge"}], "response_format": JSON_OBJECT}
    body = MESSAGES.request_body(chat)
    assert "tools" not in body and "tool_choice" not in body and "response_format" not in body


def test_the_json_tools_input_is_the_answer_text() -> None:
    verdict = {"winner": "A", "reward_a": 0.9, "reward_b": 0.1, "reason": "A is right."}
    use = {"type": "tool_use", "id": "toolu_1", "name": JSON_TOOL, "input": verdict}
    choice = MESSAGES.completion(message([{"type": "text", "text": "Here:"}, use], "tool_use"))["choices"][0]
    assert json.loads(choice["message"]["content"]) == verdict
    assert choice["finish_reason"] == "stop" and "tool_calls" not in choice["message"]
    cut = MESSAGES.completion(message([{**use, "input": {}}], "max_tokens"))["choices"][0]
    assert cut["finish_reason"] == "length" and cut["message"]["content"] == "{}"


def test_a_forced_tool_answered_in_text_gets_its_call() -> None:
    request = MESSAGES.request_body(
        {"model": "m", "messages": [{"role": "user", "content": "judge"}], "response_format": JSON_SCHEMA}
    )
    verdict = {"winner": "B", "reward_a": 0.2, "reward_b": 0.8, "reason": "B."}
    out = MESSAGES.from_completion(completion(json.dumps(verdict)), request)
    assert out["stop_reason"] == "tool_use"
    (block,) = out["content"]
    assert block["type"] == "tool_use" and block["name"] == JSON_TOOL and block["input"] == verdict
    assert json.loads(MESSAGES.completion(out)["choices"][0]["message"]["content"]) == verdict
    cut = MESSAGES.from_completion(completion('{"winner": "B", "rew', finish="length"), request)
    assert cut["stop_reason"] == "max_tokens" and cut["content"][0]["input"] == {}


# ------------------------------------------------------------------------------------ response checks


@pytest.mark.parametrize("kind", sorted(MALFORMED_BY_API["anthropic"]))
def test_malformed_messages_are_bad_responses(kind: str) -> None:
    with pytest.raises(BadResponse) as exc:
        MESSAGES.parse_response(MALFORMED_BY_API["anthropic"][kind])
    assert exc.value.problem


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (
            {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}},
            "error: overloaded_error",
        ),
        ({"id": "x"}, "no 'content'"),
        ({"content": "hi"}, "'content' is str, not a list"),
        ({"content": ["hi"]}, "not a list of blocks"),
        ({"content": [{"type": "text", "text": 3}]}, "'text' is int"),
        ({"content": [{"type": "tool_use", "name": "f", "input": "x"}]}, "tool_use block"),
        ({"content": [{"type": "text", "text": ""}]}, "no text and no tool_use"),
        ({"content": [{"type": "text", "text": "a"}], "usage": [1]}, "'usage' is list"),
        (
            {"content": [{"type": "text", "text": "a"}], "usage": {"cache_read_input_tokens": "9"}},
            "cache_read",
        ),
        ({"content": [{"type": "text", "text": "a"}], "usage": {"cache_creation": 5}}, "cache_creation"),
    ],
)
def test_each_problem_is_named(body: dict[str, Any], problem: str) -> None:
    with pytest.raises(BadResponse, match=problem):
        MESSAGES.parse_response(json.dumps(body).encode())


def test_an_answer_cut_before_any_text_is_truncated_not_malformed() -> None:
    thinking = [{"type": "thinking", "thinking": "Let me think", "signature": "s"}]
    data = MESSAGES.parse_response(json.dumps(message(thinking, "max_tokens")).encode())
    choice = MESSAGES.completion(data)["choices"][0]
    assert choice["finish_reason"] == "length" and choice["message"]["content"] is None
    with pytest.raises(BadResponse, match="no text and no tool_use"):
        MESSAGES.parse_response(json.dumps(message(thinking, "end_turn")).encode())


def test_secrets_are_removed_and_good_bodies_pass() -> None:
    key = "sk-ant-secret-0123456789abcdef"
    raw = json.dumps(message([{"type": "text", "text": f"the key is {key}"}])).encode()
    data = MESSAGES.parse_response(raw, (key,))
    assert key not in json.dumps(data) and data["content"][0]["text"].startswith("the key is ")
    with pytest.raises(BadResponse) as exc:
        MESSAGES.parse_response(b"<html>" + key.encode(), (key,))
    assert key not in exc.value.snippet and exc.value.problem == "the body is not JSON"


# ----------------------------------------------------------------------------- the chat view and usage


@pytest.mark.parametrize(
    ("stop", "finish"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("tool_use", "tool_calls"),
        ("refusal", "content_filter"),
        (None, "stop"),
    ],
)
def test_stop_reasons(stop: str | None, finish: str) -> None:
    out = MESSAGES.completion(message([{"type": "text", "text": "hi"}], stop))  # type: ignore[arg-type]
    assert out["choices"][0]["finish_reason"] == finish


def test_completion_joins_text_and_lists_tool_calls() -> None:
    blocks: list[dict[str, Any]] = [
        {"type": "text", "text": "Let me "},
        {"type": "text", "text": "look."},
        {"type": "tool_use", "id": "toolu_9", "name": "lookup", "input": {"order_id": "123"}},
    ]
    out = MESSAGES.completion(message(blocks, "tool_use"))
    msg = out["choices"][0]["message"]
    assert msg["content"] == "Let me look."
    assert msg["tool_calls"] == [
        {
            "id": "toolu_9",
            "type": "function",
            "function": {"name": "lookup", "arguments": '{"order_id": "123"}'},
        }
    ]
    assert out["model"] == "claude-x" and out["id"] == "msg_1"


def test_usage_keeps_reads_and_writes_apart() -> None:
    usage: dict[str, Any] = {
        "input_tokens": 10,
        "output_tokens": 5,
        "cache_read_input_tokens": 200,
        "cache_creation_input_tokens": 40,
        "cache_creation": {"ephemeral_5m_input_tokens": 30, "ephemeral_1h_input_tokens": 10},
    }
    assert usage_counts(usage) == {
        "input_tokens": 10,
        "cached_input_tokens": 200,
        "cache_write_tokens": 30,
        "cache_write_1h_tokens": 10,
        "output_tokens": 5,
    }
    no_breakdown = usage_counts({**usage, "cache_creation": None})
    assert (no_breakdown["cache_write_tokens"], no_breakdown["cache_write_1h_tokens"]) == (40, 0)
    got = MESSAGES.usage({**message([{"type": "text", "text": "a"}]), "usage": usage})
    assert got is not None
    assert (got.prompt_tokens, got.cached_tokens, got.completion_tokens) == (250, 200, 5)
    assert MESSAGES.usage({"content": []}) is None
    assert MESSAGES.usage(message([], input_tokens=0, output_tokens=0)) is None


# ---------------------------------------------------------------------------------------- server side


def completion(
    content: str | None, calls: list[dict[str, Any]] | None = None, finish: str = "stop", **usage: Any
) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        msg["tool_calls"] = calls
    return {
        "id": "chatcmpl-abc123",
        "object": "chat.completion",
        "model": "claude-x",
        "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 7, "total_tokens": 107, **usage},
    }


def test_from_completion_is_a_message() -> None:
    out = MESSAGES.from_completion(completion("Hello."), {"model": "claude-x"})
    assert out == {
        "id": "msg_abc123",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [{"type": "text", "text": "Hello."}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 100,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
            "output_tokens": 7,
        },
    }
    assert MESSAGES.completion(out)["choices"][0]["message"] == {"role": "assistant", "content": "Hello."}


@pytest.mark.parametrize(
    ("finish", "stop"), [("length", "max_tokens"), ("tool_calls", "tool_use"), ("stop", "end_turn")]
)
def test_from_completion_stop_reasons_and_tool_use(finish: str, stop: str) -> None:
    out = MESSAGES.from_completion(completion(None, [CALL], finish), {})
    assert out["stop_reason"] == stop
    assert out["content"] == [
        {"type": "tool_use", "id": "call_1", "name": "lookup", "input": {"order_id": "123"}}
    ]
    cut = {**CALL, "function": {"name": "lookup", "arguments": '{"order_'}}
    assert MESSAGES.from_completion(completion(None, [cut], "length"), {})["content"][0]["input"] == {}


def test_from_completion_usage_takes_the_cache_out_of_input() -> None:
    details = {"cached_tokens": 60, "cache_write_tokens": 30, "cache_write_1h_tokens": 10}
    out = MESSAGES.from_completion(completion("x", prompt_tokens_details=details), {})
    assert out["usage"] == {
        "input_tokens": 10,
        "cache_creation_input_tokens": 30,
        "cache_read_input_tokens": 60,
        "cache_creation": {"ephemeral_5m_input_tokens": 20, "ephemeral_1h_input_tokens": 10},
        "output_tokens": 7,
    }
    got = MESSAGES.usage(out)
    assert got is not None and (got.prompt_tokens, got.cached_tokens) == (100, 60)
    assert "usage" not in MESSAGES.from_completion({**completion("x"), "usage": None}, {})


def test_stream_events_have_the_sdk_shapes_and_add_back_up() -> None:
    response = MESSAGES.from_completion(completion("Let me look.", [CALL], "tool_calls"), {})
    events = MESSAGES.stream_events(response)
    assert [name for name, _ in events] == [
        "message_start",
        "ping",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert all(name == data["type"] for name, data in events)
    start = events[0][1]["message"]
    assert start["content"] == [] and start["stop_reason"] is None and start["usage"]["output_tokens"] == 0
    assert events[3][1]["delta"] == {"type": "text_delta", "text": "Let me look."}
    assert events[5][1]["content_block"] == {
        "type": "tool_use",
        "id": "call_1",
        "name": "lookup",
        "input": {},
    }
    assert events[6][1]["delta"] == {"type": "input_json_delta", "partial_json": '{"order_id": "123"}'}
    assert events[8][1]["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}
    assert events[8][1]["usage"]["output_tokens"] == 7
    assert MESSAGES.from_stream(parse_events(encode_events(events))) == response


def test_from_stream_joins_split_deltas_and_refuses_errors() -> None:
    response = MESSAGES.from_completion(completion("ab", [CALL]), {})
    events = MESSAGES.stream_events(response)
    text_delta = events[3]
    split = [
        ("content_block_delta", {**text_delta[1], "delta": {"type": "text_delta", "text": "a"}}),
        ("content_block_delta", {**text_delta[1], "delta": {"type": "text_delta", "text": "b"}}),
    ]
    json_delta = events[6][1]
    halves = [
        (
            "content_block_delta",
            {**json_delta, "delta": {"type": "input_json_delta", "partial_json": '{"order_'}},
        ),
        (
            "content_block_delta",
            {**json_delta, "delta": {"type": "input_json_delta", "partial_json": 'id": "123"}'}},
        ),
    ]
    rebuilt = MESSAGES.from_stream([*events[:3], *split, *events[4:6], *halves, *events[7:]])
    assert rebuilt == response
    error = ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    with pytest.raises(ValueError, match="overloaded_error"):
        MESSAGES.from_stream([*events[:3], error])
    with pytest.raises(ValueError, match="message_start"):
        MESSAGES.from_stream(events[2:])


@pytest.mark.parametrize(
    ("status", "kind", "type_"),
    [
        (400, "invalid_request", "invalid_request_error"),
        (401, "authentication", "authentication_error"),
        (404, "not_found", "not_found_error"),
        (413, "invalid_request", "request_too_large"),
        (429, "rate_limit", "rate_limit_error"),
        (529, "overloaded", "overloaded_error"),
        (500, "server", "api_error"),
    ],
)
def test_error_bodies(status: int, kind: str, type_: str) -> None:
    assert MESSAGES.error_body(status, "why", kind) == {
        "type": "error",
        "error": {"type": type_, "message": "why"},
    }
