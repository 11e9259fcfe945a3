"""The recording proxy (docs/protocol.md#the-recording-proxy): an HTTP server on 127.0.0.1 (aiohttp's) that
takes Chat Completions, Responses and Messages requests from a program that is not Python in this
process (an agent CLI, a service under test) and sends each through the run's gateway, so its calls are
cached, limited, budgeted, seeded and in the ledger like every other call of the run.

- One server per process, on the event loop of the process's gateways (the engine's), its socket made
  with the first route and closed at the end of the process.
- A route (:meth:`RecordingProxy.register`) is one unit of work: its path prefix ``/w/<work token>``
  tells which transcript (or test) a request belongs to; its requests are numbered with the unit's own
  calls (``<work>#<n>``).
- The client holds only the run's proxy token (``Authorization: Bearer`` or ``x-api-key``), never the
  gateway key: the gateway adds that. A request without it, or with another run's, gets 401.
- A request asking for a stream gets the whole answer re-sent as the format's events; a gateway error
  comes back in the format's error shape with the upstream status, and ``x-should-retry: false`` (the
  gateway has made its retries already).
- A request is refused on its head before its body is read (so a client's ``Expect: 100-continue`` is
  answered only once its token is checked); a body is at most :data:`MAX_REQUEST_BYTES` and must arrive
  within :data:`READ_TIMEOUT`; a malformed request (llhttp's verdict) or body (JSON nested too deeply
  included) gets a 400, never a dropped connection.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hmac
import json
import logging
import os
import re
import secrets
import socket
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, cast

from ..records.json_types import JSONObject
from .backends import replay_guard
from .endpoint import ROLE_KEY_VARIABLES, key_variables
from .errors import GatewayError
from .redact import MIN_RUN, known_secrets, redact
from .route_policy import Refusals, RoutePolicy, refusal
from .wire import APIS, NEUTRAL_API, Api, WireFormat, wire_format
from .wire.sse import encode_events

if TYPE_CHECKING:
    from types import TracebackType

    from aiohttp import web

    from .gateway import CallContext, Gateway, WireReply

__all__ = [
    "HOST",
    "MAX_REQUEST_BYTES",
    "READ_TIMEOUT",
    "ProxyAnswer",
    "ProxyRequest",
    "ProxyRoute",
    "RecordingProxy",
    "WireRequest",
    "WorkCalls",
    "client_environment",
    "gateway_call",
    "new_proxy_token",
    "parse_route_path",
    "presented_tokens",
    "quiet_logger",
]

HOST = "127.0.0.1"
_WORK_PATH = re.compile(r"/w/(?P<work>[0-9a-f]{16})(?P<rest>/[^?#]*)?")
_ENDPOINTS: dict[str, Api] = {wire_format(api).path: api for api in APIS}
_KINDS = {
    400: "invalid_request",
    401: "authentication",
    403: "permission",
    404: "not_found",
    429: "rate_limit",
    529: "overloaded",
}
MAX_REQUEST_BYTES = 32 << 20
"""The largest request body accepted: an agent program's whole context, tool outputs included."""
READ_TIMEOUT = 120.0
"""Seconds a client may stay silent in the middle of a request (head or body) or between requests."""
_LINGER = 2.0
_CLIENT_VARIABLES = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN")


def new_proxy_token() -> str:
    """A run's proxy token: random, made once per run (the controller's, handed to its workers)."""
    return "gauge-proxy-" + secrets.token_hex(24)


