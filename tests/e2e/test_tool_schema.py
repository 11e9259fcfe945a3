"""Tool arguments are validated with the full JSON Schema draft, end to end: a model
asks for one valid call and one call per broken keyword through the real ``openai`` client (loopback
server); the transcript records return code 0 for the valid call and 2 with the validator's message for
every other, and the tool only ever receives the valid one.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_gauge._internal.run.judge import JUDGE_SYSTEM_PROMPT
from pytest_gauge.testing import LoopbackServer, completion, message_text, tool_call
from tests.helpers import read_jsonl

SUITE_DATA = Path(__file__).resolve().parents[1] / "data" / "schema_suite"
KEY = "sk-gauge-schema-test"
VALID: dict[str, Any] = {
    "flight": "GA123",
    "seats": 2,
    "note": "window",
    "meals": ["veg"],
    "currency": "EUR",
    "loyalty_id": None,
    "passenger": {"name": "Ada", "age": 36},
}
# (call id, arguments breaking exactly one keyword, the validator's message for it)
BROKEN: list[tuple[str, dict[str, Any], str]] = [
    ("minimum", {**VALID, "seats": 0}, "arguments.seats: 0 is less than the minimum of 1"),
    ("maximum", {**VALID, "seats": 9}, "arguments.seats: 9 is greater than the maximum of 4"),
    (
        "pattern",
        {**VALID, "flight": "ga123"},
        "arguments.flight: 'ga123' does not match '^[A-Z]{2}[0-9]{3}$'",
    ),
    ("maxLength", {**VALID, "note": "x" * 21}, f"arguments.note: '{'x' * 21}' is too long"),
    ("maxItems", {**VALID, "meals": ["a", "b", "c"]}, "arguments.meals: ['a', 'b', 'c'] is too long"),
    ("const", {**VALID, "currency": "USD"}, "arguments.currency: 'EUR' was expected"),
    (
        "anyOf",
        {**VALID, "loyalty_id": "abc"},
        "arguments.loyalty_id: 'abc' is not valid under any of the given schemas",
    ),
    ("ref", {**VALID, "passenger": {"age": 36}}, "arguments.passenger: 'name' is a required property"),
    (
        "ref_deep",
        {**VALID, "passenger": {"name": "Ada", "age": -1}},
        "arguments.passenger.age: -1 is less than",
    ),
]


def responder(body: dict[str, Any]) -> dict[str, Any]:
    """The judge prefers A; the user sends the task and stops; each agent makes every call at once."""
    messages = body["messages"]
    system = message_text(messages[0]["content"]) if messages[0]["role"] == "system" else ""
    if system == JUDGE_SYSTEM_PROMPT:
        return completion(json.dumps({"winner": "A", "reward_a": 1, "reward_b": 1, "reason": "same"}))
    if "You are role-playing a user" in system:
        if len(messages) == 2:
            found = re.search(r"<task>\n(.*?)\n</task>", system, re.DOTALL)
            assert found is not None
            return completion(found.group(1))
        return completion("[DONE] satisfied=yes")
    if any(m["role"] == "tool" for m in messages):
        return completion("Booked.")
    calls = [tool_call("valid", "book_seat", VALID)]
    calls += [tool_call(call_id, "book_seat", args) for call_id, args, _ in BROKEN]
    return completion(None, tool_calls=calls)


@pytest.fixture
def server(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopbackServer]:
    target = pytester.path / "suites" / "schema"
    target.mkdir(parents=True)
    shutil.copy(SUITE_DATA / "tasks.jsonl", target / "tasks.jsonl")
    shutil.copy(SUITE_DATA / "suite_schema.py", target / "test_schema_suite.py")
    pytester.makeini("[pytest]\ngauge_seed = 3\n")
    srv = LoopbackServer(responder).start()
    monkeypatch.setenv("TAOTOKEN_API_KEY", KEY)
    monkeypatch.setenv("TAOTOKEN_BASE_URL", srv.base_url)
    yield srv
    srv.stop()


@pytest.mark.slow  # one live plugin run in a subprocess
def test_each_broken_keyword_is_code_2_with_the_validators_message_and_the_tool_never_sees_it(
    pytester: pytest.Pytester, server: LoopbackServer
) -> None:
    result = pytester.runpytest_subprocess(
        "suites",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:randomly",
        "--gauge-cache",
        "off",
        "--gauge-backend",
        "live",
    )
    result.assert_outcomes(passed=1)  # orders="seeded": one case for the one pair
    for agent in ("agent_x", "agent_y"):
        [transcript] = read_jsonl(pytester.path / "gauge-out" / "schema" / "agents" / f"{agent}.jsonl")
        calls = [c for t in transcript["turns"] if t["role"] == "assistant" for c in t["tool_calls"]]
        assert [c["id"] for c in calls] == ["valid", *(call_id for call_id, _, _ in BROKEN)]
        valid, *broken = calls
        assert (valid["return_code"], valid["error"], valid["arguments"]) == (0, None, VALID)
        assert json.loads(valid["result"]) == {"booked": 2, "flight": "GA123"}
        for call, (call_id, args, message) in zip(broken, BROKEN, strict=True):
            assert (call["return_code"], call["arguments"]) == (2, args), call_id
            assert call["error"].startswith(f"arguments do not match the tool's schema: {message}"), call
            assert call["result"] == f"error: {call['error']}"
    received = read_jsonl(pytester.path / "book_seat_calls.jsonl")
    assert received == [VALID, VALID]  # once per agent: no broken call reached the tool
