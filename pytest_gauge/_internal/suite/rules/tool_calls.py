"""Rules on the agent's tool calls: called or not, arguments, order, count, return codes, a call after
a failure."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ...records import ToolCall, Transcript
from ...records.json_types import JSONObject
from ..regex_bound import PatternTimeout, bounded_search
from ..schema import CompiledSchema, SchemaError, compile_schema
from .base import (
    Rule,
    RuleArgs,
    RuleCommon,
    RuleResult,
    RuleSpecError,
    SimHint,
    compile_pattern,
    json_equal,
    quote,
    quote_list,
)

__all__ = [
    "NoCallAfterFailure",
    "ToolArgs",
    "ToolCallCount",
    "ToolCalled",
    "ToolNotCalled",
    "ToolOrder",
    "ToolReturnCode",
]


def _calls(transcript: Transcript, name: str) -> list[ToolCall]:
    return [c for c in transcript.tool_calls() if c.name == name]


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"


@dataclass(frozen=True, kw_only=True)
class ToolCalled(Rule):
    """The tool was called at least ``min_count`` times."""

    type: ClassVar[str] = "tool_called"
    _ARGS: ClassVar[tuple[str, ...]] = ("name", "min_count")
    _REQUIRED: ClassVar[tuple[str, ...]] = ("name",)

    name: str
    min_count: int = 1

    @classmethod
    def _build(cls, a: RuleArgs, common: RuleCommon) -> Rule:
        return cls(name=a.name("name"), min_count=a.integer("min_count", minimum=1, default=1), **common)

    def check(self, transcript: Transcript) -> RuleResult:
        n = len(_calls(transcript, self.name))
        return RuleResult(
            n >= self.min_count,
            f"tool {quote(self.name)} called {_times(n)}, needed at least {self.min_count}",
        )

    def _describe(self) -> str:
        times = "at least once" if self.min_count == 1 else f"at least {self.min_count} times"
        return f"The agent calls the tool {quote(self.name)} {times}."

    def hint(self, satisfy: bool) -> SimHint:
        if satisfy:
            return SimHint(tool_calls=tuple((self.name, {}) for _ in range(self.min_count)))
        if self.min_count == 1:
            return SimHint(avoid_tools=(self.name,))
        return SimHint(tool_calls=tuple((self.name, {}) for _ in range(self.min_count - 1)))


@dataclass(frozen=True, kw_only=True)
class ToolNotCalled(Rule):
    """The tool was never called."""

    type: ClassVar[str] = "tool_not_called"
    _ARGS: ClassVar[tuple[str, ...]] = ("name",)
    _REQUIRED: ClassVar[tuple[str, ...]] = ("name",)

    name: str

    @classmethod
    def _build(cls, a: RuleArgs, common: RuleCommon) -> Rule:
        return cls(name=a.name("name"), **common)

    def check(self, transcript: Transcript) -> RuleResult:
        n = len(_calls(transcript, self.name))
        if n:
            return RuleResult(False, f"tool {quote(self.name)} was called {_times(n)}")
        return RuleResult(True, f"tool {quote(self.name)} was not called")

    def _describe(self) -> str:
        return f"The agent never calls the tool {quote(self.name)}."

    def hint(self, satisfy: bool) -> SimHint:
        return SimHint(avoid_tools=(self.name,)) if satisfy else SimHint(tool_calls=((self.name, {}),))


def _changed(value: Any) -> Any:
    """A JSON value that is certainly not equal to ``value`` (to break an argument match)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, str):
        return value + "9"
    if isinstance(value, list):
        return [*value, "9"]
    if isinstance(value, dict):
        return {**value, "_changed": True}
    return "9"


