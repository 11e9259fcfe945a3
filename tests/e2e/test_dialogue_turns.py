"""The conversation's first and empty turns in real runs: the simulated user opens with the task text
verbatim (its model is asked only from the second user message on), and a turn with nothing said is
flagged in the transcript, counted in conclusion.md and gateable with ``empty_turn_rate``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import MINI_INI, read_jsonl, run_inprocess

SUITE = """
from pytest_gauge import CallableAgent, Judge, Suite, UserSimulator


async def blank(messages, tools):
    return "   "  # says nothing


async def echo(messages, tools):
    return "You asked: " + messages[0]["content"]


suite = Suite(
    agents=[CallableAgent("blank", blank), CallableAgent("echo", echo)],
    judge=Judge("sim-judge"),
    user=UserSimulator("sim-user", max_turns=2),
    gates=["empty_turn_rate(echo) <= 0", "empty_turn_rate(blank) <= 0.5"],
)
"""

TASKS: list[dict[str, Any]] = [
    {"format_version": 1},
    {
        "task_id": "t1",
        "category": "information_retrieval",
        "task_prompt": "  Name the three plan tiers: basic, pro and enterprise.  ",
        "success_criteria": [{"type": "contains_all", "phrases": ["basic"]}],
    },
    {
        "task_id": "t2",
        "category": "clarification",
        "task_prompt": "Book me a table for dinner.",
        "hidden_facts": ["Party of 4"],
        "success_criteria": [{"type": "asks_clarification"}],
    },
]


@pytest.fixture
def turns_suite(pytester: pytest.Pytester) -> Path:
    folder = pytester.path / "suites" / "turns"
    folder.mkdir(parents=True)
    (folder / "test_turns.py").write_text(SUITE)
    (folder / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in TASKS))
    pytester.makeini(MINI_INI)
    return folder


def test_the_user_opens_with_the_task_and_empty_turns_are_flagged_and_gated(
    pytester: pytest.Pytester, turns_suite: Path
) -> None:
    result = run_inprocess(pytester, "suites", "-n", "0")
    out = pytester.path / "gauge-out" / "turns"
    result.stdout.fnmatch_lines(["*FAILED*gates?empty_turn_rate(blank) <= 0.5*"])
    result.assert_outcomes(passed=4 + 1, failed=1)  # 4 cases, the echo gate; the blank gate fails

    tasks = {str(t["task_id"]): str(t["task_prompt"]) for t in TASKS[1:]}
    for agent in ("blank", "echo"):
        for row in read_jsonl(out / "agents" / f"{agent}.jsonl"):
            first = row["turns"][0]
            assert first["role"] == "user" and first["content"] == tasks[row["task_id"]]  # verbatim
            for turn in row["turns"]:
                blank = not turn["content"].strip() and not turn["tool_calls"]
                assert turn.get("empty", False) is blank
            if agent == "blank":
                assert any(t.get("empty") for t in row["turns"] if t["role"] == "assistant")

    ledger = read_jsonl(out / "agent_runs.jsonl")
    for agent in ("blank", "echo"):
        for row in read_jsonl(out / "agents" / f"{agent}.jsonl"):
            work = f"transcript/{row['task_id']}/{agent}/{row['sample']}"
            calls = sum(1 for r in ledger if r["work"] == work and r["role"] == "user_sim")
            user_turns = sum(1 for t in row["turns"] if t["role"] == "user")
            done = 1 if row["ended_by"] == "user_done" else 0
            assert calls == user_turns - 1 + done  # the opening is not a model call
    conclusion = (out / "reports" / "conclusion.md").read_text()
    assert "## Empty turns" in conclusion
    assert "blank: 2 in 2 transcripts" in conclusion
    metrics = json.loads((out / "reports" / "metrics.json").read_text())
    assert metrics["metrics"]["empty_turn_rate(blank)"]["value"] == 1.0
    assert metrics["metrics"]["empty_turn_rate(echo)"]["value"] == 0.0