@dataclass(frozen=True)
class ProxyRequest:
    """One HTTP request as the proxy takes it: method, path (no query), headers (names looked up in any
    case), the whole body."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: bytes


@dataclass(frozen=True)
class ProxyAnswer:
    """What the proxy answers one request with: status, body, headers (the length is the server's)."""

    status: int
    body: bytes
    headers: dict[str, str]


@dataclass(frozen=True)
class WireRequest:
    """One request of a route as a call of its unit: the unit's call number, the route's role, the model,
    the wire format, the body in the format's request shape (no ``stream``) and the client's headers (of
    which the gateway sends the format's ``passed_headers``)."""

    seq: int
    role: str
    model: str
    api: Api
    body: JSONObject
    headers: Mapping[str, str] | None = None


class WorkCalls(Protocol):
    """How a route's requests become calls of its unit of work: the unit's call numbering and its way to
    the gateway (the engine's :class:`~pytest_gauge._internal.run.work.WorkCaller`, a test's calls, or
    :class:`GatewayCalls`)."""

    def next_seq(self) -> int:
        """The number of the unit's next call (shared with its other calls)."""
        ...

    async def call(self, request: WireRequest) -> WireReply:
        """One call through the gateway."""
        ...


async def gateway_call(gateway: Gateway, ctx: CallContext, request: WireRequest) -> WireReply:
    """One request through ``gateway`` (:meth:`~.gateway.Gateway.call`): the cache, limits, retries,
    diagnoses and ledger of every call."""
    r = request
    return await gateway.call(ctx, r.seq, r.role, r.model, r.api, r.body, r.headers)


class GatewayCalls:
    """A route's calls straight through a gateway in one call context, numbered 1, 2, ... by the route."""

    def __init__(self, gateway: Gateway, ctx: CallContext) -> None:
        self.gateway = gateway
        self.ctx = ctx
        self._seq = 0
        self._lock = threading.Lock()

    def next_seq(self) -> int:
        with self._lock:
            self._seq += 1
            return self._seq

    async def call(self, request: WireRequest) -> WireReply:
        return await gateway_call(self.gateway, self.ctx, request)

    def refused(self, seq: int, role: str, model: str, fmt: WireFormat, reason: str) -> None:
        """A request the route's policy refused: its ledger line."""
        self.gateway.refused(self.ctx, seq, role, model, fmt.api, reason)


@dataclass(frozen=True)
class ProxyRoute:
    """One registered unit of work: base URLs for both SDK styles, the run's proxy token, ``close()``.

    ``openai_base_url`` ends in ``/v1`` (the openai SDK appends ``/chat/completions`` or ``/responses``);
    ``anthropic_base_url`` does not (the anthropic SDK appends ``/v1/messages``)."""

    ctx: CallContext
    role: str
    port: int
    work_token: str
    token: str = field(repr=False)
    proxy: RecordingProxy = field(repr=False, compare=False)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/w/<work token>``: the route's prefix (and the anthropic SDK's base)."""
        return f"http://{HOST}:{self.port}/w/{self.work_token}"

    @property
    def openai_base_url(self) -> str:
        return self.base_url + "/v1"

    @property
    def anthropic_base_url(self) -> str:
        return self.base_url

    def close(self) -> None:
        """Refuse this route's requests from now on (404); its calls already made stay in the ledger."""
        self.proxy.unregister(self.work_token)

    def __enter__(self) -> ProxyRoute:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


@dataclass(frozen=True)
class _Work:
    ctx: CallContext
    role: str
    calls: WorkCalls
    seed: int | None
    policy: RoutePolicy | None = None


def parse_route_path(path: str) -> tuple[str, Api | None] | None:
    """``/w/<work token>[/v1]/<endpoint>`` as (work token, the endpoint's format or None); None when the
    path is not under a work token."""
    match = _WORK_PATH.fullmatch(path)
    if match is None:
        return None
    rest = (match["rest"] or "").rstrip("/")
    if rest.startswith("/v1/"):
        rest = rest[3:]
    return match["work"], _ENDPOINTS.get(rest)


def presented_tokens(headers: Mapping[str, str]) -> list[str]:
    """The tokens a request presents: ``Authorization: Bearer <t>`` and ``x-api-key: <t>``."""
    found = []
    auth = headers.get("authorization", "").strip()
    if auth[:7].lower() == "bearer ":
        found.append(auth[7:].strip())
    if headers.get("x-api-key", "").strip():
        found.append(headers["x-api-key"].strip())
    return found


