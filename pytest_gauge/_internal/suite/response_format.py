"""The judge's ``response_format`` setting as a suite declares it: the chain of formats it
stands for, tried in order, and the label a verdict records. Asking the judge with it, and falling back
once per model, is :mod:`pytest_gauge._internal.run.judge_format`'s."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..records.json_types import JSONObject

__all__ = [
    "AUTO",
    "JSON_OBJECT",
    "JSON_SCHEMA",
    "VERDICT_SCHEMA",
    "FormatChain",
    "format_chain",
    "format_label",
]

AUTO = "auto"

VERDICT_SCHEMA: JSONObject = {
    "type": "object",
    "properties": {
        "winner": {"type": "string", "enum": ["A", "B", "tie"]},
        "reward_a": {"type": "number"},
        "reward_b": {"type": "number"},
        "reason": {"type": "string"},
    },
    "required": ["winner", "reward_a", "reward_b", "reason"],
    "additionalProperties": False,
}
"""The verdict as the judge prompt asks for it (rewards 0..1 are checked by the parser: strict schemas
of several gateways refuse ``minimum``/``maximum``)."""

JSON_SCHEMA: JSONObject = {
    "type": "json_schema",
    "json_schema": {"name": "judge_verdict", "strict": True, "schema": VERDICT_SCHEMA},
}
JSON_OBJECT: JSONObject = {"type": "json_object"}

FormatChain = tuple[JSONObject | None, ...]


def format_chain(setting: str | Mapping[str, Any] | None) -> FormatChain:
    """The formats to try in order, the last one always the prompt alone (None).

    ``"auto"``: json_schema, json_object, none. ``"json_object"`` / ``"json_schema"``: start there.
    A mapping is sent as given first (a ``json_schema`` mapping falls back to json_object next).
    ``None``: the prompt alone, no fallback needed.
    """
    if setting is None:
        return (None,)
    if isinstance(setting, str):
        if setting in (AUTO, "json_schema"):
            return (JSON_SCHEMA, JSON_OBJECT, None)
        if setting == "json_object":
            return (JSON_OBJECT, None)
        raise ValueError(
            f"Judge(response_format={setting!r}): use 'auto', 'json_schema', 'json_object', a mapping "
            "such as {'type': 'json_object'}, or None"
        )
    first = dict(setting)
    if first.get("type") == "json_schema":
        return (first, JSON_OBJECT, None)
    return (first, None)


def format_label(fmt: Mapping[str, Any] | None) -> str:
    """``json_schema``, ``json_object`` (the format's type) or ``none`` for the prompt alone."""
    return str(fmt.get("type", "custom")) if fmt else "none"
