"""Model replies are bounded: an agent's or the user simulator's reply past
``Suite(max_reply_chars=...)`` is cut, with a marker saying how much, before it is recorded in the
transcript or sent on to the next model."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pytest_gauge import CallableAgent, ModelAgent, Suite
from pytest_gauge._internal.records import ChatResult
from pytest_gauge._internal.run.dialogue import DialogueConfig, run_dialogue
from pytest_gauge._internal.suite.declare import SuiteError
from pytest_gauge._internal.suite.tasks import Task

LIMIT = 1_000


def _config(**kw: Any) -> DialogueConfig:
    base: dict[str, Any] = dict(
        agent_name="a", agent_model="m", agent_system_prompt="", agent_temperature=0.0, agent_max_tokens=8,
        agent_fn=None, user_model="u", user_temperature=0.0, user_max_tokens=8, user_extra_prompt="",
        max_turns=2, tool_step_limit=1, max_reply_chars=LIMIT,
    )  # fmt: skip
    return DialogueConfig(**(base | kw))


def test_a_long_reply_is_cut_with_a_marker_before_it_is_recorded_or_sent_on() -> None:
    sent: list[list[dict[str, Any]]] = []

    async def call(role: str, model: str, messages: list[dict[str, Any]], **_: Any) -> ChatResult:
        sent.append(messages)
        return ChatResult(("x" if role == "agent" else "u") * 250_000, (), "stop")

    transcript = asyncio.run(run_dialogue(Task("t1", "c", "Help me", ()), 0, _config(), call))
    agent, user = transcript.turns[1], transcript.turns[2]
    for turn in (agent, user):
        assert len(turn.content) < LIMIT + 100
        assert turn.content.endswith("[... 249,000 more characters cut: the limit is 1,000]")
    assert max(len(str(m.get("content"))) for msgs in sent for m in msgs) < LIMIT + 100  # sent on cut


def test_a_callable_agents_reply_is_cut_too_and_the_limit_is_checked() -> None:
    async def call(role: str, model: str, messages: list[dict[str, Any]], **_: Any) -> ChatResult:
        return ChatResult("DONE", (), "stop")

    cfg = _config(agent_model=None, agent_fn=lambda messages, tools: "y" * 5_000, max_turns=1)
    transcript = asyncio.run(run_dialogue(Task("t1", "c", "Help me", ()), 0, cfg, call))
    assert "4,000 more characters cut" in transcript.turns[1].content
    agents: list[ModelAgent | CallableAgent] = [ModelAgent("a", "m"), CallableAgent("b", lambda m, t: "")]
    assert Suite(agents=agents).max_reply_chars == 100_000
    with pytest.raises(SuiteError, match="max_reply_chars must be a whole number >= 1"):
        Suite(agents=agents, max_reply_chars=0)
