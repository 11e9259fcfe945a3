"""Anthropic Messages (``api="anthropic"``, ``POST /v1/messages``): system prompt, content blocks,
``tool_use``/``tool_result``, ``stop_reason``, the cache's read and write counts, and its stream of named
events (``message_start`` ... ``message_stop``). The mapping, both ways, is the table in
docs/protocol.md#wire-anthropic.

The judge's JSON verdict has no ``response_format`` here: a ``json_schema`` format becomes one tool,
:data:`JSON_TOOL`, whose input schema is the format's schema, forced with ``tool_choice``; its
``tool_use`` input is the answer's JSON text (:meth:`MessagesFormat.completion`). ``json_object`` has no
Messages form: the prompt alone asks for JSON (the fallback's next step).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ...records import Usage
from ..redact import known_secrets, redact_known
from ..response import BadResponse, body_snippet, usage_problem
from .base import Api, StreamEvent
from .noise import quiet_material
from .shapes import ChatUsageBody, MessagesUsageBody, UsageCounts

__all__ = [
    "ANTHROPIC_VERSION",
    "DEFAULT_MAX_TOKENS",
    "JSON_TOOL",
    "MESSAGES",
    "SEED_USER",
    "MessagesFormat",
    "usage_counts",
]

DEFAULT_MAX_TOKENS = 4096
"""``max_tokens`` of a Messages request whose chat body sets none (Messages requires it): the output
limit of every current Claude model is at least this."""

SEED_USER = "gauge-seed-"
"""Messages has no ``seed``: a chat body's seed travels as ``metadata.user_id`` ``gauge-seed-<n>`` (an
opaque id to the API), so the simulator reads it back and repeats of one request differ as over chat."""

JSON_TOOL = "json_answer"
"""The forced tool a ``json_schema`` response format becomes; its ``tool_use`` input is the JSON answer."""

_CACHE_FIELDS = (
    "model",
    "system",
    "messages",
    "max_tokens",
    "stop_sequences",
    "temperature",
    "top_p",
    "top_k",
    "tools",
    "tool_choice",
    "thinking",
    "output_config",
)
_STOP_TO_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}
_FINISH_TO_STOP = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "content_filter": "refusal",
}
_ERROR_TYPES = {
    "invalid_request": "invalid_request_error",
    "authentication": "authentication_error",
    "permission": "permission_error",
    "not_found": "not_found_error",
    "rate_limit": "rate_limit_error",
    "overloaded": "overloaded_error",
    "server": "api_error",
}
ANTHROPIC_VERSION = "2023-06-01"
"""The ``anthropic-version`` header every Messages request carries (the API refuses a request without it)."""
_USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


class MessagesFormat:
    """``/messages``: Anthropic's Messages API."""

    api: Api = "anthropic"
    path = "/messages"
    passed_headers: tuple[str, ...] = ("anthropic-beta",)  # beta body fields need their flag
    request_headers: Mapping[str, str] = {"anthropic-version": ANTHROPIC_VERSION}
    own_auth = True
    done_marker = False
    ping_tokens = 1
    provider = "anthropic"
    title = "Messages (api=anthropic)"

    # -- client side ---------------------------------------------------------------------------------
    def request_path(self, base_url: str) -> str:
        """``/messages`` below a base ending in ``/v1``, else ``/v1/messages``: the URL is always
        ``{root}/v1/messages``, the one the Anthropic SDK (and Claude Code) builds from the gateway's root,
        so a gateway serving Claude Code serves the plugin's Messages calls at the same path."""
        return self.path if base_url.rstrip("/").endswith("/v1") else "/v1" + self.path

    def sdk_base_url(self, root: str) -> str:
        return root

    def request_body(self, chat_body: dict[str, Any]) -> dict[str, Any]:
        """System messages joined into ``system``, the rest as content blocks (empty messages left out,
        consecutive roles merged, tool results as the user's ``tool_result`` blocks), tools,
        ``tool_choice``, ``max_tokens`` (:data:`DEFAULT_MAX_TOKENS` when unset), ``stop_sequences``; a
        ``json_schema`` response format as the forced :data:`JSON_TOOL`; ``seed`` as ``metadata.user_id``
        (:data:`SEED_USER`). No ``temperature``/``top_p``: API version 2026-10-21 and the current models
        answer them with a 400 (even at their defaults)."""
        messages = [m for m in chat_body.get("messages") or () if isinstance(m, dict)]
        system = "\n\n".join(
            _text(m.get("content")) for m in messages if m.get("role") in ("system", "developer")
        )
        out: dict[str, Any] = {"model": chat_body.get("model"), "max_tokens": _chat_max_tokens(chat_body)}
        if system:
            out["system"] = system
        turns = [_to_message(m) for m in messages if m.get("role") not in ("system", "developer")]
        out["messages"] = _merge_roles([t for t in turns if t["content"]])  # Messages refuses empty ones
        stop = chat_body.get("stop")
        if stop:
            out["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
        seed = chat_body.get("seed")
        if isinstance(seed, int) and not isinstance(seed, bool):
            out["metadata"] = {"user_id": f"{SEED_USER}{seed}"}
        tools = [_to_tool(t) for t in chat_body.get("tools") or () if isinstance(t, dict)]
        choice = _to_tool_choice(chat_body.get("tool_choice"), chat_body.get("parallel_tool_calls"))
        forced = _json_tool(chat_body.get("response_format"))
        if forced is not None:
            tools.append(forced)
            choice = {"type": "tool", "name": JSON_TOOL}
        if tools:
            out["tools"] = tools
        if choice is not None and tools:
            out["tool_choice"] = choice
        return out

    def cache_material(self, body: dict[str, Any]) -> dict[str, Any]:
        """What decides the answer and the seed (:data:`SEED_USER`); never ``stream`` nor another
        ``metadata.user_id`` (a client's per-session id, e.g. Claude Code's), and without the run-to-run
        noise of an agent program's text (its folders, today's date: :func:`.noise.quiet`)."""
        material = {**{k: body.get(k) for k in _CACHE_FIELDS}, "seed": _seed(body)}
        return quiet_material(material)  # an agent program's per-run noise left out (wire/noise.py)

    def seeded(self, body: dict[str, Any], seed: int) -> dict[str, Any]:
        """``metadata.user_id`` as :data:`SEED_USER` ``<seed>`` unless it is one already (a client's
        own per-session id, Claude Code's, is replaced: it decides nothing of the answer)."""
        if _seed(body) is not None:
            return body
        return {**body, "metadata": {**_obj(body.get("metadata")), "user_id": f"{SEED_USER}{seed}"}}

    def parse_response(self, content: bytes, secrets: tuple[str, ...] = ()) -> dict[str, Any]:
        """The Message in ``content``, checked like ``gateway.response.parse_completion`` checks a chat
        completion: JSON object, ``content`` a list of blocks with some text or a ``tool_use``, numeric
        usage; a key the run knows quoted in it removed first."""
        try:
            known = dict.fromkeys((*secrets, *known_secrets()))
            data = json.loads(redact_known(content.decode("utf-8"), known))
        except (ValueError, UnicodeDecodeError):
            problem = "the body is empty" if not content.strip() else "the body is not JSON"
            raise BadResponse(problem, body_snippet(content, secrets)) from None
        if not isinstance(data, dict):
            kind = type(data).__name__
            raise BadResponse(f"the body is a JSON {kind}, not an object", body_snippet(content, secrets))
        wrong = _content_problem(data) or _usage_problem(data.get("usage"))
        if wrong is not None:
            raise BadResponse(wrong, body_snippet(content, secrets))
        return data

    def completion(self, response: dict[str, Any]) -> dict[str, Any]:
        """Text blocks joined as ``content``, ``tool_use`` blocks as ``tool_calls`` (arguments: the input's
        JSON), the :data:`JSON_TOOL` call's input as the JSON text content; ``stop_reason`` in chat terms
        (``end_turn``/``stop_sequence`` -> stop, ``max_tokens`` -> length, ``tool_use`` -> tool_calls)."""
        blocks = [b for b in response.get("content") or () if isinstance(b, dict)]
        text = "".join(str(b.get("text") or "") for b in blocks if b.get("type") == "text")
        calls = [b for b in blocks if b.get("type") == "tool_use"]
        answer = next((b for b in calls if b.get("name") == JSON_TOOL), None)
        finish = _STOP_TO_FINISH.get(str(response.get("stop_reason")), "stop")
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if answer is not None:
            message["content"] = json.dumps(answer.get("input") or {}, ensure_ascii=False)
            finish = "length" if finish == "length" else "stop"
        elif calls:
            message["tool_calls"] = [_to_call(b) for b in calls]
        out: dict[str, Any] = {
            "id": response.get("id"),
            "object": "chat.completion",
            "created": 0,
            "model": response.get("model"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        }
        usage = _chat_usage(response.get("usage"))
        if usage is not None:
            out["usage"] = usage
        return out

    def usage(self, response: dict[str, Any]) -> Usage | None:
        """Messages' usage (``input_tokens`` excludes the cache's reads and writes); None when missing or
        when it counts no input token at all."""
        u = response.get("usage")
        if not isinstance(u, dict):
            return None
        counts = usage_counts(u)
        if counts["input_tokens"] + counts["cached_input_tokens"] + _writes(counts) <= 0:
            return None
        return _ledger_usage(counts, u)

    # -- server side ---------------------------------------------------------------------------------
    def chat_request(self, body: dict[str, Any]) -> dict[str, Any]:
        """The inverse of :meth:`request_body` (an older client's ``temperature``/``top_p`` kept); ValueError
        (a 400) without ``max_tokens``, as Messages answers; thinking blocks and cache_control marks are
        dropped, images kept as ``image_url`` parts."""
        max_tokens = body.get("max_tokens")
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool):
            raise ValueError("max_tokens: Field required (an integer)")
        messages: list[dict[str, Any]] = []
        system = _text(body.get("system"))
        if system:
            messages.append({"role": "system", "content": system})
        raw = body.get("messages")
        if not isinstance(raw, list):
            raise ValueError("messages: Field required (a list)")
        for m in raw:
            if not isinstance(m, dict):
                raise ValueError("messages: each message must be an object")
            messages.extend(_from_message(m))
        out: dict[str, Any] = {"model": body.get("model"), "messages": messages, "max_tokens": max_tokens}
        if body.get("stop_sequences"):
            out["stop"] = list(body["stop_sequences"])
        for key in ("temperature", "top_p"):
            if body.get(key) is not None:
                out[key] = body[key]
        _chat_tools(body, out)
        if _seed(body) is not None:
            out["seed"] = _seed(body)
        return out

    def from_completion(self, completion: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
        """A Message: ``msg_`` id, the text block and ``tool_use`` blocks, ``stop_reason``, Messages usage.
        A request forcing a tool (``tool_choice`` ``{"type": "tool"}``) always gets that tool's call: a
        completion answering it in text gets the text's JSON object as the call's input."""
        choice = (completion.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        text = _text(message.get("content"))
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        blocks += [_to_tool_use(c) for c in message.get("tool_calls") or () if isinstance(c, dict)]
        stop = _FINISH_TO_STOP.get(str(choice.get("finish_reason")), "end_turn")
        forced = request.get("tool_choice")
        if isinstance(forced, dict) and forced.get("type") == "tool" and not message.get("tool_calls"):
            blocks = [_forced_use(str(forced.get("name")), text, str(completion.get("id") or ""))]
            stop = "max_tokens" if stop == "max_tokens" else "tool_use"
        cid = str(completion.get("id") or "")
        out: dict[str, Any] = {
            "id": "msg_" + (cid.split("-", 1)[-1] if cid else "0"),
            "type": "message",
            "role": "assistant",
            "model": completion.get("model") or request.get("model"),
            "content": blocks,
            "stop_reason": stop,
            "stop_sequence": None,
        }
        usage = completion.get("usage")
        if isinstance(usage, dict):
            out["usage"] = _messages_usage(usage)
        return out

    def stream_events(self, response: dict[str, Any]) -> list[StreamEvent]:
        """``message_start`` (no content, no stop reason), ``ping``, per block ``content_block_start`` /
        ``_delta`` (``text_delta`` or ``input_json_delta``) / ``_stop``, ``message_delta`` (stop reason,
        cumulative usage), ``message_stop``: the shapes of the SDK's ``RawMessageStreamEvent``."""
        head = {k: v for k, v in response.items() if k not in ("content", "usage")}
        head.update(content=[], stop_reason=None, stop_sequence=None)
        usage = response.get("usage")
        if isinstance(usage, dict):
            head["usage"] = {**usage, "output_tokens": 0}
        events: list[StreamEvent] = [("message_start", {"type": "message_start", "message": head})]
        events.append(("ping", {"type": "ping"}))
        for i, block in enumerate(response.get("content") or ()):
            events.extend(_block_events(i, block))
        delta: dict[str, Any] = {
            "type": "message_delta",
            "delta": {
                "stop_reason": response.get("stop_reason"),
                "stop_sequence": response.get("stop_sequence"),
            },
        }
        if isinstance(usage, dict):
            delta["usage"] = dict(usage)
        events.append(("message_delta", delta))
        events.append(("message_stop", {"type": "message_stop"}))
        return events

    def from_stream(self, events: list[StreamEvent]) -> dict[str, Any]:
        """The Message the events add up to: text deltas joined, ``partial_json`` joined and parsed, the
        stop reason and usage of ``message_delta`` (cumulative counts overwrite); ValueError on an
        ``error`` event or a stream without ``message_start``."""
        out: dict[str, Any] | None = None
        blocks: dict[int, dict[str, Any]] = {}
        partial: dict[int, str] = {}
        for _, data in events:
            kind = data.get("type")
            if kind == "error":
                err = _obj(data.get("error"))
                raise ValueError(f"the stream ended in an error: {err.get('type')}: {err.get('message')}")
            if kind == "message_start":
                out = dict(data.get("message") or {})
            elif out is None:
                if kind != "ping":
                    raise ValueError(f"server-sent event {kind!r} came before message_start")
            else:
                _apply_event(out, data, blocks, partial)
        if out is None:
            raise ValueError("the stream has no message_start event")
        for i, text in partial.items():
            blocks[i]["input"] = json.loads(text) if text.strip() else {}
        out["content"] = [blocks[i] for i in sorted(blocks)]
        return out

    def error_body(self, status: int, message: str, kind: str) -> dict[str, Any]:
        """``{"type": "error", "error": {"type": ..., "message": ...}}`` (413: ``request_too_large``)."""
        type_ = "request_too_large" if status == 413 else _ERROR_TYPES.get(kind, "invalid_request_error")
        return {"type": "error", "error": {"type": type_, "message": message}}


# -- client side helpers ------------------------------------------------------------------------------


def _text(content: Any) -> str:
    """The text of a chat content or a Messages content/system (a string, or text parts joined)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text") or "") for p in content if isinstance(p, dict) and "text" in p)
    return ""


def _seed(body: dict[str, Any]) -> int | None:
    """The seed a request carries as ``metadata.user_id`` ``gauge-seed-<n>``, else None."""
    user = _obj(body.get("metadata")).get("user_id")
    tail = user[len(SEED_USER) :] if isinstance(user, str) and user.startswith(SEED_USER) else ""
    return int(tail) if tail.lstrip("-").isdigit() else None


def _chat_max_tokens(body: dict[str, Any]) -> int:
    for key in ("max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return DEFAULT_MAX_TOKENS


def _user_blocks(content: Any) -> list[dict[str, Any]]:
    """A chat user content as Messages blocks: text parts, ``image_url`` parts as image blocks."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    blocks: list[dict[str, Any]] = []
    for part in content if isinstance(content, list) else ():
        if isinstance(part, str):
            blocks.append({"type": "text", "text": part})
        elif isinstance(part, dict) and part.get("type") == "text" and part.get("text"):
            blocks.append({"type": "text", "text": str(part["text"])})
        elif isinstance(part, dict) and part.get("type") == "image_url":
            blocks.append(_image_block(part.get("image_url")))
    return blocks


def _image_block(image: Any) -> dict[str, Any]:
    """A chat ``image_url`` as an image block: a ``data:`` URL as base64, any other URL as a url source."""
    url = str(image.get("url") if isinstance(image, dict) else image or "")
    if url.startswith("data:") and ";base64," in url:
        media, data = url[5:].split(";base64,", 1)
        return {"type": "image", "source": {"type": "base64", "media_type": media, "data": data}}
    return {"type": "image", "source": {"type": "url", "url": url}}


def _to_message(m: dict[str, Any]) -> dict[str, Any]:
    """One chat message as a Messages message (not yet merged with its neighbours)."""
    role = m.get("role")
    if role == "tool":
        result = {
            "type": "tool_result",
            "tool_use_id": str(m.get("tool_call_id") or ""),
            "content": _text(m.get("content")),
        }
        return {"role": "user", "content": [result]}
    if role == "assistant":
        text = _text(m.get("content"))
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        blocks += [_to_tool_use(c) for c in m.get("tool_calls") or () if isinstance(c, dict)]
        return {"role": "assistant", "content": blocks}
    return {"role": "user", "content": _user_blocks(m.get("content"))}


def _merge_roles(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Consecutive messages of one role as one (Messages alternates roles); a lone text block stays a
    plain string content."""
    merged: list[dict[str, Any]] = []
    for m in messages:
        if merged and merged[-1]["role"] == m["role"]:
            merged[-1]["content"] = merged[-1]["content"] + m["content"]
        else:
            merged.append({"role": m["role"], "content": list(m["content"])})
    for m in merged:
        content = m["content"]
        if len(content) == 1 and content[0].get("type") == "text":
            m["content"] = content[0]["text"]
    return merged


def _arguments(raw: Any) -> dict[str, Any]:
    """A chat tool call's ``arguments`` as a ``tool_use`` input: its JSON object, else ``{}``."""
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw) if isinstance(raw, str) and raw.strip() else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _to_tool_use(call: dict[str, Any]) -> dict[str, Any]:
    fn = call.get("function") or {}
    return {
        "type": "tool_use",
        "id": str(call.get("id") or ""),
        "name": str(fn.get("name") or ""),
        "input": _arguments(fn.get("arguments")),
    }


def _to_tool(tool: dict[str, Any]) -> dict[str, Any]:
    """A chat function tool as a Messages tool (``parameters`` -> ``input_schema``)."""
    fn = tool.get("function") or {}
    out: dict[str, Any] = {"name": fn.get("name")}
    if fn.get("description"):
        out["description"] = fn["description"]
    out["input_schema"] = fn.get("parameters") or {"type": "object", "properties": {}}
    return out


def _to_tool_choice(choice: Any, parallel: Any) -> dict[str, Any] | None:
    """Chat's ``tool_choice`` (auto, none, required, a named function) and ``parallel_tool_calls``."""
    out: dict[str, Any] | None = None
    if choice in ("auto", "none"):
        out = {"type": choice}
    elif choice == "required":
        out = {"type": "any"}
    elif isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        out = {"type": "tool", "name": choice["function"].get("name")}
    if parallel is False:
        out = out or {"type": "auto"}
        if out["type"] != "none":
            out["disable_parallel_tool_use"] = True
    return out


def _json_tool(fmt: Any) -> dict[str, Any] | None:
    """The forced :data:`JSON_TOOL` a ``json_schema`` response format becomes (the schema's name kept as
    its ``title``, the schema's own title first); None for any other format."""
    if not isinstance(fmt, dict) or fmt.get("type") != "json_schema":
        return None
    spec = fmt.get("json_schema") or {}
    schema = dict(spec.get("schema") or {"type": "object"})
    if spec.get("name"):
        schema.setdefault("title", spec["name"])
    return {
        "name": JSON_TOOL,
        "description": "Give your answer as this tool's input: the JSON object the instructions ask for.",
        "input_schema": schema,
    }


def _content_problem(data: dict[str, Any]) -> str | None:
    """What makes ``data`` no usable Message (an error body, content not a list of blocks, a block of
    the wrong types, no text and no tool call unless it was cut by ``max_tokens``), or None."""
    if data.get("type") == "error":
        err = _obj(data.get("error"))
        return f"the body is an error: {err.get('type')}: {err.get('message')}"
    content = data.get("content")
    if content is None:
        return "no 'content'"
    if not isinstance(content, list):
        return f"'content' is {type(content).__name__}, not a list"
    if not all(isinstance(b, dict) for b in content):
        return "'content' is not a list of blocks (objects)"
    for b in content:
        if b.get("type") == "text" and not isinstance(b.get("text"), str):
            return f"a text block's 'text' is {type(b.get('text')).__name__}, not a string"
        if b.get("type") == "tool_use" and not (
            isinstance(b.get("name"), str) and isinstance(b.get("input"), dict)
        ):
            return "a tool_use block has no string 'name' or no object 'input'"
    if data.get("stop_reason") == "max_tokens":
        return None  # cut before any text (say, while thinking): a truncated answer, not a malformed one
    if not any(b.get("type") == "tool_use" or (b.get("type") == "text" and b.get("text")) for b in content):
        return "'content' has no text and no tool_use block"
    return None


def _usage_problem(usage: Any) -> str | None:
    wrong = usage_problem(usage, _USAGE_FIELDS)
    if wrong is not None or usage is None:
        return wrong
    parts = usage.get("cache_creation")
    if parts is not None and not isinstance(parts, dict):
        return f"'usage.cache_creation' is {type(parts).__name__}, not an object"
    return None


def _to_call(block: dict[str, Any]) -> dict[str, Any]:
    args = json.dumps(block.get("input") or {}, ensure_ascii=False)
    return {
        "id": block.get("id"),
        "type": "function",
        "function": {"name": block.get("name"), "arguments": args},
    }


def _obj(value: Any) -> dict[str, Any]:
    """``value`` when it is an object, else an empty one."""
    return value if isinstance(value, dict) else {}


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def usage_counts(u: dict[str, Any]) -> UsageCounts:
    """Messages usage in the ledger's terms: uncached input, cache reads, the cache writes' 5-minute and
    1-hour parts (all writes are 5-minute without a ``cache_creation`` breakdown, the default TTL), output."""
    writes = _int(u.get("cache_creation_input_tokens"))
    parts = u.get("cache_creation")
    one_hour = _int(parts.get("ephemeral_1h_input_tokens")) if isinstance(parts, dict) else 0
    five = _int(parts.get("ephemeral_5m_input_tokens")) if isinstance(parts, dict) else writes
    if isinstance(parts, dict) and five + one_hour == 0:
        five = writes
    return {
        "input_tokens": _int(u.get("input_tokens")),
        "cached_input_tokens": _int(u.get("cache_read_input_tokens")),
        "cache_write_tokens": five,
        "cache_write_1h_tokens": one_hour,
        "output_tokens": _int(u.get("output_tokens")),
    }


def _writes(counts: UsageCounts) -> int:
    return counts["cache_write_tokens"] + counts["cache_write_1h_tokens"]


def _ledger_usage(counts: UsageCounts, raw: dict[str, Any]) -> Usage:
    """The ledger's Usage of Messages counts (docs/protocol.md#usage: ``cache_write_tokens`` is every
    write, ``cache_write_1h_tokens`` the one-hour part of them), with the Messages usage object as raw."""
    return Usage(
        input_tokens=counts["input_tokens"],
        output_tokens=counts["output_tokens"],
        cached_input_tokens=counts["cached_input_tokens"],
        cache_write_tokens=_writes(counts),
        cache_write_1h_tokens=counts["cache_write_1h_tokens"],
        raw=raw,
    )


def _chat_usage(u: Any) -> ChatUsageBody | None:
    """Messages usage as a chat ``usage`` (prompt including the cache's reads and writes)."""
    if not isinstance(u, dict):
        return None
    counts = usage_counts(u)
    prompt = counts["input_tokens"] + counts["cached_input_tokens"] + _writes(counts)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": counts["output_tokens"],
        "total_tokens": prompt + counts["output_tokens"],
        "prompt_tokens_details": {"cached_tokens": counts["cached_input_tokens"]},
    }


# -- server side helpers ------------------------------------------------------------------------------


def _from_message(m: dict[str, Any]) -> list[dict[str, Any]]:
    """One Messages message as chat messages: a user's ``tool_result`` blocks as ``tool`` messages first,
    then its other blocks; an assistant's text and ``tool_use`` blocks as one message with tool calls."""
    role = m.get("role")
    content = m.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
    if role == "assistant":
        text = "".join(
            str(b.get("text") or "") for b in blocks if isinstance(b, dict) and b.get("type") == "text"
        )
        out: dict[str, Any] = {"role": "assistant", "content": text or None}
        calls = [_to_call(b) for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"]
        if calls:
            out["tool_calls"] = calls
        return [out]
    if role == "system":  # Claude Code sends some context (its MCP servers' instructions) this way
        text = "".join(
            str(b.get("text") or "") for b in blocks if isinstance(b, dict) and b.get("type") == "text"
        )
        return [{"role": "system", "content": text}]
    if role != "user":
        raise ValueError(f"messages: role {role!r} is not 'user', 'assistant' or 'system'")
    results = [
        {"role": "tool", "tool_call_id": str(b.get("tool_use_id") or ""), "content": _text(b.get("content"))}
        for b in blocks
        if isinstance(b, dict) and b.get("type") == "tool_result"
    ]
    parts = [_chat_part(b) for b in blocks if isinstance(b, dict) and b.get("type") in ("text", "image")]
    if not parts:
        return results
    if isinstance(content, str) or all(p["type"] == "text" for p in parts):
        return [*results, {"role": "user", "content": "".join(str(p["text"]) for p in parts)}]
    return [*results, {"role": "user", "content": parts}]


def _chat_part(block: dict[str, Any]) -> dict[str, Any]:
    """A text or image block as a chat content part."""
    if block.get("type") == "text":
        return {"type": "text", "text": str(block.get("text") or "")}
    source = _obj(block.get("source"))
    if source.get("type") == "base64":
        url = f"data:{source.get('media_type')};base64,{source.get('data')}"
    else:
        url = str(source.get("url") or "")
    return {"type": "image_url", "image_url": {"url": url}}


def _chat_tools(body: dict[str, Any], out: dict[str, Any]) -> None:
    """A Messages request's tools and ``tool_choice`` into the chat body ``out``; the forced
    :data:`JSON_TOOL` back as the ``json_schema`` response format it stands for."""
    tools = [t for t in body.get("tools") or () if isinstance(t, dict)]
    choice = body.get("tool_choice") if isinstance(body.get("tool_choice"), dict) else None
    answer = next((t for t in tools if t.get("name") == JSON_TOOL), None)
    if answer is not None and choice is not None and choice.get("name") == JSON_TOOL:
        schema = dict(answer.get("input_schema") or {})
        name = schema.pop("title", JSON_TOOL)
        out["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": name, "strict": True, "schema": schema},
        }
        tools = [t for t in tools if t is not answer]
        choice = None
    if tools:
        out["tools"] = [_chat_tool(t) for t in tools]
    if choice is None:
        return
    kind = choice.get("type")
    if kind in ("auto", "none"):
        out["tool_choice"] = kind
    elif kind == "any":
        out["tool_choice"] = "required"
    elif kind == "tool":
        out["tool_choice"] = {"type": "function", "function": {"name": choice.get("name")}}
    if choice.get("disable_parallel_tool_use") is True:
        out["parallel_tool_calls"] = False


def _chat_tool(tool: dict[str, Any]) -> dict[str, Any]:
    fn: dict[str, Any] = {"name": tool.get("name")}
    if tool.get("description"):
        fn["description"] = tool["description"]
    fn["parameters"] = tool.get("input_schema") or {"type": "object", "properties": {}}
    return {"type": "function", "function": fn}


def _forced_use(name: str, text: str, cid: str) -> dict[str, Any]:
    """The call of a forced tool answered in text: the text's JSON object as its input (``{}`` when the
    text is no JSON object, e.g. cut by ``max_tokens``)."""
    return {
        "type": "tool_use",
        "id": "toolu_" + (cid.split("-", 1)[-1] or "0"),
        "name": name,
        "input": _arguments(text),
    }


def _messages_usage(u: dict[str, Any]) -> MessagesUsageBody:
    """A chat ``usage`` as Messages usage: ``input_tokens`` without the cache's reads
    (``prompt_tokens_details.cached_tokens``) and writes (``cache_write_tokens``, of which
    ``cache_write_1h_tokens`` are one-hour writes: the loopback server's way to send them)."""
    details = _obj(u.get("prompt_tokens_details"))
    read = _int(details.get("cached_tokens"))
    writes = _int(details.get("cache_write_tokens"))
    one_hour = min(_int(details.get("cache_write_1h_tokens")), writes)
    return {
        "input_tokens": max(0, _int(u.get("prompt_tokens")) - read - writes),
        "cache_creation_input_tokens": writes,
        "cache_read_input_tokens": read,
        "cache_creation": {
            "ephemeral_5m_input_tokens": writes - one_hour,
            "ephemeral_1h_input_tokens": one_hour,
        },
        "output_tokens": _int(u.get("completion_tokens")),
    }


def _block_events(i: int, block: dict[str, Any]) -> list[StreamEvent]:
    """One content block's start, delta and stop events."""
    if block.get("type") == "tool_use":
        start = {**block, "input": {}}
        delta = {
            "type": "input_json_delta",
            "partial_json": json.dumps(block.get("input") or {}, ensure_ascii=False),
        }
    else:
        start = {**block, "text": ""}
        delta = {"type": "text_delta", "text": str(block.get("text") or "")}
    return [
        ("content_block_start", {"type": "content_block_start", "index": i, "content_block": start}),
        ("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": i}),
    ]


def _apply_event(
    out: dict[str, Any], data: dict[str, Any], blocks: dict[int, dict[str, Any]], partial: dict[int, str]
) -> None:
    """One event after ``message_start`` applied to the message being rebuilt."""
    kind = data.get("type")
    index = int(data.get("index") or 0)
    if kind == "content_block_start":
        blocks[index] = dict(data.get("content_block") or {})
    elif kind == "content_block_delta":
        delta = data.get("delta") or {}
        if delta.get("type") == "text_delta":
            blocks[index]["text"] = str(blocks[index].get("text") or "") + str(delta.get("text") or "")
        elif delta.get("type") == "input_json_delta":
            partial[index] = partial.get(index, "") + str(delta.get("partial_json") or "")
    elif kind == "message_delta":
        delta = data.get("delta") or {}
        out["stop_reason"] = delta.get("stop_reason")
        out["stop_sequence"] = delta.get("stop_sequence")
        if isinstance(data.get("usage"), dict):
            out["usage"] = {**(out.get("usage") or {}), **data["usage"]}


MESSAGES = MessagesFormat()
