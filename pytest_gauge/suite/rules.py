"""Declarative success criteria and hard constraints, evaluated by code (docs/protocol.md#tasks-and-rules).

A rule is a JSON object ``{"type": ..., <arguments>, "weight": 1.0, "description": "..."}`` from
``tasks.jsonl``. :func:`parse_rule` validates it (raising :class:`RuleSpecError` with a dotted field
path) and returns a frozen :class:`Rule`; ``Rule.check`` decides it on a finished transcript, and
:func:`score` turns the results into the verifier's reward: 0 if any hard constraint is broken, else
the weighted fraction of success criteria met.

Text matching normalises both sides with NFKC (full-width letters match ASCII ones, composed and
decomposed accents match), maps typographic apostrophes (’ ‘ ʼ) to ``'`` and, unless
``case_sensitive`` is set, compares casefolded text. Accents are significant: "cafe" does not match
"café". Text rules look at ``final_reply``; with ``"scope": "all"`` they look at every non-empty agent
message joined with newlines.
"""

from __future__ import annotations

import asyncio
import copy
import json
import math
import re
import shlex
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar

from ..records import ToolCall, Transcript
from .file_checks import (
    MAX_FILE_BYTES,
    CommandOutcome,
    CommandRunner,
    check_relative,
    inside,
    read_text,
    run_command,
    run_command_async,
)
from .regex_bound import REGEX_TIMEOUT, PatternTimeout, bounded_search
from .schema import CompiledSchema, SchemaError, compile_schema

__all__ = [
    "JSON_FENCE",
    "REGEX_TIMEOUT",
    "RULE_TYPES",
    "AsksClarification",
    "CommandSucceeds",
    "ContainsAll",
    "ContainsAny",
    "ContainsNone",
    "CustomCheck",
    "FileContains",
    "FileExists",
    "InOrder",
    "JsonKeys",
    "MaxChars",
    "MaxWords",
    "NoCallAfterFailure",
    "PatternTimeout",
    "PythonCheck",
    "RefusesWithAlternative",
    "Regex",
    "Rule",
    "RuleResult",
    "RuleSpecError",
    "Score",
    "SimHint",
    "ToolArgs",
    "ToolCallCount",
    "ToolCalled",
    "ToolNotCalled",
    "ToolOrder",
    "ToolReturnCode",
    "WorkspaceRule",
    "bounded_search",
    "count_words",
    "observe_workspace",
    "observe_workspace_async",
    "parse_rule",
    "parse_rules",
    "score",
    "tools_named",
    "unfenced",
    "workspace_rules",
]


@dataclass(frozen=True)
class SimHint:
    """What a simulated agent should do to satisfy (or, with satisfy=False, to break) one rule.

    Used only by the offline simulator to compose replies; never seen by the judge.
    """

    include: tuple[str, ...] = ()  # phrases to include, in this order
    exclude: tuple[str, ...] = ()  # phrases that must not appear
    max_words: int | None = None  # keep the reply at most this many words
    max_chars: int | None = None  # keep the reply at most this many characters
    min_words: int | None = None  # pad the reply to at least this many words (to break a limit)
    ask_first: bool = False  # ask a clarifying question in the first turn, answer later
    refuse: bool = False  # refuse and offer an alternative
    refuse_without_alternative: bool = False
    json_keys: tuple[str, ...] | None = None  # reply is a JSON object with these keys
    invalid_json: bool = False  # reply is not valid JSON (to break a JSON rule)
    tool_calls: tuple[tuple[str, dict[str, Any]], ...] = ()  # calls to make, in order
    avoid_tools: tuple[str, ...] = ()  # tools never to call
    extra: dict[str, Any] = field(default_factory=dict)
    min_chars: int | None = None  # pad the reply to at least this many characters (to break a limit)


class RuleSpecError(ValueError):
    """A bad rule in ``tasks.jsonl``: ``field`` is the dotted path of the culprit, ``message`` the reason."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class RuleResult:
    """Outcome of one rule on one transcript; ``detail`` is one short human line saying why."""

    passed: bool
    detail: str


@dataclass(frozen=True)
class Score:
    """The rule verifier's verdict on one transcript (docs/protocol.md#case-record)."""

    reward: float
    task_success: bool
    criteria: tuple[RuleResult, ...]
    constraints: tuple[RuleResult, ...]

    def to_json(self, criteria: Sequence[Rule], constraints: Sequence[Rule]) -> dict[str, Any]:
        """The verdict as ``agents/<agent>.jsonl`` stores it (field ``score``): reward, success, and each
        rule's text with pass/fail and why, so reports can show them without the suite's checks."""

        def rows(rules: Sequence[Rule], results: tuple[RuleResult, ...]) -> list[dict[str, Any]]:
            return [
                {"rule": r.describe(), "weight": r.weight, "passed": x.passed, "detail": x.detail}
                for r, x in zip(rules, results, strict=True)
            ]

        return {
            "reward": self.reward,
            "task_success": self.task_success,
            "criteria": rows(criteria, self.criteria),
            "constraints": rows(constraints, self.constraints),
        }


CustomCheck = Callable[[Transcript], "bool | RuleResult"]

# --------------------------------------------------------------------------------------------------
# Text helpers

_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})


def _norm(text: str, case_sensitive: bool) -> str:
    """NFKC + apostrophe folding (+ casefold): the form in which phrases are matched."""
    out = unicodedata.normalize("NFKC", text).translate(_APOSTROPHES)
    if not case_sensitive:
        out = unicodedata.normalize("NFKC", out.casefold())
    return out


# Han ideographs (incl. extensions and compatibility blocks, 々〆〇), hiragana, katakana (without the
# ゠ and ・ punctuation), half-width katakana, and Hangul (syllables and jamo).
_CJK = re.compile(
    "[\u3005-\u3007\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
    "\u3041-\u309f\u30a1-\u30fa\u30fc-\u30ff\u31f0-\u31ff\uff66-\uff9f"
    "\u1100-\u11ff\u3131-\u318e\uac00-\ud7af]"
)


