"""The simulated user: opens with the task, answers questions from its hidden facts, then says done.

Its satisfaction is read from surface signals only (politeness, apparent effort, overlap with what it
asked, refusals) plus leniency and a seeded coin, never from the rules, so it disagrees with the rule
verdict in a realistic share of transcripts (docs/protocol.md#why: satisfaction is not completion).
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..records import Transcript, Turn
from ..run.dialogue import USER_SIM_LAST_TURN, USER_SIM_OPENING
from ..run.user_audit import USER_AUDIT_MARKER, contradicted
from ..suite.rules import count_words
from ..suite.sim_profiles import SimUser
from ..suite.tasks import Task
from .agent import find_task
from .common import has_cjk, message_text, seeded, stable_hash

__all__ = [
    "UserPrompt",
    "is_user_audit_request",
    "is_user_sim_request",
    "parse_user_prompt",
    "satisfaction_probability",
    "surface_signals",
    "user_audit_reply",
    "user_reply",
]

USER_SIM_MARKER = "You are role-playing a user"

POLITE = re.compile(
    r"\b(please|thank|thanks|happy to help|glad|sure|certainly|of course|sorry)\b"
    r"|请|谢谢|感谢|很乐意|好的|当然|抱歉",
    re.IGNORECASE,
)
_REFUSAL = re.compile(r"\b(can't|cannot|can not|unable to|won't|will not)\b|不能|无法|拒绝", re.IGNORECASE)
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]{3,}")
_STOP = frozenset(
    "about after also been before could does each explain from give have help into just list make more most "
    "need please should some tell than that their them then there these they this those want what when where "
    "which while will with would write your task".split()
)
_NO_MORE_EN = "I have no more details, please do your best."
_NO_MORE_ZH = "我没有更多细节了，请尽力而为。"


@dataclass(frozen=True)
class UserPrompt:
    """What the user simulator was told: the task text, its hidden facts and persona."""

    task: str
    hidden_facts: tuple[str, ...]
    persona: str


def _tag(text: str, name: str) -> str:
    match = re.search(rf"<{name}>\n?(.*?)\n?</{name}>", text, re.DOTALL)
    return match.group(1) if match else ""


def parse_user_prompt(system: str) -> UserPrompt:
    """Parse ``<task>``, ``<hidden_facts>`` (``- fact`` lines; ``- (none)`` is none) and ``<persona>``."""
    facts = []
    for line in _tag(system, "hidden_facts").splitlines():
        fact = line.strip()
        fact = fact[2:].strip() if fact.startswith("- ") else fact
        if fact and fact != "(none)":
            facts.append(fact)
    return UserPrompt(_tag(system, "task"), tuple(facts), _tag(system, "persona").strip())


def is_user_sim_request(messages: Sequence[Mapping[str, Any]]) -> bool:
    """A user-simulator request has a system message containing the role-play instruction."""
    return any(m.get("role") == "system" and USER_SIM_MARKER in message_text(dict(m)) for m in messages)


def _overlap(task: str, replies: str) -> float:
    """Share of the task's content words (CJK bigrams for Chinese) that the agent's replies echo."""
    if has_cjk(task):
        chars = [c for c in task if "\u4e00" <= c <= "\u9fff"]
        grams = {a + b for a, b in itertools.pairwise(chars)}
        return sum(g in replies for g in grams) / len(grams) if grams else 0.5
    words = {w.lower() for w in _WORD.findall(task)} - _STOP
    low = replies.lower()
    return sum(w in low for w in words) / len(words) if words else 0.5


_LIMIT_EN = re.compile(
    r"\b(?:under|at most|no more than|fewer than|less than|within|max(?:imum)?(?: of)?)\s+(\d+)\s+words",
    re.IGNORECASE,
)
_LIMIT_ZH = re.compile(r"不超过\s*(\d+)\s*个?字")
_JSON_ASK = re.compile(r"\bjson\b", re.IGNORECASE)

# Logit weights of satisfaction; the intercept and leniency slope set the base rate, the rest are the
# surface cues a user notices. Tuned so that about a fifth to a quarter of failed transcripts end
# "satisfied" at the default leniency (docs/protocol.md#metrics: satisfied-but-failed).
_WEIGHTS = {
    "intercept": -6.0,
    "leniency": 2.6,
    "polite": 0.8,
    "effort": 0.6,
    "echo": 6.0,
    "over_limit": -1.5,
    "not_json": -1.2,
    "refused": -0.7,
}


def surface_signals(task: str, agent_replies: Sequence[str]) -> dict[str, float]:
    """What a user can see without any rules: politeness, effort (length of the last reply), echo of
    its request, a word limit it asked for being exceeded, asked-for JSON missing, a refusal."""
    text = "\n".join(agent_replies)
    last = agent_replies[-1] if agent_replies else ""
    limit = _LIMIT_ZH.search(task) or _LIMIT_EN.search(task)
    over = limit is not None and count_words(last) > int(limit.group(1))
    not_json = False
    if _JSON_ASK.search(task):
        try:
            not_json = not isinstance(json.loads(last), dict)
        except ValueError:
            not_json = True
    return {
        "polite": 1.0 if POLITE.search(text) else 0.0,
        "effort": min(1.0, count_words(last) / 60.0),
        "echo": _overlap(task, text),
        "over_limit": 1.0 if over else 0.0,
        "not_json": 1.0 if not_json else 0.0,
        "refused": 1.0 if _REFUSAL.search(last) else 0.0,
    }


def satisfaction_probability(task: str, agent_replies: Sequence[str], leniency: float) -> float:
    """P(satisfied): a logistic function of :func:`surface_signals` shifted by leniency. The rules are
    never consulted, so satisfaction and task success disagree in a realistic share of transcripts."""
    if not agent_replies:
        return 0.05
    signals = surface_signals(task, agent_replies)
    logit = _WEIGHTS["intercept"] + _WEIGHTS["leniency"] * leniency
    logit += sum(_WEIGHTS[k] * v for k, v in signals.items())
    return 1.0 / (1.0 + math.exp(-logit))


def _mistake(profile: SimUser, task_id: str) -> str:
    """Which of its own mistakes the profile makes on this task ("" for none)."""
    for kind, tasks in (
        ("leak", profile.leak_tasks),
        ("early", profile.end_early_tasks),
        ("silent", profile.silent_tasks),
        ("contradict", profile.contradict_tasks),
    ):
        if task_id and task_id in tasks:
            return kind
    return ""


def _changed(fact: str) -> str:
    """``fact`` with its first digit changed (the same fact when it has none): a contradiction."""
    m = re.search(r"[0-9]", fact)
    return fact if m is None else f"{fact[: m.start()]}{(int(m.group()) + 1) % 10}{fact[m.end() :]}"


def user_reply(world_seed: int, profile: SimUser, body: Mapping[str, Any], tasks: Sequence[Task] = ()) -> str:
    """The user simulator's next message for the flipped conversation in ``body`` (``tasks``: the
    world's, to find which task it plays for the profile's mistakes)."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    system = next((message_text(m) for m in messages if m.get("role") == "system"), "")
    prompt = parse_user_prompt(system)
    zh = has_cjk(prompt.task)
    convo = [m for m in messages if m.get("role") != "system"]
    last = message_text(convo[-1]) if convo else USER_SIM_OPENING
    agent_replies = [
        message_text(m)
        for m in convo
        if m.get("role") == "user" and message_text(m) not in (USER_SIM_OPENING, USER_SIM_LAST_TURN)
    ]
    own = [message_text(m) for m in convo if m.get("role") == "assistant"]

    def verdict() -> str:
        coin = seeded(
            world_seed,
            "user-satisfaction",
            str(body.get("model", "")),
            stable_hash(prompt.task, agent_replies),
        )
        p = satisfaction_probability(prompt.task, agent_replies, profile.leniency)
        return "[DONE] satisfied=" + ("yes" if coin.random() < p else "no")

    if last.strip() == USER_SIM_LAST_TURN:
        return verdict()
    if not agent_replies:
        return prompt.task
    task = find_task(tasks, prompt.task) if tasks else None
    mistake = _mistake(profile, task.task_id if task else "")
    if mistake == "silent" and len(agent_replies) == 1:
        return ""
    if mistake == "early" and len(agent_replies) == 1:
        return "[DONE] satisfied=yes"
    changed = [_changed(f) for f in prompt.hidden_facts if _changed(f) != f]
    if mistake == "contradict" and len(agent_replies) == 1 and changed:
        return ("" if zh else " ").join(changed)
    latest = agent_replies[-1]
    said = "\n".join(own)
    new = [f for f in prompt.hidden_facts if f not in said]
    if "?" in latest or "？" in latest or (mistake == "leak" and new):
        if new:
            return ("" if zh else " ").join(new)
        return _NO_MORE_ZH if zh else _NO_MORE_EN
    thanks = "谢谢。" if zh else "Thanks."
    return f"{thanks}\n{verdict()}"


