"""The three wire formats one gateway speaks (docs/protocol.md#wire-formats): OpenAI Chat Completions
(``chat``), Anthropic Messages (``anthropic``) and OpenAI Responses (``responses``).

The rest of the package speaks one neutral shape, the Chat Completions one: roles build chat request
bodies, the dialogue reads chat completions. A :class:`WireFormat` translates at the edge, both ways:

- client side (the gateway): a chat body into the format's request, the format's response into a chat
  completion view, and its usage into the one ledger convention;
- server side (the simulator, the loopback server, the recording proxy): the format's request into a
  chat body, a chat completion into the format's response, a whole response into the format's stream
  events (SSE), and the format's error body.

One module per format is its only home: nothing else in the package spells a format's fields.
"""

from __future__ import annotations

from . import anthropic, chat, responses
from .base import APIS, NEUTRAL_API, Api, StreamEvent, WireFormat

__all__ = ["APIS", "NEUTRAL_API", "Api", "StreamEvent", "WireFormat", "format_for_path", "wire_format"]

_FORMATS: dict[str, WireFormat] = {
    "chat": chat.CHAT,
    "anthropic": anthropic.MESSAGES,
    "responses": responses.RESPONSES,
}


def wire_format(api: str) -> WireFormat:
    """The format named ``api`` (one of :data:`APIS`); ValueError naming the choices otherwise."""
    if api not in _FORMATS:
        raise ValueError(f"api={api!r} is not a wire format: use one of {', '.join(APIS)}")
    return _FORMATS[api]


def format_for_path(path: str) -> WireFormat | None:
    """The format a request path asks for (``.../chat/completions``, ``.../messages``,
    ``.../responses``), query string and trailing slash ignored; None for any other path."""
    clean = path.split("?", 1)[0].rstrip("/")
    for api in APIS:
        fmt = wire_format(api)
        if clean.endswith(fmt.path):
            return fmt
    return None