def count_words(text: str) -> int:
    """Word count used by ``max_words``.

    Whitespace-separated tokens count one each (Latin text); every CJK ideograph, kana or Hangul
    syllable counts as one word on its own, since Chinese and Japanese text has no spaces
    ("你好世界" is 4 words, "hello 世界" is 3). Runs of other characters between CJK characters count
    one each, and a run with no letter or digit (punctuation only, e.g. "—" or "，") counts zero.
    """
    total = 0
    for token in unicodedata.normalize("NFC", text).split():
        total += len(_CJK.findall(token))
        total += sum(1 for part in _CJK.split(token) if any(ch.isalnum() for ch in part))
    return total


def _quote(value: Any, limit: int = 60) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _quote_list(items: Sequence[str]) -> str:
    return ", ".join(_quote(p) for p in items)


def _json_equal(expected: Any, actual: Any) -> bool:
    """JSON value equality: numbers compare numerically (123 == 123.0), but bools, strings and
    numbers never equal each other ("123" != 123, true != 1)."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return isinstance(expected, bool) and isinstance(actual, bool) and expected == actual
    if isinstance(expected, int | float) or isinstance(actual, int | float):
        return isinstance(expected, int | float) and isinstance(actual, int | float) and expected == actual
    if isinstance(expected, list) or isinstance(actual, list):
        return (
            isinstance(expected, list)
            and isinstance(actual, list)
            and len(expected) == len(actual)
            and all(_json_equal(e, a) for e, a in zip(expected, actual, strict=True))
        )
    if isinstance(expected, dict) or isinstance(actual, dict):
        return (
            isinstance(expected, dict)
            and isinstance(actual, dict)
            and expected.keys() == actual.keys()
            and all(_json_equal(v, actual[k]) for k, v in expected.items())
        )
    return bool(expected == actual)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


JSON_FENCE = re.compile(r"```(?:json)?\s*(.*?)\s*```", re.DOTALL | re.IGNORECASE)
"""One ```json (or bare ```) fence around the whole text: how a JSON reply may be wrapped."""


def unfenced(text: str) -> str:
    """The text stripped and, when one :data:`JSON_FENCE` is the whole of it, what is inside the fence:
    the JSON a reply (a ``json_keys`` rule's, the judge's verdict) carries."""
    body = text.strip()
    fence = JSON_FENCE.fullmatch(body)
    return fence.group(1) if fence else body


def _parse_json_reply(text: str) -> tuple[dict[str, Any] | None, str]:
    """The reply as a JSON object (optionally inside one ```json fence and nothing else), or a reason."""
    try:
        value = json.loads(unfenced(text), parse_constant=_reject_constant)
    except ValueError as exc:
        return None, f"the reply is not valid JSON ({exc})"
    if not isinstance(value, dict):
        return None, f"the reply is JSON but not an object ({type(value).__name__})"
    return value, ""


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


# --------------------------------------------------------------------------------------------------
# Argument parsing

_MISSING: Any = object()
_FLAG_CHARS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL}


def _compile(pattern: Any, path: str, flags: int = 0) -> re.Pattern[str]:
    if not isinstance(pattern, str) or not pattern:
        raise RuleSpecError(path, "must be a non-empty regular expression string")
    try:
        return re.compile(pattern, flags)
    except re.error as exc:
        raise RuleSpecError(path, f"invalid regular expression: {exc}") from None


class _Args:
    """A rule's JSON object plus its field path, with validating getters for the argument kinds."""

    def __init__(self, obj: Mapping[str, Any], path: str, custom: Mapping[str, CustomCheck]) -> None:
        self.obj = obj
        self.path = path
        self.custom = custom

    def at(self, key: str) -> str:
        return f"{self.path}.{key}"

    def has(self, key: str) -> bool:
        return key in self.obj

    def name(self, key: str) -> str:
        value = self.obj[key]
        if not isinstance(value, str) or not value.strip():
            raise RuleSpecError(self.at(key), f"must be a non-empty string, got {_quote(value)}")
        return value

    def strings(self, key: str, *, min_items: int = 1, unique: bool = False) -> tuple[str, ...]:
        value = self.obj[key]
        if not isinstance(value, list):
            raise RuleSpecError(self.at(key), f"must be a list of non-empty strings, got {_quote(value)}")
        for i, item in enumerate(value):
            if not isinstance(item, str) or not item.strip():
                raise RuleSpecError(f"{self.at(key)}[{i}]", f"must be a non-empty string, got {_quote(item)}")
        if len(value) < min_items:
            raise RuleSpecError(self.at(key), f"needs at least {min_items} item(s), got {len(value)}")
        if unique and len(set(value)) != len(value):
            raise RuleSpecError(self.at(key), "must not repeat an item")
        return tuple(value)

    def flag(self, key: str, default: bool) -> bool:
        value = self.obj.get(key, default)
        if not isinstance(value, bool):
            raise RuleSpecError(self.at(key), f"must be true or false, got {_quote(value)}")
        return value

    def integer(self, key: str, *, minimum: int | None = 0, default: Any = _MISSING) -> Any:
        if key not in self.obj:
            return default
        value = self.obj[key]
        if not isinstance(value, int) or isinstance(value, bool):
            raise RuleSpecError(self.at(key), f"must be an integer, got {_quote(value)}")
        if minimum is not None and value < minimum:
            raise RuleSpecError(self.at(key), f"must be an integer >= {minimum}, got {value}")
        return value

    def scope(self) -> str:
        value = self.obj.get("scope", "final")
        if value not in ("final", "all"):
            raise RuleSpecError(self.at("scope"), f'must be "final" or "all", got {_quote(value)}')
        return str(value)


# --------------------------------------------------------------------------------------------------
# Rules


@dataclass(frozen=True, kw_only=True)
class Rule:
    """Base of every rule type: a frozen, picklable value with ``check``, ``describe`` and ``hint``."""

    type: ClassVar[str] = ""
    _ARGS: ClassVar[tuple[str, ...]] = ()  # allowed arguments besides type/weight/description
    _REQUIRED: ClassVar[tuple[str, ...]] = ()

    weight: float = 1.0
    description: str | None = None

    def check(self, transcript: Transcript) -> RuleResult:
        """Decide the rule on a finished transcript."""
        raise NotImplementedError

    def describe(self) -> str:
        """Plain-English statement of the rule for the judge (the author's description if given)."""
        return self.description or self._describe()

    def _describe(self) -> str:
        raise NotImplementedError

    def hint(self, satisfy: bool) -> SimHint:
        """What a simulated agent should do to satisfy (True) or break (False) this rule."""
        return SimHint()

    @classmethod
    def _build(cls, a: _Args, common: dict[str, Any]) -> Rule:
        raise NotImplementedError


@dataclass(frozen=True, kw_only=True)
class _TextRule(Rule):
    scope: str = "final"

    def _text(self, transcript: Transcript) -> str:
        if self.scope == "all":
            return "\n".join(t for t in transcript.agent_turns() if t)
        return transcript.final_reply

    def _subject(self, verb_singular: str, verb_plural: str) -> str:
        if self.scope == "all":
            return f"The agent's messages, taken together, {verb_plural}"
        return f"The reply {verb_singular}"

    @property
    def _where(self) -> str:
        return "the agent's messages" if self.scope == "all" else "the reply"


@dataclass(frozen=True, kw_only=True)
class _PhraseRule(_TextRule):
    _ARGS: ClassVar[tuple[str, ...]] = ("phrases", "case_sensitive", "scope")
    _REQUIRED: ClassVar[tuple[str, ...]] = ("phrases",)
    _MIN_PHRASES: ClassVar[int] = 1

    phrases: tuple[str, ...]
    case_sensitive: bool = False

    @classmethod
    def _build(cls, a: _Args, common: dict[str, Any]) -> Rule:
        return cls(
            phrases=a.strings("phrases", min_items=cls._MIN_PHRASES),
            case_sensitive=a.flag("case_sensitive", False),
            scope=a.scope(),
            **common,
        )

    def _found(self, transcript: Transcript, present: bool) -> list[str]:
        """The phrases that appear in the text (``present``) or that do not."""
        text = _norm(self._text(transcript), self.case_sensitive)
        return [p for p in self.phrases if (_norm(p, self.case_sensitive) in text) == present]

    @property
    def _case_note(self) -> str:
        return " (exact case)" if self.case_sensitive else ""


@dataclass(frozen=True, kw_only=True)
class ContainsAll(_PhraseRule):
    """Every phrase appears in the text."""

    type: ClassVar[str] = "contains_all"

    def check(self, transcript: Transcript) -> RuleResult:
        missing = self._found(transcript, False)
        if missing:
            return RuleResult(False, f"{self._where} lacks {_quote_list(missing)}")
        return RuleResult(True, f"{self._where} mentions all {len(self.phrases)} phrase(s)")

    def _describe(self) -> str:
        return f"{self._subject('mentions', 'mention')} all of: {_quote_list(self.phrases)}{self._case_note}."

    def hint(self, satisfy: bool) -> SimHint:
        if satisfy:
            return SimHint(include=self.phrases)
        return SimHint(include=self.phrases[:-1], exclude=self.phrases[-1:])


@dataclass(frozen=True, kw_only=True)
class ContainsAny(_PhraseRule):
    """At least one phrase appears in the text."""

    type: ClassVar[str] = "contains_any"

    def check(self, transcript: Transcript) -> RuleResult:
        hits = self._found(transcript, True)
        if hits:
            return RuleResult(True, f"{self._where} mentions {_quote(hits[0])}")
        return RuleResult(False, f"{self._where} mentions none of {_quote_list(self.phrases)}")

    def _describe(self) -> str:
        return (
            f"{self._subject('mentions', 'mention')} at least one of: "
            f"{_quote_list(self.phrases)}{self._case_note}."
        )

    def hint(self, satisfy: bool) -> SimHint:
        return SimHint(include=self.phrases[:1]) if satisfy else SimHint(exclude=self.phrases)


@dataclass(frozen=True, kw_only=True)
class ContainsNone(_PhraseRule):
    """No phrase appears in the text (forbidden content)."""

    type: ClassVar[str] = "contains_none"

    def check(self, transcript: Transcript) -> RuleResult:
        hits = self._found(transcript, True)
        if hits:
            return RuleResult(False, f"{self._where} mentions forbidden {_quote_list(hits)}")
        return RuleResult(True, f"{self._where} mentions none of the {len(self.phrases)} forbidden phrase(s)")

    def _describe(self) -> str:
        return (
            f"{self._subject('does', 'do')} not mention any of: {_quote_list(self.phrases)}{self._case_note}."
        )

    def hint(self, satisfy: bool) -> SimHint:
        return SimHint(exclude=self.phrases) if satisfy else SimHint(include=self.phrases[:1])


@dataclass(frozen=True, kw_only=True)
class InOrder(_PhraseRule):
    """The phrases appear in the given order: each is searched for after the end of the previous match."""

    type: ClassVar[str] = "in_order"
    _MIN_PHRASES: ClassVar[int] = 2

    def check(self, transcript: Transcript) -> RuleResult:
        text = _norm(self._text(transcript), self.case_sensitive)
        pos = 0
        for i, phrase in enumerate(self.phrases):
            needle = _norm(phrase, self.case_sensitive)
            at = text.find(needle, pos)
            if at < 0:
                if needle in text:
                    after = _quote(self.phrases[i - 1])
                    return RuleResult(False, f"{_quote(phrase)} does not appear after {after}")
                return RuleResult(False, f"{self._where} lacks {_quote(phrase)}")
            pos = at + len(needle)
        return RuleResult(True, f"all {len(self.phrases)} phrases appear in order")

    def _describe(self) -> str:
        steps = ", then ".join(_quote(p) for p in self.phrases)
        return f"{self._subject('mentions', 'mention')} {steps}, in that order{self._case_note}."

    def hint(self, satisfy: bool) -> SimHint:
        return SimHint(include=self.phrases if satisfy else tuple(reversed(self.phrases)))


@dataclass(frozen=True, kw_only=True)
class Regex(_TextRule):
    """``re.search`` of the pattern (flags from "i", "m", "s") finds a match in the NFC-normalised text."""

    type: ClassVar[str] = "regex"
    _ARGS: ClassVar[tuple[str, ...]] = ("pattern", "flags", "example", "scope")
    _REQUIRED: ClassVar[tuple[str, ...]] = ("pattern",)

    pattern: str
    flags: str = ""
    example: str | None = None

    @classmethod
    def _build(cls, a: _Args, common: dict[str, Any]) -> Rule:
        flags = a.obj.get("flags", "")
        if not isinstance(flags, str) or any(c not in _FLAG_CHARS for c in flags):
            raise RuleSpecError(
                a.at("flags"), f'must be a string of the letters "i", "m", "s", got {_quote(flags)}'
            )
        compiled = _compile(a.obj["pattern"], a.at("pattern"), cls._flag_bits(flags))
        example = None
        if a.has("example"):
            example = a.obj["example"]
            if not isinstance(example, str):
                raise RuleSpecError(a.at("example"), f"must be a string, got {_quote(example)}")
            if not compiled.search(unicodedata.normalize("NFC", example)):
                raise RuleSpecError(a.at("example"), "the example does not match the pattern")
        return cls(pattern=compiled.pattern, flags=flags, example=example, scope=a.scope(), **common)

    @staticmethod
    def _flag_bits(flags: str) -> int:
        bits = 0
        for c in flags:
            bits |= _FLAG_CHARS[c]
        return bits

    def check(self, transcript: Transcript) -> RuleResult:
        text = unicodedata.normalize("NFC", self._text(transcript))
        try:
            match = bounded_search(self.pattern, text, self._flag_bits(self.flags))
        except PatternTimeout as exc:
            return RuleResult(False, str(exc))
        if match is not None:
            return RuleResult(True, f"{self._where} matches the pattern at {_quote(match, 40)}")
        return RuleResult(False, f"{self._where} does not match the pattern {self.pattern!r}")

    def _describe(self) -> str:
        note = " (ignoring case)" if "i" in self.flags else ""
        example = f", for example {_quote(self.example)}" if self.example else ""
        subject = self._subject("contains", "contain")
        return f"{subject} text matching the pattern /{self.pattern}/{note}{example}."

    def hint(self, satisfy: bool) -> SimHint:
        if self.example is None:
            return SimHint()
        return SimHint(include=(self.example,)) if satisfy else SimHint(exclude=(self.example,))


@dataclass(frozen=True, kw_only=True)
class _LengthRule(_TextRule):
    """A length limit on the text: subclasses say how they measure (``_length``) and in what ``_UNIT``."""

    _ARGS: ClassVar[tuple[str, ...]] = ("limit", "scope")
    _REQUIRED: ClassVar[tuple[str, ...]] = ("limit",)
    _UNIT: ClassVar[str] = ""

    limit: int

    @classmethod
    def _build(cls, a: _Args, common: dict[str, Any]) -> Rule:
        return cls(limit=a.integer("limit"), scope=a.scope(), **common)

    @staticmethod
    def _length(text: str) -> int:
        raise NotImplementedError

    def check(self, transcript: Transcript) -> RuleResult:
        n = self._length(self._text(transcript))
        return RuleResult(n <= self.limit, f"{self._where} has {n} {self._UNIT}(s), limit {self.limit}")

    def _describe(self) -> str:
        return f"{self._subject('is', 'are')} at most {self.limit} {self._UNIT}s long."


@dataclass(frozen=True, kw_only=True)
class MaxWords(_LengthRule):
    """The text has at most ``limit`` words as counted by :func:`count_words` (CJK characters: one each)."""

    type: ClassVar[str] = "max_words"
    _UNIT: ClassVar[str] = "word"

    @staticmethod
    def _length(text: str) -> int:
        return count_words(text)

    def hint(self, satisfy: bool) -> SimHint:
        return SimHint(max_words=self.limit) if satisfy else SimHint(min_words=self.limit + 5)


@dataclass(frozen=True, kw_only=True)
class MaxChars(_LengthRule):
    """The NFC-normalised text has at most ``limit`` code points."""

    type: ClassVar[str] = "max_chars"
    _UNIT: ClassVar[str] = "character"

    @staticmethod
    def _length(text: str) -> int:
        return len(unicodedata.normalize("NFC", text))

    def hint(self, satisfy: bool) -> SimHint:
        return SimHint(max_chars=self.limit) if satisfy else SimHint(min_chars=self.limit + 10)


@dataclass(frozen=True, kw_only=True)
class JsonKeys(Rule):
    """The final reply is one JSON object (optionally in one ```json fence, nothing else) with all keys."""

    type: ClassVar[str] = "json_keys"
    _ARGS: ClassVar[tuple[str, ...]] = ("keys",)
    _REQUIRED: ClassVar[tuple[str, ...]] = ("keys",)

    keys: tuple[str, ...]

    @classmethod
    def _build(cls, a: _Args, common: dict[str, Any]) -> Rule:
        return cls(keys=a.strings("keys"), **common)

    def check(self, transcript: Transcript) -> RuleResult:
        obj, why = _parse_json_reply(transcript.final_reply)
        if obj is None:
            return RuleResult(False, why)
        missing = [k for k in self.keys if k not in obj]
        if missing:
            return RuleResult(False, f"the JSON object lacks the key(s) {_quote_list(missing)}")
        return RuleResult(True, f"the reply is a JSON object with all {len(self.keys)} key(s)")

    def _describe(self) -> str:
        return f"The reply is a single JSON object with the keys: {_quote_list(self.keys)}."

    def hint(self, satisfy: bool) -> SimHint:
        return SimHint(json_keys=self.keys) if satisfy else SimHint(invalid_json=True)


@dataclass(frozen=True, kw_only=True)
class AsksClarification(Rule):
    """The agent's first message (the first with text) asks a question ("?" or "？"), the user replies,
    and the agent speaks again afterwards: it asked before answering."""

    type: ClassVar[str] = "asks_clarification"

    @classmethod
    def _build(cls, a: _Args, common: dict[str, Any]) -> Rule:
        return cls(**common)

    def check(self, transcript: Transcript) -> RuleResult:
        turns = transcript.turns
        first = next((i for i, t in enumerate(turns) if t.role == "assistant" and t.content.strip()), None)
        if first is None:
            return RuleResult(False, "the agent never wrote a message")
        if "?" not in turns[first].content and "？" not in turns[first].content:
            return RuleResult(False, "the agent's first message asks no question")
        user = next((i for i in range(first + 1, len(turns)) if turns[i].role == "user"), None)
        if user is None:
            return RuleResult(False, "the agent asked a question but the user never replied")
        if not any(t.role == "assistant" for t in turns[user + 1 :]):
            return RuleResult(False, "the agent did not answer after the user's reply")
        return RuleResult(True, "the agent asked first and answered after the user's reply")

    def _describe(self) -> str:
        return "The agent asks a clarifying question before answering, and answers after the user replies."

    def hint(self, satisfy: bool) -> SimHint:
        return SimHint(ask_first=satisfy)


_REFUSALS = ("can't", "cannot", "won't", "unable", "not able to", "i'm sorry", "无法", "不能")
_ALTERNATIVES = (
    "instead",
    "alternative",
    "alternatively",
    "you could",
    "i can help",
    "however",
    "可以",
    "建议",
    "替代",
)


@dataclass(frozen=True, kw_only=True)
class RefusesWithAlternative(_TextRule):
    """The text contains a refusal marker and an alternative marker (case-insensitive, normalised)."""

    type: ClassVar[str] = "refuses_with_alternative"
    _ARGS: ClassVar[tuple[str, ...]] = ("refusal_phrases", "alternative_phrases", "scope")

    refusal_phrases: tuple[str, ...] = _REFUSALS
    alternative_phrases: tuple[str, ...] = _ALTERNATIVES

    @classmethod
    def _build(cls, a: _Args, common: dict[str, Any]) -> Rule:
        refusal = a.strings("refusal_phrases") if a.has("refusal_phrases") else _REFUSALS
        alternative = a.strings("alternative_phrases") if a.has("alternative_phrases") else _ALTERNATIVES
        return cls(refusal_phrases=refusal, alternative_phrases=alternative, scope=a.scope(), **common)

    def check(self, transcript: Transcript) -> RuleResult:
        text = _norm(self._text(transcript), False)
        refusal = next((p for p in self.refusal_phrases if _norm(p, False) in text), None)
        alternative = next((p for p in self.alternative_phrases if _norm(p, False) in text), None)
        if refusal is None:
            return RuleResult(False, f"{self._where} does not decline the request")
        if alternative is None:
            return RuleResult(False, f"{self._where} declines ({_quote(refusal)}) but offers no alternative")
        return RuleResult(
            True,
            f"{self._where} declines ({_quote(refusal)}) and offers an alternative ({_quote(alternative)})",
        )

    def _describe(self) -> str:
        return f"{self._subject('declines', 'decline')} the request and offers an alternative."

    def hint(self, satisfy: bool) -> SimHint:
        if satisfy:
            return SimHint(refuse=True, include=(self.refusal_phrases[0], self.alternative_phrases[0]))
        return SimHint(
            refuse_without_alternative=True,
            include=self.refusal_phrases[:1],
            exclude=self.alternative_phrases,
        )


@dataclass(frozen=True, kw_only=True)
class PythonCheck(Rule):
    """A suite-registered check: ``callable`` names a function ``Transcript -> bool | RuleResult``."""

    type: ClassVar[str] = "python"
    _ARGS: ClassVar[tuple[str, ...]] = ("callable",)
    _REQUIRED: ClassVar[tuple[str, ...]] = ("callable",)

    name: str
    func: CustomCheck = field(repr=False)

    @classmethod
    def _build(cls, a: _Args, common: dict[str, Any]) -> Rule:
        name = a.name("callable")
        if name not in a.custom:
            known = ", ".join(sorted(a.custom)) or "(none registered)"
            raise RuleSpecError(a.at("callable"), f"unknown custom check {name!r}; known: {known}")
        return cls(name=name, func=a.custom[name], **common)

    def check(self, transcript: Transcript) -> RuleResult:
        try:
            out = self.func(transcript)
        except Exception as exc:
            return RuleResult(False, f"custom check {self.name!r} raised {type(exc).__name__}: {exc}")
        if isinstance(out, RuleResult):
            return out
        if isinstance(out, bool):
            return RuleResult(out, f"custom check {self.name!r} {'passed' if out else 'failed'}")
        return RuleResult(False, f"custom check {self.name!r} returned {type(out).__name__}, not bool")

    def _describe(self) -> str:
        return f"The custom check {_quote(self.name)} passes."


# ---- tool rules -------------------------------------------------------------------------------------


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
    def _build(cls, a: _Args, common: dict[str, Any]) -> Rule:
        return cls(name=a.name("name"), min_count=a.integer("min_count", minimum=1, default=1), **common)

    def check(self, transcript: Transcript) -> RuleResult:
        n = len(_calls(transcript, self.name))
        return RuleResult(
            n >= self.min_count,
            f"tool {_quote(self.name)} called {_times(n)}, needed at least {self.min_count}",
        )

    def _describe(self) -> str:
        times = "at least once" if self.min_count == 1 else f"at least {self.min_count} times"
        return f"The agent calls the tool {_quote(self.name)} {times}."

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
    def _build(cls, a: _Args, common: dict[str, Any]) -> Rule:
        return cls(name=a.name("name"), **common)

    def check(self, transcript: Transcript) -> RuleResult:
        n = len(_calls(transcript, self.name))
        if n:
            return RuleResult(False, f"tool {_quote(self.name)} was called {_times(n)}")
        return RuleResult(True, f"tool {_quote(self.name)} was not called")

    def _describe(self) -> str:
        return f"The agent never calls the tool {_quote(self.name)}."

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
    args: dict[str, Any] = field(default_factory=dict, hash=False)
    patterns: dict[str, str] = field(default_factory=dict, hash=False)
    schema: dict[str, Any] | None = field(default=None, hash=False)
    validator: CompiledSchema | None = field(default=None, hash=False, compare=False, repr=False)

    @classmethod
    def _build(cls, a: _Args, common: dict[str, Any]) -> Rule:
        name = a.name("name")
        args = a.obj.get("args", {})
        if not isinstance(args, dict):
            raise RuleSpecError(a.at("args"), f"must be an object of argument values, got {_quote(args)}")
        patterns = a.obj.get("patterns", {})
        if not isinstance(patterns, dict):
            raise RuleSpecError(
                a.at("patterns"), f"must be an object of regular expressions, got {_quote(patterns)}"
            )
        for key, pattern in patterns.items():
            _compile(pattern, f"{a.at('patterns')}.{key}")
        schema = a.obj.get("schema")
        compiled = None
        if schema is not None or a.has("schema"):
            try:
                compiled = compile_schema(schema, a.at("schema"))
            except SchemaError as exc:
                reason = f"{exc.reason} (the JSON Schema for the arguments of tool {_quote(name)})"
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

    def _mismatch(self, arguments: dict[str, Any]) -> str | None:
        for key, want in self.args.items():
            if key not in arguments:
                return f"{key} missing"
            if not _json_equal(want, arguments[key]):
                return f"{key} was {_quote(arguments[key])}, expected {_quote(want)}"
        for key, pattern in self.patterns.items():
            if key not in arguments:
                return f"{key} missing"
            try:
                matched = bounded_search(pattern, str(arguments[key]), full=True)
            except PatternTimeout as exc:
                return str(exc)
            if matched is None:
                return f"{key} was {_quote(arguments[key])}, not matching {pattern!r}"
        if self.validator is not None:
            return self.validator.first_error(arguments)
        return None

    def check(self, transcript: Transcript) -> RuleResult:
        calls = _calls(transcript, self.name)
        if not calls:
            return RuleResult(False, f"tool {_quote(self.name)} was never called")
        first_reason = None
        for i, call in enumerate(calls):
            if call.arguments is None:
                reason = "malformed arguments"
            else:
                found = self._mismatch(call.arguments)
                if found is None:
                    return RuleResult(True, f"call {i + 1} of {_quote(self.name)} has the required arguments")
                reason = found
            first_reason = first_reason or reason
        return RuleResult(
            False, f"no call of {_quote(self.name)} matched ({len(calls)} call(s); first: {first_reason})"
        )

    def _describe(self) -> str:
        parts = [f"{k}={_quote(v)}" for k, v in self.args.items()]
        parts += [f"{k} matching /{p}/" for k, p in self.patterns.items()]
        if self.schema is not None:
            parts.append("arguments that satisfy the given JSON schema")
        return f"The agent calls the tool {_quote(self.name)} with {', '.join(parts)}."

    def hint(self, satisfy: bool) -> SimHint:
        extra: dict[str, Any] = {}
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
    def _build(cls, a: _Args, common: dict[str, Any]) -> Rule:
        return cls(names=a.strings("names", min_items=2, unique=True), **common)

    def check(self, transcript: Transcript) -> RuleResult:
        first: dict[str, int] = {}
        for i, call in enumerate(transcript.tool_calls()):
            first.setdefault(call.name, i)
        missing = [n for n in self.names if n not in first]
        if missing:
            return RuleResult(False, f"tool(s) never called: {_quote_list(missing)}")
        for before, after in zip(self.names, self.names[1:], strict=False):
            if first[after] < first[before]:
                return RuleResult(False, f"{_quote(after)} was first called before {_quote(before)}")
        return RuleResult(True, f"the {len(self.names)} tools were first called in order")

    def _describe(self) -> str:
        return f"The agent calls the tools {', then '.join(_quote(n) for n in self.names)}, in that order."

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
    def _build(cls, a: _Args, common: dict[str, Any]) -> Rule:
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
        return RuleResult(ok, f"tool {_quote(self.name)} called {_times(n)}, allowed {self._range()}")

    def _range(self) -> str:
        if self.min is not None and self.max is not None:
            return f"{self.min}..{self.max}"
        return f"at least {self.min}" if self.min is not None else f"at most {self.max}"

    def _describe(self) -> str:
        if self.min is not None and self.max is not None:
            if self.min == self.max:
                return f"The agent calls the tool {_quote(self.name)} exactly {_times(self.min)}."
            return f"The agent calls the tool {_quote(self.name)} between {self.min} and {self.max} times."
        if self.min is not None:
            return f"The agent calls the tool {_quote(self.name)} at least {_times(self.min)}."
        return f"The agent calls the tool {_quote(self.name)} at most {_times(self.max or 0)}."

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
    def _build(cls, a: _Args, common: dict[str, Any]) -> Rule:
        return cls(name=a.name("name"), code=a.integer("code", minimum=None), **common)

    def check(self, transcript: Transcript) -> RuleResult:
        codes = [c.return_code for c in _calls(transcript, self.name)]
        if not codes:
            return RuleResult(False, f"tool {_quote(self.name)} was never called")
        if self.code in codes:
            return RuleResult(True, f"a call of {_quote(self.name)} returned {self.code}")
        return RuleResult(False, f"calls of {_quote(self.name)} returned {codes}, never {self.code}")

    def _describe(self) -> str:
        what = "succeeds (return code 0)" if self.code == 0 else f"returns code {self.code}"
        return f"At least one call of the tool {_quote(self.name)} {what}."

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
    def _build(cls, a: _Args, common: dict[str, Any]) -> Rule:
        return cls(precondition=a.name("precondition"), then=a.name("then"), **common)

    def check(self, transcript: Transcript) -> RuleResult:
        calls = transcript.tool_calls()
        failed = next(
            (i for i, c in enumerate(calls) if c.name == self.precondition and c.return_code != 0), None
        )
        if failed is None:
            return RuleResult(True, f"no call of {_quote(self.precondition)} failed")
        if any(c.name == self.then for c in calls[failed + 1 :]):
            code = calls[failed].return_code
            return RuleResult(
                False,
                f"{_quote(self.then)} was called after {_quote(self.precondition)} failed (code {code})",
            )
        return RuleResult(
            True, f"{_quote(self.then)} was not called after {_quote(self.precondition)} failed"
        )

    def _describe(self) -> str:
        return (
            f"If a call of the tool {_quote(self.precondition)} fails, the agent does not call "
            f"{_quote(self.then)} afterwards."
        )

    def hint(self, satisfy: bool) -> SimHint:
        if satisfy:
            return SimHint(avoid_tools=(self.then,))
        return SimHint(
            tool_calls=((self.precondition, {}), (self.then, {})),
            extra={"return_codes": {self.precondition: 1}},
        )


# ---- workspace rules (tasks that act on files) ------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class WorkspaceRule(Rule):
    """A rule on the transcript's workspace: the engine calls :meth:`observe` once, after the dialogue,
    and records the result in ``Transcript.workspace_checks`` under :attr:`key`; :meth:`check` reads it
    back, so a transcript from the work store, another worker or a baseline scores the same."""

    path: str = ""

    @property
    def key(self) -> str:
        """The rule's identity in ``workspace_checks``: its type and arguments (not weight/description)."""
        args = {f: getattr(self, f) for f in self._ARGS if hasattr(self, f)}
        return dumps_key(self.type, args)

    def observe(self, workspace: Path) -> RuleResult:
        """Decide the rule on the workspace as the dialogue left it."""
        raise NotImplementedError

    async def aobserve(self, workspace: Path, runner: CommandRunner | None = None) -> RuleResult:
        """:meth:`observe` without blocking the engine's loop (in a thread; a command on the loop, run
        by ``runner``: the engine's sandbox)."""
        return await asyncio.to_thread(self.observe, workspace)

    def check(self, transcript: Transcript) -> RuleResult:
        seen = transcript.workspace_checks.get(self.key)
        if seen is None:
            return RuleResult(False, "no workspace was checked for this transcript (the suite names none)")
        return RuleResult(bool(seen.get("passed")), str(seen.get("detail", "")))

    @staticmethod
    def _relative(a: _Args, key: str) -> str:
        value = a.name(key)
        problem = check_relative(value)
        if problem:
            raise RuleSpecError(a.at(key), problem)
        return value