class RecordingProxy:
    """The process's recording proxy (see the module docstring): routes, the server, its connections.

    Served by aiohttp's low-level server (its C parser, llhttp, reads the requests): a request's body
    is at most :data:`MAX_REQUEST_BYTES` (413), and a client silent for ``read_timeout`` seconds in the
    middle of a request's head or body, or between requests, loses its connection (408 mid-body)."""

    def __init__(
        self, token: str, loop: asyncio.AbstractEventLoop, *, read_timeout: float = READ_TIMEOUT
    ) -> None:
        self.token = token
        self.loop = loop
        self.read_timeout = read_timeout
        self._gateways: dict[str, Gateway] = {}
        self._works: dict[str, _Work] = {}
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._serving: concurrent.futures.Future[asyncio.Server] | None = None
        self._web: web.Server | None = None
        self._closed = False

    @property
    def port(self) -> int | None:
        """The server's port, None before the first route."""
        return None if self._sock is None else int(self._sock.getsockname()[1])

    def add_gateway(self, gateway: Gateway) -> None:
        """Serve routes of ``gateway.suite`` through ``gateway`` (each suite's, the tests' own)."""
        with self._lock:
            self._gateways[gateway.suite] = gateway

    def register(
        self,
        ctx: CallContext,
        role: str = "agent",
        *,
        calls: WorkCalls | None = None,
        seed: int | None = None,
        policy: RoutePolicy | None = None,
    ) -> ProxyRoute:
        """A route for the unit of work ``ctx``: its requests are ``role`` calls of that work, numbered
        by ``calls`` (default: through the suite's gateway, numbered by the route), with ``seed`` added to
        requests that carry none (in the format's place: :meth:`~.wire.WireFormat.seeded`). Starts the
        server on first use; safe from any thread. ``policy``: what the route accepts (the models and caps
        the suite gave the program, gateway/route_policy.py); anything else is refused with a 403."""
        if calls is None:
            gateway = self._gateways.get(ctx.suite)
            if gateway is None:
                raise ValueError(f"the recording proxy has no gateway for suite {ctx.suite!r} here")
            calls = GatewayCalls(gateway, ctx)
        port = self._start()
        work_token = secrets.token_hex(8)
        with self._lock:
            self._works[work_token] = _Work(ctx, role, calls, seed, policy)
        return ProxyRoute(ctx, role, port, work_token, self.token, self)

    def unregister(self, work_token: str) -> None:
        with self._lock:
            self._works.pop(work_token, None)

    def _start(self) -> int:
        """The listening socket, made now (so the port is known at once, from any thread); the loop
        starts accepting on it as soon as it runs the server's start."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the recording proxy of this process is closed (the run is ending)")
            if self._sock is None:
                sock = socket.create_server((HOST, 0), backlog=128)
                sock.setblocking(False)
                self._sock = sock
                self._serving = asyncio.run_coroutine_threadsafe(self._serve(sock), self.loop)

                replay_guard.allowed.add((HOST, int(sock.getsockname()[1])))
            return int(self._sock.getsockname()[1])

    async def _serve(self, sock: socket.socket) -> asyncio.Server:
        """aiohttp's low-level server on ``sock``: no access log; an idle or stalled connection closed
        after ``read_timeout``; the unread rest of a refused request's body read and dropped for up to
        ``_LINGER`` seconds (so the client reads its answer instead of a reset), then the connection
        closed if the body has not ended."""
        from aiohttp import web  # deferred: aiohttp (~0.2 s CPU) only once a program needs the proxy

        def request(message: Any, payload: Any, protocol: Any, writer: Any, task: Any) -> web.BaseRequest:
            return web.BaseRequest(
                message, payload, protocol, writer, task, self.loop, client_max_size=MAX_REQUEST_BYTES
            )

        served = web.Server(
            self._handle,
            request_factory=request,
            loop=self.loop,
            logger=quiet_logger(),
            access_log=None,
            keepalive_timeout=self.read_timeout,
            lingering_time=_LINGER,
        )
        self._web = served
        return await self.loop.create_server(served, sock=sock)

    def close(self, timeout: float = 5.0) -> None:
        """Stop serving and close every connection (idempotent). On the running loop's thread nothing
        is waited for; from another thread up to ``timeout`` seconds; once the loop has stopped (the
        engine ended first, having let its started units, and their programs, finish) the socket is
        closed at once."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._works.clear()
            serving, sock = self._serving, self._sock
        if serving is None or sock is None:
            return

        replay_guard.allowed.discard((HOST, int(sock.getsockname()[1])))
        if self.loop.is_closed() or not self.loop.is_running():
            server = _server_of(serving)
            if server is not None:
                with contextlib.suppress(Exception):  # a closed loop's selector may refuse: the socket goes
                    server.close()
            sock.close()
            return
        done = asyncio.run_coroutine_threadsafe(self._shutdown(serving, sock), self.loop)
        if _on_loop(self.loop):
            return
        try:
            done.result(timeout)
        except (concurrent.futures.TimeoutError, concurrent.futures.CancelledError, RuntimeError):
            pass

    async def _shutdown(
        self, serving: concurrent.futures.Future[asyncio.Server], sock: socket.socket
    ) -> None:
        """Stop listening, then end every connection: a request being answered has a moment to finish."""
        server = _server_of(serving)
        if server is None:
            sock.close()
            return
        server.close()
        if self._web is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._web.shutdown(0.5), 2.0)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(server.wait_closed(), 2.0)

    # ----- serving ------------------------------------------------------------------------------
    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        """One HTTP request: refused before its body is read (so ``Expect: 100-continue`` is answered
        only to a request the proxy takes), else read (bounded in size and time) and answered."""
        from aiohttp import web  # deferred: aiohttp, only with the proxy running

        refused = self._refusal(request.method, request.path, request.headers)
        if refused is not None:
            answer = refused
        else:
            body = await self._read_body(request)
            if isinstance(body, ProxyAnswer):
                answer = body
            else:
                read = ProxyRequest(request.method, request.path, request.headers, body)
                answer = await self.answer(read)
        return web.Response(status=answer.status, body=answer.body, headers=answer.headers)

    async def _read_body(self, request: web.BaseRequest) -> bytes | ProxyAnswer:
        """The body of a request the proxy takes: the client expecting ``100 Continue`` told to go on
        (the line aiohttp's routed handlers send), then read within ``read_timeout``, at most
        :data:`MAX_REQUEST_BYTES` (408 or 413, and the connection closed, otherwise)."""
        from aiohttp import web  # deferred: aiohttp, only with the proxy running

        fmt = wire_format(_api_of_path(request.path))
        too_large = f"pytest-gauge proxy: the request body is larger than {MAX_REQUEST_BYTES} bytes"
        if (request.content_length or 0) > MAX_REQUEST_BYTES:
            return _error(fmt, 413, too_large)
        if request.headers.get("expect", "").lower() == "100-continue" and request.version >= (1, 1):
            await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            request.writer.output_size = 0
        try:
            return await asyncio.wait_for(request.read(), self.read_timeout)
        except TimeoutError:
            return _error(fmt, 408, f"pytest-gauge proxy: no request body within {self.read_timeout:g} s")
        except web.HTTPRequestEntityTooLarge:
            return _error(fmt, 413, too_large)
        except web.RequestPayloadError as exc:
            return _error(fmt, 400, f"pytest-gauge proxy: the request body is malformed ({exc})")

    def _refusal(self, method: str, path: str, headers: Mapping[str, str]) -> ProxyAnswer | None:
        """The answer to a request refused on its head alone (404 no such endpoint or route, 401 no
        token of this run), else None."""
        route = parse_route_path(path)
        api = route[1] if route is not None else None
        fmt = wire_format(api or _api_of_path(path))
        if method != "POST" or route is None or api is None:
            return _error(
                fmt, 404, f"pytest-gauge proxy: no such endpoint ({method} {path}): POST to {_USAGE}"
            )
        if not self._authorized(headers):
            return _error(
                fmt,
                401,
                "pytest-gauge proxy: the request carries no proxy token of this run (Authorization: Bearer"
                " or x-api-key): use the token the plugin set in the client's environment",
            )
        with self._lock:
            known = route[0] in self._works
        if not known:
            return _error(fmt, 404, "pytest-gauge proxy: no unit of work is registered at this path (closed)")
        return None

    async def answer(self, request: ProxyRequest) -> ProxyAnswer:
        """A request's answer: refused (404, 401, 400) or sent through the gateway as its unit's call."""
        refused = self._refusal(request.method, request.path, request.headers)
        if refused is not None:
            return refused
        work_token, api = cast("tuple[str, Api]", parse_route_path(request.path))
        fmt = wire_format(api)
        with self._lock:
            work = self._works.get(work_token)
        if work is None:
            return _error(fmt, 404, "pytest-gauge proxy: no unit of work is registered at this path (closed)")
        body = _json_body(fmt, request.body)
        if isinstance(body, ProxyAnswer):
            return body
        return await self._forward(work, fmt, body, request.headers)

    def _authorized(self, headers: Mapping[str, str]) -> bool:
        return any(hmac.compare_digest(t.encode(), self.token.encode()) for t in presented_tokens(headers))

    async def _forward(
        self, work: _Work, fmt: WireFormat, body: JSONObject, client_headers: Mapping[str, str]
    ) -> ProxyAnswer:
        """The request through the gateway, as the unit's next call (with the client's headers of the
        format's ``passed_headers``, e.g. ``anthropic-beta``); the answer whole or as events."""
        stream = body.get("stream") is True
        sent = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
        if work.seed is not None:  # each sample of a program draws its own answers
            sent = fmt.seeded(sent, work.seed)
        seq = work.calls.next_seq()
        reason = refusal(work.policy, fmt, sent) if work.policy is not None else None
        if reason is not None:  # held to what the suite gave it: a 403, a ledger line, a transcript note
            if isinstance(work.calls, Refusals):
                work.calls.refused(seq, work.role, str(sent["model"]), fmt, reason)
            return _error(fmt, 403, reason)
        try:
            passed = {k: v for k, v in client_headers.items() if k.lower() in fmt.passed_headers}
            request = WireRequest(seq, work.role, str(sent["model"]), fmt.api, sent, passed or None)
            reply = await work.calls.call(request)
        except GatewayError as exc:
            status = exc.status if isinstance(exc.status, int) and 400 <= exc.status <= 599 else 502
            return _error(fmt, status, str(exc))
        except Exception as exc:  # a bug inside pytest-gauge: the client gets a 500 naming it, not a reset
            return _error(fmt, 500, f"pytest-gauge proxy: internal error ({type(exc).__name__}: {exc})")
        headers = {"x-gauge-seq": str(seq)}
        headers["x-gauge-cache"] = "hit" if reply.record.cache_hit else "miss"
        if stream:
            events = fmt.stream_events(reply.response)
            data = encode_events(events, done_marker=fmt.done_marker)
            sse = {"content-type": "text/event-stream", "cache-control": "no-cache", **headers}
            return ProxyAnswer(200, data, sse)
        return ProxyAnswer(200, _json(reply.response), {"content-type": "application/json", **headers})


