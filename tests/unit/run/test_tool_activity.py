"""Tool activity in a run, pure: a callable agent's tool calls recorded in its transcript, and the judge's
name-blind view of them."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from typing import Any

from pytest_gauge import Tool
from pytest_gauge._internal.records import ToolCall, Transcript, Turn
from pytest_gauge._internal.run.dialogue import ChatResult, run_dialogue
from pytest_gauge._internal.run.judge import Redactor, render_transcript
from pytest_gauge._internal.suite.rules import parse_rules, score
from pytest_gauge._internal.suite.tasks import Task
from pytest_gauge._internal.suite.tools import ToolExecutor
from tests.unit.sim.test_sim import config
from tests.unit.suite.test_tools import ORDER_SCHEMA

STEP_LIMIT = 3  # Suite(tool_step_limit=...) of the tools suite


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

    cfg = replace(
        config("in_house", "unused"),
        agent_model=None,
        agent_system_prompt="",
        agent_max_tokens=0,
        agent_fn=agent,
        user_model="user-model",
        user_max_tokens=100,
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
