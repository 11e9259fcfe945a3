"""The HTTP client of model calls: one per gateway (the package's own HTTP/1.1 pool for plain
``http://`` and the simulator, else an ``httpx2.AsyncClient``; its pool sized to the run's concurrency
cap), the request as the gateway sends it (base URL, kept query parameters, the key as a
bearer token or an ``x-api-key`` header, a JSON body encoded once per call), the body read bounded, the
whole request within ``--gauge-timeout``, and typed failures (status, headers, body, the server's
message; docs/protocol.md#gateway-failures).

It replaces the ``openai`` SDK on the call path: ``import openai`` costs about a second of CPU in every
process that makes a call, and its request building most of a call's own CPU. ``openai`` is imported
only when a user asks for the SDK (:meth:`ModelClient.openai`, ``gauge_client.openai``).

The failures keep the SDK's class names (``RateLimitError``, ``APITimeoutError``, ...) and its
``Error code: N - message`` text: the ledger's ``error`` field is the class name, so ledgers written
before and after read alike. A plain ``http://`` gateway without a proxy, and the simulator's in-process
server, go through the package's own HTTP/1.1 client (:mod:`.http_client`, about a tenth of httpx2's CPU
per call); ``httpx2`` is imported only when a client needs it (TLS, a proxy, a test's httpx2 transport,
the SDK), not with this module.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import ssl
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urlsplit

from ..version import __version__
from .http_client import PlainHttpPool, Serve
from .response import MAX_BODY_BYTES, BadResponse

if TYPE_CHECKING:
    import httpx2
    import openai

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
    "UnprocessableEntityError",
    "attempt_failures",
    "encode_body",
    "plain_origin",
    "serve_transport",
    "status_error",
    "tls_context",
]

USER_AGENT = f"pytest-gauge/{__version__}"


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
    """No answer: the connection failed (the transport's error is ``__cause__``)."""

    def __init__(self, url: str, message: str = "Connection error.") -> None:
        super().__init__(message, url)


class APITimeoutError(APIConnectionError):
    """No answer in time: connect, write, read or the pool (the transport's timeout is ``__cause__``)."""

    def __init__(self, url: str) -> None:
        super().__init__(url, "Request timed out.")


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
    failure, a bad body, the whole-request timeout, and httpx2's while the body is read (once httpx2 is
    in use: a plain-http run never imports it)."""
    httpx2 = sys.modules.get("httpx2")
    return (*_FAILURES, httpx2.HTTPError) if httpx2 is not None else _FAILURES


def plain_origin(url: str, environ: Mapping[str, str]) -> tuple[str, int] | None:
    """``(host, port)`` when ``url`` is reached by the package's own client: plain ``http://``, no user
    in the URL, and no HTTP proxy configured (``http_proxy``/``all_proxy``, either case: httpx2 honours
    them); else None."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname or parts.username is not None:
        return None
    if any(environ.get(name) for name in _PROXY_VARIABLES):
        return None
    try:
        return parts.hostname, parts.port or 80
    except ValueError:  # a port that is not a number: httpx2 says what is wrong
        return None


_PROXY_VARIABLES = ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY")


