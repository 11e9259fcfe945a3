"""OpenAI Chat Completions (``api="chat"``), the package's neutral shape: both directions are (nearly)
the identity; the stream is ``chat.completion.chunk`` deltas ending in ``data: [DONE]``."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from ...records import Usage
from ..response import parse_completion
from .base import Api, StreamEvent

__all__ = ["CHAT", "ChatFormat", "chat_usage"]

_CACHE_FIELDS = (
    "model",
    "messages",
    "temperature",
    "top_p",
    "seed",
    "max_tokens",
    "stop",
    "response_format",
    "tools",
    "tool_choice",
)
_ERROR_TYPES = {
    "authentication": ("authentication_error", "invalid_api_key"),
    "not_found": ("invalid_request_error", "model_not_found"),
    "rate_limit": ("rate_limit_exceeded", "rate_limit_exceeded"),
    "overloaded": ("server_error", "overloaded"),
    "server": ("server_error", None),
}


class ChatFormat:
    """``/chat/completions``: the request and the response are the package's own shape."""

    api: Api = "chat"
    path = "/chat/completions"
    passed_headers: tuple[str, ...] = ()
    request_headers: Mapping[str, str] = {}
    own_auth = False
    done_marker = True
    ping_tokens = 1
    provider = "openai"
    title = "chat"

    def request_path(self, base_url: str) -> str:
        return self.path

    def sdk_base_url(self, root: str) -> str:
        return root + "/v1"

    def request_body(self, chat_body: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in chat_body.items() if k not in ("stream", "stream_options")}

    def cache_material(self, body: dict[str, Any]) -> dict[str, Any]:
        return {k: body.get(k) for k in _CACHE_FIELDS}

    def seeded(self, body: dict[str, Any], seed: int) -> dict[str, Any]:
        return body if body.get("seed") is not None else {**body, "seed": seed}

    def parse_response(self, content: bytes, secrets: tuple[str, ...] = ()) -> dict[str, Any]:
        return parse_completion(content, secrets)

    def completion(self, response: dict[str, Any]) -> dict[str, Any]:
        return response

    def usage(self, response: dict[str, Any]) -> Usage | None:
        """Chat's ``usage`` (``prompt_tokens`` includes ``prompt_tokens_details.cached_tokens``); None
        when missing or when it counts no prompt token (a proxy passing on usage it never got)."""
        u = response.get("usage")
        if not isinstance(u, dict):
            return None
        usage = chat_usage(u)
        return usage if usage.prompt_tokens > 0 else None

    def chat_request(self, body: dict[str, Any]) -> dict[str, Any]:
        return body

    def from_completion(self, completion: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
        return completion

    def stream_events(self, response: dict[str, Any]) -> list[StreamEvent]:
        """Role, content (or one delta per tool call), the finish reason, then usage (the chunk
        ``stream_options.include_usage`` asks for; sent always, as most gateways do)."""
        head = {k: response.get(k) for k in ("id", "created", "model", "system_fingerprint")}
        head["object"] = "chat.completion.chunk"
        choice = (response.get("choices") or [{}])[0]
        message = choice.get("message") or {}

        def chunk(delta: dict[str, Any], finish: str | None = None) -> StreamEvent:
            return None, {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

        events = [chunk({"role": "assistant", "content": "" if message.get("tool_calls") else None})]
        if message.get("content"):
            events.append(chunk({"content": message["content"]}))
        for i, call in enumerate(message.get("tool_calls") or ()):
            events.append(chunk({"tool_calls": [{"index": i, **call}]}))
        events.append(chunk({}, choice.get("finish_reason") or "stop"))
        if response.get("usage") is not None:
            events.append((None, {**head, "choices": [], "usage": response["usage"]}))
        return events

    def from_stream(self, events: list[StreamEvent]) -> dict[str, Any]:
        """Deltas joined: content concatenated, tool calls merged by ``index`` (arguments concatenated)."""
        out: dict[str, Any] = {"object": "chat.completion", "choices": []}
        content: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        finish = None
        for _, data in events:
            out.update({k: data[k] for k in ("id", "created", "model", "system_fingerprint") if k in data})
            if data.get("usage") is not None:
                out["usage"] = data["usage"]
            for choice in data.get("choices") or ():
                delta = choice.get("delta") or {}
                content.append(delta.get("content") or "")
                for part in delta.get("tool_calls") or ():
                    _merge_call(calls.setdefault(int(part.get("index", 0)), {}), part)
                finish = choice.get("finish_reason") or finish
        message: dict[str, Any] = {"role": "assistant", "content": "".join(content) or None}
        if calls:
            message["tool_calls"] = [calls[i] for i in sorted(calls)]
        out["choices"] = [{"index": 0, "message": message, "finish_reason": finish}]
        return out

    def error_body(self, status: int, message: str, kind: str) -> dict[str, Any]:
        type_, code = _ERROR_TYPES.get(kind, ("invalid_request_error", None))
        return {"error": {"message": message, "type": type_, "param": None, "code": code}}


def chat_usage(usage: Mapping[str, Any]) -> Usage:
    """A chat completion's ``usage`` in the ledger's convention: its ``prompt_tokens`` include the cache
    reads (``prompt_tokens_details.cached_tokens``), so the uncached input is the difference; Chat reports
    no cache writes. Missing counts are 0, missing details None; the object itself is kept as ``raw``."""
    prompt = _count(usage.get("prompt_tokens")) or 0
    cached = _detail(usage, "prompt_tokens_details", "cached_tokens")
    if cached is not None:
        cached = min(cached, prompt)
    return Usage(
        input_tokens=prompt - (cached or 0),
        output_tokens=_count(usage.get("completion_tokens")) or 0,
        cached_input_tokens=cached,
        reasoning_tokens=_detail(usage, "completion_tokens_details", "reasoning_tokens"),
        raw=dict(usage),
    )


def _count(value: object) -> int | None:
    """A token count from JSON: a non-negative number (floats truncated), else None."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return int(value)
    return None


def _detail(usage: Mapping[str, Any], section: str, key: str) -> int | None:
    part = usage.get(section)
    return _count(part.get(key)) if isinstance(part, Mapping) else None


def _merge_call(into: dict[str, Any], part: dict[str, Any]) -> None:
    """One streamed tool-call delta added to the call it continues."""
    for key in ("id", "type"):
        if part.get(key):
            into[key] = part[key]
    fn = into.setdefault("function", {"name": "", "arguments": ""})
    got = copy.deepcopy(part.get("function") or {})
    fn["name"] = fn["name"] or got.get("name") or ""
    fn["arguments"] += got.get("arguments") or ""


CHAT = ChatFormat()
