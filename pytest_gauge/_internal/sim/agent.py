"""The simulated agent: finds its task, decides per rule whether to meet it, and replies or calls tools.

Decisions are keyed on (world seed, agent model, task id, request seed, rule index), never on the turn,
so the whole multi-turn conversation (and its tool loop) follows one consistent plan. Tool calls are
emitted ONE PER RESPONSE, in plan order: the k-th call goes out when k tool results are in the history.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from statistics import NormalDist
from typing import Any

from ..gateway.wire.noise import quiet_text
from ..records import Transcript, Turn
from ..records.json_types import JSONObject
from ..run.dialogue import REFLECTION_PROMPT
from ..run.mcp_tools import MCP_SERVER_NAME
from ..suite.rules import FileContains, Rule, SimHint
from ..suite.sim_profiles import SimAgent
from ..suite.tasks import Task
from .common import has_cjk, looks_like_error, message_text, seeded
from .compose import ComposeInput, MergedHints, clarifying_question, compose, merge_hints, refusal_text

__all__ = ["AgentOutput", "agent_reply", "find_task", "is_tool_rule"]

_TOOL_ONLY_TYPES = ("no_call_after_failure",)


@dataclass(frozen=True)
class AgentOutput:
    """One agent response: text content, or tool calls in OpenAI shape (then content is None)."""

    content: str | None
    tool_calls: tuple[JSONObject, ...] = ()


def is_tool_rule(rule_type: str) -> bool:
    """Rules about tool activity (decided with ``tool_skill``; unreadable for the judge)."""
    return rule_type.startswith("tool_") or rule_type in _TOOL_ONLY_TYPES


def find_task(tasks: Sequence[Task], prompt: str) -> Task | None:
    """The task whose prompt equals ``prompt`` (stripped), else the first whose prompt it contains."""
    text = prompt.strip()
    for task in tasks:
        if task.task_prompt.strip() == text:
            return task
    for task in tasks:
        if task.task_prompt.strip() and task.task_prompt.strip() in text:
            return task
    return None


def _opening(tasks: Sequence[Task], users: Sequence[Mapping[str, Any]]) -> int:
    """Which user message opens the task: the first that holds a task's prompt (an agent program sends
    its own context as user messages before it: Codex's AGENTS.md and environment), else the first."""
    for i, m in enumerate(users):
        if find_task(tasks, message_text(dict(m))) is not None:
            return i
    return 0


REFLECTION_KEEP = 0.7
"""Share of the agent's shortfall left after one reflection round."""

SHARED_DIFFICULTY = 0.8
"""Correlation of rule outcomes between agents: each rule of a task has a difficulty shared by every
agent (like an item in item-response theory), so two agents of equal skill mostly succeed and fail on
the same rules, and a close pair differs on few, small points. The marginal chance stays ``skill``."""

_NORMAL = NormalDist()


def _difficulty_draw(key: tuple[Any, ...], kind: str, index: int) -> float:
    """A uniform draw for (agent, rule) built from a task-wide difficulty and an agent-specific part."""
    world_seed, _model, task_id, sample_seed = key
    shared = seeded(world_seed, task_id, sample_seed, "difficulty", kind, index).random()
    own = seeded(*key, kind, index).random()
    z = math.sqrt(SHARED_DIFFICULTY) * _NORMAL.inv_cdf(_clip(shared)) + math.sqrt(
        1 - SHARED_DIFFICULTY
    ) * _NORMAL.inv_cdf(_clip(own))
    return _NORMAL.cdf(z)


def _clip(u: float) -> float:
    return min(max(u, 1e-12), 1 - 1e-12)


_MCP_PREFIXES = (f"mcp__{MCP_SERVER_NAME}__", f"{MCP_SERVER_NAME}__")
"""How program agents name the suite's tools served over MCP: Claude Code ``mcp__gauge__<tool>``,
Codex ``gauge__<tool>`` (docs/protocol.md#mcp)."""


def _offered_tools(body: Mapping[str, Any]) -> dict[str, JSONObject]:
    """The request's tools by name; a suite tool a program agent offers under its MCP name is also
    found under the suite's name (the rules' hints name it so), its function keeping the offered name."""
    offered: dict[str, JSONObject] = {}
    for tool in body.get("tools") or []:
        if isinstance(tool, dict):
            fn = tool.get("function") or {}
            if isinstance(fn, dict) and isinstance(fn.get("name"), str):
                offered[fn["name"]] = fn
    for name, fn in list(offered.items()):
        bare = next((name[len(p) :] for p in _MCP_PREFIXES if name.startswith(p)), None)
        if bare and bare not in offered:
            offered[bare] = fn
    return offered


_WORKDIR = re.compile(r"Primary working directory: (\S+)")


