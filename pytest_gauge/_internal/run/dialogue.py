"""The user-simulator ↔ agent conversation, with the agent's tool loop (docs/protocol.md#roles).

One call of :func:`run_dialogue` produces the transcript of (task, agent, sample). The simulated user
sees its own prompt (task, hidden facts, persona) and the conversation with roles flipped (the agent's
messages are its "user" turns); the agent never sees the user simulator's instructions.
"""

from __future__ import annotations

import asyncio
import json
import re
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from ..records import NEUTRAL_API, Api, ChatResult, ToolCall, Transcript, Turn
from ..records.json_types import JSONObject
from ..suite.tasks import Task
from ..suite.tools import cut_text
from .http_agent import HttpSession
from .mcp_tools import McpTools, merge_calls
from .programs import ProgramFailed, ProgramSession

__all__ = [
    "REFLECTION_PROMPT",
    "USER_SIM_OPENING",
    "BodyCaller",
    "ChatCaller",
    "ChatResult",
    "DialogueConfig",
    "parse_user_reply",
    "revise",
    "run_dialogue",
    "user_sim_system_prompt",
]

USER_SIM_OPENING = "(The conversation starts now. Write your first message to the assistant.)"
USER_SIM_LAST_TURN = (
    "(The assistant has used its last turn. Reply only with the final line "
    "[DONE] satisfied=yes or [DONE] satisfied=no.)"
)
REFLECTION_PROMPT = (
    "Review your last answer against everything the user asked for and every constraint. "
    "Reply with the improved final answer only."
)
_DONE = re.compile(r"\[DONE\]\s*satisfied\s*=\s*(yes|no)", re.IGNORECASE)


def user_sim_system_prompt(task: Task, max_turns: int, extra: str = "") -> str:
    """The simulated user's instructions. The opening message must state the task as given."""
    facts = "\n".join(f"- {f}" for f in task.hidden_facts) or "- (none)"
    persona = task.persona or "an ordinary customer"
    return (
        "You are role-playing a user who wants help from an AI assistant. Stay in character; you are "
        "not the assistant and you do not grade it.\n"
        f"<task>\n{task.task_prompt}\n</task>\n"
        f"<hidden_facts>\n{facts}\n</hidden_facts>\n"
        f"<persona>\n{persona}\n</persona>\n"
        "The conversation opened with your first message: the task text exactly as written above. "
        "Reveal a hidden fact "
        "only when the assistant asks for it. The assistant has at most "
        f"{max_turns} replies. When your request has been handled, or you want to stop, end your "
        "message with the line [DONE] satisfied=yes or [DONE] satisfied=no, saying whether you are "
        "satisfied." + (f"\n{extra}" if extra else "")
    )


def parse_user_reply(text: str) -> tuple[str, bool, bool | None]:
    """Split a user-simulator reply into (message without the marker, done, satisfied)."""
    match = _DONE.search(text)
    if not match:
        return text.strip(), False, None
    message = (text[: match.start()] + text[match.end() :]).strip()
    return message, True, match.group(1).lower() == "yes"


class ChatCaller(Protocol):
    """Sends one chat completion for a role within the current work; numbering calls is its job."""

    async def __call__(
        self,
        role: str,
        model: str,
        messages: list[JSONObject],
        *,
        temperature: float,
        max_tokens: int,
        tools: list[JSONObject] | None = None,
        seed: int | None = None,
        response_format: JSONObject | None = None,
        api: Api = NEUTRAL_API,
    ) -> ChatResult: ...


class BodyCaller(ABC):
    """The :class:`ChatCaller` of the package's callers (a unit of work, a test): it builds the request
    body in one place, so suite calls and tests' calls ask the same way (None fields are dropped by the
    gateway; ``tool_choice=auto`` whenever tools are offered); :meth:`send` numbers and sends it."""

    async def __call__(
        self,
        role: str,
        model: str,
        messages: list[JSONObject],
        *,
        temperature: float,
        max_tokens: int,
        tools: list[JSONObject] | None = None,
        seed: int | None = None,
        response_format: JSONObject | None = None,
        api: Api = NEUTRAL_API,
    ) -> ChatResult:
        body = {
            "messages": messages,
            "temperature": temperature,
            "max_tokens": max_tokens,
            "tools": tools,
            "tool_choice": "auto" if tools else None,
            "seed": seed,
            "response_format": response_format,
        }
        return await self.send(role, model, body, api)

    @abstractmethod
    async def send(self, role: str, model: str, body: JSONObject, api: Api = NEUTRAL_API) -> ChatResult:
        """Send one call's chat body as the caller's next call, in the wire format ``api``."""


