"""Rules on the agent's text (phrases, patterns, length, JSON keys, clarification, refusal) and the
suite's own Python checks."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field
from typing import ClassVar

from ...records import Transcript
from ..regex_bound import PatternTimeout, bounded_search
from .base import (
    FLAG_CHARS,
    CustomCheck,
    Rule,
    RuleArgs,
    RuleCommon,
    RuleResult,
    RuleSpecError,
    SimHint,
    compile_pattern,
    count_words,
    norm_text,
    parse_json_reply,
    quote,
    quote_list,
)

__all__ = [
    "AsksClarification",
    "ContainsAll",
    "ContainsAny",
    "ContainsNone",
    "InOrder",
    "JsonKeys",
    "MaxChars",
    "MaxWords",
    "PythonCheck",
    "RefusesWithAlternative",
    "Regex",
]


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
    def _build(cls, a: RuleArgs, common: RuleCommon) -> Rule:
        return cls(
            phrases=a.strings("phrases", min_items=cls._MIN_PHRASES),
            case_sensitive=a.flag("case_sensitive", False),
            scope=a.scope(),
            **common,
        )

    def _found(self, transcript: Transcript, present: bool) -> list[str]:
        """The phrases that appear in the text (``present``) or that do not."""
        text = norm_text(self._text(transcript), self.case_sensitive)
        return [p for p in self.phrases if (norm_text(p, self.case_sensitive) in text) == present]

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
            return RuleResult(False, f"{self._where} lacks {quote_list(missing)}")
        return RuleResult(True, f"{self._where} mentions all {len(self.phrases)} phrase(s)")

    def _describe(self) -> str:
        return f"{self._subject('mentions', 'mention')} all of: {quote_list(self.phrases)}{self._case_note}."

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
            return RuleResult(True, f"{self._where} mentions {quote(hits[0])}")
        return RuleResult(False, f"{self._where} mentions none of {quote_list(self.phrases)}")

    def _describe(self) -> str:
        return (
            f"{self._subject('mentions', 'mention')} at least one of: "
            f"{quote_list(self.phrases)}{self._case_note}."
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
            return RuleResult(False, f"{self._where} mentions forbidden {quote_list(hits)}")
        return RuleResult(True, f"{self._where} mentions none of the {len(self.phrases)} forbidden phrase(s)")

    def _describe(self) -> str:
        return (
            f"{self._subject('does', 'do')} not mention any of: {quote_list(self.phrases)}{self._case_note}."
        )

    def hint(self, satisfy: bool) -> SimHint:
        return SimHint(exclude=self.phrases) if satisfy else SimHint(include=self.phrases[:1])


@dataclass(frozen=True, kw_only=True)
class InOrder(_PhraseRule):
    """The phrases appear in the given order: each is searched for after the end of the previous match."""

    type: ClassVar[str] = "in_order"
    _MIN_PHRASES: ClassVar[int] = 2

    def check(self, transcript: Transcript) -> RuleResult:
        text = norm_text(self._text(transcript), self.case_sensitive)
        pos = 0
        for i, phrase in enumerate(self.phrases):
            needle = norm_text(phrase, self.case_sensitive)
            at = text.find(needle, pos)
            if at < 0:
                if needle in text:
                    after = quote(self.phrases[i - 1])
                    return RuleResult(False, f"{quote(phrase)} does not appear after {after}")
                return RuleResult(False, f"{self._where} lacks {quote(phrase)}")
            pos = at + len(needle)
        return RuleResult(True, f"all {len(self.phrases)} phrases appear in order")

    def _describe(self) -> str:
        steps = ", then ".join(quote(p) for p in self.phrases)
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
    def _build(cls, a: RuleArgs, common: RuleCommon) -> Rule:
        flags = a.obj.get("flags", "")
        if not isinstance(flags, str) or any(c not in FLAG_CHARS for c in flags):
            raise RuleSpecError(
                a.at("flags"), f'must be a string of the letters "i", "m", "s", got {quote(flags)}'
            )
        compiled = compile_pattern(a.obj["pattern"], a.at("pattern"), cls._flag_bits(flags))
        example = None
        if a.has("example"):
            example = a.obj["example"]
            if not isinstance(example, str):
                raise RuleSpecError(a.at("example"), f"must be a string, got {quote(example)}")
            if not compiled.search(unicodedata.normalize("NFC", example)):
                raise RuleSpecError(a.at("example"), "the example does not match the pattern")
        return cls(pattern=compiled.pattern, flags=flags, example=example, scope=a.scope(), **common)

    @staticmethod
    def _flag_bits(flags: str) -> int:
        bits = 0
        for c in flags:
            bits |= FLAG_CHARS[c]
        return bits

    def check(self, transcript: Transcript) -> RuleResult:
        text = unicodedata.normalize("NFC", self._text(transcript))
        try:
            match = bounded_search(self.pattern, text, self._flag_bits(self.flags))
        except PatternTimeout as exc:
            return RuleResult(False, str(exc))
        if match is not None:
            return RuleResult(True, f"{self._where} matches the pattern at {quote(match, 40)}")
        return RuleResult(False, f"{self._where} does not match the pattern {self.pattern!r}")

    def _describe(self) -> str:
        note = " (ignoring case)" if "i" in self.flags else ""
        example = f", for example {quote(self.example)}" if self.example else ""
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
    def _build(cls, a: RuleArgs, common: RuleCommon) -> Rule:
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
    def _build(cls, a: RuleArgs, common: RuleCommon) -> Rule:
        return cls(keys=a.strings("keys"), **common)

    def check(self, transcript: Transcript) -> RuleResult:
        obj, why = parse_json_reply(transcript.final_reply)
        if obj is None:
            return RuleResult(False, why)
        missing = [k for k in self.keys if k not in obj]
        if missing:
            return RuleResult(False, f"the JSON object lacks the key(s) {quote_list(missing)}")
        return RuleResult(True, f"the reply is a JSON object with all {len(self.keys)} key(s)")

    def _describe(self) -> str:
        return f"The reply is a single JSON object with the keys: {quote_list(self.keys)}."

    def hint(self, satisfy: bool) -> SimHint:
        return SimHint(json_keys=self.keys) if satisfy else SimHint(invalid_json=True)


@dataclass(frozen=True, kw_only=True)
class AsksClarification(Rule):
    """The agent's first message (the first with text) asks a question ("?" or "？"), the user replies,
    and the agent speaks again afterwards: it asked before answering."""

    type: ClassVar[str] = "asks_clarification"

    @classmethod
    def _build(cls, a: RuleArgs, common: RuleCommon) -> Rule:
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
    def _build(cls, a: RuleArgs, common: RuleCommon) -> Rule:
        refusal = a.strings("refusal_phrases") if a.has("refusal_phrases") else _REFUSALS
        alternative = a.strings("alternative_phrases") if a.has("alternative_phrases") else _ALTERNATIVES
        return cls(refusal_phrases=refusal, alternative_phrases=alternative, scope=a.scope(), **common)

    def check(self, transcript: Transcript) -> RuleResult:
        text = norm_text(self._text(transcript), False)
        refusal = next((p for p in self.refusal_phrases if norm_text(p, False) in text), None)
        alternative = next((p for p in self.alternative_phrases if norm_text(p, False) in text), None)
        if refusal is None:
            return RuleResult(False, f"{self._where} does not decline the request")
        if alternative is None:
            return RuleResult(False, f"{self._where} declines ({quote(refusal)}) but offers no alternative")
        return RuleResult(
            True,
            f"{self._where} declines ({quote(refusal)}) and offers an alternative ({quote(alternative)})",
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
    def _build(cls, a: RuleArgs, common: RuleCommon) -> Rule:
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
        return f"The custom check {quote(self.name)} passes."
