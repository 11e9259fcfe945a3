"""The simulated user audited: checks of the user simulator's own conduct on one
transcript, by rules on its turns (docs/protocol.md#user-audit). A flagged transcript's verdicts rest on
a user that did not play its part, so its cases are marked and ``user_sim_error_rate`` counts it.

Kinds: ``leaked_fact`` (a user turn after the opening states a hidden fact the agent's previous turn did
not ask for: no question mark in it), ``ended_early`` (the user ended, or declared itself satisfied,
while the agent's last reply was still a question or the agent had said nothing, before the turn limit),
``silent`` (a user turn after the opening with nothing said), ``no_task`` (no user turn states the
task), ``contradicted`` (a user turn states a value for one of the task's facts, hidden or of its persona,
other than the true one: so it also catches two different values across turns), ``cooperative``
(satisfied while the rules failed and the agent asked nothing), ``judged`` (the optional audit model,
``UserSimulator(audit_model=...)``, found an error in the user's turns: :func:`user_audit_messages`).
"""

from __future__ import annotations

import json
import re
import unicodedata

from ..records import Transcript
from ..suite.tasks import Task

__all__ = [
    "USER_AUDIT_KINDS",
    "USER_AUDIT_MARKER",
    "audit_user",
    "contradicted",
    "fact_slots",
    "parse_user_audit",
    "user_audit_messages",
]

USER_AUDIT_KINDS = (
    "leaked_fact",
    "ended_early",
    "silent",
    "no_task",
    "contradicted",
    "cooperative",
    "judged",
)
"""The user simulator's errors checked per transcript, in report order."""

_SPACE = re.compile(r"\s+")
_TOKEN = re.compile(r"\w+(?:[.,:']\w+)*")
_CLAUSE = re.compile(r"[;\n]|\.(?:\s|$)")
_SKIP = frozenset({"is", "about", "around", "roughly", "approximately", "actually", "really", "still", "now"})
_GENERIC = frozenset(
    {"a", "an", "the", "at", "of", "in", "on", "for", "to", "is", "i", "my", "and", "it", "we"}
)
_NEGATION = frozenset({"not", "no", "never"})
_MAX_FACTS = 32
_MAX_TOKENS = 4000


def _norm(text: str) -> str:
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def _asks(text: str) -> bool:
    return "?" in text or "？" in text


def _leaked(task: Task, t: Transcript) -> bool:
    """A hidden fact said by the user (after its opening) when the agent's previous turn asked nothing."""
    facts = [_norm(f) for f in task.hidden_facts if _norm(f) and _norm(f) not in _norm(task.task_prompt)]
    asked = False
    for i, turn in enumerate(t.turns):
        if turn.role == "assistant" and turn.content.strip():
            asked = _asks(turn.content)
        elif turn.role == "user" and i > 0:
            said = _norm(turn.content)
            if not asked and any(f in said for f in facts):
                return True
            asked = False
    return False


_NUMBERS = {w: str(i) for i, w in enumerate("zero one two three four five six seven eight nine ten".split())}


def _tokens(text: str) -> list[str]:
    """Normalised word tokens (number words as digits), at most 4000."""
    return [_NUMBERS.get(w, w) for w in _TOKEN.findall(_norm(text))[:_MAX_TOKENS]]


def _slot(fact: str) -> tuple[tuple[str, ...], str, bool] | None:
    """One fact as (key tokens, true value token, value before the key), or None when it has no value
    the rules can read: ``key: value`` / ``key is value`` (the first word of the value), else its first
    token with a digit (``Party of 4``: key ``party of``; ``4 guests``: key ``guests``, value first)."""
    norm = _norm(fact)
    head, sep, tail = norm.partition(":")
    if not sep:
        head, sep, tail = norm.partition(" is ")
    words, after = _tokens(head), _tokens(tail)
    if sep and words and after and not set(words) <= _GENERIC:
        return (*words, *(("is",) if sep == " is " else ())), after[0], False
    toks = _tokens(norm)
    at = next((i for i, w in enumerate(toks) if any(c.isdigit() for c in w)), -1)
    if at < 0:
        return None
    before, rest = tuple(toks[:at]), tuple(toks[at + 1 : at + 3])
    if before and not set(before) <= _GENERIC:
        return before, toks[at], False
    if rest and not set(rest) <= _GENERIC:
        return rest, toks[at], True
    return None


def fact_slots(task: Task) -> list[tuple[tuple[str, ...], str, bool]]:
    """The task's readable facts (:func:`_slot`): its hidden facts and its persona's clauses (split at
    ``;``, a full stop or a line break), at most 32."""
    clauses = [*task.hidden_facts, *_CLAUSE.split(task.persona or "")]
    slots = [s for c in clauses if c.strip() and (s := _slot(c)) is not None]
    return slots[:_MAX_FACTS]


