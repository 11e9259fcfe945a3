"""The simulated user audited (issue 29, point 4): checks of the user simulator's own conduct on one
transcript, by rules on its turns (docs/protocol.md#user-audit). A flagged transcript's verdicts rest on
a user that did not play its part, so its cases are marked and ``user_sim_error_rate`` counts it.

Kinds: ``leaked_fact`` (a user turn after the opening states a hidden fact the agent's previous turn did
not ask for: no question mark in it), ``ended_early`` (the user ended, or declared itself satisfied,
while the agent's last reply was still a question or the agent had said nothing, before the turn limit),
``silent`` (a user turn after the opening with nothing said), ``no_task`` (no user turn states the
task), ``cooperative`` (satisfied while the rules failed and the agent asked nothing).
"""

from __future__ import annotations

import re
import unicodedata

from ..records import Transcript
from ..suite.tasks import Task

__all__ = ["USER_AUDIT_KINDS", "audit_user"]

USER_AUDIT_KINDS = ("leaked_fact", "ended_early", "silent", "no_task", "cooperative")
"""The user simulator's errors checked per transcript, in report order."""

_SPACE = re.compile(r"\s+")


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
        "cooperative": t.user_satisfied is True and not task_success and not asked,
    }
    return tuple(k for k in USER_AUDIT_KINDS if found[k])