@dataclass(frozen=True, kw_only=True)
class ToolArgs(Rule):
    """Some call of the tool has well-formed arguments matching every exact value (JSON equality,
    123 == 123.0 but "123" != 123), every pattern (``re.fullmatch`` on ``str(value)``) and the schema."""

    type: ClassVar[str] = "tool_args"
    _ARGS: ClassVar[tuple[str, ...]] = ("name", "args", "patterns", "schema")
    _REQUIRED: ClassVar[tuple[str, ...]] = ("name",)

    name: str
    args: JSONObject = field(default_factory=dict, hash=False)
    patterns: dict[str, str] = field(default_factory=dict, hash=False)
    schema: JSONObject | None = field(default=None, hash=False)
    validator: CompiledSchema | None = field(default=None, hash=False, compare=False, repr=False)

    @classmethod
    def _build(cls, a: RuleArgs, common: RuleCommon) -> Rule:
        name = a.name("name")
        args = a.obj.get("args", {})
        if not isinstance(args, dict):
            raise RuleSpecError(a.at("args"), f"must be an object of argument values, got {quote(args)}")
        patterns = a.obj.get("patterns", {})
        if not isinstance(patterns, dict):
            raise RuleSpecError(
                a.at("patterns"), f"must be an object of regular expressions, got {quote(patterns)}"
            )
        for key, pattern in patterns.items():
            compile_pattern(pattern, f"{a.at('patterns')}.{key}")
        schema = a.obj.get("schema")
        compiled = None
        if schema is not None or a.has("schema"):
            try:
                compiled = compile_schema(schema, a.at("schema"))
            except SchemaError as exc:
                reason = f"{exc.reason} (the JSON Schema for the arguments of tool {quote(name)})"
                raise RuleSpecError(exc.where + exc.path, reason) from None
        if not args and not patterns and schema is None:
            raise RuleSpecError(
                a.path,
                "tool_args needs at least one of args, patterns, schema "
                "(use tool_called to only require a call)",
            )
        return cls(
            name=name, args=dict(args), patterns=dict(patterns), schema=schema, validator=compiled, **common
        )

    def _mismatch(self, arguments: JSONObject) -> str | None:
        for key, want in self.args.items():
            if key not in arguments:
                return f"{key} missing"
            if not json_equal(want, arguments[key]):
                return f"{key} was {quote(arguments[key])}, expected {quote(want)}"
        for key, pattern in self.patterns.items():
            if key not in arguments:
                return f"{key} missing"
            try:
                matched = bounded_search(pattern, str(arguments[key]), full=True)
            except PatternTimeout as exc:
                return str(exc)
            if matched is None:
                return f"{key} was {quote(arguments[key])}, not matching {pattern!r}"
        if self.validator is not None:
            return self.validator.first_error(arguments)
        return None

    def check(self, transcript: Transcript) -> RuleResult:
        calls = _calls(transcript, self.name)
        if not calls:
            return RuleResult(False, f"tool {quote(self.name)} was never called")
        first_reason = None
        for i, call in enumerate(calls):
            if call.arguments is None:
                reason = "malformed arguments"
            else:
                found = self._mismatch(call.arguments)
                if found is None:
                    return RuleResult(True, f"call {i + 1} of {quote(self.name)} has the required arguments")
                reason = found
            first_reason = first_reason or reason
        return RuleResult(
            False, f"no call of {quote(self.name)} matched ({len(calls)} call(s); first: {first_reason})"
        )

    def _describe(self) -> str:
        parts = [f"{k}={quote(v)}" for k, v in self.args.items()]
        parts += [f"{k} matching /{p}/" for k, p in self.patterns.items()]
        if self.schema is not None:
            parts.append("arguments that satisfy the given JSON schema")
        return f"The agent calls the tool {quote(self.name)} with {', '.join(parts)}."

    def hint(self, satisfy: bool) -> SimHint:
        extra: JSONObject = {}
        if self.patterns:
            extra["patterns"] = dict(self.patterns)
        if self.schema is not None:
            extra["schema"] = copy.deepcopy(self.schema)
        if satisfy:
            return SimHint(tool_calls=((self.name, copy.deepcopy(self.args)),), extra=extra)
        if not self.args:
            return SimHint(avoid_tools=(self.name,))
        key = next(iter(self.args))
        broken = {**copy.deepcopy(self.args), key: _changed(self.args[key])}
        return SimHint(tool_calls=((self.name, broken),), extra=extra)


@dataclass(frozen=True, kw_only=True)
class ToolOrder(Rule):
    """Every named tool was called, and their first calls happen in the given order."""

    type: ClassVar[str] = "tool_order"
    _ARGS: ClassVar[tuple[str, ...]] = ("names",)
    _REQUIRED: ClassVar[tuple[str, ...]] = ("names",)

    names: tuple[str, ...]

    @classmethod
    def _build(cls, a: RuleArgs, common: RuleCommon) -> Rule:
        return cls(names=a.strings("names", min_items=2, unique=True), **common)

    def check(self, transcript: Transcript) -> RuleResult:
        first: dict[str, int] = {}
        for i, call in enumerate(transcript.tool_calls()):
            first.setdefault(call.name, i)
        missing = [n for n in self.names if n not in first]
        if missing:
            return RuleResult(False, f"tool(s) never called: {quote_list(missing)}")
        for before, after in zip(self.names, self.names[1:], strict=False):
            if first[after] < first[before]:
                return RuleResult(False, f"{quote(after)} was first called before {quote(before)}")
        return RuleResult(True, f"the {len(self.names)} tools were first called in order")

    def _describe(self) -> str:
        return f"The agent calls the tools {', then '.join(quote(n) for n in self.names)}, in that order."

    def hint(self, satisfy: bool) -> SimHint:
        names = self.names if satisfy else tuple(reversed(self.names))
        return SimHint(tool_calls=tuple((n, {}) for n in names))