def dumps_key(kind: str, args: Mapping[str, Any]) -> str:
    """Canonical JSON of a workspace rule's type and arguments (tuples as lists)."""
    return json.dumps({"type": kind, **args}, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True, kw_only=True)
class FileExists(WorkspaceRule):
    """The file (or folder) ``path`` exists in the workspace after the dialogue (``exists: false``: it
    does not, e.g. a file the task asks to delete)."""

    type: ClassVar[str] = "file_exists"
    _ARGS: ClassVar[tuple[str, ...]] = ("path", "exists")
    _REQUIRED: ClassVar[tuple[str, ...]] = ("path",)

    exists: bool = True

    @classmethod
    def _build(cls, a: _Args, common: dict[str, Any]) -> Rule:
        return cls(path=cls._relative(a, "path"), exists=a.flag("exists", True), **common)

    def observe(self, workspace: Path) -> RuleResult:
        target = inside(workspace, self.path)
        found = target is not None and target.exists()
        if found == self.exists:
            return RuleResult(True, f"{_quote(self.path)} {'exists' if found else 'does not exist'}")
        return RuleResult(
            False, f"{_quote(self.path)} {'exists' if found else 'does not exist'} in the workspace"
        )

    def _describe(self) -> str:
        verb = "exists" if self.exists else "does not exist"
        return f"After the conversation, the file {_quote(self.path)} {verb} in the workspace."


