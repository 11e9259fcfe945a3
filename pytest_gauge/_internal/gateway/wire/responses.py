"""OpenAI Responses (``api="responses"``, ``POST /v1/responses``): instructions, input items,
``function_call``/``function_call_output`` items, ``incomplete_details``, usage details, and its stream of
named events (``response.created`` ... ``response.completed``), in the shapes of the ``openai`` SDK's
``openai.types.responses`` (docs/protocol.md#wire-formats has the mapping table).

The package's chat bodies carry a ``seed`` the Responses API has no parameter for: it travels as
``metadata.seed`` (a string, as metadata values are), so samples stay distinct in the cache key and the
simulator answers each sample as it does over Chat Completions.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ...records import Usage
from ..redact import known_secrets, redact_known
from ..response import BadResponse, body_snippet, usage_problem
from .base import Api, StreamEvent
from .chat import CHAT
from .noise import quiet_material
from .shapes import ChatUsageBody, ResponsesUsageBody

__all__ = ["RESPONSES", "ResponsesFormat"]

_CACHE_FIELDS = (
    "model",
    "instructions",
    "input",
    "tools",
    "tool_choice",
    "text",
    "max_output_tokens",
    "temperature",
    "top_p",
    "reasoning",
    "parallel_tool_calls",
    "include",
    "truncation",
)
_SAMPLING = ("temperature", "top_p", "parallel_tool_calls")
_USAGE_COUNTS = ("input_tokens", "output_tokens", "total_tokens")
_FINAL_EVENTS = ("response.completed", "response.incomplete", "response.failed")
_STATUS_EVENT = {"completed": "response.completed", "incomplete": "response.incomplete"}
_WORDS_PER_DELTA = 8
_ARGUMENT_CHUNK = 32
_NO_STATE = (
    "'previous_response_id' needs the server's stored responses, and this server keeps none: send the "
    "whole conversation as 'input' (with store: false)"
)


def _text(content: Any) -> str:
    """The text of chat or Responses content: a string, or its text parts joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(p.get("text") or p.get("refusal") or "") if isinstance(p, dict) else str(p) for p in content
        )
    return ""


# -- client side: chat body -> Responses request ---------------------------------------------------


def _input_content(content: Any) -> Any:
    """Chat message content as Responses input content (a string stays one; parts become
    ``input_text``/``input_image`` parts)."""
    if not isinstance(content, list):
        return _text(content)
    parts: list[dict[str, Any]] = []
    for part in content:
        if not isinstance(part, dict):
            parts.append({"type": "input_text", "text": str(part)})
        elif part.get("type") == "text":
            parts.append({"type": "input_text", "text": str(part.get("text", ""))})
        elif part.get("type") == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            detail = image.get("detail", "auto") if isinstance(image, dict) else "auto"
            parts.append({"type": "input_image", "image_url": url, "detail": detail})
        else:
            parts.append(dict(part))
    return parts


def _message_items(message: dict[str, Any]) -> list[dict[str, Any]]:
    """One chat message as Responses input items: a message, then an assistant's function calls, or a
    tool result as a ``function_call_output``."""
    role = message.get("role")
    if role == "tool":
        output = message.get("content")
        text = output if isinstance(output, str) else _text(output)
        return [{"type": "function_call_output", "call_id": message.get("tool_call_id"), "output": text}]
    items: list[dict[str, Any]] = []
    calls = message.get("tool_calls") or []
    content = message.get("content")
    if content not in (None, "") or not calls:
        items.append({"type": "message", "role": role, "content": _input_content(content)})
    for call in calls:
        fn = call.get("function") or {}
        items.append(
            {
                "type": "function_call",
                "call_id": call.get("id"),
                "name": fn.get("name"),
                "arguments": fn.get("arguments") or "",
            }
        )
    return items


