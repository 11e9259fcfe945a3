"""What the agent CLIs send that the formats must read (captured from Claude Code 2.1.328 and Codex
0.169.0): Codex offers an MCP server's tools as a Responses ``namespace`` tool and expects its call back
with that ``namespace``; Claude Code puts context in ``system`` messages inside ``messages``; the
simulated agent calls an MCP tool by the name it was offered."""

from __future__ import annotations

from typing import Any

from pytest_gauge._internal.gateway.wire import wire_format
from pytest_gauge._internal.sim.agent import _offered_tools

NAMESPACE = {
    "type": "namespace",
    "name": "mcp__gauge",
    "description": "Tools in the mcp__gauge namespace.",
    "tools": [
        {"type": "function", "name": "lookup_order", "parameters": {"type": "object", "properties": {}}}
    ],
}


def _completion(name: str) -> dict[str, Any]:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": name, "arguments": '{"order_id": "B456"}'},
    }
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    return {"id": "x", "model": "m", "choices": [{"message": message, "finish_reason": "tool_calls"}]}


def test_a_responses_namespace_tool_is_a_chat_tool_and_its_call_goes_back_with_its_namespace() -> None:
    fmt = wire_format("responses")
    request = {"model": "m", "input": "hi", "tools": [NAMESPACE, {"type": "web_search"}]}
    chat = fmt.chat_request(request)
    assert [t["function"]["name"] for t in chat["tools"]] == ["mcp__gauge__lookup_order"]
    [item] = fmt.from_completion(_completion("mcp__gauge__lookup_order"), request)["output"]
    assert (item["type"], item["namespace"], item["name"]) == ("function_call", "mcp__gauge", "lookup_order")
    history = {
        "model": "m",
        "tools": [NAMESPACE],
        "input": [
            {"type": "message", "role": "user", "content": "hi"},
            {**item, "arguments": "{}"},
            {"type": "function_call_output", "call_id": item["call_id"], "output": "ok"},
        ],
    }
    called = fmt.chat_request(history)["messages"][1]["tool_calls"][0]["function"]["name"]
    assert called == "mcp__gauge__lookup_order"


def test_a_plain_function_call_has_no_namespace() -> None:
    request = {"model": "m", "input": "hi", "tools": [{"type": "function", "name": "f", "parameters": {}}]}
    [item] = wire_format("responses").from_completion(_completion("f"), request)["output"]
    assert "namespace" not in item and item["name"] == "f"


def test_a_messages_system_message_inside_messages() -> None:
    body = {
        "model": "m",
        "max_tokens": 10,
        "system": [{"type": "text", "text": "You are an agent."}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "What is the status of B456?"}]},
            {"role": "system", "content": [{"type": "text", "text": "# MCP Server Instructions"}]},
        ],
    }
    roles = [(m["role"], m["content"]) for m in wire_format("anthropic").chat_request(body)["messages"]]
    assert roles[-1] == ("system", "# MCP Server Instructions")


def test_the_simulated_agent_knows_an_mcp_tool_by_the_suites_name() -> None:
    tool = {"type": "function", "function": {"name": "mcp__gauge__lookup_order", "parameters": {}}}
    offered = _offered_tools({"tools": [tool]})
    assert offered["lookup_order"]["name"] == "mcp__gauge__lookup_order"