class ModelClient:
    """One gateway's HTTP client: ``post`` sends a JSON body to ``base_url`` + path and gives back the
    2xx body (bounded) and headers, or raises a :class:`CallError`. A plain ``http://`` gateway with no
    proxy configured is reached by the package's own HTTP/1.1 client (:mod:`.http_client`), any other by
    httpx2 (TLS, proxies), the pool sized to ``max_connections``. ``serve``: an in-process server (the
    simulator's) behind the same HTTP/1.1 client; ``transport``: an httpx2 one (tests). ``http``
    (httpx2, for the SDK) is built on first use."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        query: Mapping[str, str] | None = None,
        timeout: float = 600.0,
        max_connections: int | None = None,
        transport: httpx2.AsyncBaseTransport | None = None,
        serve: Serve | None = None,
    ) -> None:
        self.api_key = api_key
        self.query = dict(query or {})
        self.timeout = timeout
        self.max_connections = max_connections
        self._transport = transport
        self._serve = serve
        self._http: httpx2.AsyncClient | None = None
        self._urls: dict[str, httpx2.URL] = {}
        self._targets: dict[str, tuple[str, str]] = {}
        self._plain: PlainHttpPool | None = None
        self.base_url = base_url
        self._openai: openai.AsyncOpenAI | None = None

    @property
    def http(self) -> httpx2.AsyncClient:
        """The httpx2 client (its pool sized to the concurrency cap: the slots never let more attempts
        out at once, and each request's pool pass probes every idle connection's socket, so spare ones
        only cost CPU), built on first use."""
        if self._http is None:
            import httpx2  # deferred: keeps httpx2 off pytest's start-up

            cap = self.max_connections
            limits = (
                httpx2.Limits(max_connections=cap, max_keepalive_connections=cap)
                if cap is not None
                else httpx2.Limits()
            )
            transport = self._transport
            if transport is None and self._serve is not None:
                transport = serve_transport(self._serve)
            verify = tls_context() if transport is None else True  # a test's transport makes no TLS
            self._http = httpx2.AsyncClient(
                limits=limits, timeout=self.timeout, transport=transport, verify=verify
            )
        return self._http

    @property
    def base_url(self) -> str:
        """The URL every path is appended to (``.../v1``); setting it applies to the next request."""
        return self._base_url

    @base_url.setter
    def base_url(self, url: str) -> None:
        self._base_url = url
        self._urls.clear()
        self._targets.clear()
        if self._serve is not None:  # the URL's host only names the in-process server in its requests
            parts = urlsplit(url)
            self._plain = PlainHttpPool(parts.hostname or "localhost", parts.port or 80, serve=self._serve)
            return
        origin = plain_origin(url, os.environ) if self._transport is None else None
        self._plain = PlainHttpPool(*origin, self.max_connections) if origin is not None else None

    @property
    def uses_plain_http(self) -> bool:
        """Whether calls go through the package's own HTTP/1.1 client (else httpx2)."""
        return self._plain is not None

    def target(self, path: str) -> tuple[str, str]:
        """``(path and query, whole URL)`` of ``path``: ``base_url`` + ``path`` with the kept query
        parameters (``api-version``), built once per path; both clients send this URL."""
        found = self._targets.get(path)
        if found is None:
            joined = self._base_url.rstrip("/") + "/" + path.lstrip("/")
            if self.query:
                joined += ("&" if "?" in joined else "?") + urlencode(self.query)
            parts = urlsplit(joined)
            found = self._targets[path] = (parts.path + (f"?{parts.query}" if parts.query else ""), joined)
        return found

    def url(self, path: str) -> httpx2.URL:
        """:meth:`target`'s whole URL as httpx2's, built once per path."""
        found = self._urls.get(path)
        if found is None:
            import httpx2  # deferred: keeps httpx2 off pytest's start-up

            found = self._urls[path] = httpx2.URL(self.target(path)[1])
        return found

    def headers(self, headers: Mapping[str, str] | None, key: str | None, auth: str) -> dict[str, str]:
        """The request's headers: JSON both ways, the client's name, ``headers`` (passed ones, a format's
        own), and the key (``key``, else the client's) as a bearer token or an ``x-api-key`` header."""
        out = {
            "Accept": "application/json",
            "Accept-Encoding": "gzip, deflate",
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
        :class:`APITimeoutError` / :class:`APIConnectionError` when no answer came."""
        seconds = self.timeout if timeout is None else timeout
        if self._plain is not None:
            return await self._post_plain(
                self._plain, path, content, self.headers(headers, key, auth), seconds
            )
        import httpx2  # deferred: keeps httpx2 off pytest's start-up

        request = self.http.build_request(
            "POST", self.url(path), content=content, headers=self.headers(headers, key, auth), timeout=seconds
        )
        async with asyncio.timeout(seconds):
            try:
                raw = await self.http.send(request, stream=True)
            except httpx2.TimeoutException as exc:
                raise APITimeoutError(str(request.url)) from exc
            except _request_errors() as exc:
                raise APIConnectionError(str(request.url)) from exc
            try:
                if not raw.is_success:
                    text = (await read_bounded(raw, truncate=True)).decode(raw.encoding or "utf-8", "replace")
                    raise status_error(raw.status_code, raw.headers, text, str(request.url))
                return await read_bounded(raw), raw.headers
            finally:
                await raw.aclose()

    async def _post_plain(
        self, pool: PlainHttpPool, path: str, content: bytes, headers: dict[str, str], seconds: float
    ) -> tuple[bytes, Mapping[str, str]]:
        """:meth:`post` on the package's own HTTP/1.1 client."""
        target, url = self.target(path)
        async with asyncio.timeout(seconds):
            try:
                answer = await pool.post(target, headers, content)
            except OSError as exc:
                raise APIConnectionError(url) from exc
        if not 200 <= answer.status < 300:
            try:
                text = answer.body.decode(answer.charset, "replace")
            except LookupError:
                text = answer.body.decode("utf-8", "replace")
            raise status_error(answer.status, answer.headers, text, url)
        return answer.body, answer.headers

    async def aclose(self) -> None:
        """Close the kept connections (the plain pool's, and httpx2's if built) at the end of a run, so no
        socket is left to the garbage collector; a later call opens new ones."""
        if self._plain is not None:
            self._plain.close()
        if self._http is not None:
            http, self._http, self._openai = self._http, None, None
            await http.aclose()
        await asyncio.sleep(0)  # an aborted connection's socket is closed on the loop's next pass

    def openai(self) -> openai.AsyncOpenAI:
        """An ``openai.AsyncOpenAI`` on this client (same base URL, key, query and connection pool),
        built on first use: the one place the package imports the SDK for a call."""
        if self._openai is None:
            import openai  # deferred: keeps openai off pytest's start-up

            self._openai = openai.AsyncOpenAI(
                api_key=self.api_key,
                base_url=self._base_url,
                max_retries=0,
                timeout=self.timeout,
                default_query=self.query or None,
                http_client=self.http,
            )
        return self._openai


@functools.cache
def tls_context() -> ssl.SSLContext:
    """httpx2's default TLS context (the system's CAs, or ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` as set when
    first asked), made once per process and shared by every client: each new context loads the CA bundle
    again, 20-60 ms of CPU per client (the doctor makes one per model it checks)."""
    import httpx2  # deferred: keeps httpx2 off pytest's start-up

    return httpx2.create_ssl_context()


def serve_transport(serve: Serve) -> httpx2.AsyncBaseTransport:
    """An httpx2 transport answered by the in-process server ``serve`` (for ``openai.AsyncOpenAI``)."""
    import httpx2  # deferred: keeps httpx2 off pytest's start-up

    async def handler(request: httpx2.Request) -> httpx2.Response:
        status, kind, content = serve(request.method, request.url.path, await request.aread())
        return httpx2.Response(status, content=content, headers={"content-type": kind})

    return httpx2.MockTransport(handler)


def _request_errors() -> tuple[type[BaseException], ...]:
    """What a failed send raises besides a timeout: the transport's errors, a TLS failure, a stream
    that ended (as the SDK counted them: a connection error)."""

    import anyio  # deferred: keeps anyio off pytest's start-up
    import httpx2  # deferred: keeps httpx2 off pytest's start-up

    return (httpx2.RequestError, ssl.SSLError, anyio.EndOfStream)


async def read_bounded(raw: Any, limit: int = MAX_BODY_BYTES, truncate: bool = False) -> bytes:
    """The response body, refused (:class:`BadResponse`) as soon as it passes ``limit`` bytes, or with
    ``truncate`` (an error body: only its start is quoted) cut there."""
    declared = raw.headers.get("content-length")
    if not truncate and declared is not None and declared.isdigit() and int(declared) > limit:
        raise BadResponse(f"the body is {int(declared)} bytes, more than the {limit} accepted", "")
    chunks: list[bytes] = []
    size = 0
    async for chunk in raw.aiter_bytes():
        size += len(chunk)
        if size > limit:
            if truncate:
                chunks.append(chunk[: len(chunk) - (size - limit)])
                break
            raise BadResponse(f"the body is more than the {limit} bytes accepted", "")
        chunks.append(chunk)
    return b"".join(chunks)
