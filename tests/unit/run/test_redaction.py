"""The judge's name redaction: whole identifiers only (an agent named with an ordinary word leaves other
words alone), the task and its rules kept as written, and the sides' own text still blind."""

from __future__ import annotations

from pytest_gauge._internal.records import Transcript, Turn
from pytest_gauge._internal.run.judge import REDACTED, Redactor, build_judge_messages
from pytest_gauge._internal.suite.rules import parse_rules
from pytest_gauge._internal.suite.tasks import Task


def test_names_are_redacted_as_whole_identifiers_only() -> None:
    redact = Redactor(["terse", "sim-agent-x", "agent_x"])
    assert redact("terseness and interest stay") == "terseness and interest stay"
    assert redact("I am Terse, running sim-agent-x.") == f"I am {REDACTED}, running {REDACTED}."
    assert redact("agent_x's reply, agent_x_v2") == f"{REDACTED}'s reply, {REDACTED}_v2"
    assert redact("xagent_x9") == "xagent_x9"


def test_the_task_and_rules_are_kept_and_the_sides_are_blind() -> None:
    rules = parse_rules([{"type": "contains_all", "phrases": ["terse"]}], field="success_criteria")
    task = Task("t1", "constraint", "Give a terse answer: what is 2 + 2?", rules)
    turns = [Turn("user", task.task_prompt), Turn("assistant", "I am terse. 4")]
    side = Transcript("t1", "terse", 0, turns, "I am terse. 4", None, "user_done")
    text = build_judge_messages(task, side, side, Redactor(["terse"]))[1]["content"]
    assert "<task>\nGive a terse answer: what is 2 + 2?\n</task>" in text
    assert '"terse"' in text  # the rule's description, as written
    assert "[user]\nGive a terse answer" in text  # the opening is the task
    assert text.count(f"I am {REDACTED}. 4") == 2  # each side's reply
    assert "I am terse" not in text
