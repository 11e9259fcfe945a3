"""The simulated pairwise judge: reads only its prompt, estimates each side's quality, adds biases.

It parses the blind prompt (``<task>``, ``<response_a>``, ``<response_b>``), rebuilds pseudo
transcripts from the rendered blocks and checks the rules it can read on them: text rules always, tool
rules only when real tool names are shown (with ``tool_1`` aliases, quality comes from whether the tool
results read like errors; a return code is inferred from the result text). It reads phrases well but
cannot count words exactly. The decision adds Gaussian noise, position bias and length bias; noise is
keyed on the exact messages, so the two orders of a case get independent draws and flips happen.
"""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..records import ToolCall, Transcript, Turn
from ..records.json_types import JSONObject
from ..run import judge as judge_mod
from ..run.dialogue import tool_arguments
from ..suite.rules import count_words
from ..suite.sim_profiles import SimJudge
from ..suite.tasks import Task
from .agent import is_tool_rule
from .common import has_cjk, looks_like_error, message_text, seeded, stable_hash
from .user import POLITE

__all__ = ["JudgeDecision", "decide", "is_judge_request", "judge_reply", "parse_rendered", "quality"]

_HEADER = re.compile(r"^\[(user|assistant|tool result)\]$")
_CALL = re.compile(r"^\[tool call\] ([^\s(]+)\((.*)\)$")
_ALIAS = re.compile(r"tool_\d+")
_OMITTED = re.compile(r"^\[\d+ earlier turns omitted for length\]$")


def is_judge_request(messages: Sequence[Mapping[str, Any]]) -> bool:
    """A judge request: the system prompt is the judge's, or a user message carries ``<response_a>``."""
    for m in messages:
        text = message_text(dict(m))
        if m.get("role") == "system" and text == judge_mod.JUDGE_SYSTEM_PROMPT:
            return True
        if m.get("role") == "user" and "<response_a>" in text:
            return True
    return False


def _tag(text: str, name: str) -> str | None:
    match = re.search(rf"<{name}>\n?(.*?)\n?</{name}>", text, re.DOTALL)
    return match.group(1) if match else None


def parse_rendered(text: str, task_id: str = "") -> Transcript:
    """Rebuild a pseudo transcript from :func:`pytest_gauge._internal.run.judge.render_transcript` output."""
    blocks: list[tuple[str, str, list[str]]] = []  # (kind, header detail, content lines)
    for line in text.split("\n"):
        if _OMITTED.match(line):
            continue
        header = _HEADER.match(line)
        call_line = _CALL.match(line)
        if header:
            blocks.append((header.group(1), "", []))
        elif call_line:
            blocks.append(("call", call_line.group(1), [call_line.group(2)]))
        elif blocks:
            blocks[-1][2].append(line)
    turns: list[Turn] = []
    pending: list[ToolCall] = []
    final = ""
    for kind, detail, lines in blocks:
        content = "\n".join(lines)
        if kind == "user":
            turns.append(Turn("user", content))
        elif kind == "assistant":
            turns.append(Turn("assistant", content))
            final = content
        elif kind == "call":
            if not turns or turns[-1].role != "assistant":
                turns.append(Turn("assistant", ""))
            raw = content
            call = ToolCall(
                id=f"call_{len(pending)}", name=detail, raw_arguments=raw, arguments=tool_arguments(raw)
            )
            turns[-1].tool_calls.append(call)
            pending.append(call)
        else:
            turns.append(Turn("tool", content))
            owner = next((c for c in pending if not c.result), None)
            if owner is not None:
                owner.result = content
                owner.return_code = 1 if looks_like_error(content) else 0
                turns[-1].tool_call_id = owner.id
    return Transcript(task_id, "", 0, turns, final, None, "user_done")


