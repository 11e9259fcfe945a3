"""The user audit's rule checks on hand-made transcripts: ``contradicted`` flags a
user turn that gives a fact (hidden or of the persona) a value other than the true one, and nothing
else; the other kinds stay as they were. The optional audit model's request, the simulator's answer to
it and the reading of its answer (``judged``)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from pytest_gauge._internal.records import Transcript, Turn
from pytest_gauge._internal.run.user_audit import (
    USER_AUDIT_KINDS,
    audit_user,
    contradicted,
    fact_slots,
    parse_user_audit,
    user_audit_messages,
)
from pytest_gauge._internal.sim import SimBackend, SimWorld
from pytest_gauge._internal.suite.tasks import Task

_TASK = Task(
    task_id="t",
    category="clarification",
    task_prompt="Book me a table for dinner.",
    success_criteria=(),
    hidden_facts=("Party of 4", "Friday at 7pm", "I am on the pro plan"),
    persona="My name is Ana; budget: 50 euros. Three days in May",
)


def _said(*user: str) -> Transcript:
    turns: list[Turn] = []
    for text in user:
        turns += [Turn("user", text), Turn("assistant", "How many people, and when?")]
    return Transcript("t", "a", 0, turns, turns[-1].content, None, "max_turns")


def test_the_readable_facts_are_read_from_hidden_facts_and_persona_clauses() -> None:
    assert fact_slots(_TASK) == [
        (("party", "of"), "4", False),
        (("friday", "at"), "7pm", False),
        (("my", "name", "is"), "ana", False),
        (("budget",), "50", False),
        (("days", "in"), "3", True),
    ]


@pytest.mark.parametrize(
    "turns",
    [
        ("Book me a table for dinner.", "Party of 4, Friday at 7pm."),
        ("Book me a table for dinner.", "party of four on friday at 7pm", "Yes, party of 4."),
        ("Book me a table for dinner.", "My name is Ana and my budget is about 50 euros."),
        ("Book me a table for dinner.", "It is not a party of 5, a party of 4.", "I'm on the pro plan"),
        ("Book me a table for dinner.", "Three days in may would suit me."),
        ("Book me a table for dinner.", "Party of"),
    ],
)
def test_true_values_and_unreadable_statements_are_not_contradictions(turns: tuple[str, ...]) -> None:
    assert not contradicted(_TASK, _said(*turns))
    assert "contradicted" not in audit_user(_TASK, _said(*turns), True, 10)


@pytest.mark.parametrize(
    "turns",
    [
        # against the hidden facts
        ("Book me a table for dinner.", "Party of 5, Friday at 7pm."),
        ("Book me a table for dinner.", "Friday at 8pm please."),
        # against an earlier turn of its own (the second value differs from the first, the true one)
        ("Book me a table for dinner.", "Party of 4.", "Sorry, party of six."),
        # against the persona
        ("Book me a table for dinner.", "My name is Bob."),
        ("Book me a table for dinner.", "My budget is roughly 80 euros."),
        ("Book me a table for dinner.", "Five days in May."),
    ],
)
def test_a_different_value_for_a_fact_is_a_contradiction(turns: tuple[str, ...]) -> None:
    assert contradicted(_TASK, _said(*turns))
    assert audit_user(_TASK, _said(*turns), True, 10) == ("contradicted",)


def test_facts_sharing_a_key_allow_each_value_and_a_task_without_facts_is_never_flagged() -> None:
    task = Task("t", "c", "Find my rooms.", (), hidden_facts=("Room 12", "Room 14"))
    assert not contradicted(task, _said("Find my rooms.", "Room 12 and room 14"))
    assert contradicted(task, _said("Find my rooms.", "Room 15"))
    bare = Task("t", "c", "Say hi.", ())
    assert not contradicted(bare, _said("Say hi.", "Party of 9, my name is Bob"))
    assert USER_AUDIT_KINDS.index("contradicted") == USER_AUDIT_KINDS.index("no_task") + 1


def test_the_work_is_bounded_on_a_huge_turn() -> None:
    huge = "party of 4 " * 50_000 + "party of 5"
    assert not contradicted(_TASK, _said("Book me a table for dinner.", huge))


def _ask_sim(task: Task, transcript: Transcript) -> str | None:
    """The simulator's audit model on ``transcript`` (the request the run sends), parsed as the run does."""
    body = {"model": "sim-audit", "messages": user_audit_messages(task, transcript), "temperature": 0.0}
    world = SimWorld(seed=1, tasks=(task,))
    status, payload = SimBackend(world).handle("POST", "/v1/chat/completions", json.dumps(body).encode())
    assert status == 200
    return parse_user_audit(payload["choices"][0]["message"]["content"])


def test_the_simulated_audit_model_finds_a_contradiction_or_a_silent_turn_and_nothing_else() -> None:
    contradicting = _said("Book me a table for dinner.", "Party of 5.")
    assert _ask_sim(_TASK, contradicting) == "the user contradicted its own facts"
    assert _ask_sim(_TASK, _said("Book me a table for dinner.", "")) == "the user said nothing in a turn"
    assert _ask_sim(_TASK, _said("Book me a table for dinner.", "Party of 4,\nFriday at 7pm.")) is None
    flagged = replace(contradicting, user_audit="the user contradicted its own facts")
    assert audit_user(_TASK, flagged, True, 10) == ("contradicted", "judged")
    assert Transcript.from_json(flagged.to_json()) == flagged
    assert "user_audit" not in contradicting.to_json()  # unchanged bytes without the audit


@pytest.mark.parametrize(
    ("answer", "found"),
    [
        ('{"erred": true, "reason": "It leaked the date."}', "It leaked the date."),
        ('Sure: {"erred": true}', "erred"),
        ('{"erred": false, "reason": "fine"}', None),
        ('{"erred": "yes"}', None),
        ("no JSON here", None),
        ("{not json}", None),
    ],
)
def test_the_audit_answer_is_read_strictly(answer: str, found: str | None) -> None:
    assert parse_user_audit(answer) == found