def quiet_logger() -> logging.Logger:
    """The logger aiohttp's server reports to: a malformed request is answered (400) and not logged
    with its traceback; any other error still is."""
    logger = logging.getLogger("pytest_gauge.http_server")
    if not logger.filters:
        logger.addFilter(_not_a_bad_request)
    return logger


def _not_a_bad_request(record: logging.LogRecord) -> bool:
    from aiohttp.http_exceptions import HttpProcessingError  # deferred: aiohttp, only with the proxy

    return not (record.exc_info and isinstance(record.exc_info[1], HttpProcessingError))


def _json_body(fmt: WireFormat, raw: bytes) -> JSONObject | ProxyAnswer:
    """A request body as the JSON object with a model it must be, else the 400 saying what it is."""
    try:
        body = json.loads(raw.decode("utf-8"))
    except RecursionError:
        return _error(fmt, 400, "pytest-gauge proxy: the request body's JSON is nested too deeply")
    except (UnicodeDecodeError, ValueError):
        return _error(fmt, 400, "pytest-gauge proxy: the request body is not JSON")
    if not isinstance(body, dict) or not isinstance(body.get("model"), str) or not body["model"]:
        return _error(fmt, 400, "pytest-gauge proxy: the request body must be a JSON object with a model")
    return body


_USAGE = "/w/<work token>[/v1]/chat/completions, /responses or /messages"


