"""What the loopback server answers with: the :data:`Responder` type, the default echo responder, the
helpers a responder builds completions and tool calls with, and the OpenAI-style error bodies.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._internal.records.json_types import JSONObject
from .._internal.sim.common import content_text as message_text

__all__ = [
    "Responder",
    "ResponderError",
    "biased_verdict",
    "completion",
    "default_responder",
    "default_usage",
    "error_body",
    "full_usage",
    "message_text",
    "tool_call",
]

Responder = Callable[[JSONObject], JSONObject]
"""Request JSON body -> chat.completion JSON dict (id/object/created/model are filled in when missing)."""


class ResponderError(Exception):
    """Raised by a responder to answer with an OpenAI-style error (e.g. a 400 ``context_length_exceeded``)."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.code = code
        self.param = param
        self.headers = dict(headers or {})


def tool_call(call_id: str, name: str, arguments: Mapping[str, Any] | str) -> JSONObject:
    """One assistant ``tool_calls`` entry; ``arguments`` as a dict is JSON-encoded, a str is sent verbatim."""
    raw = arguments if isinstance(arguments, str) else json.dumps(dict(arguments))
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": raw}}


def completion(
    content: str | None,
    *,
    tool_calls: Sequence[Mapping[str, Any]] | None = None,
    finish_reason: str | None = None,
    usage: Mapping[str, int] | None = None,
    model: str | None = None,
) -> JSONObject:
    """A chat.completion dict for a responder to return; finish_reason defaults to tool_calls/stop.

    Without ``usage`` the server computes the default character-based usage for the request.
    """
    message: JSONObject = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [dict(tc) for tc in tool_calls]
    reason = finish_reason or ("tool_calls" if tool_calls else "stop")
    out: JSONObject = {"choices": [{"index": 0, "message": message, "finish_reason": reason}]}
    if usage is not None:
        out["usage"] = full_usage(dict(usage))
    if model is not None:
        out["model"] = model
    return out


def full_usage(usage: JSONObject) -> JSONObject:
    """A responder's usage with its token counts as ints and the total filled in."""
    prompt = int(usage.get("prompt_tokens", 0))
    completion_tokens = int(usage.get("completion_tokens", 0))
    return {
        **usage,
        "prompt_tokens": prompt,
        "completion_tokens": completion_tokens,
        "total_tokens": int(usage.get("total_tokens", prompt + completion_tokens)),
    }


def default_usage(body: Mapping[str, Any], content: str) -> dict[str, int]:
    """Character-based usage (chars // 4 + 1 on each side) for a request and its answer."""
    messages = body.get("messages") or []
    chars = sum(len(message_text(m.get("content"))) for m in messages if isinstance(m, dict))
    prompt, out = chars // 4 + 1, len(content) // 4 + 1
    return {"prompt_tokens": prompt, "completion_tokens": out, "total_tokens": prompt + out}


def default_responder(body: JSONObject) -> JSONObject:
    """Deterministic echo: ``"ok: " + last user message[:40]``; usage = chars//4 + 1 on each side."""
    messages = body.get("messages") or []
    last_user = next((m for m in reversed(messages) if isinstance(m, dict) and m.get("role") == "user"), None)
    text = message_text(last_user.get("content")) if last_user is not None else ""
    content = "ok: " + text[:40]
    return completion(content, usage=default_usage(body, content))


def biased_verdict(body: Mapping[str, Any], slot: str | None) -> JSONObject | None:
    """With ``FaultPlan.judge_prefers`` set: a judge request (a user message carrying ``<response_a>``, as
    pytest-gauge's blind judge prompt does) is answered with a valid verdict for that slot, whatever the
    responses say: a judge with total position bias. Other requests: None (the responder answers)."""
    if slot is None:
        return None
    messages = body.get("messages") or []
    if not any(
        isinstance(m, dict) and m.get("role") == "user" and "<response_a>" in message_text(m.get("content"))
        for m in messages
    ):
        return None
    verdict = {
        "winner": slot,
        "reward_a": 1.0 if slot == "A" else 0.0,
        "reward_b": 1.0 if slot == "B" else 0.0,
        "reason": f"Response {slot} is better.",
    }
    content = json.dumps(verdict)
    return completion(content, usage=default_usage(body, content))


def error_body(message: str, type: str, code: str | None = None, param: str | None = None) -> JSONObject:
    """An OpenAI-style error body."""
    return {"error": {"message": message, "type": type, "param": param, "code": code}}