AgentFn = Callable[[list[JSONObject], "ToolRunner"], Awaitable[str] | str]


class ToolRunner(Protocol):
    """Executes a tool call locally and returns the record (result, return code, latency)."""

    schemas: list[JSONObject]

    async def run(self, call_id: str, name: str, raw_arguments: str) -> ToolCall: ...


@dataclass(frozen=True)
class DialogueConfig:
    """Everything the conversation needs about the two roles in it."""

    agent_name: str
    agent_model: str | None  # None for a callable agent
    agent_system_prompt: str
    agent_temperature: float
    agent_max_tokens: int
    agent_fn: AgentFn | None
    user_model: str
    user_temperature: float
    user_max_tokens: int
    user_extra_prompt: str
    max_turns: int
    tool_step_limit: int
    agent_seed: int | None = None
    user_seed: int | None = None
    max_reply_chars: int = 0  # a longer reply is cut with a marker (0: no limit); Suite(max_reply_chars=)
    workdir: Path | None = None  # the transcript's workspace (files/workspace.py), when it has one
    agent_api: Api = NEUTRAL_API  # the wire format of the agent's calls (ModelAgent(api=))
    user_api: Api = NEUTRAL_API  # the wire format of the user simulator's calls (UserSimulator(api=))
    program: ProgramSession | None = None  # a CommandAgent's transcript: one process per turn
    http: HttpSession | None = None  # an HttpAgent's transcript: one POST per turn
    mcp: McpTools | None = None  # a program agent's MCP server of the suite's tools (its recorded calls)


async def _agent_reply(
    cfg: DialogueConfig,
    call: ChatCaller,
    history: list[JSONObject],
    tools: ToolRunner | None,
    turns: list[Turn],
) -> tuple[str, bool, bool]:
    """One agent turn: call the model, run its tool calls, repeat until a final reply or the step limit.

    Returns (reply, hit_step_limit, truncated). Tool activity is appended to ``turns`` and ``history``.
    """
    if cfg.program is not None:
        return await _program_reply(cfg, cfg.program, history, turns)
    if cfg.http is not None:  # the service's own tools are its business: only its reply is recorded
        return cut_text((await cfg.http.turn(history)).reply, cfg.max_reply_chars), False, False
    if cfg.agent_fn is not None:
        recorder = _RecordingRunner(tools) if tools is not None else None
        produced = cfg.agent_fn(list(history), recorder)  # type: ignore[arg-type]
        reply = await produced if asyncio.iscoroutine(produced) else produced
        if recorder is not None and recorder.calls:
            raw_calls = [_openai_call(c) for c in recorder.calls]
            _append_tool_activity("", recorder.calls, raw_calls, turns, history, None)
        return cut_text(str(reply), cfg.max_reply_chars), False, False
    assert cfg.agent_model is not None
    messages = [{"role": "system", "content": cfg.agent_system_prompt}, *history]
    # up to tool_step_limit rounds of tool calls, then one more model call for the final reply; a
    # response that still asks for tools then hits the limit (its calls are not run)
    for step in range(cfg.tool_step_limit + 1):
        result = await call(
            "agent",
            cfg.agent_model,
            messages,
            temperature=cfg.agent_temperature,
            max_tokens=cfg.agent_max_tokens,
            tools=tools.schemas if tools and tools.schemas else None,
            seed=cfg.agent_seed,
            api=cfg.agent_api,
        )
        content = cut_text(result.content, cfg.max_reply_chars)
        if not result.tool_calls or tools is None:
            return content, False, result.finish_reason == "length"
        if step == cfg.tool_step_limit:
            break
        calls: list[ToolCall] = []
        for raw in result.tool_calls:
            fn = raw.get("function", {})
            calls.append(
                await tools.run(str(raw.get("id", "")), str(fn.get("name", "")), str(fn.get("arguments", "")))
            )
        _append_tool_activity(content, calls, list(result.tool_calls), turns, history, messages)
    return "", True, False


