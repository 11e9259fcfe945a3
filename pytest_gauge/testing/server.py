"""A real model server on 127.0.0.1 that injects gateway faults on purpose: OpenAI Chat Completions,
Anthropic Messages and OpenAI Responses (each model route speaks the wire format its path names,
:mod:`pytest_gauge.gateway.wire`, streamed as server-sent events when the request asks for it).

Tests and benchmarks point the real ``openai`` (or ``anthropic``) client at it
(``base_url=server.base_url``) to exercise 401/404/429/5xx handling, timeouts, connection resets, missing
usage, truncation and concurrency limits without any network. It is aiohttp's low-level HTTP server
running its own event loop in a background thread, so concurrent requests overlap and the server is never
the bottleneck of a client benchmark. The faults are in :mod:`.faults`, the answers in :mod:`.responders`;
``python -m pytest_gauge.testing --port 0`` (:mod:`.__main__`) runs the same server in its own process
(:class:`~.process.ServerProcess`).

Fault decisions are a pure function of the fault plan and the 1-based index ``n`` of the model request
(any wire format; the counters call them chat requests) since start (or since
:meth:`LoopbackServer.reset_counters`), so runs are reproducible.
"""

from __future__ import annotations

import asyncio
import json
import random
import socket
import ssl
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs

from aiohttp import web

from ..gateway.proxy import quiet_logger
from ..gateway.wire import WireFormat, format_for_path
from .batches import BatchStore
from .exchange import Request, Response
from .faults import FaultPlan, auth_fault, every, model_response
from .responders import Responder, default_responder, error_body

__all__ = [
    "ADMIN_PREFIX",
    "DEFAULT_MODELS",
    "HOST",
    "LoopbackServer",
    "RequestRecord",
    "Served",
]

ADMIN_PREFIX = "/__gauge__"
HOST = "127.0.0.1"
DEFAULT_MODELS: tuple[str, ...] = ("loopback-model",)
MAX_HEADER_BYTES = 1 << 20
MAX_BODY_BYTES = 64 << 20


@dataclass
class RequestRecord:
    """One non-admin request as received; ``status`` is None while served, 0 if the connection was reset."""

    seq: int
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None
    chat_index: int | None = None
    status: int | None = None
    query: str = ""


class Served:
    """What both ways of running the server share: its URLs, and stopping it at the end of a ``with``."""

    port: int
    path_prefix: str
    scheme: str = "http"  # "https" when the server was given a certificate

    def stop(self) -> None:
        raise NotImplementedError

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def root_url(self) -> str:
        """``http(s)://127.0.0.1:<port>`` (no path prefix), e.g. for the admin routes."""
        return f"{self.scheme}://{HOST}:{self.port}"

    @property
    def base_url(self) -> str:
        """The ``base_url`` to give an OpenAI client, e.g. ``http://127.0.0.1:54321/v1``."""
        return self.root_url + self.path_prefix