def _split_instructions(messages: list[dict[str, Any]]) -> tuple[str | None, list[dict[str, Any]]]:
    """The leading system (or developer) messages as ``instructions``; the rest stay messages."""
    lead = 0
    while lead < len(messages) and messages[lead].get("role") in ("system", "developer"):
        lead += 1
    if lead == 0:
        return None, messages
    return "\n\n".join(_text(m.get("content")) for m in messages[:lead]), messages[lead:]


def _tools_out(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat tool definitions as Responses function tools (flat; ``strict`` false unless asked, since
    Responses' own default is strict and Chat's is not)."""
    out: list[dict[str, Any]] = []
    for tool in tools:
        if tool.get("type") != "function":
            out.append(dict(tool))
            continue
        fn = tool.get("function") or {}
        flat: dict[str, Any] = {"type": "function", "name": fn.get("name")}
        if fn.get("description") is not None:
            flat["description"] = fn["description"]
        flat["parameters"] = fn.get("parameters") or {"type": "object", "properties": {}}
        flat["strict"] = bool(fn.get("strict", False))
        out.append(flat)
    return out


def _tool_choice_out(choice: Any) -> Any:
    """Chat's ``{"type": "function", "function": {"name": N}}`` as Responses' ``{"type": "function",
    "name": N}``; the strings (auto, none, required) are the same."""
    if isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        return {"type": "function", "name": choice["function"].get("name")}
    return choice


def _format_out(fmt: dict[str, Any]) -> dict[str, Any]:
    """Chat's ``response_format`` as Responses' ``text.format`` (the json_schema fields flattened)."""
    if fmt.get("type") == "json_schema":
        schema = fmt.get("json_schema") or {}
        return {"type": "json_schema", **schema}
    return dict(fmt)


def _request(chat_body: dict[str, Any]) -> dict[str, Any]:
    messages = [m for m in chat_body.get("messages") or [] if isinstance(m, dict)]
    instructions, rest = _split_instructions(messages)
    body: dict[str, Any] = {"model": chat_body.get("model")}
    if instructions is not None:
        body["instructions"] = instructions
    body["input"] = [item for m in rest for item in _message_items(m)]
    if chat_body.get("tools"):
        body["tools"] = _tools_out(chat_body["tools"])
    if chat_body.get("tool_choice") is not None:
        body["tool_choice"] = _tool_choice_out(chat_body["tool_choice"])
    limit = chat_body.get("max_completion_tokens", chat_body.get("max_tokens"))
    if limit is not None:
        body["max_output_tokens"] = limit
    if isinstance(chat_body.get("response_format"), dict):
        body["text"] = {"format": _format_out(chat_body["response_format"])}
    body.update({k: chat_body[k] for k in _SAMPLING if chat_body.get(k) is not None})
    if chat_body.get("reasoning_effort") is not None:
        body["reasoning"] = {"effort": chat_body["reasoning_effort"]}
    if chat_body.get("seed") is not None:
        body["metadata"] = {"seed": str(chat_body["seed"])}
    body["store"] = False
    return body


# -- client side: checking and reading a response --------------------------------------------------


def _item_problem(i: int, item: Any) -> str | None:
    if not isinstance(item, dict):
        return f"'output[{i}]' is not an object"
    kind = item.get("type")
    if kind == "message":
        parts = item.get("content")
        if not isinstance(parts, list) or not all(isinstance(p, dict) for p in parts):
            return f"'output[{i}].content' is not a list of objects"
        for j, part in enumerate(parts):
            if part.get("type") == "output_text" and not isinstance(part.get("text"), str):
                return f"'output[{i}].content[{j}].text' is not a string"
    elif kind == "function_call":
        for key in ("call_id", "name", "arguments"):
            if not isinstance(item.get(key), str):
                return f"'output[{i}].{key}' of a function call is not a string"
    return None


def _usage_problem(usage: Any) -> str | None:
    wrong = usage_problem(usage, _USAGE_COUNTS)
    if wrong is not None or usage is None:
        return wrong
    for section in ("input_tokens_details", "output_tokens_details"):
        if usage.get(section) is not None and not isinstance(usage[section], dict):
            return f"'usage.{section}' is not an object"
    return None


def _response_problem(data: dict[str, Any]) -> str | None:
    """What makes ``data`` unusable as a Responses answer, or None."""
    output = data.get("output")
    if output is None:
        return "no 'output'"
    if not isinstance(output, list):
        return f"'output' is {type(output).__name__}, not a list"
    for i, item in enumerate(output):
        wrong = _item_problem(i, item)
        if wrong is not None:
            return wrong
    status = data.get("status")
    if status == "failed":
        err = data.get("error")
        said = err.get("message") if isinstance(err, dict) else None
        return f"the response failed ({said})" if said else "the response failed"
    if status in ("queued", "in_progress"):
        return f"the response is still {status} (background responses are not read)"
    answered = any(isinstance(i, dict) and i.get("type") in ("message", "function_call") for i in output)
    if not answered and status != "incomplete":
        return "'output' has no message and no function call"
    return _usage_problem(data.get("usage"))


def _finish(response: dict[str, Any], calls: list[dict[str, Any]]) -> str:
    """The chat finish reason: ``length`` for an answer cut at ``max_output_tokens``, ``content_filter``,
    ``tool_calls`` for function calls, else ``stop``."""
    if response.get("status") == "incomplete":
        details = response.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, dict) else None
        if reason == "content_filter":
            return "content_filter"
        return "length"
    return "tool_calls" if calls else "stop"


def _chat_usage(usage: Any) -> ChatUsageBody | None:
    """Responses usage in Chat's shape (both count cached tokens inside the input and reasoning tokens
    inside the output)."""
    if not isinstance(usage, dict):
        return None
    ins, outs = usage.get("input_tokens_details"), usage.get("output_tokens_details")
    out: ChatUsageBody = {
        "prompt_tokens": usage.get("input_tokens") or 0,
        "completion_tokens": usage.get("output_tokens") or 0,
        "total_tokens": usage.get("total_tokens")
        or (usage.get("input_tokens") or 0) + (usage.get("output_tokens") or 0),
    }
    if isinstance(ins, dict) and ins.get("cached_tokens") is not None:
        out["prompt_tokens_details"] = {"cached_tokens": ins["cached_tokens"]}
    if isinstance(outs, dict) and outs.get("reasoning_tokens") is not None:
        out["completion_tokens_details"] = {"reasoning_tokens": outs["reasoning_tokens"]}
    return out


def _count(value: object) -> int | None:
    """A token count from JSON: a non-negative number (floats truncated), else None."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return int(value)
    return None


