"""Turning the rules' simulator hints into an agent's reply text (English or Chinese).

The composer is where a simulated agent's decisions (meet this criterion, break that constraint)
become text: required phrases in order, forbidden phrases kept out, word and character caps kept
(or broken by padding), JSON objects, refusals and clarifying questions.
"""

from __future__ import annotations

import json
import random
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ..records.json_types import JSONObject
from ..suite.rules import SimHint, count_words

__all__ = [
    "ComposeInput",
    "MergedHints",
    "PlannedCall",
    "clarifying_question",
    "compose",
    "merge_hints",
    "refusal_text",
]

_FILLER_EN = (
    "I double-checked the details against the information you provided.",
    "This approach keeps things simple and easy to follow.",
    "I have organised the answer so that the most important points come first.",
    "Each step builds on the previous one, so nothing is left out.",
    "The main considerations here are accuracy, clarity and completeness.",
    "If anything changes on your side, the same reasoning still applies.",
    "I kept the explanation practical so that you can act on it right away.",
    "Where there were several options, I picked the most reliable one.",
    "This is based on commonly accepted practice in situations like yours.",
    "Feel free to come back to me if you would like more background on any part.",
)
_FILLER_ZH = (
    "我已经根据您提供的信息仔细核对了细节。",
    "这个方案简单明了，便于执行。",
    "我把最重要的内容放在了前面。",
    "每一步都建立在前一步的基础上，没有遗漏。",
    "这里主要考虑的是准确性、清晰度和完整性。",
    "即使情况有变，同样的思路依然适用。",
    "说明尽量务实，方便您立即采取行动。",
    "在有多个选项时，我选择了最可靠的一个。",
    "这些建议基于此类情况下的通行做法。",
    "如果您想了解任何部分的更多背景，欢迎随时告诉我。",
)
_POLITE_EN = "Sure, I'd be happy to help!"
_POLITE_ZH = "好的，很乐意为您效劳！"
_REFUSE_EN = "I'm sorry, but I can't help with that request."
_REFUSE_ZH = "抱歉，我不能帮助完成这个请求。"
_ALTERNATIVE_EN = "Instead, I can offer a safer alternative that still addresses your underlying need."
_ALTERNATIVE_ZH = "作为替代，我可以提供一个更安全的方案来满足您的实际需求。"
_QUESTION_EN = "Before I answer, could you tell me a bit more about your situation and what you need exactly?"
_QUESTION_ZH = "在回答之前，能否请您再详细说明一下您的具体情况和需求?"
_GENERIC_EN = "Here is how I would handle this request."
_GENERIC_ZH = "以下是我对这个请求的处理方式。"


@dataclass
class PlannedCall:
    """One tool call in a merged plan; ``strong`` when a hint being satisfied asked for it."""

    name: str
    args: JSONObject
    strong: bool


@dataclass
class MergedHints:
    """The union of one agent's hints for one task, after its satisfy/break decisions."""

    include: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    max_words: int | None = None
    max_chars: int | None = None
    min_words: int | None = None
    min_chars: int | None = None
    ask_first: bool = False
    refuse: bool = False
    refuse_bare: bool = False
    json_keys: tuple[str, ...] | None = None
    invalid_json: bool = False
    calls: list[PlannedCall] = field(default_factory=list)
    avoid_strong: set[str] = field(default_factory=set)
    avoid_weak: set[str] = field(default_factory=set)

    @property
    def capped(self) -> bool:
        """A length cap is being kept (and none is being broken): no filler then."""
        no_break = self.min_words is None and self.min_chars is None
        return no_break and (self.max_words is not None or self.max_chars is not None)

    def tool_calls(self) -> list[PlannedCall]:
        """The calls to make, in order: a tool avoided by a kept rule is never called; one avoided only
        by a broken rule is still called when a kept rule asks for it."""
        return [
            c
            for c in self.calls
            if c.name not in self.avoid_strong and (c.strong or c.name not in self.avoid_weak)
        ]


