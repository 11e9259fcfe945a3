"""The HTTP client of model calls: one per gateway (an ``aiohttp`` session per event loop, its pool sized
to the run's concurrency cap, TLS and ``HTTP(S)_PROXY`` as the environment says; the simulator's
in-process server called directly), the request as the gateway sends it (base URL, kept query
parameters, the key as a bearer token or an ``x-api-key`` header, a JSON body encoded once per call), the
body read bounded, the whole request within ``--gauge-timeout``, and typed failures (status, headers,
body, the server's message; a connection's failure named by its cause; docs/protocol.md#gateway-failures).

It replaces the ``openai`` SDK on the call path: ``import openai`` costs about a second of CPU in every
process that makes a call, and its request building most of a call's own CPU. ``openai`` is imported
only when a user asks for the SDK (:meth:`ModelClient.openai`, ``gauge_client.openai``).

The failures keep the SDK's class names (``RateLimitError``, ``APITimeoutError``, ...) and its
``Error code: N - message`` text: the ledger's ``error`` field is the class name, so ledgers written
before and after read alike.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urlsplit

from ..version import __version__
from .response import MAX_BODY_BYTES, BadResponse
from .tls import tls_context

if TYPE_CHECKING:
    import httpx2
    import openai

    from .client_session import LoopSession

__all__ = [
    "APIConnectionError",
    "APIStatusError",
    "APITimeoutError",
    "AuthenticationError",
    "BadRequestError",
    "CallError",
    "ConflictError",
    "InternalServerError",
    "ModelClient",
    "NotFoundError",
    "PermissionDeniedError",
    "RateLimitError",
    "Serve",
    "UnprocessableEntityError",
    "attempt_failures",
    "encode_body",
    "serve_transport",
    "status_error",
    "tls_context",
]

USER_AGENT = f"pytest-gauge/{__version__}"

Serve = Callable[[str, str, bytes], tuple[int, str, bytes]]
"""An in-process server (the simulator's): ``(method, path, body) -> (status, content type, body)``."""


class CallError(Exception):
    """A model call's HTTP failure before any usable body: ``url`` is the request's."""

    def __init__(self, message: str, url: str) -> None:
        super().__init__(message)
        self.message = message
        self.url = url


class APIStatusError(CallError):
    """A non-2xx answer: its status, headers, body (the JSON error object, ``{"error": {...}}``
    unwrapped as the SDK did, or the stripped text) and ``Error code: N[ - the server's message]``."""

    def __init__(
        self, message: str, url: str, status_code: int, headers: Mapping[str, str], body: object
    ) -> None:
        super().__init__(message, url)
        self.status_code = status_code
        self.headers = headers
        self.body = body


class BadRequestError(APIStatusError):
    """400."""


class AuthenticationError(APIStatusError):
    """401."""


class PermissionDeniedError(APIStatusError):
    """403."""


class NotFoundError(APIStatusError):
    """404."""


class ConflictError(APIStatusError):
    """409."""


class UnprocessableEntityError(APIStatusError):
    """422."""


class RateLimitError(APIStatusError):
    """429."""


class InternalServerError(APIStatusError):
    """5xx."""


_STATUS_CLASSES: dict[int, type[APIStatusError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    422: UnprocessableEntityError,
    429: RateLimitError,
}


class APIConnectionError(CallError):
    """No usable answer: the connection failed, or what came back is not HTTP (the transport's error is
    ``__cause__``; ``cause`` says what went wrong in words, for the diagnosis)."""

    def __init__(self, url: str, message: str = "Connection error.", cause: str = "") -> None:
        super().__init__(message, url)
        self.cause = cause


class APITimeoutError(APIConnectionError):
    """No answer in time: connect, write, read or the pool (the transport's timeout is ``__cause__``)."""

    def __init__(self, url: str) -> None:
        super().__init__(url, "Request timed out.", "no answer in time")


def status_error(status: int, headers: Mapping[str, str], text: str, url: str) -> APIStatusError:
    """The typed error of a non-2xx answer whose body is ``text``: the class of its status, the message
    ``Error code: N`` with `` - message`` when the body is a JSON error with one, the body as JSON (its
    ``error`` object when it has one) or else the stripped text."""
    message = f"Error code: {status}"
    stripped = text.strip()
    body: object = stripped
    try:
        body = json.loads(stripped)
    except ValueError:
        pass
    else:
        error = body.get("error", body) if isinstance(body, dict) else None
        said = error.get("message") if isinstance(error, dict) else None
        if isinstance(said, str) and said:
            message += f" - {said}"
    data = body.get("error", body) if isinstance(body, dict) else body
    kind = _STATUS_CLASSES.get(status) or (InternalServerError if status >= 500 else APIStatusError)
    return kind(message, url, status, headers, data)


def encode_body(body: Mapping[str, Any]) -> bytes:
    """A request body's JSON bytes, as the SDK and httpx encode them (UTF-8, compact, no NaN)."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


_FAILURES: tuple[type[Exception], ...] = (CallError, BadResponse, TimeoutError)


def attempt_failures() -> tuple[type[Exception], ...]:
    """The errors that are an attempt's outcome (anything else is a bug and propagates): a typed
    failure, a bad body, the whole-request timeout."""
    return _FAILURES


class ModelClient:
    """One gateway's HTTP client: ``post`` sends a JSON body to ``base_url`` + path and gives back the
    2xx body (bounded) and headers, or raises a :class:`CallError`. Requests go through an aiohttp
    session (:mod:`.client_session`, imported on the first request), at most ``max_connections`` at
    once; ``serve``: an in-process server (the simulator's), called directly. ``http`` (httpx2, for the
    SDK only) is built on first use."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        query: Mapping[str, str] | None = None,
        timeout: float = 600.0,
        max_connections: int | None = None,
        serve: Serve | None = None,
    ) -> None:
        self.api_key = api_key
        self.query = dict(query or {})
        self.timeout = timeout
        self.max_connections = max_connections
        self._serve = serve
        self._session: LoopSession | None = None
        self._http: httpx2.AsyncClient | None = None
        self._targets: dict[str, tuple[str, str]] = {}
        self.base_url = base_url
        self._openai: openai.AsyncOpenAI | None = None

    @property
    def http(self) -> httpx2.AsyncClient:
        """An httpx2 client for the ``openai`` SDK (:meth:`openai`), on the simulator when ``serve`` is
        set; built on first use. The plugin's own calls never use it."""
        if self._http is None:
            import httpx2  # deferred: only a user's SDK client needs httpx2

            cap = self.max_connections
            limits = httpx2.Limits(max_connections=cap, max_keepalive_connections=cap) if cap else None
            transport = serve_transport(self._serve) if self._serve is not None else None
            self._http = httpx2.AsyncClient(
                limits=limits or httpx2.Limits(),
                timeout=self.timeout,
                transport=transport,
                verify=tls_context(),
            )
        return self._http

    @property
    def base_url(self) -> str:
        """The URL every path is appended to (``.../v1``); setting it applies to the next request."""
        return self._base_url

    @base_url.setter
    def base_url(self, url: str) -> None:
        self._base_url = url
        self._targets.clear()

    def target(self, path: str) -> tuple[str, str]:
        """``(path and query, whole URL)`` of ``path``: ``base_url`` + ``path`` with the kept query
        parameters (``api-version``), built once per path."""
        found = self._targets.get(path)
        if found is None:
            joined = self._base_url.rstrip("/") + "/" + path.lstrip("/")
            if self.query:
                joined += ("&" if "?" in joined else "?") + urlencode(self.query)
            parts = urlsplit(joined)
            found = self._targets[path] = (parts.path + (f"?{parts.query}" if parts.query else ""), joined)
        return found

    def headers(self, headers: Mapping[str, str] | None, key: str | None, auth: str) -> dict[str, str]:
        """The request's headers: JSON both ways, the client's name, ``headers`` (passed ones, a format's
        own), and the key (``key``, else the client's) as a bearer token or an ``x-api-key`` header."""
        out = {
            "Accept": "application/json",
            "Accept-Encoding": "gzip, deflate, br",
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
        }
        if headers:
            out.update(headers)
        key = key or self.api_key
        if key:
            out["x-api-key" if auth == "x-api-key" else "Authorization"] = (
                key if auth == "x-api-key" else f"Bearer {key}"
            )
        return out

    async def post(
        self,
        path: str,
        content: bytes,
        headers: Mapping[str, str] | None = None,
        *,
        key: str | None = None,
        auth: str = "bearer",
        timeout: float | None = None,
    ) -> tuple[bytes, Mapping[str, str]]:
        """POST ``content`` (JSON bytes) to ``path``; the 2xx body, refused past :data:`MAX_BODY_BYTES`
        (:class:`BadResponse`), and the answer's headers. All of it within ``timeout`` (a server dripping
        bytes cannot hold it longer). Raises :class:`APIStatusError` on any other status,
        :class:`APITimeoutError` / :class:`APIConnectionError` (naming the cause) when no usable answer
        came."""
        return await self.send("POST", path, content, headers, key=key, auth=auth, timeout=timeout)

    async def send(
        self,
        method: str,
        path: str,
        content: bytes = b"",
        headers: Mapping[str, str] | None = None,
        *,
        key: str | None = None,
        auth: str = "bearer",
        timeout: float | None = None,
    ) -> tuple[bytes, Mapping[str, str]]:
        """:meth:`post` with any method (the batch APIs' GETs and uploads: ``headers`` may name another
        ``Content-Type``), the same errors and bounds."""
        seconds = self.timeout if timeout is None else timeout
        if self._serve is not None:
            return self._post_in_process(self._serve, path, content, method)
        url = self.target(path)[1]
        sent = self.headers(headers, key, auth)
        async with asyncio.timeout(seconds):
            return await self._post_network(url, content, sent, method)

    def _post_in_process(
        self, serve: Serve, path: str, content: bytes, method: str = "POST"
    ) -> tuple[bytes, Mapping[str, str]]:
        """:meth:`post` answered by the in-process server: its status and body read as a network's."""
        url = self.target(path)[1]
        status, kind, body = serve(method, urlsplit(url).path, content)
        headers = {"content-type": kind, "content-length": str(len(body))}
        if not 200 <= status < 300:
            raise status_error(status, headers, body[:MAX_BODY_BYTES].decode("utf-8", "replace"), url)
        if len(body) > MAX_BODY_BYTES:
            raise BadResponse(f"the body is {len(body)} bytes, more than the {MAX_BODY_BYTES} accepted", "")
        return body, headers

    async def _post_network(
        self, url: str, content: bytes, headers: dict[str, str], method: str = "POST"
    ) -> tuple[bytes, Mapping[str, str]]:
        """:meth:`post` over aiohttp: a status error, a bounded body, or a connection error naming its
        cause (the timeout is the caller's)."""
        from .client_session import LoopSession, fault_of, read_bounded  # deferred: aiohttp, ~0.2 s CPU

        if self._session is None:
            self._session = LoopSession(self.max_connections)
        try:
            session, route = self._session.get(), self._session.route(url, headers)
            async with session.request(
                method,
                url,
                data=content if method != "GET" else None,
                headers=headers,
                allow_redirects=False,
                **route,
            ) as answer:
                if not 200 <= answer.status < 300:
                    raw = await read_bounded(answer, MAX_BODY_BYTES, truncate=True)
                    text = raw.decode(answer.charset or "utf-8", "replace")
                    raise status_error(answer.status, answer.headers, text, url)
                return await read_bounded(answer, MAX_BODY_BYTES), answer.headers
        except (CallError, BadResponse, asyncio.CancelledError):
            raise
        except LookupError as exc:  # an unknown charset: the body as UTF-8
            raise APIConnectionError(url, cause=f"the answer names an unknown charset: {exc}") from exc
        except Exception as exc:
            fault = fault_of(exc)
            if fault is None:
                raise
            if fault.is_timeout:
                raise APITimeoutError(url) from exc
            raise APIConnectionError(url, cause=fault.cause) from exc

    async def aclose(self) -> None:
        """Close the kept connections (and httpx2's if built) at the end of a run, so no socket is left to
        the garbage collector; a later call opens new ones."""
        if self._session is not None:
            await self._session.aclose()
        if self._http is not None:
            http, self._http, self._openai = self._http, None, None
            await http.aclose()

    def openai(self) -> openai.AsyncOpenAI:
        """An ``openai.AsyncOpenAI`` on this client (same base URL, key, query; on the simulator when
        ``serve`` is set), built on first use: the one place the package imports the SDK for a call."""
        if self._openai is None:
            import openai  # deferred: about a second of CPU, only for a user's SDK client

            self._openai = openai.AsyncOpenAI(
                api_key=self.api_key,
                base_url=self._base_url,
                max_retries=0,
                timeout=self.timeout,
                default_query=self.query or None,
                http_client=self.http,
            )
        return self._openai


def serve_transport(serve: Serve) -> httpx2.AsyncBaseTransport:
    """An httpx2 transport answered by the in-process server ``serve`` (for ``openai.AsyncOpenAI``)."""
    import httpx2  # deferred: only the SDK on the simulator needs it

    async def handler(request: httpx2.Request) -> httpx2.Response:
        status, kind, content = serve(request.method, request.url.path, await request.aread())
        return httpx2.Response(status, content=content, headers={"content-type": kind})

    return httpx2.MockTransport(handler)
