"""A tests-only suite for argument validation: one tool whose schema uses the keywords the
old subset ignored (minimum, maximum, pattern, maxLength, maxItems, const, anyOf and a $ref into $defs).

``tests/test_tool_schema.py`` copies this folder into a pytester directory as ``suites/schema/`` with this
module renamed ``test_schema_suite.py`` and drives both agents through the real ``openai`` client against
the loopback server. Every call that reaches the tool is appended to ``book_seat_calls.jsonl`` in the
working directory, so the test can see which calls the tool never received.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pytest_gauge import Judge, ModelAgent, Suite, Tool, UserSimulator

__all__ = ["BOOK_SEAT_SCHEMA", "CALLS_LOG", "book_seat", "suite"]

CALLS_LOG = Path("book_seat_calls.jsonl")

BOOK_SEAT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "flight": {"type": "string", "pattern": "^[A-Z]{2}[0-9]{3}$"},
        "seats": {"type": "integer", "minimum": 1, "maximum": 4},
        "note": {"type": "string", "maxLength": 20},
        "meals": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
        "currency": {"const": "EUR"},
        "loyalty_id": {"anyOf": [{"type": "string", "minLength": 6}, {"type": "null"}]},
        "passenger": {"$ref": "#/$defs/passenger"},
    },
    "required": ["flight", "seats", "passenger"],
    "$defs": {
        "passenger": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
            "required": ["name"],
        }
    },
}


def book_seat(**arguments: Any) -> dict[str, Any]:
    """Book the seats; logs every call it really receives."""
    with CALLS_LOG.open("a", encoding="utf-8") as f:
        f.write(json.dumps(arguments, sort_keys=True) + "\n")
    return {"booked": arguments["seats"], "flight": arguments["flight"]}


suite = Suite(
    agents=[ModelAgent("agent_x", "model-x"), ModelAgent("agent_y", "model-y")],
    judge=Judge("judge-model"),
    user=UserSimulator("user-model", max_turns=1),
    tools=[Tool("book_seat", "Book seats on a flight", BOOK_SEAT_SCHEMA, book_seat)],
    orders="seeded",
)