class LoopbackServer(Served):
    """Model server on 127.0.0.1 (chat completions, messages, responses) with fault injection and
    thread-safe counters.

    Use as ``with LoopbackServer(latency=0.05) as srv: openai.OpenAI(base_url=srv.base_url, ...)``.
    ``faults`` and ``latency`` may be reassigned while it runs; counters are read as snapshots.
    """

    def __init__(
        self,
        responder: Responder | None = None,
        *,
        latency: float = 0.0,
        faults: FaultPlan | None = None,
        path_prefix: str = "/v1",
        port: int = 0,
        models: Iterable[str] = DEFAULT_MODELS,
        latency_jitter: float = 0.0,
        tls: tuple[str, str] | None = None,
    ) -> None:
        self.responder: Responder = responder or default_responder
        self.latency = latency
        self.latency_jitter = latency_jitter  # each answer waits latency ± up to this (seeded)
        self.tls = tls  # (certificate file, key file): serve HTTPS
        self.scheme = "https" if tls else "http"
        self._jitter = random.Random(faults.seed if faults else 0)
        self.faults = faults or FaultPlan()
        prefix = "/" + path_prefix.strip("/") if path_prefix.strip("/") else ""
        self.path_prefix = prefix
        self.models = tuple(models)
        self.port = port
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_event: asyncio.Event | None = None
        self._start_error: BaseException | None = None
        self._in_flight = 0
        self._gather: tuple[int, int, float] | None = None  # (n, after, timeout) while armed
        self._gather_models: set[str] | None = None  # models whose first request passed (first_per_model)
        self._gathered: asyncio.Event | None = None
        self.gather_timed_out = False
        self._holding = 0
        self.batches = BatchStore(prefix, lambda: self.responder)  # /files, /batches, /messages/batches
        self._release: asyncio.Event | None = None
        self._reset_state()

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> LoopbackServer:
        """Bind 127.0.0.1 (port 0 = a free port) and serve from a background thread; return self."""
        if self._thread is not None:
            raise RuntimeError("LoopbackServer already started")
        ready = threading.Event()
        loop = asyncio.new_event_loop()
        self._loop = loop

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self._serve(ready))
            except BaseException as exc:  # surfaced to start() if it happens before ready
                self._start_error = exc
            finally:
                ready.set()
                loop.close()

        self._thread = threading.Thread(target=run, name=f"gauge-loopback-{id(self):x}", daemon=True)
        self._thread.start()
        ready.wait()
        if self._start_error is not None:
            self._thread.join()
            self._thread = None
            raise RuntimeError("LoopbackServer failed to start") from self._start_error
        return self

    def stop(self) -> None:
        """Close the listener and every connection (pending handlers are cancelled), then join the thread."""
        thread, loop, stop_event = self._thread, self._loop, self._stop_event
        if thread is None or loop is None:
            return
        if stop_event is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(stop_event.set)
            except RuntimeError:  # loop already closed
                pass
        thread.join(timeout=10)
        self._thread = None
        self._loop = None

    def __enter__(self) -> LoopbackServer:
        return self if self._thread is not None else self.start()

    # ------------------------------------------------------------------ counters

    def _reset_state(self) -> None:
        self._records: list[RequestRecord] = []
        self._requests_total = 0
        self._chat_total = 0
        self._faulted_total = 0  # model requests of the plan's fault_apis (their own fault index)
        self._by_status: dict[int, int] = {}
        self._by_path: dict[str, int] = {}
        self._max_in_flight = self._in_flight
        self._connections_total = 0
        self._busy, self._busy_since = 0.0, time.monotonic()  # in flight × seconds, since this reset
        self._busy_mark = self._busy_since

    def gather(self, n: int, *, after: int = 0, timeout: float = 60.0, first_per_model: bool = False) -> None:
        """Hold chat requests, from the ``after + 1``-th on, until ``n`` requests are in flight at once,
        then let every request through (once; call again to re-arm).

        This makes a lower bound on a client's concurrency a deterministic test: a client able to keep
        ``n`` requests open reaches ``max_in_flight >= n`` however loaded the machine is, instead of
        depending on requests overlapping by chance. ``after`` lets warm-up calls that a client sends
        one at a time (pytest-gauge's first call per worker) pass unheld. If ``n`` is not reached within
        ``timeout`` seconds the held requests are released anyway and :attr:`gather_timed_out` is set.
        ``first_per_model``: each model's first request passes unheld too (pytest-gauge sends one call per
        (role, model) alone before the others of that model).
        """
        with self._lock:
            self._gather = (n, after, timeout)
            self._gather_models = set() if first_per_model else None
            self._gathered = None  # created on the server's loop by the first held request
            self.gather_timed_out = False

    def _gather_check(
        self, chat_index: int | None, model: object = None
    ) -> tuple[asyncio.Event, float] | None:
        """Under the lock, after counting a request in flight: release the held requests when ``n`` are
        in flight, or return what this request must wait for."""
        if self._gather is None or chat_index is None:
            return None
        if self._gather_models is not None and str(model) not in self._gather_models:
            self._gather_models.add(str(model))
            return None
        n, after, timeout = self._gather
        if self._gathered is None:
            self._gathered = asyncio.Event()
        if self._in_flight >= n:
            self._gathered.set()
            self._gather = None
            return None
        return (self._gathered, timeout) if chat_index > after else None

    async def _held(self, wait: tuple[asyncio.Event, float] | None) -> None:
        if wait is None:
            return
        event, timeout = wait
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except TimeoutError:
            with self._lock:
                self.gather_timed_out = True
                self._gather = None
            event.set()

    def reset_counters(self) -> None:
        """Zero every counter and restart the fault schedule at request 1 (in_flight stays live); a hold
        that was released holds again."""
        with self._lock:
            self._reset_state()
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._rearm)

    def _rearm(self) -> None:
        if self._release is not None and self._release.is_set():
            self._release = asyncio.Event()

    @property
    def requests_total(self) -> int:
        """Non-admin requests received (any route, any outcome)."""
        with self._lock:
            return self._requests_total

    @property
    def requests_by_status(self) -> dict[int, int]:
        """Completed requests per status; 0 counts connections reset without a response."""
        with self._lock:
            return dict(self._by_status)

    @property
    def in_flight(self) -> int:
        """Requests fully read and not yet answered."""
        with self._lock:
            return self._in_flight

    @property
    def max_in_flight(self) -> int:
        """The largest ``in_flight`` seen since start or the last reset."""
        with self._lock:
            return self._max_in_flight

    @property
    def connections_total(self) -> int:
        """TCP connections accepted (keep-alive clients reuse them)."""
        with self._lock:
            return self._connections_total

    @property
    def log(self) -> list[RequestRecord]:
        """Every non-admin request in arrival order (the live records; status fills in on completion)."""
        with self._lock:
            return list(self._records)

    @property
    def bodies(self) -> list[dict[str, Any]]:
        """Request JSON bodies (those that parsed as an object), in arrival order."""
        with self._lock:
            return [r.body for r in self._records if r.body is not None]

    @property
    def headers_seen(self) -> list[dict[str, str]]:
        """Request headers (lower-case names), in arrival order."""
        with self._lock:
            return [dict(r.headers) for r in self._records]

    @property
    def statuses(self) -> list[int]:
        """Statuses of completed requests in arrival order (0 = connection reset, in-flight ones omitted)."""
        with self._lock:
            return [r.status for r in self._records if r.status is not None]

    @property
    def by_path(self) -> dict[str, int]:
        """Non-admin requests per URL path (query string dropped)."""
        with self._lock:
            return dict(self._by_path)

    def stats(self, full: bool = False) -> dict[str, Any]:
        """The counters as plain JSON, as served by ``GET /__gauge__/stats``; ``full`` adds bodies/headers."""
        with self._lock:
            out: dict[str, Any] = {
                "requests_total": self._requests_total,
                "chat_requests_total": self._chat_total,
                "requests_by_status": {str(k): v for k, v in sorted(self._by_status.items())},
                "statuses": [r.status for r in self._records if r.status is not None],
                "by_path": dict(self._by_path),
                "in_flight": self._in_flight,
                "max_in_flight": self._max_in_flight,
                "mean_in_flight": self._mean_in_flight(),
                "connections_total": self._connections_total,
                "latency": self.latency,
                "faults": self.faults.to_dict(),
            }
            if full:
                out["bodies"] = [r.body for r in self._records if r.body is not None]
                out["headers_seen"] = [dict(r.headers) for r in self._records]
            return out

    def _mark_busy(self) -> None:
        """Add the in-flight count's time since the last change to its integral (under the lock); until
        the first request since a reset, the window starts now (a client's start-up is not idle time)."""
        now = time.monotonic()
        if self._busy == 0.0 and self._in_flight == 0:
            self._busy_since = now
        self._busy += self._in_flight * (now - self._busy_mark)
        self._busy_mark = now

    def _mean_in_flight(self) -> float:
        """Requests in flight on average from the first request since the counters were reset to the
        last answer (under the lock)."""
        elapsed = self._busy_mark - self._busy_since
        return self._busy / elapsed if elapsed > 0 else 0.0

    # ------------------------------------------------------------------ serving

    @property
    def held(self) -> int:
        """Chat requests held unanswered right now (``FaultPlan.hold_after``), until :meth:`release`."""
        with self._lock:
            return self._holding

    def release(self) -> None:
        """Answer every held request, and every later one at once (the hold is over)."""
        loop, event = self._loop, self._release
        if loop is not None and event is not None and not loop.is_closed():
            loop.call_soon_threadsafe(event.set)

    async def _hold(self) -> None:
        assert self._release is not None
        with self._lock:
            self._holding += 1
        try:
            await self._release.wait()
        finally:
            with self._lock:
                self._holding -= 1

    async def _serve(self, ready: threading.Event) -> None:
        """aiohttp's low-level server on 127.0.0.1 until :meth:`stop`; then every handler is cancelled."""
        self._stop_event = asyncio.Event()
        self._release = asyncio.Event()
        loop = asyncio.get_running_loop()

        def request(message: Any, payload: Any, protocol: Any, writer: Any, task: Any) -> web.BaseRequest:
            return web.BaseRequest(
                message, payload, protocol, writer, task, loop, client_max_size=MAX_BODY_BYTES
            )

        served = _Counted(
            self._on_request,
            self._count_connection,
            request_factory=request,
            loop=loop,
            logger=quiet_logger(),
            access_log=None,
            max_line_size=MAX_HEADER_BYTES,
            max_field_size=MAX_HEADER_BYTES,
        )
        tls = None
        if self.tls is not None:
            tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            tls.load_cert_chain(*self.tls)
        server = await loop.create_server(served, HOST, self.port, backlog=4096, ssl=tls)
        self.port = server.sockets[0].getsockname()[1]
        ready.set()
        try:
            await self._stop_event.wait()
        finally:
            server.close()
            await served.shutdown(0.01)
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:  # handlers whose client left: aiohttp no longer tracks them
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def _count_connection(self) -> None:
        with self._lock:
            self._connections_total += 1

    async def _on_request(self, request: web.BaseRequest) -> web.StreamResponse:
        """One HTTP request: read whole, served (:meth:`_handle`), its answer written (or dripped, or
        the connection reset)."""
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            message = f"Bad request: the body is more than {MAX_BODY_BYTES} bytes"
            return _written(Response(413, error_body(message, "invalid_request_error")), "req_bad")
        headers = {k.lower(): v for k, v in request.headers.items()}
        req = Request(request.method, request.path_qs, request.path, request.query_string, headers, body)
        return await self._handle(req, request)

    async def _handle(self, req: Request, request: web.BaseRequest) -> web.StreamResponse:
        """Serve one request: count it, hold or delay it as planned, answer it."""
        if req.path.startswith(ADMIN_PREFIX + "/") or req.path == ADMIN_PREFIX:
            return _written(self._admin(req), "req_admin")
        body, body_error = _json_object(req.body)
        fmt = self._model_route(req)
        models_path = self.path_prefix + "/models"
        is_model = fmt is not None  # any wire format; the counters keep the name "chat"
        plan = self.faults
        with self._lock:
            self._requests_total += 1
            chat_index: int | None = None
            if is_model:
                self._chat_total += 1
                chat_index = self._chat_total
                if plan.fault_apis and fmt is not None and fmt.api in plan.fault_apis:
                    self._faulted_total += 1
            record = RequestRecord(
                self._requests_total, req.method, req.path, req.headers, body, chat_index, query=req.query
            )
            self._records.append(record)
            self._by_path[req.path] = self._by_path.get(req.path, 0) + 1
            self._mark_busy()
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
            held = self._gather_check(chat_index, body.get("model") if isinstance(body, dict) else None)
        done = False

        def finish(status: int) -> None:
            # Book-keeping happens just before the bytes go out, so a client that has read its response
            # always sees it counted.
            nonlocal done
            if done:
                return
            done = True
            with self._lock:
                self._mark_busy()
                self._in_flight -= 1
                record.status = status
                self._by_status[status] = self._by_status.get(status, 0) + 1

        try:
            await self._held(held)
            delay = self.latency
            if self.latency_jitter:
                delay = max(0.0, delay + self._jitter.uniform(-self.latency_jitter, self.latency_jitter))
            if chat_index is not None and every(plan.slow_every, chat_index):
                delay += plan.slow_seconds
            if delay > 0:
                await asyncio.sleep(delay)
            if is_model and plan.hold_after and (chat_index or 0) > plan.hold_after:
                await self._hold()  # a request that reached the server and waits: tests stop runs here
            batch = None if fmt is not None else self.batches.answer(req)
            if batch is not None:
                resp = auth_fault(req, plan) or batch
            elif fmt is not None:
                n = self._faulted_total if plan.fault_apis and fmt.api in plan.fault_apis else chat_index
                resp = model_response(fmt, req, body, body_error, plan, n or 0, record.seq, self.responder)
            elif req.method == "GET" and req.path == models_path:
                resp = auth_fault(req, plan) or Response(200, self._models_payload())
            else:
                msg = f"Invalid URL ({req.method} {req.path})"
                resp = Response(404, error_body(msg, "invalid_request_error"))
            if resp.status >= 400 and plan.should_retry_false:
                resp.headers.setdefault("x-should-retry", "false")
            if resp.reset:
                finish(0)
                return _reset(request)
            finish(resp.status)
            drips = not plan.drip_models or (body or {}).get("model") in plan.drip_models
            if is_model and plan.drip_seconds > 0 and resp.status == 200 and drips:
                return await _dripped(request, resp, f"req_loopback_{record.seq}", plan.drip_seconds)
            return _written(resp, f"req_loopback_{record.seq}")
        finally:
            finish(0)  # cancelled or failed before answering: counts as a dropped connection

    def _model_route(self, req: Request) -> WireFormat | None:
        """The wire format a POST to one of the model routes speaks (``<prefix>/chat/completions``,
        ``<prefix>/messages``, ``<prefix>/responses``); None for any other request."""
        fmt = format_for_path(req.path)
        if req.method != "POST" or fmt is None or req.path.rstrip("/") != self.path_prefix + fmt.path:
            return None
        return fmt

    def _models_payload(self) -> dict[str, Any]:
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "gauge-loopback"} for m in self.models]
        return {"object": "list", "data": data}

    def _admin(self, req: Request) -> Response:
        route = req.path[len(ADMIN_PREFIX) :]
        try:
            if req.method == "GET" and route == "/stats":
                full = parse_qs(req.query).get("full", ["0"])[0] not in ("0", "", "false")
                return Response(200, self.stats(full=full))
            if req.method == "POST" and route == "/reset":
                self.reset_counters()
                return Response(200, {"ok": True})
            if req.method == "POST" and route == "/faults":
                self.faults = FaultPlan.from_dict(json.loads(req.body or b"{}"))
                return Response(200, {"ok": True, "faults": self.faults.to_dict()})
            if req.method == "POST" and route == "/latency":
                self.latency = float(json.loads(req.body or b"{}")["latency"])
                return Response(200, {"ok": True, "latency": self.latency})
        except (ValueError, TypeError, KeyError) as exc:
            return Response(400, error_body(f"bad admin request: {exc}", "invalid_request_error"))
        return Response(404, error_body(f"Invalid URL ({req.method} {req.path})", "invalid_request_error"))