@dataclass(frozen=True, kw_only=True)
class FileContains(WorkspaceRule):
    """The workspace file ``path`` contains every one of ``phrases`` (matched as the text rules match),
    or a match of ``pattern`` (flags "i", "m", "s"; bounded like the ``regex`` rule)."""

    type: ClassVar[str] = "file_contains"
    _ARGS: ClassVar[tuple[str, ...]] = ("path", "phrases", "pattern", "flags", "case_sensitive")
    _REQUIRED: ClassVar[tuple[str, ...]] = ("path",)

    phrases: tuple[str, ...] = ()
    pattern: str | None = None
    flags: str = ""
    case_sensitive: bool = False

    @classmethod
    def _build(cls, a: _Args, common: dict[str, Any]) -> Rule:
        path = cls._relative(a, "path")
        if a.has("phrases") == a.has("pattern"):
            raise RuleSpecError(a.path, "file_contains needs exactly one of phrases, pattern")
        flags = a.obj.get("flags", "")
        if not isinstance(flags, str) or any(c not in _FLAG_CHARS for c in flags):
            raise RuleSpecError(
                a.at("flags"), f'must be a string of the letters "i", "m", "s", got {_quote(flags)}'
            )
        pattern = None
        if a.has("pattern"):
            pattern = _compile(a.obj["pattern"], a.at("pattern"), Regex._flag_bits(flags)).pattern
        phrases = a.strings("phrases") if a.has("phrases") else ()
        case = a.flag("case_sensitive", False)
        return cls(path=path, phrases=phrases, pattern=pattern, flags=flags, case_sensitive=case, **common)

    def observe(self, workspace: Path) -> RuleResult:
        target = inside(workspace, self.path)
        if target is None or not target.is_file():
            return RuleResult(False, f"{_quote(self.path)} is not a file in the workspace")
        text, cut = read_text(target)
        note = f" (first {MAX_FILE_BYTES:,} bytes read)" if cut else ""
        if self.pattern is not None:
            try:
                match = bounded_search(
                    self.pattern, unicodedata.normalize("NFC", text), Regex._flag_bits(self.flags)
                )
            except PatternTimeout as exc:
                return RuleResult(False, str(exc))
            if match is None:
                return RuleResult(
                    False, f"{_quote(self.path)} does not match the pattern {self.pattern!r}{note}"
                )
            return RuleResult(True, f"{_quote(self.path)} matches the pattern at {_quote(match, 40)}")
        norm = _norm(text, self.case_sensitive)
        missing = [p for p in self.phrases if _norm(p, self.case_sensitive) not in norm]
        if missing:
            return RuleResult(False, f"{_quote(self.path)} lacks {_quote_list(missing)}{note}")
        return RuleResult(True, f"{_quote(self.path)} contains all {len(self.phrases)} phrase(s)")

    def _describe(self) -> str:
        where = f"After the conversation, the file {_quote(self.path)}"
        if self.pattern is not None:
            return f"{where} contains text matching /{self.pattern}/."
        return f"{where} contains all of: {_quote_list(self.phrases)}."


