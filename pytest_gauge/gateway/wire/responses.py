"""OpenAI Responses (``api="responses"``, ``POST /v1/responses``): instructions, input items,
``function_call``/``function_call_output`` items, ``incomplete_details``, usage details, and its stream of
named events (``response.created`` ... ``response.completed``). TO BE WRITTEN (issue 27): every method of
``WireFormat`` raises NotImplementedError until then."""

from __future__ import annotations

from typing import Any

from ...records import Usage
from .base import Api, StreamEvent

__all__ = ["RESPONSES", "ResponsesFormat"]


class ResponsesFormat:
    """``/responses``: OpenAI's Responses API."""

    api: Api = "responses"
    path = "/responses"

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


RESPONSES = ResponsesFormat()
