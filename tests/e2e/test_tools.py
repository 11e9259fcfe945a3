"""Tool use: the local executor and its return codes, declaration errors, the agent's tool loop
on the sim backend and through the real ``openai`` client against the loopback server, the step limit,
callable agents' recorded calls, and the judge's name-blind view of tool activity.

Live runs use ``tests/data/tools_suite`` (copied into a pytester folder) with a scripted responder: it
tells the three roles apart like the simulator does and plays each task's agent script exactly.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_gauge import ModelAgent, Suite, Tool, ToolResult
from pytest_gauge.records import ToolCall, Transcript, Turn
from pytest_gauge.run.dialogue import ChatResult, DialogueConfig, run_dialogue
from pytest_gauge.run.judge import JUDGE_SYSTEM_PROMPT, Redactor, render_transcript
from pytest_gauge.suite.declare import SuiteError
from pytest_gauge.suite.rules import parse_rules, score
from pytest_gauge.suite.schema import SchemaError, compile_schema
from pytest_gauge.suite.tasks import Task
from pytest_gauge.suite.tools import ToolError, ToolExecutor
from pytest_gauge.testing import LoopbackServer, completion, message_text, tool_call
from tests.helpers import read_jsonl, run_inprocess

SUITE_DATA = Path(__file__).resolve().parents[1] / "data" / "tools_suite"
OBJ: dict[str, Any] = {"type": "object", "properties": {}}
ORDER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"order_id": {"type": "string"}},
    "required": ["order_id"],
}
LOOKUP_RESULT = (
    '{"amount": 25, "order_id": "A123", "status": "delivered"}'  # sorted-key JSON of ORDERS["A123"]
)
STEP_LIMIT = 3  # Suite(tool_step_limit=...) of the tools suite
KEY = "sk-gauge-tools-test"


def run_call(executor: ToolExecutor, name: str, raw: str, call_id: str = "c1") -> ToolCall:
    return asyncio.run(executor.run(call_id, name, raw))


# ------------------------------------------------------------------------------------ the executor


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


# ---------------------------------------------------------------------------------- declarations


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


# ------------------------------------------------------------------------ a callable agent's tools


def test_a_callable_agents_tool_calls_are_recorded_in_the_transcript() -> None:
    task = Task(
        "c01",
        "tool_call",
        "What is the status of order A123?",
        success_criteria=parse_rules(
            [{"type": "tool_args", "name": "lookup_order", "args": {"order_id": "A123"}}],
            field="success_criteria",
        ),
        tools=("lookup_order",),
    )
    executor = ToolExecutor(
        [Tool("lookup_order", "", ORDER_SCHEMA, lambda order_id: {"status": "delivered"})]
    )
    roles: list[str] = []

    async def caller(role: str, model: str, messages: list[dict[str, Any]], **_: Any) -> ChatResult:
        roles.append(role)
        first = len(messages) == 2
        return ChatResult(task.task_prompt if first else "[DONE] satisfied=yes", (), "stop")

    async def agent(messages: list[dict[str, Any]], tools: Any) -> str:
        assert [s["function"]["name"] for s in tools.schemas] == ["lookup_order"]
        call = await tools.run("c1", "lookup_order", '{"order_id": "A123"}')
        return f"Order A123 is {json.loads(call.result)['status']}."

    cfg = DialogueConfig(
        agent_name="in_house",
        agent_model=None,
        agent_system_prompt="",
        agent_temperature=0.0,
        agent_max_tokens=0,
        agent_fn=agent,
        user_model="user-model",
        user_temperature=0.0,
        user_max_tokens=100,
        user_extra_prompt="",
        max_turns=3,
        tool_step_limit=STEP_LIMIT,
    )
    transcript = asyncio.run(run_dialogue(task, 0, cfg, caller, executor))
    assert roles == ["user_sim"]  # the opening is the task itself; one call for the user's last word
    assert [(t.role, t.content, t.tool_call_id) for t in transcript.turns] == [
        ("user", task.task_prompt, None),
        ("assistant", "", None),
        ("tool", '{"status": "delivered"}', "c1"),
        ("assistant", "Order A123 is delivered.", None),
    ]
    [call] = transcript.tool_calls()
    assert (call.name, call.arguments, call.return_code) == ("lookup_order", {"order_id": "A123"}, 0)
    assert score(task.success_criteria, (), transcript).task_success


# -------------------------------------------------------------------------------- the judge's view


def test_judge_view_renders_tool_activity_without_agent_or_model_names() -> None:
    lookup = ToolCall(
        "call_1",
        "lookup_order",
        '{"order_id": "A123"}',
        {"order_id": "A123"},
        '{"handled_by": "agent_x", "status": "delivered"}',
        0,
    )
    refund = ToolCall(
        "call_2",
        "issue_refund",
        '{"order_id": "A123", "amount": 25}',
        {"order_id": "A123", "amount": 25},
        "error: RuntimeError: refunds paused",
        1,
    )
    transcript = Transcript(
        "r01",
        "agent_x",
        0,
        [
            Turn("user", "Refund order A123."),
            Turn("assistant", "", tool_calls=[lookup]),
            Turn("tool", lookup.result, tool_call_id="call_1"),
            Turn("assistant", "Checking with Model-X first.", tool_calls=[refund]),
            Turn("tool", refund.result, tool_call_id="call_2"),
            Turn("assistant", "I am agent_x (model-x): the refund failed, please retry tomorrow."),
        ],
        "I am agent_x (model-x): the refund failed, please retry tomorrow.",
        True,
        "user_done",
    )
    text = render_transcript(transcript, Redactor(["agent_x", "model-x"]))
    assert text == (
        "[user]\nRefund order A123.\n"
        '[tool call] lookup_order({"order_id": "A123"})\n'
        '[tool result]\n{"handled_by": "[redacted]", "status": "delivered"}\n'
        "[assistant]\nChecking with [redacted] first.\n"
        '[tool call] issue_refund({"order_id": "A123", "amount": 25})\n'
        "[tool result]\nerror: RuntimeError: refunds paused\n"
        "[assistant]\nI am [redacted] ([redacted]): the refund failed, please retry tomorrow."
    )


# ------------------------------------------------------------------ suite runs (sim and live)


@pytest.fixture
def tools_suite(pytester: pytest.Pytester) -> Path:
    """``tests/data/tools_suite`` as ``suites/tools`` in a fresh pytester folder (sim backend by default)."""
    target = pytester.path / "suites" / "tools"
    target.mkdir(parents=True)
    shutil.copy(SUITE_DATA / "tasks.jsonl", target / "tasks.jsonl")
    shutil.copy(SUITE_DATA / "suite_tools.py", target / "test_tools_suite.py")
    pytester.makeini("[pytest]\ngauge_backend = sim\ngauge_seed = 7\n")
    return target


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return run_inprocess(pytester, "suites", "--gauge-cache", "off", *args)


def transcripts(pytester: pytest.Pytester, agent: str) -> dict[str, dict[str, Any]]:
    rows = read_jsonl(pytester.path / "gauge-out" / "tools" / "agents" / f"{agent}.jsonl")
    return {r["task_id"]: r for r in rows}


def calls_of(transcript: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for t in transcript["turns"] if t["role"] == "assistant" for c in t["tool_calls"]]


def test_raising_and_hanging_tools_do_not_stop_a_sim_run(
    pytester: pytest.Pytester, tools_suite: Path
) -> None:
    run(pytester).assert_outcomes(passed=5 * 2)
    pairs = read_jsonl(pytester.path / "gauge-out" / "tools" / "pairs" / "pair_results.jsonl")
    assert len(pairs) == 10 and all(p["judge_choice"] != "error" for p in pairs)
    for agent in ("agent_x", "agent_y"):
        by_task = transcripts(pytester, agent)
        assert sorted(by_task) == ["b01", "f01", "h01", "l01", "r01"]
        assert {t["ended_by"] for t in by_task.values()} == {"user_done"}  # every conversation finished
        [raised] = calls_of(by_task["f01"])
        assert (raised["name"], raised["return_code"]) == ("check_stock", 1)
        assert raised["result"].startswith("error: RuntimeError: inventory service unavailable for ")
        [hung] = calls_of(by_task["h01"])
        assert (hung["name"], hung["return_code"], hung["error"]) == ("track_shipment", 124, "timeout")
        assert hung["result"] == "error: tool did not finish within 0.2s"
        for task_id, call in (("f01", raised), ("h01", hung)):
            turns = by_task[task_id]["turns"]
            tool_turns = [t for t in turns if t["role"] == "tool"]
            assert [(t["tool_call_id"], t["content"]) for t in tool_turns] == [(call["id"], call["result"])]
            assert call["result"] in by_task[task_id]["final_reply"]  # the agent saw the error and went on
        assert [(c["name"], c["return_code"]) for c in calls_of(by_task["r01"])] == [
            ("lookup_order", 0),
            ("issue_refund", 0),
        ]
        assert [c["return_code"] for c in calls_of(by_task["l01"])] == [4]  # ToolResult's own code
    # the rules decide task_success from the calls: every planned call was made and matched
    assert all(p["task_success_left"] and p["task_success_right"] for p in pairs)


def test_a_task_naming_an_unknown_tool_is_a_located_collection_error(
    pytester: pytest.Pytester, tools_suite: Path
) -> None:
    path = tools_suite / "tasks.jsonl"
    lines = path.read_text().splitlines()
    lines[3] = lines[3].replace('"tools": ["track_shipment"]', '"tools": ["track_shipment", "teleport"]')
    path.write_text("\n".join(lines) + "\n")
    result = run(pytester)
    assert result.ret != 0
    result.stdout.re_match_lines(
        [
            r".*tasks\.jsonl:4: tools: unknown tool 'teleport' "
            r"\(suite tools: lookup_order, issue_refund, check_stock, track_shipment\)"
        ]
    )
    assert "Traceback" not in result.stdout.str() and "passed" not in result.stdout.str()


def test_an_invalid_tool_schema_fails_at_suite_import_with_the_tool_and_path(
    pytester: pytest.Pytester, tools_suite: Path
) -> None:
    module = tools_suite / "test_tools_suite.py"
    source = module.read_text()
    assert '_schema(sku="string")' in source
    module.write_text(source.replace('_schema(sku="string")', '_schema(sku="strnig")'))
    result = run(pytester)
    assert result.ret != 0
    result.stdout.re_match_lines(
        [
            r"_* ERROR collecting suites/tools/test_tools_suite\.py _*",
            r".*ToolError: tool check_stock\.parameters\.properties\.sku\.type: "
            r"'strnig' is not a JSON Schema type.*",
        ]
    )
    result.assert_outcomes(errors=1)


# ---- live: the real openai client against the loopback server, with a scripted responder


def _tasks_by_prompt() -> dict[str, str]:
    rows = read_jsonl(SUITE_DATA / "tasks.jsonl")[1:]
    return {r["task_prompt"]: r["task_id"] for r in rows}


def _agent_script(task_id: str, model: str, tool_msgs: list[dict[str, Any]]) -> dict[str, Any]:
    """What the agent model answers, given the tool results it has seen so far."""
    n = len(tool_msgs)
    if task_id == "r01" and model == "model-x":  # look up, then refund the amount the lookup returned
        if n == 0:
            return completion(
                None, tool_calls=[tool_call("call_lookup", "lookup_order", {"order_id": "A123"})]
            )
        if n == 1:
            amount = json.loads(message_text(tool_msgs[0]["content"]))["amount"]
            args = {"order_id": "A123", "amount": amount}
            return completion(None, tool_calls=[tool_call("call_refund", "issue_refund", args)])
        return completion("I refunded 25 dollars on order A123.")
    if task_id == "r01":  # model-y refunds without looking the order up first
        if n == 0:
            args = {"order_id": "A123", "amount": 25}
            return completion(None, tool_calls=[tool_call("call_refund", "issue_refund", args)])
        return completion("Refund issued.")
    if task_id == "l01":  # never stops calling tools
        return completion(None, tool_calls=[tool_call(f"call_{n}", "lookup_order", {"order_id": "A123"})])
    if task_id == "b01" and n == 0:
        return completion(None, tool_calls=[tool_call("call_bad", "lookup_order", "{not json")])
    return completion("Done.")


def scripted_responder(body: dict[str, Any]) -> dict[str, Any]:
    """Judge, user simulator and agents told apart by their system prompts, like the simulator does."""
    messages = body["messages"]
    system = message_text(messages[0]["content"]) if messages[0]["role"] == "system" else ""
    if system == JUDGE_SYSTEM_PROMPT:
        verdict = {"winner": "A", "reward_a": 0.9, "reward_b": 0.4, "reason": "A followed the criteria."}
        return completion(json.dumps(verdict))
    if "You are role-playing a user" in system:
        if len(messages) == 2:  # the opening: send the task text exactly
            found = re.search(r"<task>\n(.*?)\n</task>", system, re.DOTALL)
            assert found is not None
            return completion(found.group(1))
        return completion("Thanks.\n[DONE] satisfied=yes")
    first_user = next(message_text(m["content"]) for m in messages if m["role"] == "user")
    tool_msgs = [m for m in messages if m["role"] == "tool"]
    return _agent_script(_tasks_by_prompt()[first_user], body["model"], tool_msgs)


@pytest.fixture
def server(tools_suite: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopbackServer]:
    srv = LoopbackServer(scripted_responder).start()
    monkeypatch.setenv("TAOTOKEN_API_KEY", KEY)
    monkeypatch.setenv("TAOTOKEN_BASE_URL", srv.base_url)
    yield srv
    srv.stop()


def live(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return run(pytester, "--gauge-backend", "live", *args)


def agent_bodies(server: LoopbackServer, task_prompt: str, model: str) -> list[dict[str, Any]]:
    def first_user(body: dict[str, Any]) -> str:
        return next(message_text(m["content"]) for m in body["messages"] if m["role"] == "user")

    return [b for b in server.bodies if b["model"] == model and first_user(b) == task_prompt]


def pair_rows(pytester: pytest.Pytester, task_id: str) -> list[dict[str, Any]]:
    rows = read_jsonl(pytester.path / "gauge-out" / "tools" / "pairs" / "pair_results.jsonl")
    return [r for r in rows if r["task_id"] == task_id]


def test_a_model_agent_completes_a_two_step_tool_task_through_the_real_client(
    pytester: pytest.Pytester, server: LoopbackServer
) -> None:
    live(pytester, "-k", "r01").assert_outcomes(passed=2)
    prompt = "Refund order A123, it arrived broken. The amount was 25 dollars."
    t = transcripts(pytester, "agent_x")["r01"]
    assert (t["ended_by"], t["final_reply"], t["user_satisfied"]) == (
        "user_done",
        "I refunded 25 dollars on order A123.",
        True,
    )
    assert [(c["id"], c["name"], c["arguments"], c["result"], c["return_code"]) for c in calls_of(t)] == [
        ("call_lookup", "lookup_order", {"order_id": "A123"}, LOOKUP_RESULT, 0),
        (
            "call_refund",
            "issue_refund",
            {"order_id": "A123", "amount": 25},
            '{"order_id": "A123", "refunded": 25}',
            0,
        ),
    ]
    assert [t_["role"] for t_ in t["turns"]] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    # what the gateway saw: the tools offered on every agent request, the results as tool messages
    bodies = agent_bodies(server, prompt, "model-x")
    assert len(bodies) == 3
    for body in bodies:
        assert [tool["function"]["name"] for tool in body["tools"]] == ["lookup_order", "issue_refund"]
        assert all(tool["type"] == "function" for tool in body["tools"])
    assert not [m for m in bodies[0]["messages"] if m["role"] == "tool"]
    second = bodies[1]["messages"]
    [asked] = [m for m in second if m["role"] == "assistant" and m.get("tool_calls")]
    assert [c["id"] for c in asked["tool_calls"]] == ["call_lookup"]
    assert [(m["tool_call_id"], m["content"]) for m in second if m["role"] == "tool"] == [
        ("call_lookup", LOOKUP_RESULT)
    ]
    assert second.index(asked) < next(i for i, m in enumerate(second) if m["role"] == "tool")
    assert [m["tool_call_id"] for m in bodies[2]["messages"] if m["role"] == "tool"] == [
        "call_lookup",
        "call_refund",
    ]
    # the user simulator never sees tool activity
    user_bodies = [
        b for b in server.bodies if "You are role-playing a user" in message_text(b["messages"][0]["content"])
    ]
    assert user_bodies and all(
        m["role"] != "tool" and "tool_calls" not in m for b in user_bodies for m in b["messages"]
    )
    # the judge sees the calls, name-blind
    judge_texts = [
        json.dumps(b["messages"])
        for b in server.bodies
        if message_text(b["messages"][0]["content"]) == JUDGE_SYSTEM_PROMPT
    ]
    assert len(judge_texts) == 2
    for text in judge_texts:
        assert "[tool call] lookup_order(" in text and "[tool result]" in text
        assert not any(name in text for name in ("agent_x", "agent_y", "model-x", "model-y"))
    # the rules on arguments and order decide task_success: agent_y refunded without a lookup
    rows = pair_rows(pytester, "r01")
    assert len(rows) == 2
    for row in rows:
        assert (row["agent_left"], row["task_success_left"], row["reward_left"]) == ("agent_x", True, 1.0)
        assert (row["agent_right"], row["task_success_right"], row["reward_right"]) == ("agent_y", False, 0.5)


def test_malformed_tool_arguments_from_the_model_are_a_recorded_mistake(
    pytester: pytest.Pytester, server: LoopbackServer
) -> None:
    live(pytester, "-k", "b01").assert_outcomes(passed=2)
    for agent, model in (("agent_x", "model-x"), ("agent_y", "model-y")):
        t = transcripts(pytester, agent)["b01"]
        [call] = calls_of(t)
        assert (call["raw_arguments"], call["arguments"], call["return_code"]) == ("{not json", None, 2)
        assert call["result"].startswith("error: malformed arguments: ")
        assert (t["ended_by"], t["final_reply"]) == ("user_done", "Done.")
        bodies = agent_bodies(server, "Look up order A123 for me.", model)
        assert len(bodies) == 2
        assert [(m["tool_call_id"], m["content"]) for m in bodies[1]["messages"] if m["role"] == "tool"] == [
            ("call_bad", call["result"])
        ]
    for row in pair_rows(pytester, "b01"):  # tool_args: "no call matched (first: malformed arguments)"
        assert (row["task_success_left"], row["task_success_right"]) == (False, False)
        assert row["judge_choice"] == "A"


def test_an_agent_that_never_stops_calling_tools_hits_the_step_limit(
    pytester: pytest.Pytester, server: LoopbackServer
) -> None:
    live(pytester, "-k", "l01 or r01").assert_outcomes(passed=4)
    ledger = read_jsonl(pytester.path / "gauge-out" / "tools" / "agent_runs.jsonl")
    for agent, model in (("agent_x", "model-x"), ("agent_y", "model-y")):
        t = transcripts(pytester, agent)["l01"]
        assert (t["ended_by"], t["final_reply"], t["user_satisfied"]) == ("step_limit", "", None)
        calls = calls_of(t)
        assert [(c["id"], c["return_code"]) for c in calls] == [(f"call_{i}", 0) for i in range(STEP_LIMIT)]
        # one model call per executed step, plus the one that asked for more and was refused
        bodies = agent_bodies(server, "Keep checking order A123 until its status changes.", model)
        assert len(bodies) == STEP_LIMIT + 1
        work = [r for r in ledger if r["work"] == f"transcript/l01/{agent}/0" and r["role"] == "agent"]
        assert len(work) == STEP_LIMIT + 1
        assert transcripts(pytester, agent)["r01"]["ended_by"] == "user_done"  # the run went on
    assert len(pair_rows(pytester, "l01")) == 2 and len(pair_rows(pytester, "r01")) == 2


def test_a_huge_result_or_error_is_cut_with_a_marker() -> None:
    """Issue 30, point 9: a 20 MB result and a 5 MB exception message are cut to the tool's
    ``max_result_chars`` (default 20,000) before they are recorded or sent back to the model."""
    from pytest_gauge.suite.tools import Tool as _Tool
    from pytest_gauge.suite.tools import ToolExecutor as _Executor

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