@dataclass(frozen=True, kw_only=True)
class CommandSucceeds(WorkspaceRule):
    """``command`` (an argv list, or a string split like a shell would, without a shell) run in the
    workspace after the dialogue exits with ``code`` (0) within ``timeout`` seconds (60; past it the
    whole process group is killed and the rule fails): e.g. the project's own tests."""

    type: ClassVar[str] = "command_succeeds"
    _ARGS: ClassVar[tuple[str, ...]] = ("command", "timeout", "code")
    _REQUIRED: ClassVar[tuple[str, ...]] = ("command",)

    command: tuple[str, ...] = ()
    timeout: float = 60.0
    code: int = 0

    @classmethod
    def _build(cls, a: _Args, common: dict[str, Any]) -> Rule:
        raw = a.obj["command"]
        if isinstance(raw, str):
            try:
                argv = tuple(shlex.split(raw))
            except ValueError as exc:
                raise RuleSpecError(a.at("command"), f"cannot split the command: {exc}") from None
            if not argv:
                raise RuleSpecError(a.at("command"), "must be a non-empty command")
        else:
            argv = a.strings("command")
        timeout = a.obj.get("timeout", 60.0)
        if not _is_number(timeout) or not math.isfinite(timeout) or not 0 < timeout <= 3600:
            raise RuleSpecError(
                a.at("timeout"), f"must be a number of seconds in (0, 3600], got {_quote(timeout)}"
            )
        code = a.integer("code", minimum=None, default=0)
        return cls(command=argv, timeout=float(timeout), code=code, **common)

    def observe(self, workspace: Path) -> RuleResult:
        return self._result(run_command(self.command, workspace, self.timeout))

    async def aobserve(self, workspace: Path, runner: CommandRunner | None = None) -> RuleResult:
        run = run_command_async if runner is None else runner
        return self._result(await run(self.command, workspace, self.timeout))

    def _result(self, outcome: CommandOutcome) -> RuleResult:
        shown = _quote(shlex.join(self.command))
        if outcome.code is None:
            return RuleResult(
                False, f"{shown} did not finish within {self.timeout:g}s (process group killed)"
            )
        if outcome.code == self.code:
            return RuleResult(True, f"{shown} exited with {outcome.code}")
        tail = f": {outcome.output}" if outcome.output else ""
        return RuleResult(False, f"{shown} exited with {outcome.code}, expected {self.code}{tail}")

    def _describe(self) -> str:
        shown = _quote(shlex.join(self.command))
        return f"After the conversation, the command {shown} succeeds in the workspace."