def _api_of_path(path: str) -> Api:
    """The format whose error shape a refused request gets: the one its path names, else Chat's."""
    clean = path.split("?", 1)[0].rstrip("/")
    for suffix, api in _ENDPOINTS.items():
        if clean.endswith(suffix):
            return api
    return NEUTRAL_API


def _error(fmt: WireFormat, status: int, message: str) -> ProxyAnswer:
    """An error in the format's shape, redacted; ``x-should-retry: false`` (the gateway has retried)."""
    kind = _KINDS.get(status, "server" if status >= 500 else "invalid_request")
    body = _json(fmt.error_body(status, redact(message), kind))
    return ProxyAnswer(status, body, {"content-type": "application/json", "x-should-retry": "false"})


def _json(payload: Any) -> bytes:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _server_of(serving: concurrent.futures.Future[asyncio.Server]) -> asyncio.Server | None:
    """The server once the loop has started it, else None (not yet run, failed or cancelled)."""
    if not serving.done() or serving.cancelled() or serving.exception() is not None:
        return None
    return serving.result()


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def client_environment(route: ProxyRoute, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a client of the proxy: ``environ`` (default ``os.environ``) without any
    gateway key (the key variables, per-role keys, ``ANTHROPIC_API_KEY``, any variable holding a known
    secret), with the route's base URLs and the run's proxy token for both SDK styles, and loopback
    exempt from any HTTP proxy."""
    env = dict(os.environ if environ is None else environ)
    held = {s for s in (*known_secrets(env), *known_secrets()) if s != route.token}
    held |= {env[n].strip() for n in key_variables() if env.get(n, "").strip()}
    dropped = {*key_variables(), *ROLE_KEY_VARIABLES.values(), "ANTHROPIC_API_KEY", *_CLIENT_VARIABLES}
    for name in list(env):
        if name in dropped or _holds(env[name], held):
            del env[name]
    env.update(
        OPENAI_BASE_URL=route.openai_base_url,
        OPENAI_API_KEY=route.token,
        ANTHROPIC_BASE_URL=route.anthropic_base_url,
        ANTHROPIC_AUTH_TOKEN=route.token,
    )
    for name in ("NO_PROXY", "no_proxy"):
        kept = [h for h in env.get(name, "").split(",") if h.strip()]
        env[name] = ",".join([*kept, *(h for h in (HOST, "localhost") if h not in kept)])
    return env


def _holds(value: str, held: set[str]) -> bool:
    """Whether ``value`` is, or contains, one of the ``held`` secrets (short ones only whole)."""
    value = value.strip()
    return any(s == value or (len(s) >= MIN_RUN and s in value) for s in held)