def _ledger_usage(usage: dict[str, Any]) -> Usage | None:
    """A Responses ``usage`` object in the ledger's convention (None without any input token):
    ``input_tokens`` counts all input, ``input_tokens_details.cached_tokens`` (cache reads) and
    ``cache_write_tokens`` (cache writes) are parts of it, so the uncached input is what is left;
    ``output_tokens`` includes ``output_tokens_details.reasoning_tokens``. The object is kept as ``raw``."""
    total_in = _count(usage.get("input_tokens")) or 0
    if total_in <= 0:
        return None
    ins, outs = usage.get("input_tokens_details"), usage.get("output_tokens_details")
    ins = ins if isinstance(ins, dict) else {}
    cached = _count(ins.get("cached_tokens"))
    cached = None if cached is None else min(cached, total_in)
    writes = _count(ins.get("cache_write_tokens"))
    writes = None if writes is None else min(writes, total_in - (cached or 0))
    return Usage(
        input_tokens=total_in - (cached or 0) - (writes or 0),
        output_tokens=_count(usage.get("output_tokens")) or 0,
        cached_input_tokens=cached,
        cache_write_tokens=writes,
        reasoning_tokens=_count(outs.get("reasoning_tokens")) if isinstance(outs, dict) else None,
        raw=dict(usage),
    )


# -- server side: Responses request -> chat body ----------------------------------------------------