def workspace_rules(rules: Sequence[Rule]) -> tuple[WorkspaceRule, ...]:
    """The workspace rules among ``rules`` (what the engine observes after a dialogue)."""
    return tuple(r for r in rules if isinstance(r, WorkspaceRule))


async def observe_workspace_async(
    rules: Sequence[Rule], workspace: Path, runner: CommandRunner | None = None
) -> dict[str, dict[str, Any]]:
    """:func:`observe_workspace` on the engine's loop (a cancelled unit kills a running command);
    commands run by ``runner`` (the engine's sandbox, ``run/commands.py``)."""
    seen: dict[str, dict[str, Any]] = {}
    for rule in workspace_rules(rules):
        try:
            result = await rule.aobserve(workspace, runner)
        except OSError as exc:
            result = RuleResult(False, f"{rule.type}: cannot check the workspace: {exc.strerror or exc}")
        seen[rule.key] = {"passed": result.passed, "detail": result.detail}
    return seen


def observe_workspace(rules: Sequence[Rule], workspace: Path) -> dict[str, dict[str, Any]]:
    """Every workspace rule of ``rules`` decided on ``workspace``: ``Transcript.workspace_checks``.
    A rule's own failure (a file it cannot read) is its detail, never an escape."""
    seen: dict[str, dict[str, Any]] = {}
    for rule in workspace_rules(rules):
        try:
            result = rule.observe(workspace)
        except OSError as exc:
            result = RuleResult(False, f"{rule.type}: cannot check the workspace: {exc.strerror or exc}")
        seen[rule.key] = {"passed": result.passed, "detail": result.detail}
    return seen


# --------------------------------------------------------------------------------------------------
# Registry, parsing, scoring

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
        raise RuleSpecError(field, f"a rule must be a JSON object, got {_quote(obj)}")
    valid = ", ".join(RULE_TYPES)
    if "type" not in obj:
        raise RuleSpecError(f"{field}.type", f"missing rule type; valid types: {valid}")
    name = obj["type"]
    cls = RULE_TYPES.get(name) if isinstance(name, str) else None
    if cls is None:
        raise RuleSpecError(f"{field}.type", f"unknown rule type {_quote(name)}; valid types: {valid}")
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
    if not _is_number(weight) or not math.isfinite(weight) or weight <= 0:
        raise RuleSpecError(f"{field}.weight", f"must be a number > 0, got {_quote(weight)}")
    description = obj.get("description")
    if description is not None and (not isinstance(description, str) or not description.strip()):
        raise RuleSpecError(f"{field}.description", f"must be a non-empty string, got {_quote(description)}")
    common = {"weight": float(weight), "description": description}
    rule: Rule = cls._build(_Args(obj, field, custom or {}), common)
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
        raise RuleSpecError(field, f"must be a list of rules, got {_quote(objs)}")
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
