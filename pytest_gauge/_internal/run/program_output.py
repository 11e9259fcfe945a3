"""Reading a program agent's output (docs/protocol.md#program-agents): plain text, JSON lines, or the
JSON streams of ``claude -p --output-format stream-json --verbose`` and ``codex exec --json``.

Each parser is a pure function of the program's stdout giving one :class:`ProgramReply`: the turn's
final reply, the session id for the next turn, the tool calls the program made (with their results),
and the program's own view of its usage and cost (kept beside the ledger's, which the proxy measured).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..records import ToolCall
from ..records.json_types import JSONObject

__all__ = ["PARSERS", "ProgramReply", "parse_claude", "parse_codex", "parse_jsonl", "parse_text"]


@dataclass
class ProgramReply:
    """One turn of a program agent as its output tells it."""

    reply: str = ""
    session: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: JSONObject | None = None  # the program's own usage object, as it printed it
    cost_usd: float | None = None  # the program's own cost estimate (Claude Code's total_cost_usd)
    error: str | None = None  # the program said the turn failed (its message)


def _lines(stdout: str) -> list[JSONObject]:
    """The JSON objects of a JSON-lines stdout; other lines (warnings, progress) are skipped."""
    out: list[JSONObject] = []
    for line in stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


def parse_text(stdout: str) -> ProgramReply:
    """Plain text: the whole stdout, stripped, is the reply."""
    return ProgramReply(reply=stdout.strip())


def parse_jsonl(stdout: str) -> ProgramReply:
    """JSON lines: the last ``reply`` (or ``result``, ``text``) is the reply, the last ``session`` (or
    ``session_id``) the session; ``usage`` and ``cost_usd`` when given."""
    out = ProgramReply()
    for obj in _lines(stdout):
        for key in ("reply", "result", "text"):
            if isinstance(obj.get(key), str):
                out.reply = obj[key]
                break
        for key in ("session", "session_id"):
            if isinstance(obj.get(key), str):
                out.session = obj[key]
        if isinstance(obj.get("usage"), dict):
            out.usage = obj["usage"]
        if isinstance(obj.get("cost_usd"), (int, float)):
            out.cost_usd = float(obj["cost_usd"])
        if isinstance(obj.get("error"), str):
            out.error = obj["error"]
    return out


def _text_of(content: Any) -> str:
    """A tool result's content as text (a string, or a list of ``{"type": "text"}`` blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return "" if content is None else json.dumps(content)


def _call(call_id: str, name: str, arguments: Any) -> ToolCall:
    """A program's tool call as a transcript record (its result filled in when it arrives)."""
    args = arguments if isinstance(arguments, dict) else None
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments, sort_keys=True)
    return ToolCall(id=call_id, name=name, raw_arguments=raw, arguments=args)


def parse_claude(stdout: str) -> ProgramReply:
    """Claude Code's ``stream-json``: ``system/init`` (session id), ``assistant`` messages (text and
    ``tool_use`` blocks), ``user`` messages (``tool_result`` blocks), then one ``result`` line (the
    final reply, ``total_cost_usd``, ``usage``, ``is_error``)."""
    out = ProgramReply()
    calls: dict[str, ToolCall] = {}
    last_text = ""
    for obj in _lines(stdout):
        kind = obj.get("type")
        if isinstance(obj.get("session_id"), str):
            out.session = obj["session_id"]
        content = obj.get("message", {}).get("content") if isinstance(obj.get("message"), dict) else None
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            if kind == "assistant" and block.get("type") == "tool_use":
                call = _call(str(block.get("id", "")), str(block.get("name", "")), block.get("input"))
                calls[call.id] = call
                out.tool_calls.append(call)
            elif kind == "assistant" and block.get("type") == "text":
                last_text = str(block.get("text", ""))
            elif kind == "user" and block.get("type") == "tool_result":
                done = calls.get(str(block.get("tool_use_id", "")))
                if done is not None:
                    done.result = _text_of(block.get("content"))
                    done.return_code = 1 if block.get("is_error") else 0
        if kind == "result":
            out.reply = str(obj.get("result") or last_text)
            out.usage = obj.get("usage") if isinstance(obj.get("usage"), dict) else None
            cost = obj.get("total_cost_usd")
            out.cost_usd = float(cost) if isinstance(cost, (int, float)) else None
            if obj.get("is_error"):
                out.error = str(obj.get("result") or obj.get("subtype") or "error")
    if not out.reply:
        out.reply = last_text
    return out


def _codex_item(item: JSONObject, out: ProgramReply) -> None:
    """One completed item of Codex's stream: a message, a command run, an MCP tool call or an error."""
    kind = item.get("type")
    call_id = str(item.get("id", ""))
    if kind == "agent_message":
        out.reply = str(item.get("text", ""))
    elif kind == "command_execution":
        call = _call(call_id, "command_execution", {"command": item.get("command", "")})
        call.result = str(item.get("aggregated_output", ""))
        code = item.get("exit_code")
        call.return_code = code if isinstance(code, int) else 1
        out.tool_calls.append(call)
    elif kind == "mcp_tool_call":  # named as Claude Code names an MCP tool: mcp__<server>__<tool>
        name = f"mcp__{item.get('server', '')}__{item.get('tool', '')}"
        call = _call(call_id, name, item.get("arguments"))
        result = item.get("result")
        call.result = _text_of(result.get("content")) if isinstance(result, dict) else ""
        error = item.get("error")
        if isinstance(error, dict) or item.get("status") == "failed":
            call.return_code = 1
            call.error = str(error.get("message", "")) if isinstance(error, dict) else "failed"
        out.tool_calls.append(call)


def parse_codex(stdout: str) -> ProgramReply:
    """Codex's ``exec --json``: ``thread.started`` (the session: its ``thread_id``), ``item.completed``
    (``agent_message``, ``command_execution``, ``mcp_tool_call``; ``error`` items are warnings),
    ``turn.completed`` (``usage``) or ``turn.failed`` / ``error`` (the turn failed)."""
    out = ProgramReply()
    for obj in _lines(stdout):
        kind = obj.get("type")
        if kind == "thread.started" and isinstance(obj.get("thread_id"), str):
            out.session = obj["thread_id"]
        elif kind == "item.completed" and isinstance(obj.get("item"), dict):
            _codex_item(obj["item"], out)
        elif kind == "turn.completed" and isinstance(obj.get("usage"), dict):
            out.usage = obj["usage"]
        elif kind == "turn.failed":
            error = obj.get("error")
            out.error = str(error.get("message", error)) if isinstance(error, dict) else str(error)
        elif kind == "error":
            out.error = str(obj.get("message", "error"))
    return out


PARSERS: dict[str, Callable[[str], ProgramReply]] = {
    "text": parse_text,
    "jsonl": parse_jsonl,
    "claude": parse_claude,
    "codex": parse_codex,
}
"""The parser of each ``CommandAgent(output=...)``."""