async def _program_reply(
    cfg: DialogueConfig, program: ProgramSession, history: list[JSONObject], turns: list[Turn]
) -> tuple[str, bool, bool]:
    """A program agent's turn: run it on the user's last message; the tool calls its output reports
    (its own tools and the suite's over MCP) are recorded before its reply."""
    reply = await program.turn(str(history[-1]["content"]))
    # the program's own tools' calls name its workspace by its host path: recorded as <workspace>, so a
    # transcript (and the judge's prompt quoting it) reads the same from any checkout
    reply.tool_calls = [_in_workspace(c, str(program.setup.workdir)) for c in reply.tool_calls]
    if cfg.mcp is not None:  # the suite's tools as the MCP server ran them (McpServerError: see take_calls)
        reply.tool_calls = merge_calls(reply.tool_calls, cfg.mcp.take_calls(), cfg.mcp.tools)
    if reply.tool_calls:
        raw_calls = [_openai_call(c) for c in reply.tool_calls]
        _append_tool_activity("", reply.tool_calls, raw_calls, turns, history, None)
    return cut_text(reply.reply, cfg.max_reply_chars), False, False


WORKSPACE = "<workspace>"
"""How a program's reported tool calls name its workspace folder in the transcript."""


def _in_workspace(call: ToolCall, workdir: str) -> ToolCall:
    """``call`` with the workspace's host path written as :data:`WORKSPACE` (its arguments and result)."""
    if workdir not in call.raw_arguments and workdir not in call.result:
        return call
    raw = call.raw_arguments.replace(workdir, WORKSPACE)
    arguments = tool_arguments(raw) if call.arguments is not None else None
    return replace(
        call, raw_arguments=raw, arguments=arguments, result=call.result.replace(workdir, WORKSPACE)
    )


def _openai_call(call: ToolCall) -> JSONObject:
    """A recorded call in the OpenAI ``tool_calls`` shape (for a callable agent's history)."""
    function = {"name": call.name, "arguments": call.raw_arguments}
    return {"id": call.id, "type": "function", "function": function}


def _append_tool_activity(
    content: str,
    calls: list[ToolCall],
    raw_calls: list[JSONObject],
    turns: list[Turn],
    history: list[JSONObject],
    messages: list[JSONObject] | None,
) -> None:
    """Record one round of tool calls: the assistant turn with its calls, then a ``tool`` turn per result."""
    turns.append(Turn("assistant", content, tool_calls=calls))
    new: list[JSONObject] = [{"role": "assistant", "content": content or None, "tool_calls": raw_calls}]
    for c in calls:
        turns.append(Turn("tool", c.result, tool_call_id=c.id))
        new.append({"role": "tool", "tool_call_id": c.id, "content": c.result})
    history.extend(new)
    if messages is not None:
        messages.extend(new)


class _RecordingRunner:
    """The task's tool runner as a callable agent sees it: every call it makes is kept for the transcript."""

    def __init__(self, inner: ToolRunner) -> None:
        self.inner = inner
        self.schemas = inner.schemas
        self.calls: list[ToolCall] = []

    async def run(self, call_id: str, name: str, raw_arguments: str) -> ToolCall:
        call = await self.inner.run(call_id, name, raw_arguments)
        self.calls.append(call)
        return call


def _flip(history: Sequence[JSONObject]) -> list[dict[str, str]]:
    """The conversation as the simulated user sees it: its own turns as assistant, the agent's as user.

    Tool activity is hidden from the user; it only sees the agent's text replies.
    """
    flipped: list[dict[str, str]] = []
    for m in history:
        if m["role"] == "user":
            flipped.append({"role": "assistant", "content": m["content"]})
        elif m["role"] == "assistant" and m.get("content") and not m.get("tool_calls"):
            flipped.append({"role": "user", "content": m["content"]})
    return flipped