def _json_object(raw: bytes) -> tuple[dict[str, Any] | None, bool]:
    """A request body as a JSON object, and whether there was a body that is not one."""
    if not raw:
        return None, False
    try:
        parsed = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None, True
    return (parsed, False) if isinstance(parsed, dict) else (None, True)


class _Counted(web.Server):
    """aiohttp's low-level server, telling the loopback server of each connection it accepts."""

    def __init__(self, handler: Any, on_connection: Callable[[], None], **kwargs: Any) -> None:
        super().__init__(handler, **kwargs)
        self._on_connection = on_connection

    def connection_made(self, handler: Any, transport: asyncio.Transport) -> None:
        self._on_connection()
        super().connection_made(handler, transport)


def _body_and_headers(resp: Response, request_id: str) -> tuple[bytes, dict[str, str]]:
    """A response's body (JSON of its payload, or its raw bytes) and headers (the server's own first)."""
    body = resp.raw if resp.raw is not None else json.dumps(resp.payload).encode("utf-8")
    headers = {"content-type": "application/json", "x-request-id": request_id, "server": "gauge-loopback"}
    headers.update(resp.headers)
    return body, headers


def _written(resp: Response, request_id: str) -> web.Response:
    body, headers = _body_and_headers(resp, request_id)
    return web.Response(status=resp.status, body=body, headers=headers)


async def _dripped(
    request: web.BaseRequest, resp: Response, request_id: str, every: float
) -> web.StreamResponse:
    """The head at once, then the body one byte every ``every`` seconds (a server that never times out
    a read, yet never finishes the answer)."""
    body, headers = _body_and_headers(resp, request_id)
    out = web.StreamResponse(status=resp.status, headers=headers)
    out.content_length = len(body)
    await out.prepare(request)
    for i in range(len(body)):
        await asyncio.sleep(every)
        await out.write(body[i : i + 1])
    return out


def _reset(request: web.BaseRequest) -> web.StreamResponse:
    """The connection reset (RST, SO_LINGER 0) instead of an answer; aiohttp finds it gone."""
    transport = request.transport
    if transport is not None:
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        transport.abort()
    return web.Response(status=204)


if __name__ == "__main__":  # the former way to start it: python -m pytest_gauge.testing.server
    from .__main__ import main

    sys.exit(main())