def _min(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def _max(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def _compatible(a: JSONObject, b: JSONObject) -> bool:
    return all(a[k] == b[k] for k in a.keys() & b.keys())


def _merge_calls(plan: list[PlannedCall], wanted: Sequence[tuple[str, JSONObject]], strong: bool) -> None:
    """Fold one hint's call sequence into the plan: reuse a compatible planned call that comes after
    the previous one of this sequence (filling in its arguments), else insert a new call there.
    So counts add up per hint, relative order is kept, and argument hints attach to bare calls."""
    pos = -1
    used: set[int] = set()
    for k, (name, args) in enumerate(wanted):
        found = next(
            (
                i
                for i, c in enumerate(plan)
                if i > pos and i not in used and c.name == name and _compatible(c.args, args)
            ),
            None,
        )
        if found is None:
            # a sequence's first new call goes before any planned call of its later elements (so an
            # order rule can put a lookup before an already planned refund), else last; later new
            # calls go right after their predecessor
            later = {n for n, _ in wanted[k + 1 :]}
            before = next((i for i, c in enumerate(plan) if c.name in later), len(plan))
            found = before if pos < 0 else pos + 1
            plan.insert(found, PlannedCall(name, dict(args), strong))
        else:
            plan[found].args = {**plan[found].args, **args}
            plan[found].strong = plan[found].strong or strong
        used.add(found)
        pos = found


def merge_hints(hints: Iterable[tuple[SimHint, bool]]) -> MergedHints:
    """Merge (hint, satisfied) pairs in rule order: phrases deduplicated keeping first position, caps
    tightest, padding largest, tool calls folded by :func:`_merge_calls`."""
    m = MergedHints()
    for h, satisfied in hints:
        for phrase in h.include:
            if phrase and phrase not in m.include:
                m.include.append(phrase)
        m.exclude.extend(p for p in h.exclude if p and p not in m.exclude)
        m.max_words = _min(m.max_words, h.max_words)
        m.max_chars = _min(m.max_chars, h.max_chars)
        m.min_words = _max(m.min_words, h.min_words)
        m.min_chars = _max(m.min_chars, h.min_chars)
        m.ask_first = m.ask_first or h.ask_first
        m.refuse = m.refuse or h.refuse
        m.refuse_bare = m.refuse_bare or h.refuse_without_alternative
        if h.json_keys is not None and m.json_keys is None:
            m.json_keys = tuple(h.json_keys)
        m.invalid_json = m.invalid_json or h.invalid_json
        _merge_calls(m.calls, h.tool_calls, satisfied)
        (m.avoid_strong if satisfied else m.avoid_weak).update(h.avoid_tools)
    return m


@dataclass(frozen=True)
class ComposeInput:
    """Everything besides the hints that shapes one reply (drawn by the agent from its seeded streams)."""

    zh: bool
    polite: bool
    intro: str | None
    tool_notes: tuple[str, ...]
    ack: str | None
    n_filler: int


def clarifying_question(zh: bool) -> str:
    """The one-sentence clarifying question an agent asks before answering (ends with a question mark)."""
    return _QUESTION_ZH if zh else _QUESTION_EN


def refusal_text(zh: bool, alternative: bool) -> str:
    """The canned refusal, with or without the offer of an alternative."""
    if zh:
        return _REFUSE_ZH + (_ALTERNATIVE_ZH if alternative else "")
    return _REFUSE_EN + (" " + _ALTERNATIVE_EN if alternative else "")


def _clean(text: str, exclude: Sequence[str]) -> bool:
    low = text.casefold()
    return not any(p.casefold() in low for p in exclude)


def _includes_sentence(phrases: Sequence[str], zh: bool, bare: bool) -> str:
    if bare:
        return ("；" if zh else "; ").join(phrases)
    if zh:
        return "要点如下：" + "；".join(phrases) + "。"
    label = "Here is the key point: " if len(phrases) == 1 else "Here are the key points: "
    return label + "; ".join(phrases) + "."


def _chars(text: str) -> int:
    return len(unicodedata.normalize("NFC", text))


def _fits(text: str, m: MergedHints) -> bool:
    if m.max_words is not None and count_words(text) > m.max_words:
        return False
    return m.max_chars is None or _chars(text) <= m.max_chars


def _join(parts: Iterable[str], zh: bool) -> str:
    return ("" if zh else " ").join(p for p in parts if p)


def _json_reply(m: MergedHints, ci: ComposeInput) -> str:
    lead = _join([*([ci.intro] if ci.intro else []), *m.include], ci.zh) or ("已完成" if ci.zh else "done")
    if m.invalid_json:
        keys = m.json_keys or ("answer", "details")
        return "{" + f'"{keys[0]}": "{lead}", ' + (f'"{keys[1]}": ' if len(keys) > 1 else "'details': ")
    assert m.json_keys is not None
    obj = {
        key: lead if i == 0 else (f"{key}的内容" if ci.zh else f"{key} value")
        for i, key in enumerate(m.json_keys)
    }
    return json.dumps(obj, ensure_ascii=False)


def compose(m: MergedHints, ci: ComposeInput, rng: random.Random) -> str:
    """The reply text for merged hints. Priority when a kept cap bites: required phrases and the
    refusal first, then the self-introduction, tool notes, acknowledgement, politeness (filler never).
    A broken cap is exceeded by appending filler until past ``min_words`` / ``min_chars``."""
    if m.invalid_json or m.json_keys is not None:
        return _json_reply(m, ci)
    zh = ci.zh
    # (position, priority, text); lower priority number = dropped last.
    segs: list[tuple[int, int, str]] = []
    if ci.polite:
        segs.append((0, 5, _POLITE_ZH if zh else _POLITE_EN))
    if ci.intro:
        segs.append((1, 2, ci.intro))
    include = list(m.include)
    if m.refuse or m.refuse_bare:
        refusal = refusal_text(zh, alternative=m.refuse and not m.refuse_bare)
        segs.append((2, 0, refusal))
        include = [p for p in include if p.casefold() not in refusal.casefold()]
    if ci.ack:
        segs.append((4, 4, ci.ack))
    if include:
        segs.append((5, 0, _includes_sentence(include, zh, bare=False)))
    elif not (m.refuse or m.refuse_bare):
        segs.append((5, 1, _GENERIC_ZH if zh else _GENERIC_EN))
    for i, note in enumerate(ci.tool_notes):
        segs.append((6 + i, 3, note))
    segs = [s for s in segs if s[1] == 0 or _clean(s[2], m.exclude)]

    pool = [s for s in (_FILLER_ZH if zh else _FILLER_EN) if _clean(s, m.exclude)]
    order = rng.sample(pool, len(pool)) if pool else []
    if m.capped:
        text = _join((s[2] for s in sorted(segs)), zh)
        while not _fits(text, m):
            droppable = [s for s in segs if s[1] > 0]
            if not droppable:
                break
            segs.remove(max(droppable, key=lambda s: (s[1], -s[0])))
            text = _join((s[2] for s in sorted(segs)), zh)
        if not _fits(text, m) and include:  # the wrapper words are the last thing to go
            segs = [s for s in segs if s[0] != 5] + [(5, 0, _includes_sentence(include, zh, bare=True))]
            text = _join((s[2] for s in sorted(segs)), zh)
        return text
    fillers = [order[i % len(order)] for i in range(ci.n_filler)] if order else []
    text = _join([*(s[2] for s in sorted(segs)), *fillers], zh)
    k = len(fillers)
    while order and (
        (m.min_words is not None and count_words(text) < m.min_words)
        or (m.min_chars is not None and _chars(text) < m.min_chars)
    ):
        text = _join([text, order[k % len(order)]], zh)
        k += 1
    return text
