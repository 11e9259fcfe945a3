"""Server-sent events (the streaming form of all three wire formats): encoding events to bytes and
reading bytes back into events. The one home of the SSE syntax (https://html.spec.whatwg.org/#server-sent-events)."""

from __future__ import annotations

import json
from collections.abc import Iterable

from .base import StreamEvent

__all__ = ["DONE", "encode_event", "encode_events", "parse_events"]

DONE = b"data: [DONE]\n\n"
"""Chat Completions' (and LiteLLM's) end-of-stream marker; Messages and Responses end with a named event."""


def encode_event(event: StreamEvent) -> bytes:
    """One event as ``event: NAME`` (when named) and one ``data:`` line of compact JSON."""
    name, data = event
    head = f"event: {name}\n" if name else ""
    return (head + "data: " + json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n\n").encode()


def encode_events(events: Iterable[StreamEvent], done_marker: bool = False) -> bytes:
    """A whole stream's bytes, with Chat Completions' ``[DONE]`` last when ``done_marker``."""
    out = b"".join(encode_event(e) for e in events)
    return out + (DONE if done_marker else b"")


def parse_events(raw: bytes) -> list[StreamEvent]:
    """The events of an SSE body (``event:``/``data:`` fields, blank-line separated, ``[DONE]`` and
    comments dropped); ValueError naming the event when a data field is not JSON."""
    events: list[StreamEvent] = []
    for block in raw.decode("utf-8").replace("\r\n", "\n").split("\n\n"):
        name: str | None = None
        data: list[str] = []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip(" "))
        text = "\n".join(data)
        if not data or text == "[DONE]":
            continue
        try:
            events.append((name, json.loads(text)))
        except ValueError:
            where = f"server-sent event {len(events) + 1} ({name or 'unnamed'})"
            raise ValueError(f"{where} is not JSON") from None
    return events