def _find_task(tasks: Sequence[Task], shown: str) -> Task | None:
    text = shown.strip()
    for task in tasks:
        if task.task_prompt.strip() == text:
            return task
    if judge_mod.REDACTED in text:
        pattern = re.compile(".*".join(re.escape(p) for p in text.split(judge_mod.REDACTED)), re.DOTALL)
        for task in tasks:
            if pattern.fullmatch(task.task_prompt.strip()):
                return task
    return None


def _perceived(rule: Any, transcript: Transcript, rng: random.Random, noise: float) -> bool:
    """Whether the judge believes the rule is met. It reads phrases well (misreading with probability
    noise / 3) but cannot count: word and character counts are perceived with multiplicative
    log-normal error of spread ``noise``, so replies near a limit are judged either way."""
    slip, fuzz = rng.random(), rng.gauss(0.0, 1.0)
    try:
        if rule.type in ("max_words", "max_chars"):
            text = transcript.final_reply
            if getattr(rule, "scope", "final") == "all":
                text = "\n".join(t for t in transcript.agent_turns() if t)
            n = count_words(text) if rule.type == "max_words" else len(text)
            return bool(n * math.exp(noise * fuzz) <= int(rule.limit))
        passed = bool(rule.check(transcript).passed)
    except Exception:  # a rule that cannot read a pseudo transcript counts as not met
        return False
    return passed != (slip < noise / 3.0)


def _readable(rules: Sequence[Any], tools_readable: bool) -> list[Any]:
    """The rules the judge can check by reading: never code checks; tool rules only when the prompt
    shows real tool names (not ``tool_1`` aliases)."""
    return [r for r in rules if r.type != "python" and (tools_readable or not is_tool_rule(r.type))]


def quality(
    task: Task | None, transcript: Transcript, rng: random.Random | None = None, noise: float = 0.0
) -> tuple[float, bool]:
    """(estimated quality in [0, 1], a readable hard constraint seems broken) for one side: 0 when a
    readable hard constraint seems broken, else the fraction of readable criteria that seem met; when no
    criterion is readable (aliased tools), estimated from whether the tool results read like errors."""
    rng = rng or random.Random(0)
    if task is None:
        return (0.5 if transcript.final_reply.strip() else 0.0), False
    tools_readable = not any(_ALIAS.fullmatch(c.name) for c in transcript.tool_calls())
    if not all(
        [_perceived(r, transcript, rng, noise) for r in _readable(task.hard_constraints, tools_readable)]
    ):
        return 0.0, True
    criteria = _readable(task.success_criteria, tools_readable)
    if criteria:
        return sum(_perceived(r, transcript, rng, noise) for r in criteria) / len(criteria), False
    calls = transcript.tool_calls()
    if not calls:
        return (0.2 if task.tools or task.success_criteria else 0.5), False
    ok = sum(c.arguments is not None and not looks_like_error(c.result) for c in calls)
    return 0.9 * ok / len(calls) + (0.1 if transcript.final_reply.strip() else 0.0), False


@dataclass(frozen=True)
class JudgeDecision:
    """The simulated judge's verdict before it is written out."""

    winner: str
    reward_a: float
    reward_b: float
    reason: str