def _chat_content(content: Any) -> Any:
    """Responses input content as chat content: a string stays one, text parts become ``text`` parts
    (one text part: a plain string), images ``image_url`` parts."""
    if not isinstance(content, list):
        return _text(content)
    parts: list[dict[str, Any]] = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("input_text", "output_text", "text"):
            parts.append({"type": "text", "text": str(part.get("text", ""))})
        elif kind == "refusal":
            parts.append({"type": "text", "text": str(part.get("refusal", ""))})
        elif kind == "input_image":
            image = {"url": part.get("image_url"), "detail": part.get("detail", "auto")}
            parts.append({"type": "image_url", "image_url": image})
        else:
            raise ValueError(f"input content of type {kind!r} is not supported here")
    if all(p["type"] == "text" for p in parts):
        return "".join(p["text"] for p in parts)
    return parts


def _call_message(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The assistant message a function call item joins: the last message when it is an assistant's
    turn with no tool result after it, else a new one."""
    if messages and messages[-1].get("role") == "assistant":
        return messages[-1]
    messages.append({"role": "assistant", "content": None})
    return messages[-1]


def _add_item(messages: list[dict[str, Any]], i: int, item: Any) -> None:
    """One input item added to the chat messages."""
    if not isinstance(item, dict):
        raise ValueError(f"'input[{i}]' is not an object")
    kind = item.get("type", "message" if "role" in item else None)
    if kind == "message":
        if item.get("role") not in ("user", "assistant", "system", "developer"):
            raise ValueError(f"'input[{i}].role' must be user, assistant, system or developer")
        messages.append({"role": item["role"], "content": _chat_content(item.get("content"))})
    elif kind == "function_call":
        name = item.get("name")
        if isinstance(item.get("namespace"), str):  # a namespace tool's call, by its chat name
            name = f"{item['namespace']}__{name}"
        call = {
            "id": item.get("call_id"),
            "type": "function",
            "function": {"name": name, "arguments": item.get("arguments") or ""},
        }
        _call_message(messages).setdefault("tool_calls", []).append(call)
    elif kind == "function_call_output":
        output = item.get("output")
        text = output if isinstance(output, str) else _text(output)
        messages.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": text})
    elif kind == "item_reference":
        raise ValueError(f"'input[{i}]' is an item_reference: {_NO_STATE}")
    elif kind != "reasoning":  # a reasoning item carried back changes no answer here
        raise ValueError(f"'input[{i}]' of type {kind!r} is not supported here")


def _messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    raw = body.get("input")
    if raw is None:
        raise ValueError("'input' is required")
    messages: list[dict[str, Any]] = []
    if isinstance(body.get("instructions"), str):
        messages.append({"role": "system", "content": body["instructions"]})
    if isinstance(raw, str):
        messages.append({"role": "user", "content": raw})
        return messages
    if not isinstance(raw, list):
        raise ValueError("'input' must be a string or an array of input items")
    for i, item in enumerate(raw):
        _add_item(messages, i, item)
    for m in messages:
        if m.get("tool_calls") and m.get("content") == "":
            m["content"] = None
    return messages


def _namespaced(tools: Any) -> dict[str, tuple[str, str]]:
    """The chat names of the functions inside ``namespace`` tools (Codex offers an MCP server's tools as
    ``{"type": "namespace", "name": "mcp__gauge", "tools": [...]}``): ``<namespace>__<name>`` ->
    (namespace, name)."""
    out: dict[str, tuple[str, str]] = {}
    for tool in tools if isinstance(tools, list) else []:
        if isinstance(tool, dict) and tool.get("type") == "namespace" and isinstance(tool.get("name"), str):
            for inner in tool.get("tools") or []:
                if isinstance(inner, dict) and isinstance(inner.get("name"), str):
                    out[f"{tool['name']}__{inner['name']}"] = (tool["name"], inner["name"])
    return out


def _flat_tools(tools: Any) -> list[Any]:
    """The function tools, a namespace's as ``<namespace>__<name>`` (see :func:`_namespaced`)."""
    out: list[Any] = []
    for tool in tools if isinstance(tools, list) else []:
        if isinstance(tool, dict) and tool.get("type") == "namespace" and isinstance(tool.get("name"), str):
            inner = [t for t in tool.get("tools") or [] if isinstance(t, dict)]
            out += [{**t, "name": f"{tool['name']}__{t.get('name')}"} for t in inner]
        else:
            out.append(tool)
    return out


def _tools_in(tools: Any) -> list[dict[str, Any]]:
    """Responses function tools as chat tools, a namespace's functions included (other tool types,
    hosted ones, are left out: nothing here can run them)."""
    out: list[dict[str, Any]] = []
    for tool in _flat_tools(tools):
        if not isinstance(tool, dict) or tool.get("type") != "function":
            continue
        fn: dict[str, Any] = {"name": tool.get("name")}
        if tool.get("description") is not None:
            fn["description"] = tool["description"]
        fn["parameters"] = tool.get("parameters") or {"type": "object", "properties": {}}
        if tool.get("strict"):
            fn["strict"] = True
        out.append({"type": "function", "function": fn})
    return out


def _format_in(fmt: dict[str, Any]) -> dict[str, Any]:
    """Responses' ``text.format`` as chat's ``response_format``."""
    if fmt.get("type") == "json_schema":
        return {"type": "json_schema", "json_schema": {k: v for k, v in fmt.items() if k != "type"}}
    return dict(fmt)


def _tool_choice_in(choice: Any) -> Any:
    if isinstance(choice, dict) and choice.get("type") == "function" and "name" in choice:
        return {"type": "function", "function": {"name": choice["name"]}}
    return choice


def _chat_body(body: dict[str, Any]) -> dict[str, Any]:
    if body.get("previous_response_id"):
        raise ValueError(_NO_STATE)
    chat: dict[str, Any] = {"model": body.get("model"), "messages": _messages(body)}
    tools = _tools_in(body.get("tools"))
    if tools:
        chat["tools"] = tools
        if body.get("tool_choice") is not None:
            chat["tool_choice"] = _tool_choice_in(body["tool_choice"])
    if body.get("max_output_tokens") is not None:
        chat["max_tokens"] = body["max_output_tokens"]
    text = body.get("text")
    if isinstance(text, dict) and isinstance(text.get("format"), dict):
        if text["format"].get("type") != "text":
            chat["response_format"] = _format_in(text["format"])
    chat.update({k: body[k] for k in _SAMPLING if body.get(k) is not None})
    reasoning = body.get("reasoning")
    if isinstance(reasoning, dict) and reasoning.get("effort") is not None:
        chat["reasoning_effort"] = reasoning["effort"]
    seed = (body.get("metadata") or {}).get("seed") if isinstance(body.get("metadata"), dict) else None
    if isinstance(seed, str) and re.fullmatch(r"-?\d+", seed):
        chat["seed"] = int(seed)
    return chat


# -- server side: completion -> Responses response, and its stream -----------------------------------


def _suffix(completion: dict[str, Any]) -> str:
    """The id part shared by a response and its items (from the completion's id: same answer, same ids)."""
    raw = str(completion.get("id") or "loopback")
    return re.sub(r"[^A-Za-z0-9]", "", raw.split("-", 1)[-1]) or "0"


def _responses_usage(usage: Any) -> ResponsesUsageBody | None:
    """Chat usage as Responses usage (the same counts; the details as the Responses API names them)."""
    if not isinstance(usage, dict):
        return None
    ins, outs = usage.get("prompt_tokens_details"), usage.get("completion_tokens_details")
    prompt, completion = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
    cached = ins.get("cached_tokens") if isinstance(ins, dict) else None
    reasoning = outs.get("reasoning_tokens") if isinstance(outs, dict) else None
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": int(cached or 0), "cache_write_tokens": 0},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": int(reasoning or 0)},
        "total_tokens": int(usage.get("total_tokens") or prompt + completion),
    }


