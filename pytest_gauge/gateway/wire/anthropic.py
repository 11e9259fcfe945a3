"""Anthropic Messages (``api="anthropic"``, ``POST /v1/messages``): system prompt, content blocks,
``tool_use``/``tool_result``, ``stop_reason``, the cache's read and write counts, and its stream of named
events (``message_start`` ... ``message_stop``). TO BE WRITTEN (issue 27): every method of
``WireFormat`` raises NotImplementedError until then."""

from __future__ import annotations

from typing import Any

from ...records import Usage
from .base import Api, StreamEvent

__all__ = ["MESSAGES", "MessagesFormat"]


class MessagesFormat:
    """``/messages``: Anthropic's Messages API."""

    api: Api = "anthropic"
    path = "/messages"

    def request_body(self, chat_body: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def cache_material(self, body: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def parse_response(self, content: bytes, secrets: tuple[str, ...] = ()) -> dict[str, Any]:
        raise NotImplementedError

    def completion(self, response: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def usage(self, response: dict[str, Any]) -> Usage | None:
        raise NotImplementedError

    def chat_request(self, body: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def from_completion(self, completion: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def stream_events(self, response: dict[str, Any]) -> list[StreamEvent]:
        raise NotImplementedError

    def from_stream(self, events: list[StreamEvent]) -> dict[str, Any]:
        raise NotImplementedError

    def error_body(self, status: int, message: str, kind: str) -> dict[str, Any]:
        raise NotImplementedError


MESSAGES = MessagesFormat()