@dataclass(frozen=True, kw_only=True)
class ToolCallCount(Rule):
    """The number of calls of the tool lies within ``min``..``max`` (either bound may be absent)."""

    type: ClassVar[str] = "tool_call_count"
    _ARGS: ClassVar[tuple[str, ...]] = ("name", "min", "max")
    _REQUIRED: ClassVar[tuple[str, ...]] = ("name",)

    name: str
    min: int | None = None
    max: int | None = None

    @classmethod
    def _build(cls, a: RuleArgs, common: RuleCommon) -> Rule:
        name = a.name("name")
        lo = a.integer("min", default=None)
        hi = a.integer("max", default=None)
        if lo is None and hi is None:
            raise RuleSpecError(a.path, "tool_call_count needs at least one of min, max")
        if lo is not None and hi is not None and lo > hi:
            raise RuleSpecError(a.at("min"), f"min ({lo}) is greater than max ({hi})")
        return cls(name=name, min=lo, max=hi, **common)

    def check(self, transcript: Transcript) -> RuleResult:
        n = len(_calls(transcript, self.name))
        ok = (self.min is None or n >= self.min) and (self.max is None or n <= self.max)
        return RuleResult(ok, f"tool {quote(self.name)} called {_times(n)}, allowed {self._range()}")

    def _range(self) -> str:
        if self.min is not None and self.max is not None:
            return f"{self.min}..{self.max}"
        return f"at least {self.min}" if self.min is not None else f"at most {self.max}"

    def _describe(self) -> str:
        if self.min is not None and self.max is not None:
            if self.min == self.max:
                return f"The agent calls the tool {quote(self.name)} exactly {_times(self.min)}."
            return f"The agent calls the tool {quote(self.name)} between {self.min} and {self.max} times."
        if self.min is not None:
            return f"The agent calls the tool {quote(self.name)} at least {_times(self.min)}."
        return f"The agent calls the tool {quote(self.name)} at most {_times(self.max or 0)}."

    def _n_calls(self, n: int) -> SimHint:
        if n <= 0:
            return SimHint(avoid_tools=(self.name,))
        return SimHint(tool_calls=tuple((self.name, {}) for _ in range(n)))

    def hint(self, satisfy: bool) -> SimHint:
        if satisfy:
            return self._n_calls(self.min if self.min is not None else min(1, self.max or 0))
        if self.max is not None:
            return self._n_calls(self.max + 1)
        return self._n_calls((self.min or 0) - 1)  # min == 0 with no max cannot be broken


@dataclass(frozen=True, kw_only=True)
class ToolReturnCode(Rule):
    """Some call of the tool returned ``code`` (0 = success)."""

    type: ClassVar[str] = "tool_return_code"
    _ARGS: ClassVar[tuple[str, ...]] = ("name", "code")
    _REQUIRED: ClassVar[tuple[str, ...]] = ("name", "code")

    name: str
    code: int

    @classmethod
    def _build(cls, a: RuleArgs, common: RuleCommon) -> Rule:
        return cls(name=a.name("name"), code=a.integer("code", minimum=None), **common)

    def check(self, transcript: Transcript) -> RuleResult:
        codes = [c.return_code for c in _calls(transcript, self.name)]
        if not codes:
            return RuleResult(False, f"tool {quote(self.name)} was never called")
        if self.code in codes:
            return RuleResult(True, f"a call of {quote(self.name)} returned {self.code}")
        return RuleResult(False, f"calls of {quote(self.name)} returned {codes}, never {self.code}")

    def _describe(self) -> str:
        what = "succeeds (return code 0)" if self.code == 0 else f"returns code {self.code}"
        return f"At least one call of the tool {quote(self.name)} {what}."

    def hint(self, satisfy: bool) -> SimHint:
        if satisfy:
            return SimHint(tool_calls=((self.name, {}),), extra={"return_codes": {self.name: self.code}})
        return SimHint(avoid_tools=(self.name,))


@dataclass(frozen=True, kw_only=True)
class NoCallAfterFailure(Rule):
    """If a call of ``precondition`` returned non-zero, no call of ``then`` comes after it in the
    transcript's call order (calls issued in the same turn after the failing one count too: the agent
    committed to them without seeing the result). Vacuously true when the precondition never failed."""

    type: ClassVar[str] = "no_call_after_failure"
    _ARGS: ClassVar[tuple[str, ...]] = ("precondition", "then")
    _REQUIRED: ClassVar[tuple[str, ...]] = ("precondition", "then")

    precondition: str
    then: str

    @classmethod
    def _build(cls, a: RuleArgs, common: RuleCommon) -> Rule:
        return cls(precondition=a.name("precondition"), then=a.name("then"), **common)

    def check(self, transcript: Transcript) -> RuleResult:
        calls = transcript.tool_calls()
        failed = next(
            (i for i, c in enumerate(calls) if c.name == self.precondition and c.return_code != 0), None
        )
        if failed is None:
            return RuleResult(True, f"no call of {quote(self.precondition)} failed")
        if any(c.name == self.then for c in calls[failed + 1 :]):
            code = calls[failed].return_code
            return RuleResult(
                False,
                f"{quote(self.then)} was called after {quote(self.precondition)} failed (code {code})",
            )
        return RuleResult(True, f"{quote(self.then)} was not called after {quote(self.precondition)} failed")

    def _describe(self) -> str:
        return (
            f"If a call of the tool {quote(self.precondition)} fails, the agent does not call "
            f"{quote(self.then)} afterwards."
        )

    def hint(self, satisfy: bool) -> SimHint:
        if satisfy:
            return SimHint(avoid_tools=(self.then,))
        return SimHint(
            tool_calls=((self.precondition, {}), (self.then, {})),
            extra={"return_codes": {self.precondition: 1}},
        )