def _edit_plan(
    edits: Sequence[tuple[str, str]],
    offered: Mapping[str, JSONObject],
    messages: Sequence[JSONObject],
) -> list[tuple[str, str]]:
    """The file edits a coding task's ``file_contains`` rules ask for, made with the agent program's own
    tools as a model would: a shell command writing the file in its working directory (Claude Code's
    ``Bash``, Codex's ``exec_command``), else Claude Code's ``Write`` (an absolute path under the
    working directory its prompt names: an answer that names the checkout, so replayed elsewhere it
    writes there)."""
    plan: list[tuple[str, str]] = []
    shell = next((name for name in ("Bash", "exec_command") if name in offered), None)
    if shell is not None:  # a relative path in its working directory: the same answer from any checkout
        for path, content in edits:
            command = f"printf '%s' {shlex.quote(content)} > {shlex.quote(path)}"
            field = "command" if shell == "Bash" else "cmd"
            plan.append((shell, json.dumps({field: command}, ensure_ascii=False)))
    elif "Write" in offered:  # Claude Code's Write takes an absolute path, under its working directory
        text = " ".join(message_text(m) for m in messages if m.get("role") in ("system", "user"))
        found = _WORKDIR.search(text)
        root = found.group(1).rstrip("/") if found is not None else None
        for path, content in edits if root is not None else ():
            args = {"file_path": f"{root}/{path}", "content": content}
            plan.append(("Write", json.dumps(args, ensure_ascii=False)))
    return plan


def _example_args(schema: Mapping[str, Any]) -> JSONObject:
    params = schema.get("parameters") or {}
    props: Mapping[str, Any] = params.get("properties") or {} if isinstance(params, dict) else {}
    required = params.get("required") if isinstance(params, dict) else None
    names = [n for n in props if not required or n in required]
    examples = {"string": "example", "integer": 1, "number": 1.0, "boolean": True, "array": [], "object": {}}
    out: JSONObject = {}
    for name in names:
        spec = props.get(name) or {}
        if not isinstance(spec, dict):
            spec = {}
        kind = spec.get("type", "string")
        if isinstance(spec.get("enum"), list) and spec["enum"]:
            out[name] = spec["enum"][0]
        elif kind in ("integer", "number") and isinstance(spec.get("minimum"), int | float):
            out[name] = spec["minimum"]
        else:
            out[name] = examples.get(kind if isinstance(kind, str) else "string", "example")
    return out


