"""The rules' shared values and helpers: results, the score, the simulator's hint, text matching and
the argument getters, and the :class:`Rule` base every rule type extends."""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypedDict

from ...records import Transcript
from ...records.json_types import JSONObject

__all__ = [
    "FLAG_CHARS",
    "JSON_FENCE",
    "CustomCheck",
    "Rule",
    "RuleArgs",
    "RuleCommon",
    "RuleResult",
    "RuleSpecError",
    "Score",
    "SimHint",
    "compile_pattern",
    "count_words",
    "is_number",
    "json_equal",
    "norm_text",
    "parse_json_reply",
    "quote",
    "quote_list",
    "unfenced",
]


class RuleCommon(TypedDict):
    """The keywords every rule's constructor takes from its spec (``weight``, ``description``)."""

    weight: float
    description: str | None


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
    tool_calls: tuple[tuple[str, JSONObject], ...] = ()  # calls to make, in order
    avoid_tools: tuple[str, ...] = ()  # tools never to call
    extra: JSONObject = field(default_factory=dict)
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

    def to_json(self, criteria: Sequence[Rule], constraints: Sequence[Rule]) -> JSONObject:
        """The verdict as ``agents/<agent>.jsonl`` stores it (field ``score``): reward, success, and each
        rule's text with pass/fail and why, so reports can show them without the suite's checks."""

        def rows(rules: Sequence[Rule], results: tuple[RuleResult, ...]) -> list[JSONObject]:
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


def norm_text(text: str, case_sensitive: bool) -> str:
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


def quote(value: Any, limit: int = 60) -> str:
    """``value`` as JSON (its repr if not JSON) cut to ``limit`` characters: how details show values."""
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def quote_list(items: Sequence[str]) -> str:
    """The items quoted, comma-separated."""
    return ", ".join(quote(p) for p in items)


def json_equal(expected: Any, actual: Any) -> bool:
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
            and all(json_equal(e, a) for e, a in zip(expected, actual, strict=True))
        )
    if isinstance(expected, dict) or isinstance(actual, dict):
        return (
            isinstance(expected, dict)
            and isinstance(actual, dict)
            and expected.keys() == actual.keys()
            and all(json_equal(v, actual[k]) for k, v in expected.items())
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


def parse_json_reply(text: str) -> tuple[JSONObject | None, str]:
    """The reply as a JSON object (optionally inside one ```json fence and nothing else), or a reason."""
    try:
        value = json.loads(unfenced(text), parse_constant=_reject_constant)
    except ValueError as exc:
        return None, f"the reply is not valid JSON ({exc})"
    if not isinstance(value, dict):
        return None, f"the reply is JSON but not an object ({type(value).__name__})"
    return value, ""


def is_number(value: Any) -> bool:
    """A JSON number (an int or float, not a bool)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


# --------------------------------------------------------------------------------------------------
# Argument parsing

_MISSING: Any = object()
FLAG_CHARS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL}
"""The letters a rule's ``flags`` argument may hold and the ``re`` flag of each."""


def compile_pattern(pattern: Any, path: str, flags: int = 0) -> re.Pattern[str]:
    """A rule argument's regular expression, compiled (a :class:`RuleSpecError` at ``path`` if not one)."""
    if not isinstance(pattern, str) or not pattern:
        raise RuleSpecError(path, "must be a non-empty regular expression string")
    try:
        return re.compile(pattern, flags)
    except re.error as exc:
        raise RuleSpecError(path, f"invalid regular expression: {exc}") from None


class RuleArgs:
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
            raise RuleSpecError(self.at(key), f"must be a non-empty string, got {quote(value)}")
        return value

    def strings(self, key: str, *, min_items: int = 1, unique: bool = False) -> tuple[str, ...]:
        value = self.obj[key]
        if not isinstance(value, list):
            raise RuleSpecError(self.at(key), f"must be a list of non-empty strings, got {quote(value)}")
        for i, item in enumerate(value):
            if not isinstance(item, str) or not item.strip():
                raise RuleSpecError(f"{self.at(key)}[{i}]", f"must be a non-empty string, got {quote(item)}")
        if len(value) < min_items:
            raise RuleSpecError(self.at(key), f"needs at least {min_items} item(s), got {len(value)}")
        if unique and len(set(value)) != len(value):
            raise RuleSpecError(self.at(key), "must not repeat an item")
        return tuple(value)

    def flag(self, key: str, default: bool) -> bool:
        value = self.obj.get(key, default)
        if not isinstance(value, bool):
            raise RuleSpecError(self.at(key), f"must be true or false, got {quote(value)}")
        return value

    def integer(self, key: str, *, minimum: int | None = 0, default: Any = _MISSING) -> Any:
        if key not in self.obj:
            return default
        value = self.obj[key]
        if not isinstance(value, int) or isinstance(value, bool):
            raise RuleSpecError(self.at(key), f"must be an integer, got {quote(value)}")
        if minimum is not None and value < minimum:
            raise RuleSpecError(self.at(key), f"must be an integer >= {minimum}, got {value}")
        return value

    def scope(self) -> str:
        value = self.obj.get("scope", "final")
        if value not in ("final", "all"):
            raise RuleSpecError(self.at("scope"), f'must be "final" or "all", got {quote(value)}')
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
    def _build(cls, a: RuleArgs, common: RuleCommon) -> Rule:
        raise NotImplementedError
