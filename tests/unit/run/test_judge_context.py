"""The judge's prompt fits ``Judge(context_tokens=...)``: long transcripts lose middle turns (marked with
how much was left out), never the task, the rules or the final replies."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

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


def test_the_judges_window_comes_from_the_price_table_when_not_given(tmp_path: Path) -> None:
    from pytest_gauge.gateway.prices import load_prices, parse_price_lines
    from pytest_gauge.records.prices import PriceTable
    from pytest_gauge.run.work import SuiteRuntime
    from pytest_gauge.suite.declare import Judge, ModelAgent, Suite

    rows = parse_price_lines(["judge-a 1 2 context=4096", "judge-b 1 2 0.5 context=8192", "other 1 2"])
    assert rows[0] == ("judge-a", 1.0, 2.0, None, "ini gauge_prices", 4096) and len(rows[2]) == 5
    table = PriceTable.from_rows(tuple(rows))
    assert table.context_tokens("judge-b") == 8192 and table.context_tokens("other") is None
    assert PriceTable.from_rows(tuple(table.rows())) == table  # the rows workers get keep the window
    (tmp_path / "p.json").write_text('{"m": {"input": 1, "output": 2, "context_tokens": 2048}}')
    assert load_prices(ini_lines=[], file="p.json", environ={}, base=tmp_path).context_tokens("m") == 2048

    def window(judge: Judge) -> int | None:
        gateway = SimpleNamespace(resources=SimpleNamespace(prices=table))
        suite = Suite(name="s", agents=[ModelAgent("a", "m-a"), ModelAgent("b", "m-b")], judge=judge)
        return SuiteRuntime("s", suite, {}, cast(Any, gateway)).judge_context()

    assert window(Judge(model="judge-b", extra_models=("judge-a", "other"))) == 4096  # a panel's smallest
    assert window(Judge(model="judge-b", context_tokens=1000)) == 1000  # the declared one wins
    assert window(Judge(model="other")) is None


def test_a_bad_context_column_names_the_line_or_the_file(tmp_path: Path) -> None:
    from pytest_gauge.gateway.prices import load_prices, parse_price_lines

    with pytest.raises(pytest.UsageError, match="context= must be a positive"):
        parse_price_lines(["m 1 2 context=0"])
    with pytest.raises(pytest.UsageError, match="must be numbers"):
        parse_price_lines(["m 1 2 context=big"])
    (tmp_path / "p.json").write_text('{"m": {"input": 1, "output": 2, "context_tokens": -5}}')
    with pytest.raises(pytest.UsageError, match=r"p\.json.*context_tokens of 'm'"):
        load_prices(ini_lines=[], file="p.json", environ={}, base=tmp_path)
