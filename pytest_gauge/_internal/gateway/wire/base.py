"""The wire formats' shared vocabulary: which APIs there are, a stream event, and the Protocol every
format module implements (the package docstring of :mod:`pytest_gauge._internal.gateway.wire` says why)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ...records import APIS, NEUTRAL_API, Api

if TYPE_CHECKING:
    from ...records import Usage

__all__ = ["APIS", "NEUTRAL_API", "Api", "StreamEvent", "WireFormat"]

StreamEvent = tuple[str | None, dict[str, Any]]
"""One server-sent event: its ``event:`` name (None for Chat Completions' unnamed chunks) and JSON data."""


class WireFormat(Protocol):
    """One wire format, both directions. Pure functions of their arguments, no I/O."""

    api: Api
    path: str
    """The request path below an OpenAI-style base URL ending in ``/v1``: ``/chat/completions``,
    ``/messages``, ``/responses``."""
    passed_headers: tuple[str, ...]
    """Request headers (lower case) that change what a request means, so the recording proxy passes a
    client's own on to the gateway (Messages' ``anthropic-beta``: Claude Code's body fields need it)."""
    request_headers: Mapping[str, str]
    """Headers every request of the format carries (Messages' ``anthropic-version``: refused without)."""
    own_auth: bool
    """True when the format's servers may take the key in their own header (Messages' ``x-api-key``): the
    gateway then places it as ``--gauge-anthropic-auth`` says; otherwise ``Authorization: Bearer``."""
    done_marker: bool
    """True when the format's stream ends with ``data: [DONE]`` (Chat Completions)."""
    ping_tokens: int
    """The least output-token cap the format's servers take: ``gauge doctor``'s 1-token call asks for it."""
    provider: str
    """The API's maker as OpenTelemetry's ``gen_ai.provider.name`` says it (the API the call spoke: a
    gateway may host any model behind it)."""
    title: str
    """The format as ``gauge doctor`` names it in a line (``Responses``, ``Messages (api=anthropic)``)."""

    # -- client side: the gateway -------------------------------------------------------------------
    def request_path(self, base_url: str) -> str:
        """The path the gateway POSTs to below ``base_url``: the one the format's official SDK builds
        from the same base URL (:attr:`path`; Messages: ``/v1/messages`` below a base without ``/v1``)."""
        ...

    def sdk_base_url(self, root: str) -> str:
        """The base URL a client of this format (its official SDK, a program agent) is given for a server
        whose routes sit below ``root``: the openai SDK's ends in ``/v1``, the anthropic SDK's does not
        (it appends ``/v1/messages`` itself)."""
        ...

    def request_body(self, chat_body: dict[str, Any]) -> dict[str, Any]:
        """A chat request body (model, messages, tools, max_tokens, response_format, ...) as this
        format's request body (never streaming: the gateway reads whole responses)."""
        ...

    def cache_material(self, body: dict[str, Any]) -> dict[str, Any]:
        """The parts of this format's request body that decide its answer (the cache key's material):
        never ``stream``, nor per-session metadata that changes between identical runs."""
        ...

    def seeded(self, body: dict[str, Any], seed: int) -> dict[str, Any]:
        """This format's request ``body`` carrying ``seed`` where the format carries the package's seed
        (chat's ``seed``, Messages' ``metadata.user_id``, Responses' ``metadata.seed``), unless it carries
        one already: how the recording proxy gives each sample of a program agent its own draw."""
        ...

    def parse_response(self, content: bytes, secrets: tuple[str, ...] = ()) -> dict[str, Any]:
        """The response in ``content``, checked: raises ``gateway.response.BadResponse`` naming what is
        wrong (not JSON, no output, wrong types). Known secrets quoted in it are removed."""
        ...

    def completion(self, response: dict[str, Any]) -> dict[str, Any]:
        """A checked response of this format viewed as a chat completion: ``choices[0].message`` with
        ``content`` and ``tool_calls``, ``finish_reason`` in chat terms (``length`` when truncated,
        ``tool_calls``, ``stop``), ``model``. Its ``usage`` is not used: :meth:`usage` is."""
        ...

    def usage(self, response: dict[str, Any]) -> Usage | None:
        """The response's usage in the ledger's one convention (``records.Usage``: uncached input, cache
        reads, cache writes, output, reasoning, and the raw object), or None when it is missing."""
        ...

    # -- server side: the simulator, the loopback server, the recording proxy ----------------------
    def chat_request(self, body: dict[str, Any]) -> dict[str, Any]:
        """This format's request body as a chat request body (what the simulator answers)."""
        ...

    def from_completion(self, completion: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
        """A chat completion (with chat usage) as this format's response to ``request``."""
        ...

    def stream_events(self, response: dict[str, Any]) -> list[StreamEvent]:
        """A whole response of this format as the events its streaming API sends, in order."""
        ...

    def from_stream(self, events: list[StreamEvent]) -> dict[str, Any]:
        """The whole response a stream of this format's events adds up to (the inverse of
        :meth:`stream_events`)."""
        ...

    def error_body(self, status: int, message: str, kind: str) -> dict[str, Any]:
        """This format's error body for an HTTP ``status`` (``kind``: invalid_request, authentication,
        not_found, rate_limit, overloaded, server)."""
        ...