def decide(
    profile: SimJudge,
    q_a: float,
    q_b: float,
    len_a: int,
    len_b: int,
    zh: bool,
    rng_key: tuple[Any, ...],
    broke: tuple[bool, bool] = (False, False),
    tone: tuple[bool, bool] = (False, False),
) -> JudgeDecision:
    """d = q_a - q_b + N(0, noise) + position_bias + length_bias * log2(len_a / len_b); tie within margin."""
    rng = seeded(*rng_key, "decision")
    length_term = profile.length_bias * math.log2(max(1, len_a) / max(1, len_b))
    tone_term = profile.tone_bias * (float(tone[0]) - float(tone[1]))
    d = q_a - q_b + rng.gauss(0.0, profile.noise) + profile.position_bias + length_term + tone_term
    winner = "tie" if abs(d) <= profile.tie_margin else ("A" if d > 0 else "B")
    small = 0.05 * min(1.0, profile.noise / 0.15)
    reward_a = round(min(1.0, max(0.0, q_a + rng.gauss(0.0, small))), 2)
    reward_b = round(min(1.0, max(0.0, q_b + rng.gauss(0.0, small))), 2)
    longer_won = (winner == "A" and len_a > len_b) or (winner == "B" and len_b > len_a)
    verbose = winner != "tie" and abs(length_term) > abs(d - length_term) and longer_won
    nicer_won = (winner == "A" and tone[0] and not tone[1]) or (winner == "B" and tone[1] and not tone[0])
    toned = winner != "tie" and not verbose and abs(tone_term) > abs(d - tone_term) and nicer_won
    w, lo = (winner, "B" if winner == "A" else "A")
    if winner == "tie":
        reason = (
            "两个回答满足标准的程度相当。" if zh else "Both responses meet the criteria to a similar degree."
        )
    elif verbose:
        reason = f"回答{w}更详细，语气更好。" if zh else f"Response {w} is more detailed and longer."
    elif toned:
        reason = f"回答{w}语气更好。" if zh else f"Response {w} has a better tone and is more helpful."
    elif broke[0 if lo == "A" else 1]:
        reason = f"回答{lo}违反了硬性约束。" if zh else f"Response {lo} breaks a hard constraint."
    else:
        reason = (
            f"回答{w}满足了更多的成功标准。"
            if zh
            else f"Response {w} meets more of the success criteria than Response {lo}."
        )
    return JudgeDecision(winner, reward_a, reward_b, reason)


def judge_reply(
    world_seed: int,
    tasks: Sequence[Task],
    profile: SimJudge,
    body: Mapping[str, Any],
    exact: Collection[str] = (),
) -> str:
    """The judge's raw reply text for the request in ``body`` (a JSON verdict, or rarely malformed).
    A task in ``exact`` (a test's own comparison, ``gauge_judge.compare``) is judged by a plain judge
    that reads its rules exactly, with the model's decision noise but none of a suite profile's
    misreading, position, length or tone bias: a reply that meets the rules wins in both orders."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    prompt = "\n".join(message_text(m) for m in messages if m.get("role") == "user")
    shown_task = _tag(prompt, "task") or ""
    task = _find_task(tasks, shown_task)
    if task is not None and task.task_id in exact:
        profile = SimJudge(noise=profile.noise, misread=0.0)
    side_a = parse_rendered(_tag(prompt, "response_a") or "")
    side_b = parse_rendered(_tag(prompt, "response_b") or "")
    key = (world_seed, "judge", str(body.get("model", "")), body.get("seed") or 0, stable_hash(messages))
    misread = profile.noise if profile.misread is None else profile.misread
    q_a, broke_a = quality(task, side_a, seeded(*key, "read-a"), misread)
    q_b, broke_b = quality(task, side_b, seeded(*key, "read-b"), misread)
    decision = decide(
        profile,
        q_a,
        q_b,
        len(side_a.final_reply),
        len(side_b.final_reply),
        has_cjk(shown_task),
        key,
        (broke_a, broke_b),
        (bool(POLITE.search(side_a.final_reply)), bool(POLITE.search(side_b.final_reply))),
    )
    verdict: JSONObject = {
        "winner": decision.winner,
        "reward_a": decision.reward_a,
        "reward_b": decision.reward_b,
        "reason": decision.reason,
    }
    err = seeded(*key, "malformed")
    if err.random() < profile.error_rate:
        kind = err.randrange(3)
        if kind == 0:
            return f"Winner: {decision.winner}"
        if kind == 1:
            del verdict["reward_b"]
            return json.dumps(verdict, ensure_ascii=False)
        return "Here is my verdict: " + json.dumps(verdict, ensure_ascii=False)
    return json.dumps(verdict, ensure_ascii=False)