def _wrong_value(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value * 1.5 + 1
    if isinstance(value, str):
        return str(int(value) + 1) if value.isdigit() else value + "-x"
    if isinstance(value, list):
        return []
    return None


def _tool_plan(
    merged: MergedHints,
    offered: Mapping[str, JSONObject],
    tool_skill: float,
    key: tuple[Any, ...],
) -> list[tuple[str, str]]:
    """Calls to make, as (name, raw JSON arguments), with skill-dependent mistakes on the calls a kept
    rule asked for: missing, a wrong argument value, rarely malformed JSON; and sometimes an extra call
    of another offered tool. Missing arguments are filled from the tool's schema (or known values)."""
    rng = seeded(*key, "tool-plan")
    err = 1.0 - tool_skill
    plan: list[tuple[str, str]] = []
    known = {k: v for c in merged.tool_calls() for k, v in c.args.items()}
    for c in merged.tool_calls():
        r_missing, r_wrong, r_malformed, r_pick = rng.random(), rng.random(), rng.random(), rng.random()
        if c.name not in offered or (c.strong and r_missing < 0.15 * err):
            continue
        example = _example_args(offered.get(c.name, {}))
        call_args = {**example, **{k: known[k] for k in example if k in known}, **c.args}
        if c.strong and r_wrong < 0.25 * err and call_args:
            victim = sorted(call_args)[int(r_pick * len(call_args))]
            call_args[victim] = _wrong_value(call_args[victim])
        raw = json.dumps(call_args, ensure_ascii=False)
        if c.strong and r_malformed < 0.1 * err:
            raw = raw[:-1]
        plan.append((c.name, raw))
    r_extra, r_where, r_which = rng.random(), rng.random(), rng.random()
    planned = {c.name for c in merged.tool_calls()}
    avoided = merged.avoid_strong | merged.avoid_weak
    others = sorted(n for n in offered if n == offered[n]["name"] and n not in planned and n not in avoided)
    if others and r_extra < 0.2 * err:
        extra = others[int(r_which * len(others))]
        raw = json.dumps(_example_args(offered[extra]), ensure_ascii=False)
        plan.insert(int(r_where * (len(plan) + 1)), (extra, raw))
    return plan


def _pseudo(text: str) -> Transcript:
    return Transcript("", "", 0, [Turn("assistant", text)], text, None, "user_done")


def _adjusted_hint(rule: Rule, satisfy: bool, zh: bool, guarded: list[tuple[str, str]]) -> SimHint:
    """The rule's hint, adapted to what this agent can do by itself: a kept no_call_after_failure is
    honoured by watching tool results (not by never calling the tool); a refusal rule that the canned
    refusal text already decides the right way needs no extra phrases."""
    hint = rule.hint(satisfy)
    if rule.type == "no_call_after_failure" and satisfy:
        guarded.append((str(getattr(rule, "precondition", "")), str(getattr(rule, "then", ""))))
        return replace(hint, avoid_tools=())
    if rule.type == "refuses_with_alternative":
        canned = refusal_text(zh, alternative=satisfy)
        if rule.check(_pseudo(canned)).passed == satisfy:
            return replace(hint, include=())
    return hint


def _blocked(
    name: str, made: Sequence[tuple[str, str]], results: Sequence[str], guarded: Sequence[tuple[str, str]]
) -> bool:
    """A kept no_call_after_failure rule forbids calling ``name`` now: its precondition failed earlier."""
    for pre, then in guarded:
        if name == then and any(
            n == pre and looks_like_error(r) for (n, _), r in zip(made, results, strict=False)
        ):
            return True
    return False


def _tool_note(content: str, zh: bool) -> str:
    snippet = " ".join(content.split())[:80]
    if zh:
        return f"工具调用失败：{snippet}。" if looks_like_error(content) else f"工具返回：{snippet}。"
    return (
        f"The tool call failed: {snippet}." if looks_like_error(content) else f"The tool returned: {snippet}."
    )


def agent_reply(
    world_seed: int,
    tasks: Sequence[Task],
    agent_name: str,
    profile: SimAgent,
    body: Mapping[str, Any],
) -> AgentOutput:
    """The agent's next message for the conversation in ``body`` (a pure function of its arguments)."""
    model = str(body.get("model", ""))
    messages: list[JSONObject] = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    users = [m for m in messages if m.get("role") == "user"]
    opening = _opening(tasks, users)
    first_user = message_text(users[opening]) if users else ""
    task = find_task(tasks, first_user)
    zh = has_cjk(task.task_prompt if task else first_user)
    key: tuple[Any, ...] = (world_seed, model, task.task_id if task else "", body.get("seed") or 0)
    # each reflection round closes part of the gap to perfect (same draws, higher bar: monotone gains)
    reflections = sum(1 for m in messages if m.get("role") == "user" and REFLECTION_PROMPT in message_text(m))
    skill = 1.0 - (1.0 - min(1.0, max(0.0, profile.skill))) * REFLECTION_KEEP**reflections
    tool_skill = min(1.0, max(0.0, profile.tool_skill if profile.tool_skill is not None else skill))

    hints: list[tuple[SimHint, bool]] = []
    edits: list[tuple[str, str]] = []  # (workspace path, content) of the file rules it will satisfy
    guarded: list[tuple[str, str]] = []  # (precondition, then) of kept no_call_after_failure rules
    if task is not None:
        for kind, rules in (("criterion", task.success_criteria), ("constraint", task.hard_constraints)):
            for i, rule in enumerate(rules):
                s = tool_skill if is_tool_rule(rule.type) else skill
                p = s if kind == "criterion" else 1.0 - (1.0 - s) / 2.0
                satisfy = _difficulty_draw(key, kind, i) < p
                hints.append((_adjusted_hint(rule, satisfy, zh, guarded), satisfy))
                if satisfy and kind == "criterion" and isinstance(rule, FileContains) and rule.phrases:
                    edits.append((rule.path, "\n".join(rule.phrases) + "\n"))
    merged = merge_hints(hints)

    user_turns = users[opening:]
    # a tool's output as an agent program passed it on, without its per-run noise (Codex's wall time):
    # the simulated reply that quotes it is then the same in every run
    tool_msgs = [quiet_text(message_text(m)) for m in messages if m.get("role") == "tool"]
    if merged.ask_first and len(user_turns) <= 1:
        return AgentOutput(clarifying_question(zh))

    offered = _offered_tools(body)
    if offered:
        plan = _tool_plan(merged, offered, tool_skill, key) + _edit_plan(edits, offered, messages)
        made = len(tool_msgs)
        if made < len(plan) and not _blocked(plan[made][0], plan[:made], tool_msgs, guarded):
            name, raw = plan[made]
            name = str(offered[name]["name"])  # the name the request offered it under (an MCP name)
            call = {"id": f"call_{made}", "type": "function", "function": {"name": name, "arguments": raw}}
            return AgentOutput(None, (call,))

    turn = len(user_turns)
    rng = seeded(*key, "compose", turn)
    polite = rng.random() < profile.politeness
    x = 2.0 * max(0.0, profile.verbosity)
    n_filler = math.floor(x) + (1 if rng.random() < x - math.floor(x) else 0)
    ack = None
    if len(user_turns) > 1:
        ack = "感谢您补充的信息。" if zh else "Thanks for the extra details."
    ci = ComposeInput(
        zh=zh,
        polite=polite,
        intro=f"I am {agent_name}, running on {model}." if profile.self_name else None,
        tool_notes=tuple(dict.fromkeys(_tool_note(t, zh) for t in tool_msgs[-3:])),
        ack=ack,
        n_filler=n_filler,
    )
    return AgentOutput(compose(merged, ci, rng))
