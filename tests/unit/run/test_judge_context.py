"""The judge's prompt fits ``Judge(context_tokens=...)``: long transcripts lose middle turns (marked with
how much was left out), never the task, the rules or the final replies."""

from __future__ import annotations

from pytest_gauge.records import Transcript, Turn
from pytest_gauge.run.judge import Redactor, judge_prompt, shorten_transcript
from pytest_gauge.suite.rules import parse_rules
from pytest_gauge.suite.tasks import Task


def _long(agent: str, turns: int) -> Transcript:
    rows = [Turn("user", "Plan my week, please.")]
    for i in range(turns):
        rows += [
            Turn("assistant", f"Step {i}: " + "detail " * 120),
            Turn("user", f"And then {i}? " + "x " * 150),
        ]
    rows.append(Turn("assistant", f"FINAL from {agent}: done."))
    return Transcript("t1", agent, 0, rows, rows[-1].content, True, "user_done")


def test_middle_turns_go_first_and_the_marker_says_how_much() -> None:
    transcript = _long("a", 12)
    text, cut = shorten_transcript(transcript, Redactor([]), 3000)
    assert len(text) <= 3000 and cut > 0
    assert text.startswith("[user]\nPlan my week, please.\n[")
    assert text.endswith("[assistant]\nFINAL from a: done.")
    assert "characters) omitted to fit the judge's context]" in text and f"({cut} characters)" in text
    whole, none_cut = shorten_transcript(transcript, Redactor([]), 10**6)
    assert none_cut == 0 and "omitted" not in whole


def test_the_prompt_fits_the_judges_context_window() -> None:
    rules = parse_rules([{"type": "contains_all", "phrases": ["done"]}], field="success_criteria")
    task = Task("t1", "multi_step", "Plan my week, please.", rules)
    left, right = _long("a", 20), _long("b", 20)
    messages, cut = judge_prompt(task, left, right, Redactor([]), context_tokens=4096, answer_tokens=300)
    chars = sum(len(m["content"]) for m in messages)
    assert chars / 3 + 300 <= 4096 and cut > 0
    body = messages[1]["content"]
    assert "<task>\nPlan my week, please.\n</task>" in body and '"done"' in body
    assert "FINAL from a: done." in body and "FINAL from b: done." in body
    _, uncut = judge_prompt(task, left, right, Redactor([]))  # no window given: the 12,000-character cap
    assert uncut < cut
