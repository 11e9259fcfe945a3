"""A replay miss names what differs from the nearest recorded request of the same work and model:
an agent program whose request changed between recording and replay."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_gauge._internal.gateway.replay_diff import differences, nearest_difference
from pytest_gauge._internal.gateway.store import Store

WORK = "transcript/t1/codex/0"


def _body(prompt: str, tools: tuple[str, ...] = ("lookup_order",)) -> dict[str, Any]:
    return {
        "model": "m",
        "input": [{"type": "message", "role": "user", "content": prompt}],
        "tools": [{"type": "function", "name": n, "parameters": {}} for n in tools],
    }


def _store(tmp_path: Path, *bodies: tuple[str, str, dict[str, Any]]) -> Store:
    store = Store(tmp_path / "responses")
    for i, (work, model, body) in enumerate(bodies):
        store.put(f"{i:064x}", {"meta": {"work": work, "model": model}, "request": body, "response": {}})
    return store


def test_the_nearest_recording_and_its_first_difference_are_named(tmp_path: Path) -> None:
    store = _store(
        tmp_path,
        (WORK, "m", _body("What is the status of order B456?", ("lookup_order", "refund"))),
        (WORK, "m", _body("What is the status of order B456, and its carrier?")),
        ("transcript/t2/codex/0", "m", _body("What is the status of order B457?")),
    )
    said = nearest_difference(store, WORK, "m", "responses", _body("What is the status of order B456?"))
    assert said is not None
    assert "differs in 1 part(s), first at tools[1]" in said
    assert "now (absent), recorded {'name': 'refund'" in said
    said = nearest_difference(
        store, WORK, "m", "responses", _body("Where is B456?", ("lookup_order", "refund"))
    )
    assert said is not None and "first at input[0].content: now 'Where is B456?'" in said


def test_nothing_recorded_for_the_work_says_nothing(tmp_path: Path) -> None:
    store = _store(tmp_path, ("transcript/t2/codex/0", "m", _body("x")))
    assert nearest_difference(store, WORK, "m", "responses", _body("x")) is None


def test_differences_walks_dicts_and_lists() -> None:
    assert list(differences({"a": [1, 2], "b": "x"}, {"a": [1], "b": "x"})) == [("a[1]", 2, None)]
