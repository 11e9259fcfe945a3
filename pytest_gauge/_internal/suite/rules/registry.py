"""The registry of rule types, the parsing of rule objects from ``tasks.jsonl`` and the verifier's reward."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from ...records import Transcript
from .base import (
    CustomCheck,
    Rule,
    RuleArgs,
    RuleCommon,
    RuleSpecError,
    Score,
    is_number,
    quote,
)
from .text import (
    AsksClarification,
    ContainsAll,
    ContainsAny,
    ContainsNone,
    InOrder,
    JsonKeys,
    MaxChars,
    MaxWords,
    PythonCheck,
    RefusesWithAlternative,
    Regex,
)
from .tool_calls import (
    NoCallAfterFailure,
    ToolArgs,
    ToolCallCount,
    ToolCalled,
    ToolNotCalled,
    ToolOrder,
    ToolReturnCode,
)
from .workspace import CommandSucceeds, FileContains, FileExists

__all__ = ["RULE_TYPES", "parse_rule", "parse_rules", "score", "tools_named"]


_CLASSES: tuple[Any, ...] = (
    ContainsAll, ContainsAny, ContainsNone, Regex, MaxWords, MaxChars, InOrder, JsonKeys,
    AsksClarification, RefusesWithAlternative, PythonCheck, ToolCalled, ToolNotCalled, ToolArgs,
    ToolOrder, ToolCallCount, ToolReturnCode, NoCallAfterFailure, FileExists, FileContains,
    CommandSucceeds,
)  # fmt: skip

RULE_TYPES: Mapping[str, type[Rule]] = MappingProxyType({c.type: c for c in _CLASSES})
_COMMON = ("type", "weight", "description")


def parse_rule(obj: object, *, field: str, custom: Mapping[str, CustomCheck] | None = None) -> Rule:
    """Validate one rule object from ``tasks.jsonl`` and build it; errors name ``field`` and the culprit."""
    if isinstance(obj, Rule):
        return obj
    if not isinstance(obj, dict):
        raise RuleSpecError(field, f"a rule must be a JSON object, got {quote(obj)}")
    valid = ", ".join(RULE_TYPES)
    if "type" not in obj:
        raise RuleSpecError(f"{field}.type", f"missing rule type; valid types: {valid}")
    name = obj["type"]
    cls = RULE_TYPES.get(name) if isinstance(name, str) else None
    if cls is None:
        raise RuleSpecError(f"{field}.type", f"unknown rule type {quote(name)}; valid types: {valid}")
    for key in obj:
        if key not in _COMMON and key not in cls._ARGS:
            allowed = ", ".join((*cls._ARGS, "weight", "description"))
            raise RuleSpecError(
                f"{field}.{key}", f"unknown argument {key!r} for rule type {name!r}; allowed: {allowed}"
            )
    for key in cls._REQUIRED:
        if key not in obj:
            raise RuleSpecError(f"{field}.{key}", f"missing required argument {key!r} for rule type {name!r}")
    weight = obj.get("weight", 1.0)
    if not is_number(weight) or not math.isfinite(weight) or weight <= 0:
        raise RuleSpecError(f"{field}.weight", f"must be a number > 0, got {quote(weight)}")
    description = obj.get("description")
    if description is not None and (not isinstance(description, str) or not description.strip()):
        raise RuleSpecError(f"{field}.description", f"must be a non-empty string, got {quote(description)}")
    common: RuleCommon = {"weight": float(weight), "description": description}
    rule: Rule = cls._build(RuleArgs(obj, field, custom or {}), common)
    return rule


def tools_named(rule: Rule) -> tuple[tuple[str, str], ...]:
    """The (argument, tool name) pairs a tool rule names (``tool_called``, ``tool_order``,
    ``no_call_after_failure`` ...); empty for the other rules. Collection checks them against the
    suite's tools: a typo in a tool's name would make the task impossible to pass, silently."""
    if isinstance(rule, ToolOrder):
        return tuple((f"names[{i}]", n) for i, n in enumerate(rule.names))
    if isinstance(rule, NoCallAfterFailure):
        return (("precondition", rule.precondition), ("then", rule.then))
    tool_rules = ToolCalled | ToolNotCalled | ToolArgs | ToolCallCount | ToolReturnCode
    if isinstance(rule, tool_rules):
        return (("name", rule.name),)
    return ()


def parse_rules(
    objs: object, *, field: str, custom: Mapping[str, CustomCheck] | None = None
) -> tuple[Rule, ...]:
    """Validate a list of rules (``success_criteria`` or ``hard_constraints``); element i is ``field[i]``."""
    if not isinstance(objs, list | tuple):
        raise RuleSpecError(field, f"must be a list of rules, got {quote(objs)}")
    return tuple(parse_rule(o, field=f"{field}[{i}]", custom=custom) for i, o in enumerate(objs))


def score(criteria: Sequence[Rule], constraints: Sequence[Rule], transcript: Transcript) -> Score:
    """The verifier's reward (docs/protocol.md#reward): 0 if any hard constraint fails, else the weighted
    fraction of criteria met (1.0 with no criteria); ``task_success`` needs every criterion and constraint."""
    crit = tuple(r.check(transcript) for r in criteria)
    cons = tuple(r.check(transcript) for r in constraints)
    broken = not all(r.passed for r in cons)
    total = sum(r.weight for r in criteria)
    met = sum(r.weight for r, res in zip(criteria, crit, strict=True) if res.passed)
    if broken:
        reward = 0.0
    elif not criteria:
        reward = 1.0
    else:
        reward = met / total
    return Score(
        reward=reward,
        task_success=not broken and all(r.passed for r in crit),
        criteria=crit,
        constraints=cons,
    )
