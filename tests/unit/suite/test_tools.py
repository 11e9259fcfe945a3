"""Tools, pure: the local executor and its return codes (schema checks, timeouts, exits, results that are
not JSON, cut results), declaration errors and the tools entry."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from typing import Any

import pytest

from pytest_gauge import ModelAgent, Suite, Tool, ToolResult
from pytest_gauge._internal.records import ToolCall
from pytest_gauge._internal.suite.declare import SuiteError
from pytest_gauge._internal.suite.schema import SchemaError, compile_schema
from pytest_gauge._internal.suite.tools import ToolError, ToolExecutor

OBJ: dict[str, Any] = {"type": "object", "properties": {}}


ORDER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"order_id": {"type": "string"}},
    "required": ["order_id"],
}


LOOKUP_RESULT = (
    '{"amount": 25, "order_id": "A123", "status": "delivered"}'  # sorted-key JSON of ORDERS["A123"]
)


def run_call(executor: ToolExecutor, name: str, raw: str, call_id: str = "c1") -> ToolCall:
    return asyncio.run(executor.run(call_id, name, raw))


def test_success_returns_sorted_json_text_with_code_0() -> None:
    seen: list[dict[str, Any]] = []

    def lookup(order_id: str) -> dict[str, Any]:
        seen.append({"order_id": order_id})
        return {"status": "delivered", "amount": 25, "order_id": order_id}

    call = run_call(
        ToolExecutor([Tool("lookup_order", "Look up", ORDER_SCHEMA, lookup)]),
        "lookup_order",
        '{"order_id": "A123"}',
        "call_7",
    )
    assert seen == [{"order_id": "A123"}]
    assert (call.id, call.name, call.raw_arguments, call.arguments) == (
        "call_7",
        "lookup_order",
        '{"order_id": "A123"}',
        {"order_id": "A123"},
    )
    assert call.result == LOOKUP_RESULT
    assert (call.return_code, call.error) == (0, None)


def test_plain_string_result_is_kept_and_empty_arguments_mean_no_arguments() -> None:
    call = run_call(ToolExecutor([Tool("ping", "", OBJ, lambda: "pong")]), "ping", "  ")
    assert (call.arguments, call.result, call.return_code) == ({}, "pong", 0)


def test_tool_result_sets_its_own_return_code() -> None:
    def lookup(order_id: str) -> ToolResult:
        return ToolResult({"error": f"no order {order_id}"}, return_code=4)

    call = run_call(
        ToolExecutor([Tool("lookup_order", "", ORDER_SCHEMA, lookup)]), "lookup_order", '{"order_id": "Z9"}'
    )
    assert (call.result, call.return_code, call.error) == ('{"error": "no order Z9"}', 4, None)


def test_a_raising_tool_is_code_1_and_the_executor_keeps_working() -> None:
    def broken(sku: str) -> dict[str, Any]:
        raise RuntimeError(f"inventory down for {sku}")

    executor = ToolExecutor(
        [Tool("check_stock", "", OBJ, broken), Tool("ping", "", OBJ, lambda: {"ok": True})]
    )
    call = run_call(executor, "check_stock", '{"sku": "KB-201"}')
    assert call.return_code == 1
    assert call.error == "RuntimeError: inventory down for KB-201"
    assert call.result == "error: RuntimeError: inventory down for KB-201"
    after = run_call(executor, "ping", "{}", "c2")
    assert (after.result, after.return_code) == ('{"ok": true}', 0)


def test_a_tool_with_wrong_keyword_arguments_is_a_tool_error_not_a_crash() -> None:
    """The schema allows any object here, so the call reaches the function, which rejects it."""
    call = run_call(
        ToolExecutor([Tool("lookup_order", "", OBJ, lambda order_id: {})]), "lookup_order", '{"id": "A123"}'
    )
    assert (
        call.return_code == 1 and call.error is not None and "unexpected keyword argument 'id'" in call.error
    )


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (
            '{"id": "A123"}',
            "arguments: 'order_id' is a required property; "
            "arguments: Additional properties are not allowed ('id' was unexpected)",
        ),
        ('{"order_id": 123}', "arguments.order_id: 123 is not of type 'string'"),
        (
            '{"order_id": "A1", "reason": "late"}',
            "arguments: Additional properties are not allowed ('reason' was unexpected)",
        ),
        ('{"order_id": "A1", "speed": "warp"}', "arguments.speed: 'warp' is not one of ['slow', 'fast']"),
        ('{"order_id": "A1", "items": [1, "x"]}', "arguments.items[1]: 'x' is not of type 'integer'"),
    ],
)
def test_arguments_that_break_the_schema_are_code_2_and_the_tool_never_runs(raw: str, why: str) -> None:
    schema = {
        "type": "object",
        "properties": {
            "order_id": {"type": "string"},
            "speed": {"type": "string", "enum": ["slow", "fast"]},
            "items": {"type": "array", "items": {"type": "integer"}},
        },
        "required": ["order_id"],
        "additionalProperties": False,
    }
    calls: list[dict[str, Any]] = []
    executor = ToolExecutor([Tool("refund", "", schema, lambda **kw: calls.append(kw))])
    call = run_call(executor, "refund", raw)
    assert call.return_code == 2 and calls == []
    assert call.arguments == json.loads(raw)  # parsed, kept for the rules and the judge
    assert call.error == f"arguments do not match the tool's schema: {why}"


def test_argument_checks_follow_json_schema_types() -> None:
    def errors(schema: dict[str, Any], value: Any) -> list[str]:
        return compile_schema(schema, "test").errors(value)

    assert errors({"type": "integer"}, 3) == errors({"type": "integer"}, 3.0) == []
    assert errors({"type": "integer"}, True) == ["arguments: True is not of type 'integer'"]
    assert errors({"type": "number"}, 2.5) == []
    assert errors({"type": ["string", "null"]}, None) == []
    assert errors({"type": "object", "properties": {"a": {"type": "string"}}}, {"b": 1}) == []


def test_a_hung_tool_times_out_with_code_124_without_waiting_for_it() -> None:
    started, release, finished = threading.Event(), threading.Event(), threading.Event()

    def hang() -> dict[str, Any]:
        started.set()
        release.wait(10)
        finished.set()
        return {"late": True}

    call = run_call(ToolExecutor([Tool("hang", "", OBJ, hang, timeout=0.2)]), "hang", "{}")
    try:
        assert (call.return_code, call.error) == (124, "timeout")
        assert call.result == "error: tool did not finish within 0.2s"
        assert started.is_set() and not finished.is_set()  # the call came back while the tool still ran
    finally:
        release.set()
    assert finished.wait(5)


def test_the_executor_default_timeout_applies_when_the_tool_sets_none() -> None:
    release = threading.Event()
    executor = ToolExecutor([Tool("hang", "", OBJ, lambda: release.wait(10))], default_timeout=0.2)
    try:
        call = run_call(executor, "hang", "{}")
    finally:
        release.set()
    assert (call.return_code, call.result) == (124, "error: tool did not finish within 0.2s")


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ("{not json", "malformed arguments: Expecting property name enclosed in double quotes"),
        ('["A123"]', "malformed arguments: not a JSON object"),
        ('{"order_id": "A1', "malformed arguments: Unterminated string starting at"),
    ],
)
def test_malformed_arguments_are_code_2_and_the_tool_never_runs(raw: str, why: str) -> None:
    calls: list[str] = []
    executor = ToolExecutor([Tool("lookup_order", "", ORDER_SCHEMA, lambda order_id: calls.append(order_id))])
    call = run_call(executor, "lookup_order", raw)
    assert (call.return_code, call.arguments, call.raw_arguments) == (2, None, raw)
    assert call.error == why and call.result == f"error: {why}"
    assert calls == []


def test_an_unknown_tool_is_code_127() -> None:
    call = run_call(ToolExecutor([Tool("ping", "", OBJ, lambda: "pong")]), "drop_database", "{}")
    assert (call.return_code, call.result, call.error) == (
        127,
        "error: unknown tool 'drop_database'",
        "unknown tool",
    )


@pytest.mark.parametrize(
    ("code", "rc", "result"),
    [(3, 3, "error: exit status 3"), (None, 0, "exit status 0"), ("bad input", 1, "error: exit status 1")],
)
def test_a_tool_that_calls_sys_exit_reports_its_status_instead_of_ending_the_run(
    code: int | str | None, rc: int, result: str
) -> None:
    def script() -> None:
        raise SystemExit(code)

    call = run_call(ToolExecutor([Tool("run_script", "", OBJ, script)]), "run_script", "{}")
    assert (call.return_code, call.result) == (rc, result)


def test_keyboard_interrupt_raised_inside_a_tool_is_a_tool_error() -> None:
    def tool() -> None:
        raise KeyboardInterrupt("from the tool")

    call = run_call(ToolExecutor([Tool("t", "", OBJ, tool)]), "t", "{}")
    assert (call.return_code, call.error) == (1, "KeyboardInterrupt: from the tool")


def test_a_result_that_is_not_json_is_a_tool_error() -> None:
    call = run_call(ToolExecutor([Tool("t", "", OBJ, lambda: {"when": {1, 2}})]), "t", "{}")
    assert call.return_code == 1
    assert call.error == "the tool's result is not JSON: Object of type set is not JSON serializable"


TYPES = "(array, boolean, integer, null, number, object, string)"


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        (["type", "object"], "parameters: a JSON Schema must be an object, got list"),
        ({"type": "dict"}, f"parameters.type: 'dict' is not a JSON Schema type {TYPES}"),
        ({"type": ["string", "text"]}, f"parameters.type[1]: 'text' is not a JSON Schema type {TYPES}"),
        (
            {"type": "object", "properties": {"a": {"type": "strnig"}}},
            "parameters.properties.a.type: 'strnig' is not a JSON Schema type",
        ),
        ({"type": "object", "required": "a"}, "parameters.required: 'a' is not of type 'array'"),
        ({"type": "object", "properties": []}, "parameters.properties: [] is not of type 'object'"),
        ({"type": "array", "items": {"type": "tuple"}}, "parameters.items.type: 'tuple'"),
        ({"type": "string", "enum": "a|b"}, "parameters.enum: 'a|b' is not of type 'array'"),
        ({"type": "string", "maxLength": -1}, "parameters.maxLength: -1 is less than the minimum of 0"),
        ({"type": "string", "pattern": "("}, "parameters.pattern: '(' is not a 'regex'"),
        ({"anyOf": []}, "parameters.anyOf: [] should be non-empty"),
        ({"$ref": "#/$defs/missing"}, "parameters: $ref '#/$defs/missing' does not resolve"),
        ({"$ref": "https://example.com/s.json"}, "parameters: $ref 'https://example.com/s.json' does not"),
    ],
)
def test_compile_schema_rejects_schemas_that_break_the_draft(schema: object, message: str) -> None:
    with pytest.raises(SchemaError) as info:
        compile_schema(schema, "parameters")
    assert str(info.value).startswith(message)


def test_schema_errors_are_caught_after_the_validator_packages_left_sys_modules(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """pytest's ``pytester`` removes the modules a test imported: the validator built before must still
    have its own exceptions caught (a fresh ``referencing`` import would define another Unresolvable)."""
    compile_schema({"type": "object"}, "warm-up")  # the validator packages imported and cached
    for name in [m for m in sys.modules if m.split(".")[0] in ("jsonschema", "referencing")]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(SchemaError, match="does not resolve"):
        compile_schema({"$ref": "https://example.com/s.json"}, "parameters")
    compiled = compile_schema(
        {"$defs": {"x": {"$id": "urn:x", "$ref": "urn:missing"}}, "$ref": "#/$defs/x"}, "p"
    )
    assert compiled.errors(1) and "cannot be resolved" in compiled.errors(1)[0]
    first = compiled.first_error(1)
    assert first is not None and "cannot be resolved" in first


def test_compile_schema_accepts_a_nested_function_schema_with_defs() -> None:
    compiled = compile_schema(
        {
            "type": "object",
            "properties": {
                "items": {"type": "array", "items": {"$ref": "#/$defs/item"}},
                "priority": {"type": ["string", "null"], "enum": ["low", "high", None]},
            },
            "required": ["items"],
            "$defs": {"item": {"type": "object", "properties": {"sku": {"type": "string"}}}},
        },
        "parameters",
    )
    assert compiled.errors({"items": [{"sku": "A"}], "priority": None}) == []
    assert compiled.errors({"items": [{"sku": 1}]}) == ["arguments.items[0].sku: 1 is not of type 'string'"]


def test_tool_rejects_a_non_object_top_level_schema_and_a_bad_name() -> None:
    with pytest.raises(
        ToolError, match=r"tool echo\.parameters: the top-level schema must have type 'object'"
    ):
        Tool("echo", "", {"type": "string"}, lambda: "")
    with pytest.raises(ToolError, match=r"tool echo\.parameters\.properties\.x\.type: 'int' is not a JSON"):
        Tool("echo", "", {"type": "object", "properties": {"x": {"type": "int"}}}, lambda x: x)
    with pytest.raises(ToolError, match="tool name 'look up'"):
        Tool("look up", "", OBJ, lambda: "")


def test_tool_schema_is_the_openai_tools_entry() -> None:
    assert Tool("lookup_order", "Look up an order", ORDER_SCHEMA, lambda order_id: {}).schema() == {
        "type": "function",
        "function": {"name": "lookup_order", "description": "Look up an order", "parameters": ORDER_SCHEMA},
    }


def test_suite_rejects_duplicate_tools_and_objects_that_are_not_tools() -> None:
    agents = [ModelAgent("a", "m-a"), ModelAgent("b", "m-b")]
    tool = Tool("ping", "", OBJ, lambda: "pong")
    with pytest.raises(SuiteError, match=r"duplicate tool names: \['ping', 'ping'\]"):
        Suite(agents=agents, tools=[tool, tool])
    with pytest.raises(SuiteError, match=r"Suite\(tools=\.\.\.\): expected Tool objects, got <function"):
        Suite(agents=agents, tools=[lambda: "pong"])  # type: ignore[list-item]


def test_a_huge_result_or_error_is_cut_with_a_marker() -> None:
    """A 20 MB result and a 5 MB exception message are cut to the tool's
    ``max_result_chars`` (default 20,000) before they are recorded or sent back to the model."""
    from pytest_gauge._internal.suite.tools import Tool as _Tool
    from pytest_gauge._internal.suite.tools import ToolExecutor as _Executor

    def huge(**_: Any) -> str:
        return "x" * 20_000_000

    def loud(**_: Any) -> str:
        raise ValueError("e" * 5_000_000)

    schema = {"type": "object", "properties": {}}
    small = _Tool("small", "cut at 100", schema, huge, max_result_chars=100)
    executor = _Executor([_Tool("huge", "big", schema, huge), _Tool("loud", "raises", schema, loud), small])
    big = asyncio.run(executor.run("c1", "huge", "{}"))
    assert len(big.result) < 20_100 and big.result.endswith(
        "19,980,000 more characters cut: the limit is 20,000]"
    )
    error = asyncio.run(executor.run("c2", "loud", "{}"))
    assert len(error.result) < 20_200 and "more characters cut" in error.result and error.return_code == 1
    assert len(asyncio.run(executor.run("c3", "small", "{}")).result) < 200