def _output_items(
    completion: dict[str, Any], status: str, namespaced: dict[str, tuple[str, str]] | None = None
) -> list[dict[str, Any]]:
    """The completion's message as output items: its text as a ``message`` item, its tool calls as
    ``function_call`` items (``call_id`` the chat call's id; a namespace tool's call with its
    ``namespace`` and own name, as the client offered it)."""
    choice = (completion.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    calls = message.get("tool_calls") or []
    suffix = _suffix(completion)
    items: list[dict[str, Any]] = []
    text = _text(message.get("content"))
    if text or not calls:
        part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
        items.append(
            {
                "id": f"msg_{suffix}",
                "type": "message",
                "status": status,
                "role": "assistant",
                "content": [part],
            }
        )
    for i, call in enumerate(calls):
        fn = call.get("function") or {}
        items.append(
            {
                "id": f"fc_{suffix}_{i}",
                "type": "function_call",
                "status": status,
                "call_id": call.get("id") or f"call_{suffix}_{i}",
                "name": fn.get("name") or "",
                "arguments": fn.get("arguments") or "",
            }
        )
        space = (namespaced or {}).get(str(fn.get("name")))
        if space is not None:
            items[-1].update(namespace=space[0], name=space[1])
    return items


def _response(completion: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    choice = (completion.get("choices") or [{}])[0]
    finish = choice.get("finish_reason")
    incomplete = {"length": "max_output_tokens", "content_filter": "content_filter"}.get(str(finish))
    status = "incomplete" if incomplete else "completed"
    created = completion.get("created") or 0
    out: dict[str, Any] = {
        "id": f"resp_{_suffix(completion)}",
        "object": "response",
        "created_at": created,
        "status": status,
        "background": False,
        "completed_at": None if incomplete else created,
        "error": None,
        "incomplete_details": {"reason": incomplete} if incomplete else None,
        "instructions": request.get("instructions"),
        "max_output_tokens": request.get("max_output_tokens"),
        "metadata": request.get("metadata") or {},
        "model": completion.get("model") or request.get("model"),
        "output": _output_items(
            completion, "incomplete" if incomplete else "completed", _namespaced(request.get("tools"))
        ),
        "parallel_tool_calls": request.get("parallel_tool_calls", True),
        "previous_response_id": None,
        "reasoning": request.get("reasoning") or {"effort": None, "summary": None},
        "store": request.get("store", True),
        "temperature": request.get("temperature", 1.0),
        "text": request.get("text") or {"format": {"type": "text"}},
        "tool_choice": request.get("tool_choice", "auto"),
        "tools": request.get("tools") or [],
        "top_p": request.get("top_p", 1.0),
        "truncation": request.get("truncation", "disabled"),
        "user": None,
    }
    usage = _responses_usage(completion.get("usage"))
    if usage is not None:
        out["usage"] = usage
    return out


def _pieces(text: str, words: int) -> list[str]:
    """``text`` cut into deltas of ``words`` words (with their spaces); joined, they are ``text``."""
    tokens = [t for t in re.findall(r"\S*\s*", text) if t]
    return ["".join(tokens[i : i + words]) for i in range(0, len(tokens), words)] or [""]


class _Events:
    """Builds a stream's events, numbering them (``sequence_number`` from 0)."""

    def __init__(self) -> None:
        self.events: list[StreamEvent] = []

    def add(self, event: str, /, **data: Any) -> None:
        self.events.append((event, {"type": event, "sequence_number": len(self.events), **data}))

    def message(self, index: int, item: dict[str, Any]) -> None:
        self.add("response.output_item.added", output_index=index, item={**item, "content": []})
        for j, part in enumerate(item.get("content") or []):
            where = {"item_id": item["id"], "output_index": index, "content_index": j}
            if part.get("type") == "output_text":
                empty = {**part, "text": ""}
                self.add("response.content_part.added", **where, part=empty)
                for piece in _pieces(part["text"], _WORDS_PER_DELTA):
                    self.add("response.output_text.delta", **where, delta=piece, logprobs=[])
                self.add("response.output_text.done", **where, text=part["text"], logprobs=[])
            else:
                self.add("response.content_part.added", **where, part=part)
            self.add("response.content_part.done", **where, part=part)
        self.add("response.output_item.done", output_index=index, item=item)

    def function_call(self, index: int, item: dict[str, Any]) -> None:
        args = str(item.get("arguments") or "")
        self.add("response.output_item.added", output_index=index, item={**item, "arguments": ""})
        where = {"item_id": item.get("id"), "output_index": index}
        for start in range(0, len(args), _ARGUMENT_CHUNK):
            self.add(
                "response.function_call_arguments.delta", **where, delta=args[start : start + _ARGUMENT_CHUNK]
            )
        self.add("response.function_call_arguments.done", **where, arguments=args)
        self.add("response.output_item.done", output_index=index, item=item)


def _stream(response: dict[str, Any]) -> list[StreamEvent]:
    ev = _Events()
    head = {**response, "status": "in_progress", "output": [], "usage": None, "incomplete_details": None}
    head["completed_at"] = None
    ev.add("response.created", response=head)
    ev.add("response.in_progress", response=head)
    for index, item in enumerate(response.get("output") or []):
        if item.get("type") == "message":
            ev.message(index, item)
        elif item.get("type") == "function_call":
            ev.function_call(index, item)
        else:
            ev.add("response.output_item.added", output_index=index, item=item)
            ev.add("response.output_item.done", output_index=index, item=item)
    final = _STATUS_EVENT.get(str(response.get("status")), "response.failed")
    ev.add(final, response=response)
    return ev.events


def _apply(items: dict[int, dict[str, Any]], kind: str, data: dict[str, Any]) -> None:
    """One item event applied to the items built so far (by output index)."""
    index = int(data.get("output_index") or 0)
    if kind in ("response.output_item.added", "response.output_item.done"):
        items[index] = json.loads(json.dumps(data["item"]))
    elif kind == "response.content_part.added":
        items[index].setdefault("content", []).append(dict(data["part"]))
    elif kind == "response.output_text.delta":
        part = items[index]["content"][int(data.get("content_index") or 0)]
        part["text"] = part.get("text", "") + str(data.get("delta") or "")
    elif kind == "response.function_call_arguments.delta":
        items[index]["arguments"] = items[index].get("arguments", "") + str(data.get("delta") or "")


def _from_stream(events: list[StreamEvent]) -> dict[str, Any]:
    """The final event's response; without one (a cut stream), the last response seen with the items
    built from the events."""
    base: dict[str, Any] = {"object": "response", "output": []}
    items: dict[int, dict[str, Any]] = {}
    for name, data in events:
        kind = str(data.get("type", name))
        if isinstance(data.get("response"), dict):
            base = dict(data["response"])
        if kind in _FINAL_EVENTS:
            break
        _apply(items, kind, data)
    if not base.get("output") and items:
        base["output"] = [items[i] for i in sorted(items)]
    return base


class ResponsesFormat:
    """``/responses``: OpenAI's Responses API."""

    api: Api = "responses"
    path = "/responses"
    passed_headers: tuple[str, ...] = ("openai-beta",)
    request_headers: Mapping[str, str] = {}
    own_auth = False
    done_marker = False
    ping_tokens = 16  # the least max_output_tokens OpenAI's Responses API takes
    provider = "openai"
    title = "Responses"

    def request_path(self, base_url: str) -> str:
        return self.path

    def sdk_base_url(self, root: str) -> str:
        return root + "/v1"

    def request_body(self, chat_body: dict[str, Any]) -> dict[str, Any]:
        """Leading system messages as ``instructions``, the rest as ``input`` items (assistant tool calls
        as ``function_call`` items, tool results as ``function_call_output``), tools flattened,
        ``max_tokens`` as ``max_output_tokens``, ``response_format`` as ``text.format``, the seed as
        ``metadata.seed``, and ``store: false`` (the whole conversation is sent every time)."""
        return _request(chat_body)

    def cache_material(self, body: dict[str, Any]) -> dict[str, Any]:
        material = {k: body.get(k) for k in _CACHE_FIELDS}
        metadata = body.get("metadata")
        material["seed"] = metadata.get("seed") if isinstance(metadata, dict) else None
        return quiet_material(material)  # an agent program's per-run noise left out (wire/noise.py)

    def seeded(self, body: dict[str, Any], seed: int) -> dict[str, Any]:
        """``metadata.seed`` (a string, as metadata values are) unless the request has one."""
        metadata = body.get("metadata")
        kept = dict(metadata) if isinstance(metadata, dict) else {}
        if kept.get("seed") is not None:
            return body
        return {**body, "metadata": {**kept, "seed": str(seed)}}

    def parse_response(self, content: bytes, secrets: tuple[str, ...] = ()) -> dict[str, Any]:
        try:
            known = dict.fromkeys((*secrets, *known_secrets()))
            data = json.loads(redact_known(content.decode("utf-8"), known))
        except (ValueError, UnicodeDecodeError):
            problem = "the body is empty" if not content.strip() else "the body is not JSON"
            raise BadResponse(problem, body_snippet(content, secrets)) from None
        if not isinstance(data, dict):
            kind = type(data).__name__
            raise BadResponse(f"the body is a JSON {kind}, not an object", body_snippet(content, secrets))
        wrong = _response_problem(data)
        if wrong is not None:
            raise BadResponse(wrong, body_snippet(content, secrets))
        return data

    def completion(self, response: dict[str, Any]) -> dict[str, Any]:
        """``output_text`` parts joined as the content, ``function_call`` items as tool calls (id: the
        ``call_id``); reasoning items are not content."""
        output = [i for i in response.get("output") or [] if isinstance(i, dict)]
        text = "".join(_text(i.get("content")) for i in output if i.get("type") == "message")
        calls = [
            {
                "id": i["call_id"],
                "type": "function",
                "function": {"name": i["name"], "arguments": i["arguments"]},
            }
            for i in output
            if i.get("type") == "function_call"
        ]
        message: dict[str, Any] = {"role": "assistant", "content": text if text or not calls else None}
        if calls:
            message["tool_calls"] = calls
        out: dict[str, Any] = {
            "id": response.get("id"),
            "object": "chat.completion",
            "created": response.get("created_at"),
            "model": response.get("model"),
            "choices": [{"index": 0, "message": message, "finish_reason": _finish(response, calls)}],
        }
        usage = _chat_usage(response.get("usage"))
        if usage is not None:
            out["usage"] = usage
        return out

    def usage(self, response: dict[str, Any]) -> Usage | None:
        """The ledger's convention (uncached input = ``input_tokens`` - cache reads - cache writes); None
        when missing or when it counts no input token (as :meth:`ChatFormat.usage`)."""
        u = response.get("usage")
        if not isinstance(u, dict):
            return None
        return _ledger_usage(u)

    def chat_request(self, body: dict[str, Any]) -> dict[str, Any]:
        """The inverse of :meth:`request_body`; ``input`` may be a plain string (one user message).
        ValueError (a 400) for ``previous_response_id`` and item references: the server keeps no state."""
        return _chat_body(body)

    def from_completion(self, completion: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
        """A ``response`` object: ``status`` completed, or incomplete with ``incomplete_details.reason``
        ``max_output_tokens`` for a completion cut at its limit (finish ``length``)."""
        return _response(completion, request)

    def stream_events(self, response: dict[str, Any]) -> list[StreamEvent]:
        """``response.created``, ``response.in_progress``, per output item its added/delta/done events,
        then ``response.completed`` (``response.incomplete`` for a cut answer), numbered from 0."""
        return _stream(response)

    def from_stream(self, events: list[StreamEvent]) -> dict[str, Any]:
        return _from_stream(events)

    def error_body(self, status: int, message: str, kind: str) -> dict[str, Any]:
        """OpenAI's error shape, the same as Chat Completions'."""
        return CHAT.error_body(status, message, kind)


RESPONSES = ResponsesFormat()