def is_user_audit_request(messages: Sequence[Mapping[str, Any]]) -> bool:
    """A user-audit request (``UserSimulator(audit_model=...)``) has the audit's system message."""
    return any(m.get("role") == "system" and USER_AUDIT_MARKER in message_text(dict(m)) for m in messages)


def user_audit_reply(tasks: Sequence[Task], body: Mapping[str, Any]) -> str:
    """The simulated audit model's JSON finding: the user erred when it contradicted the task's facts or
    said nothing after its opening (what the rules see of it: a model that reads as the rules do)."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    brief = "\n".join(message_text(m) for m in messages if m.get("role") == "user")
    task = find_task(tasks, _tag(brief, "task")) if tasks else None
    turns: list[Turn] = []
    for line in _tag(brief, "conversation").splitlines():
        for tag, role in (("[user] ", "user"), ("[agent] ", "assistant")):
            if line.startswith(tag) or line == tag.strip():
                turns.append(Turn("user" if role == "user" else "assistant", line[len(tag) :]))
                break
        else:
            if turns:
                turns[-1] = Turn(turns[-1].role, f"{turns[-1].content}\n{line}")
    said = [t.content for t in turns if t.role == "user"]
    if any(not x.strip() for x in said[1:]):
        return json.dumps({"erred": True, "reason": "the user said nothing in a turn"})
    if task is not None and contradicted(task, Transcript(task.task_id, "", 0, turns, "", None, "")):
        return json.dumps({"erred": True, "reason": "the user contradicted its own facts"})
    return json.dumps({"erred": False, "reason": "the user played its part"})
