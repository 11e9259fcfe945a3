"""The JSON types at the package's seams: :data:`JSONObject` where a shape is open, TypedDicts where it
is closed. Closed shapes (what a record writes) are checked by the type checker; an open one (a wire
body, a chat message, a tool's schema or arguments, a file's row before its checks) is checked at run
time by the code that reads it, and says so by its name."""

from __future__ import annotations

from typing import Any, NotRequired, TypeAlias, TypedDict

__all__ = ["JSONObject", "UnitSpendJSON"]

JSONObject: TypeAlias = dict[str, Any]
"""A JSON object whose shape is open: what a server, a user's suite or a file may send, read by checks
at run time (a closed shape is a TypedDict instead)."""


class UnitSpendJSON(TypedDict):
    """What a unit of work spent (``UnitSpend.to_json``): tokens, cost, and unpriced calls when any."""

    input_tokens: int
    output_tokens: int
    cost: float | None
    unpriced_calls: NotRequired[int]