def _stated(toks: list[str], key: tuple[str, ...], first: bool) -> list[str]:
    """The values said next to ``key`` in ``toks`` (the token after it, past an ``is`` and hedges, or
    the token before it); a value negated (``not`` just before the key or the value) says nothing."""
    n, out = len(key), []
    for i in range(len(toks) - n + 1):
        if tuple(toks[i : i + n]) != key:
            continue
        if first:
            if i > 0 and not _NEGATION & set(toks[max(0, i - 3) : i - 1]):
                out.append(toks[i - 1])
            continue
        j = i + n
        while j < len(toks) and j < i + n + 3 and toks[j] in _SKIP:
            j += 1
        if j < len(toks) and not _NEGATION & {toks[j], *toks[max(0, i - 2) : i]}:
            out.append(toks[j])
    return out


def contradicted(task: Task, t: Transcript) -> bool:
    """A user turn states a value for one of the task's facts (:func:`fact_slots`) other than the true
    one (facts sharing a key allow each of their values); work is bounded by 32 facts and 4000 tokens
    a turn."""
    true: dict[tuple[tuple[str, ...], bool], set[str]] = {}
    for key, value, first in fact_slots(task):
        true.setdefault((key, first), set()).add(value)
    if not true:
        return False
    for turn in t.turns:
        if turn.role != "user" or not turn.content.strip():
            continue
        toks = _tokens(turn.content)
        for (key, first), values in true.items():
            if any(v not in values for v in _stated(toks, key, first)):
                return True
    return False


def _ended_early(t: Transcript, max_turns: int) -> bool:
    replies = [x.content for x in t.turns if x.role == "assistant" and x.content.strip()]
    if t.ended_by != "user_done" or len(replies) >= max_turns:
        return False
    return not replies or _asks(replies[-1])


def audit_user(task: Task, t: Transcript, task_success: bool, max_turns: int) -> tuple[str, ...]:
    """The kinds of :data:`USER_AUDIT_KINDS` the user simulator committed in ``t`` (``max_turns``: the
    dialogue's turn limit, at which the user is asked to end and so ends on time)."""
    users = [x for x in t.turns if x.role == "user"]
    stated = any(_norm(task.task_prompt) in _norm(u.content) for u in users) if users else False
    asked = any(_asks(x.content) for x in t.turns if x.role == "assistant")
    found = {
        "leaked_fact": _leaked(task, t),
        "ended_early": _ended_early(t, max_turns),
        "silent": any(not u.content.strip() for u in users[1:]),
        "no_task": bool(task.task_prompt.strip()) and not stated,
        "contradicted": contradicted(task, t),
        "cooperative": t.user_satisfied is True and not task_success and not asked,
        "judged": t.user_audit is not None,
    }
    return tuple(k for k in USER_AUDIT_KINDS if found[k])


USER_AUDIT_MARKER = "You audit a simulated user"
_AUDIT_SYSTEM = (
    USER_AUDIT_MARKER + ": a model that played a customer talking to an AI agent. It was given a task,"
    " hidden facts (to reveal only when asked) and a persona. Judge only the user's conduct, not the"
    " agent's: did it reveal a hidden fact before the agent asked, end before the agent addressed the"
    " task, never state the task, contradict its facts, persona or an earlier turn, or say nothing?"
    ' Answer with JSON only: {"erred": true|false, "reason": "<one sentence>"}.'
)


def user_audit_messages(task: Task, t: Transcript) -> list[dict[str, str]]:
    """The audit model's request for transcript ``t``: the user's brief and the conversation, each turn
    on lines starting ``[user]`` / ``[agent]`` (tool turns left out)."""
    facts = "\n".join(f"- {f}" for f in task.hidden_facts) or "- (none)"
    lines = [f"[{'user' if x.role == 'user' else 'agent'}] {x.content}" for x in t.turns if x.role != "tool"]
    brief = (
        f"<task>\n{task.task_prompt}\n</task>\n<hidden_facts>\n{facts}\n</hidden_facts>\n"
        f"<persona>\n{task.persona or 'an ordinary customer'}\n</persona>\n"
        "<conversation>\n" + "\n".join(lines) + "\n</conversation>"
    )
    return [{"role": "system", "content": _AUDIT_SYSTEM}, {"role": "user", "content": brief}]


def parse_user_audit(text: str) -> str | None:
    """The audit model's finding: its reason when it says the user erred, else None (also for an answer
    that is not the JSON asked for: an unreadable audit flags nothing)."""
    start, end = text.find("{"), text.rfind("}")
    try:
        data = json.loads(text[start : end + 1]) if 0 <= start < end else None
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("erred") is not True:
        return None
    return str(data.get("reason") or "").strip() or "erred"