async def run_dialogue(
    task: Task,
    sample: int,
    cfg: DialogueConfig,
    call: ChatCaller,
    tools: ToolRunner | None = None,
    strategy: str = "single",
) -> Transcript:
    """Play the conversation for (task, agent, sample) and return its transcript."""
    max_turns = task.max_turns or cfg.max_turns
    system = user_sim_system_prompt(task, max_turns, cfg.user_extra_prompt)
    turns: list[Turn] = []
    history: list[JSONObject] = []  # the agent's view (without its system prompt)
    satisfied: bool | None = None
    ended_by = "max_turns"
    error: str | None = None
    final_reply = ""
    user_msgs: list[dict[str, str]] = [
        {"role": "system", "content": system},
        {"role": "user", "content": USER_SIM_OPENING},
    ]
    for turn_index in range(max_turns + 1):
        if turn_index == 0:  # the user opens with the task, verbatim, on every backend
            message, cut_short = task.task_prompt, False
        else:
            if turn_index == max_turns:
                user_msgs = [*user_msgs, {"role": "user", "content": USER_SIM_LAST_TURN}]
            result = await call(
                "user_sim",
                cfg.user_model,
                user_msgs,
                temperature=cfg.user_temperature,
                max_tokens=cfg.user_max_tokens,
                seed=cfg.user_seed,
                api=cfg.user_api,
            )
            message, done, sat = parse_user_reply(result.content)
            message = cut_text(message, cfg.max_reply_chars)
            if done:
                satisfied = sat
                ended_by = "user_done"
                break
            if turn_index == max_turns:
                break
            cut_short = result.finish_reason == "length"
        turns.append(Turn("user", message, truncated=cut_short))
        history.append({"role": "user", "content": message})
        try:
            reply, hit_limit, cut = await _agent_reply(cfg, call, history, tools, turns)
        except ProgramFailed as exc:  # the program agent failed this turn: the transcript ends with it
            ended_by, error = "error", str(exc)
            break
        if hit_limit:
            ended_by = "step_limit"
            break
        turns.append(Turn("assistant", reply, truncated=cut))
        history.append({"role": "assistant", "content": reply})
        final_reply = reply
        user_msgs = [
            {"role": "system", "content": system},
            {"role": "user", "content": USER_SIM_OPENING},
            *_flip(history),
        ]
    return Transcript(
        task_id=task.task_id,
        agent=cfg.agent_name,
        sample=sample,
        turns=turns,
        final_reply=final_reply,
        user_satisfied=satisfied,
        ended_by=ended_by,
        error=error,
        strategy=strategy,
        program_turns=_kept_turns(cfg),
    )


async def revise(
    cfg: DialogueConfig, call: ChatCaller, transcript: Transcript, tools: ToolRunner | None = None
) -> Transcript:
    """One reflection round of an agent that is not a model (a program, a service, a callable): one more
    turn of its own session asked :data:`REFLECTION_PROMPT`; its reply replaces the final one, its tool
    activity (a program's edits) is recorded before it. A failed turn ends the transcript with its error."""
    if transcript.error is not None:
        return transcript
    history: list[JSONObject] = [
        {"role": t.role, "content": t.content}
        for t in transcript.turns
        if t.role in ("user", "assistant") and t.content and not t.tool_calls
    ]
    history.append({"role": "user", "content": REFLECTION_PROMPT})
    activity: list[Turn] = []
    try:
        reply, _limit, cut = await _agent_reply(cfg, call, history, tools, activity)
    except ProgramFailed as exc:
        return replace(transcript, ended_by="error", error=str(exc), program_turns=_kept_turns(cfg))
    turns = list(transcript.turns)
    if turns and turns[-1].role == "assistant" and not turns[-1].tool_calls:
        turns.pop()
    turns += [*activity, Turn("assistant", reply, truncated=cut)]
    return replace(transcript, turns=turns, final_reply=reply, program_turns=_kept_turns(cfg))


def _kept_turns(cfg: DialogueConfig) -> list[JSONObject]:
    """A program's or a service's own record of its turns so far."""
    return _program_turns(cfg.program) or _http_turns(cfg.http)


def _program_turns(program: ProgramSession | None) -> list[JSONObject]:
    """A program agent's own view of each turn (session, usage, cost), kept beside the ledger's."""
    if program is None:
        return []
    return [{"session": r.session, "usage": r.usage, "cost_usd": r.cost_usd} for r in program.replies]


def _http_turns(http: HttpSession | None) -> list[JSONObject]:
    """An HTTP agent's turns as recorded: status, latency, attempts, session, the usage it reported."""
    return [t.record() for t in http.turns] if http is not None else []


def tool_arguments(raw: str) -> JSONObject | None:
    """Parse tool-call arguments; None when they are not a JSON object (a recorded agent mistake)."""
    try:
        value = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None
