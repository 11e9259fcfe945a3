"""A real OpenAI-compatible chat-completions server on 127.0.0.1 that injects gateway faults on purpose.

Tests and benchmarks point the real ``openai`` client at it (``base_url=server.base_url``) to exercise
401/404/429/5xx handling, timeouts, connection resets, missing usage, truncation and concurrency limits
without any network. It is a small asyncio HTTP/1.1 server (keep-alive, Content-Length or chunked request
bodies) running its own event loop in a background thread, so concurrent requests overlap and the server is
never the bottleneck of a client benchmark. ``python -m pytest_gauge.testing.server --port 0`` runs the same
server in its own process, prints ``PORT <n>`` and exposes its counters at ``GET /__gauge__/stats``
(``--suite PATH --suite-seed N`` makes it answer like the simulator for that suite, for benchmarks).

Fault decisions are a pure function of the fault plan and the 1-based index ``n`` of the chat-completion
request since start (or since :meth:`LoopbackServer.reset_counters`), so runs are reproducible.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from http import HTTPStatus
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit

__all__ = [
    "ADMIN_PREFIX",
    "MALFORMED_BODIES",
    "FaultPlan",
    "LoopbackServer",
    "RequestRecord",
    "Responder",
    "ResponderError",
    "ServerProcess",
    "biased_verdict",
    "completion",
    "default_responder",
    "main",
    "malformed_body",
    "message_text",
    "scheduled_fault",
    "tool_call",
]

Responder = Callable[[dict[str, Any]], dict[str, Any]]
"""Request JSON body -> chat.completion JSON dict (id/object/created/model are filled in when missing)."""

ADMIN_PREFIX = "/__gauge__"
HOST = "127.0.0.1"
DEFAULT_MODELS: tuple[str, ...] = ("loopback-model",)

ScheduledFault = Literal["burst_503", "429", "503", "500", "malformed", "reset"]

MALFORMED_BODIES: dict[str, bytes] = {
    "html": b"<!DOCTYPE html><html><head><title>Sign in</title></head><body>Please log in</body></html>",
    "empty": b"",
    "array": b'[{"choices": []}]',
    "choices_not_list": b'{"id": "x", "object": "chat.completion", "choices": {"0": "hi"}}',
    "choices_empty": b'{"id": "x", "object": "chat.completion", "choices": []}',
    "content_null": (
        b'{"id": "x", "object": "chat.completion", "choices": [{"index": 0, "finish_reason": "stop",'
        b' "message": {"role": "assistant", "content": null}}]}'
    ),
    "usage_string": (
        b'{"id": "x", "object": "chat.completion", "choices": [{"index": 0, "finish_reason": "stop",'
        b' "message": {"role": "assistant", "content": "hi"}}], "usage": {"prompt_tokens": "many",'
        b' "completion_tokens": 1, "total_tokens": 1}}'
    ),
}
"""200 bodies that are not a well-formed chat completion, by kind (``FaultPlan.malformed``)."""

_MAX_HEADER_BYTES = 1 << 20
_MAX_BODY_BYTES = 64 << 20


# --------------------------------------------------------------------------------------------- fault plan


@dataclass
class FaultPlan:
    """Which faults to inject; each probabilistic choice comes from an RNG seeded by (seed, request index).

    Auth faults (``status_401``, ``expected_key``) apply to both model routes (chat completions and
    models); all other faults apply to chat completions only.
    """

    status_401: bool = False
    expected_key: str | None = None
    rate_429: float = 0.0
    retry_after: str | None = "1"
    retry_after_ms: int | None = None
    rate_503: float = 0.0
    rate_500: float = 0.0
    burst_5xx: int = 0
    slow_every: int = 0
    slow_seconds: float = 0.0
    reset_every: int = 0
    no_usage: bool = False
    truncate: bool = False
    should_retry_false: bool = False
    status_400_models: frozenset[str] = frozenset()
    reject_response_formats: frozenset[str] = frozenset()
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    unknown_models: frozenset[str] = frozenset()
    rate_malformed: float = 0.0
    malformed: str = "mixed"
    rate_reset: float = 0.0
    drip_seconds: float = 0.0
    hold_after: int = 0
    judge_prefers: Literal["A", "B"] | None = None
    seed: int = 0

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form (the model sets as sorted lists), as served by the admin stats route."""
        d = asdict(self)
        d["status_400_models"] = sorted(self.status_400_models)
        d["reject_response_formats"] = sorted(self.reject_response_formats)
        d["unknown_models"] = sorted(self.unknown_models)
        return d

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FaultPlan:
        """Inverse of :meth:`to_dict`; unknown keys are an error so a typo cannot silently disable a fault."""
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown FaultPlan fields: {sorted(unknown)}")
        kwargs = dict(data)
        for name in ("status_400_models", "reject_response_formats", "unknown_models"):
            if name in kwargs:
                kwargs[name] = frozenset(kwargs[name])
        return cls(**kwargs)


def _every(k: int, n: int) -> bool:
    return k > 0 and n % k == 0


def scheduled_fault(plan: FaultPlan, n: int) -> ScheduledFault | None:
    """The status fault planned for the n-th (1-based) chat request, ignoring auth/model/reset faults.

    The first ``burst_5xx`` requests get 503; otherwise one uniform draw from ``Random("gauge:<seed>:<n>")``
    falls into [0, rate_429) -> 429, then [.., +rate_503) -> 503, then [.., +rate_500) -> 500, then
    [.., +rate_malformed) -> a malformed 200 body, then [.., +rate_reset) -> a connection reset.
    """
    if n <= plan.burst_5xx:
        return "burst_503"
    bands: tuple[tuple[ScheduledFault, float], ...] = (
        ("429", plan.rate_429),
        ("503", plan.rate_503),
        ("500", plan.rate_500),
        ("malformed", plan.rate_malformed),
        ("reset", plan.rate_reset),
    )
    if all(rate <= 0 for _, rate in bands):
        return None
    u = random.Random(f"gauge:{plan.seed}:{n}").random()
    edge = 0.0
    for fault, rate in bands:
        edge += rate
        if u < edge:
            return fault
    return None


def malformed_body(plan: FaultPlan, n: int) -> bytes:
    """The malformed body of the n-th request: ``plan.malformed``'s kind, or each kind in turn (mixed)."""
    if plan.malformed in MALFORMED_BODIES:
        return MALFORMED_BODIES[plan.malformed]
    kinds = sorted(MALFORMED_BODIES)
    return MALFORMED_BODIES[kinds[n % len(kinds)]]


# ----------------------------------------------------------------------------------------------- responses


class ResponderError(Exception):
    """Raised by a responder to answer with an OpenAI-style error (e.g. a 400 ``context_length_exceeded``)."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.code = code
        self.param = param
        self.headers = dict(headers or {})


def message_text(content: Any) -> str:
    """The text of a message ``content``: a string, a list of text parts (joined), or None -> ""."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, str):
                parts.append(part)
        return "".join(parts)
    return str(content)


def tool_call(call_id: str, name: str, arguments: Mapping[str, Any] | str) -> dict[str, Any]:
    """One assistant ``tool_calls`` entry; ``arguments`` as a dict is JSON-encoded, a str is sent verbatim."""
    raw = arguments if isinstance(arguments, str) else json.dumps(dict(arguments))
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": raw}}


def completion(
    content: str | None,
    *,
    tool_calls: Sequence[Mapping[str, Any]] | None = None,
    finish_reason: str | None = None,
    usage: Mapping[str, int] | None = None,
    model: str | None = None,
) -> dict[str, Any]:
    """A chat.completion dict for a responder to return; finish_reason defaults to tool_calls/stop.

    Without ``usage`` the server computes the default character-based usage for the request.
    """
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [dict(tc) for tc in tool_calls]
    reason = finish_reason or ("tool_calls" if tool_calls else "stop")
    out: dict[str, Any] = {"choices": [{"index": 0, "message": message, "finish_reason": reason}]}
    if usage is not None:
        out["usage"] = _full_usage(dict(usage))
    if model is not None:
        out["model"] = model
    return out


def _full_usage(usage: dict[str, Any]) -> dict[str, Any]:
    prompt = int(usage.get("prompt_tokens", 0))
    completion_tokens = int(usage.get("completion_tokens", 0))
    return {
        **usage,
        "prompt_tokens": prompt,
        "completion_tokens": completion_tokens,
        "total_tokens": int(usage.get("total_tokens", prompt + completion_tokens)),
    }


def _default_usage(body: Mapping[str, Any], content: str) -> dict[str, int]:
    messages = body.get("messages") or []
    chars = sum(len(message_text(m.get("content"))) for m in messages if isinstance(m, dict))
    prompt, out = chars // 4 + 1, len(content) // 4 + 1
    return {"prompt_tokens": prompt, "completion_tokens": out, "total_tokens": prompt + out}


def default_responder(body: dict[str, Any]) -> dict[str, Any]:
    """Deterministic echo: ``"ok: " + last user message[:40]``; usage = chars//4 + 1 on each side."""
    messages = body.get("messages") or []
    last_user = next((m for m in reversed(messages) if isinstance(m, dict) and m.get("role") == "user"), None)
    text = message_text(last_user.get("content")) if last_user is not None else ""
    content = "ok: " + text[:40]
    return completion(content, usage=_default_usage(body, content))


def biased_verdict(body: Mapping[str, Any], slot: str | None) -> dict[str, Any] | None:
    """With ``FaultPlan.judge_prefers`` set: a judge request (a user message carrying ``<response_a>``, as
    pytest-gauge's blind judge prompt does) is answered with a valid verdict for that slot, whatever the
    responses say: a judge with total position bias. Other requests: None (the responder answers)."""
    if slot is None:
        return None
    messages = body.get("messages") or []
    if not any(
        isinstance(m, dict) and m.get("role") == "user" and "<response_a>" in message_text(m.get("content"))
        for m in messages
    ):
        return None
    verdict = {
        "winner": slot,
        "reward_a": 1.0 if slot == "A" else 0.0,
        "reward_b": 1.0 if slot == "B" else 0.0,
        "reason": f"Response {slot} is better.",
    }
    content = json.dumps(verdict)
    return completion(content, usage=_default_usage(body, content))


def _error_body(message: str, type: str, code: str | None = None, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


# --------------------------------------------------------------------------------------------- the server


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


@dataclass
class _Request:
    method: str
    target: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes
    keep_alive: bool


@dataclass
class _Response:
    status: int
    payload: Any
    headers: dict[str, str] = field(default_factory=dict)
    reset: bool = False
    raw: bytes | None = None  # sent as is instead of the JSON of ``payload`` (malformed bodies)


class _BadRequest(Exception):
    pass


async def _read_request(reader: asyncio.StreamReader) -> _Request | None:
    """Read one HTTP/1.1 request; None on a clean EOF between requests."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial.strip():
            return None
        raise _BadRequest("truncated request head") from exc
    except asyncio.LimitOverrunError as exc:
        raise _BadRequest("request head too large") from exc
    lines = head[:-4].decode("latin-1").split("\r\n")
    while lines and not lines[0]:  # tolerate stray CRLF between requests
        lines.pop(0)
    parts = lines[0].split(" ") if lines else []
    if len(parts) != 3:
        raise _BadRequest("malformed request line")
    method, target, version = parts
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            raise _BadRequest("malformed header line")
        headers[name.strip().lower()] = value.strip()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = await _read_chunked(reader)
    else:
        try:
            length = int(headers.get("content-length", "0"))
        except ValueError as exc:
            raise _BadRequest("bad content-length") from exc
        if length < 0 or length > _MAX_BODY_BYTES:
            raise _BadRequest("bad content-length")
        body = await reader.readexactly(length) if length else b""
    conn = headers.get("connection", "").lower()
    keep_alive = conn != "close" if version == "HTTP/1.1" else conn == "keep-alive"
    split = urlsplit(target)
    return _Request(method.upper(), target, split.path, split.query, headers, body, keep_alive)


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while True:
        size_line = await reader.readuntil(b"\r\n")
        try:
            size = int(size_line.split(b";", 1)[0].strip(), 16)
        except ValueError as exc:
            raise _BadRequest("bad chunk size") from exc
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
                pass
            return b"".join(chunks)
        total += size
        if total > _MAX_BODY_BYTES:
            raise _BadRequest("body too large")
        chunks.append(await reader.readexactly(size))
        await reader.readexactly(2)


def _encode_response(resp: _Response, keep_alive: bool, request_id: str) -> bytes:
    body = resp.raw if resp.raw is not None else json.dumps(resp.payload).encode("utf-8")
    try:
        reason = HTTPStatus(resp.status).phrase
    except ValueError:
        reason = "Unknown"
    lines = [
        f"HTTP/1.1 {resp.status} {reason}",
        "content-type: application/json",
        f"content-length: {len(body)}",
        f"connection: {'keep-alive' if keep_alive else 'close'}",
        f"x-request-id: {request_id}",
        "server: gauge-loopback",
    ]
    lines.extend(f"{k}: {v}" for k, v in resp.headers.items())
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


async def _drip(writer: asyncio.StreamWriter, data: bytes, every: float) -> None:
    """The head at once, then the body one byte every ``every`` seconds (a server that never times out
    a read, yet never finishes the answer)."""
    head, sep, body = data.partition(b"\r\n\r\n")
    writer.write(head + sep)
    await writer.drain()
    for i in range(len(body)):
        await asyncio.sleep(every)
        writer.write(body[i : i + 1])
        await writer.drain()


class _Served:
    """What both ways of running the server share: its URLs, and stopping it at the end of a ``with``."""

    port: int
    path_prefix: str

    def stop(self) -> None:
        raise NotImplementedError

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def root_url(self) -> str:
        """``http://127.0.0.1:<port>`` (no path prefix), e.g. for the admin routes."""
        return f"http://{HOST}:{self.port}"

    @property
    def base_url(self) -> str:
        """The ``base_url`` to give an OpenAI client, e.g. ``http://127.0.0.1:54321/v1``."""
        return self.root_url + self.path_prefix


class LoopbackServer(_Served):
    """OpenAI-compatible chat-completions server on 127.0.0.1 with fault injection and thread-safe counters.

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
    ) -> None:
        self.responder: Responder = responder or default_responder
        self.latency = latency
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
        self._conn_tasks: set[asyncio.Task[None]] = set()
        self._in_flight = 0
        self._gather: tuple[int, int, float] | None = None  # (n, after, timeout) while armed
        self._gathered: asyncio.Event | None = None
        self.gather_timed_out = False
        self._holding = 0
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
        self._by_status: dict[int, int] = {}
        self._by_path: dict[str, int] = {}
        self._max_in_flight = self._in_flight
        self._connections_total = 0

    def gather(self, n: int, *, after: int = 0, timeout: float = 60.0) -> None:
        """Hold chat requests, from the ``after + 1``-th on, until ``n`` requests are in flight at once,
        then let every request through (once; call again to re-arm).

        This makes a lower bound on a client's concurrency a deterministic test: a client able to keep
        ``n`` requests open reaches ``max_in_flight >= n`` however loaded the machine is, instead of
        depending on requests overlapping by chance. ``after`` lets warm-up calls that a client sends
        one at a time (pytest-gauge's first call per worker) pass unheld. If ``n`` is not reached within
        ``timeout`` seconds the held requests are released anyway and :attr:`gather_timed_out` is set.
        """
        with self._lock:
            self._gather = (n, after, timeout)
            self._gathered = None  # created on the server's loop by the first held request
            self.gather_timed_out = False

    def _gather_check(self, chat_index: int | None) -> tuple[asyncio.Event, float] | None:
        """Under the lock, after counting a request in flight: release the held requests when ``n`` are
        in flight, or return what this request must wait for."""
        if self._gather is None or chat_index is None:
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
                "connections_total": self._connections_total,
                "latency": self.latency,
                "faults": self.faults.to_dict(),
            }
            if full:
                out["bodies"] = [r.body for r in self._records if r.body is not None]
                out["headers_seen"] = [dict(r.headers) for r in self._records]
            return out

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
        self._stop_event = asyncio.Event()
        self._release = asyncio.Event()
        server = await asyncio.start_server(
            self._on_connection, HOST, self.port, limit=_MAX_HEADER_BYTES, backlog=4096
        )
        self.port = server.sockets[0].getsockname()[1]
        ready.set()
        try:
            await self._stop_event.wait()
        finally:
            server.close()
            tasks = list(self._conn_tasks)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _on_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._conn_tasks.add(task)
        with self._lock:
            self._connections_total += 1
        try:
            while True:
                try:
                    req = await _read_request(reader)
                except _BadRequest as exc:
                    resp = _Response(400, _error_body(f"Bad request: {exc}", "invalid_request_error"))
                    writer.write(_encode_response(resp, False, "req_bad"))
                    await writer.drain()
                    return
                if req is None:
                    return
                if not await self._handle(req, writer):
                    return
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            if task is not None:
                self._conn_tasks.discard(task)
            writer.close()

    async def _handle(self, req: _Request, writer: asyncio.StreamWriter) -> bool:
        """Serve one request; returns whether the connection stays open."""
        if req.path.startswith(ADMIN_PREFIX + "/") or req.path == ADMIN_PREFIX:
            resp = self._admin(req)
            writer.write(_encode_response(resp, req.keep_alive, "req_admin"))
            await writer.drain()
            return req.keep_alive

        body: dict[str, Any] | None = None
        body_error = False
        if req.body:
            try:
                parsed = json.loads(req.body)
            except (ValueError, UnicodeDecodeError):
                body_error = True
            else:
                if isinstance(parsed, dict):
                    body = parsed
                else:
                    body_error = True
        chat_path = self.path_prefix + "/chat/completions"
        models_path = self.path_prefix + "/models"
        is_chat = req.method == "POST" and req.path == chat_path
        plan = self.faults
        with self._lock:
            self._requests_total += 1
            chat_index: int | None = None
            if is_chat:
                self._chat_total += 1
                chat_index = self._chat_total
            record = RequestRecord(
                self._requests_total, req.method, req.path, req.headers, body, chat_index, query=req.query
            )
            self._records.append(record)
            self._by_path[req.path] = self._by_path.get(req.path, 0) + 1
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
            held = self._gather_check(chat_index)
        done = False

        def finish(status: int) -> None:
            # Book-keeping happens just before the bytes go out, so a client that has read its response
            # always sees it counted.
            nonlocal done
            if done:
                return
            done = True
            with self._lock:
                self._in_flight -= 1
                record.status = status
                self._by_status[status] = self._by_status.get(status, 0) + 1

        try:
            await self._held(held)
            delay = self.latency
            if chat_index is not None and _every(plan.slow_every, chat_index):
                delay += plan.slow_seconds
            if delay > 0:
                await asyncio.sleep(delay)
            if is_chat and plan.hold_after and (chat_index or 0) > plan.hold_after:
                await self._hold()  # a request that reached the server and waits: tests stop runs here
            if is_chat:
                resp = self._chat(req, body, body_error, plan, chat_index or 0, record.seq)
            elif req.method == "GET" and req.path == models_path:
                resp = self._auth(req, plan) or _Response(200, self._models_payload())
            else:
                msg = f"Invalid URL ({req.method} {req.path})"
                resp = _Response(404, _error_body(msg, "invalid_request_error"))
            if resp.status >= 400 and plan.should_retry_false:
                resp.headers.setdefault("x-should-retry", "false")
            if resp.reset:
                finish(0)
                sock = writer.get_extra_info("socket")
                if sock is not None:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                writer.transport.abort()
                return False
            data = _encode_response(resp, req.keep_alive, f"req_loopback_{record.seq}")
            finish(resp.status)
            if is_chat and plan.drip_seconds > 0 and resp.status == 200:
                await _drip(writer, data, plan.drip_seconds)
            else:
                writer.write(data)
                await writer.drain()
            return req.keep_alive
        finally:
            finish(0)  # cancelled or failed before answering: counts as a dropped connection

    def _auth(self, req: _Request, plan: FaultPlan) -> _Response | None:
        auth = req.headers.get("authorization", "")
        token = auth[7:].strip() if auth[:7].lower() == "bearer " else None
        if plan.status_401 or (plan.expected_key is not None and token != plan.expected_key):
            body = _error_body("Incorrect API key provided", "invalid_request_error", "invalid_api_key")
            return _Response(401, body)
        return None

    def _chat(
        self, req: _Request, body: dict[str, Any] | None, body_error: bool, plan: FaultPlan, n: int, seq: int
    ) -> _Response:
        if _every(plan.reset_every, n):
            return _Response(0, None, reset=True)
        denied = self._auth(req, plan)
        if denied is not None:
            return denied
        if body is None:
            msg = (
                "We could not parse the JSON body of your request."
                if body_error or req.body
                else "The request body is empty; expected a JSON object."
            )
            return _Response(400, _error_body(msg, "invalid_request_error"))
        model = body.get("model")
        if not isinstance(model, str) or not model:
            return _Response(
                400, _error_body("you must provide a model parameter", "invalid_request_error", param="model")
            )
        if not isinstance(body.get("messages"), list):
            return _Response(
                400,
                _error_body("'messages' is a required property", "invalid_request_error", param="messages"),
            )
        if body.get("stream"):
            return _Response(
                400,
                _error_body(
                    "Streaming is not supported by the loopback server",
                    "invalid_request_error",
                    param="stream",
                ),
            )
        if model in plan.unknown_models:
            return _Response(
                404,
                _error_body(
                    f"The model `{model}` does not exist or you do not have access to it.",
                    "invalid_request_error",
                    "model_not_found",
                ),
            )
        if model in plan.status_400_models:
            return _Response(
                400,
                _error_body(
                    f"The model `{model}` does not exist", "invalid_request_error", "model_not_found", "model"
                ),
            )
        fmt = body.get("response_format")
        kind = fmt.get("type") if isinstance(fmt, dict) else None
        if kind is not None and ("*" in plan.reject_response_formats or kind in plan.reject_response_formats):
            msg = f"Invalid parameter: 'response_format' of type '{kind}' is not supported with this model."
            return _Response(400, _error_body(msg, "invalid_request_error", None, "response_format"))
        fault = scheduled_fault(plan, n)
        if fault == "429":
            headers: dict[str, str] = {}
            if plan.retry_after is not None:
                headers["retry-after"] = plan.retry_after
            if plan.retry_after_ms is not None:
                headers["retry-after-ms"] = str(plan.retry_after_ms)
            msg = f"Rate limit reached for requests on {model}. Please try again later."
            return _Response(429, _error_body(msg, "requests", "rate_limit_exceeded"), headers)
        if fault in ("burst_503", "503"):
            return _Response(503, _error_body("The server is overloaded or not ready yet.", "server_error"))
        if fault == "500":
            msg = "The server had an error while processing your request. Sorry about that!"
            return _Response(500, _error_body(msg, "server_error"))
        if fault == "malformed":
            return _Response(200, None, raw=malformed_body(plan, n))
        if fault == "reset":
            return _Response(0, None, reset=True)
        try:
            out = biased_verdict(body, plan.judge_prefers) or self.responder(body)
        except ResponderError as exc:
            return _Response(exc.status, _error_body(exc.message, exc.type, exc.code, exc.param), exc.headers)
        except Exception as exc:
            msg = f"loopback responder failed: {type(exc).__name__}: {exc}"
            return _Response(500, _error_body(msg, "server_error"))
        if not isinstance(out, dict):
            return _Response(500, _error_body("loopback responder did not return a dict", "server_error"))
        return _Response(200, self._finish_completion(body, dict(out), plan, seq))

    def _finish_completion(
        self, body: dict[str, Any], out: dict[str, Any], plan: FaultPlan, seq: int
    ) -> dict[str, Any]:
        out.setdefault("id", f"chatcmpl-loopback-{seq}")
        out.setdefault("object", "chat.completion")
        out.setdefault("created", int(time.time()))
        out.setdefault("model", body["model"])
        choices = [dict(c) for c in out.get("choices") or []]
        for i, choice in enumerate(choices):
            choice.setdefault("index", i)
            choice.setdefault("finish_reason", "stop")
            choice["message"] = dict(choice.get("message") or {"role": "assistant", "content": ""})
            choice["message"].setdefault("role", "assistant")
        if plan.truncate and choices:
            msg = choices[0]["message"]
            if isinstance(msg.get("content"), str):
                msg["content"] = msg["content"][: len(msg["content"]) // 2]
            choices[0]["finish_reason"] = "length"
        out["choices"] = choices
        if plan.no_usage:
            out.pop("usage", None)
        elif "usage" not in out:
            content = message_text(choices[0]["message"].get("content")) if choices else ""
            out["usage"] = _default_usage(body, content)
        elif out["usage"] is None:
            del out["usage"]
        else:
            out["usage"] = _full_usage(dict(out["usage"]))
        usage = out.get("usage")
        if isinstance(usage, dict) and plan.cached_tokens > 0:
            cached = min(plan.cached_tokens, usage["prompt_tokens"])
            usage["prompt_tokens_details"] = {"cached_tokens": cached}
        if isinstance(usage, dict) and plan.reasoning_tokens > 0:
            reasoning = min(plan.reasoning_tokens, usage["completion_tokens"])
            usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
        return out

    def _models_payload(self) -> dict[str, Any]:
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "gauge-loopback"} for m in self.models]
        return {"object": "list", "data": data}

    def _admin(self, req: _Request) -> _Response:
        route = req.path[len(ADMIN_PREFIX) :]
        try:
            if req.method == "GET" and route == "/stats":
                full = parse_qs(req.query).get("full", ["0"])[0] not in ("0", "", "false")
                return _Response(200, self.stats(full=full))
            if req.method == "POST" and route == "/reset":
                self.reset_counters()
                return _Response(200, {"ok": True})
            if req.method == "POST" and route == "/faults":
                self.faults = FaultPlan.from_dict(json.loads(req.body or b"{}"))
                return _Response(200, {"ok": True, "faults": self.faults.to_dict()})
            if req.method == "POST" and route == "/latency":
                self.latency = float(json.loads(req.body or b"{}")["latency"])
                return _Response(200, {"ok": True, "latency": self.latency})
        except (ValueError, TypeError, KeyError) as exc:
            return _Response(400, _error_body(f"bad admin request: {exc}", "invalid_request_error"))
        return _Response(404, _error_body(f"Invalid URL ({req.method} {req.path})", "invalid_request_error"))


# ---------------------------------------------------------------------------------------- subprocess mode


def _admin_call(root_url: str, route: str, payload: Any = None, timeout: float = 10.0) -> dict[str, Any]:
    data = None if payload is None else json.dumps(payload).encode("utf-8")
    req = urllib.request.Request(
        root_url + ADMIN_PREFIX + route,
        data=data,
        method="GET" if data is None else "POST",
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=timeout) as resp:  # loopback only
        result: dict[str, Any] = json.loads(resp.read())
        return result


class ServerProcess(_Served):
    """The loopback server in a child process (``python -m pytest_gauge.testing.server``), for multi-process.

    ``args`` are extra CLI arguments (e.g. ``["--latency", "0.05", "--rate-429", "0.1"]``).
    """

    def __init__(self, args: Sequence[str] = (), *, startup_timeout: float = 20.0) -> None:
        self.args = list(args)
        self.startup_timeout = startup_timeout
        self.proc: subprocess.Popen[str] | None = None
        self.port = 0
        self.path_prefix = "/v1"
        if "--prefix" in self.args:
            raw = self.args[self.args.index("--prefix") + 1].strip("/")
            self.path_prefix = "/" + raw if raw else ""

    def start(self) -> ServerProcess:
        """Launch the child, wait for its ``PORT <n>`` line; returns self."""
        root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ)
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        cmd = [sys.executable, "-m", "pytest_gauge.testing.server", "--port", "0", *self.args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
        stdout = self.proc.stdout
        assert stdout is not None
        result: list[str] = []
        reader = threading.Thread(target=lambda: result.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(self.startup_timeout)
        line = result[0] if result else ""
        if not line.startswith("PORT "):
            self.stop()
            raise RuntimeError(f"loopback server process did not start (got {line!r})")
        self.port = int(line.split()[1])
        return self

    def stop(self) -> None:
        """Terminate the child (SIGTERM, then SIGKILL after 5 s) and reap it."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()

    def __enter__(self) -> ServerProcess:
        return self if self.proc is not None else self.start()

    def stats(self, full: bool = False) -> dict[str, Any]:
        """The child's counters via ``GET /__gauge__/stats``."""
        return _admin_call(self.root_url, "/stats" + ("?full=1" if full else ""))

    def set_faults(self, plan: FaultPlan) -> None:
        """Replace the child's fault plan."""
        _admin_call(self.root_url, "/faults", plan.to_dict())

    def set_latency(self, latency: float) -> None:
        """Replace the child's latency."""
        _admin_call(self.root_url, "/latency", {"latency": latency})

    def reset_counters(self) -> None:
        """Zero the child's counters and restart its fault schedule."""
        _admin_call(self.root_url, "/reset", {})


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m pytest_gauge.testing.server",
        description="OpenAI-compatible loopback server with fault injection.",
    )
    p.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0 = any free port)")
    p.add_argument("--latency", type=float, default=0.0, help="seconds before every answer")
    p.add_argument("--prefix", default="/v1", help="path prefix of the model routes")
    p.add_argument("--models", default=",".join(DEFAULT_MODELS), help="comma-separated ids for GET /models")
    p.add_argument("--status-401", action="store_true")
    p.add_argument("--expected-key", default=None)
    p.add_argument("--rate-429", type=float, default=0.0)
    p.add_argument("--retry-after", default="1", help="Retry-After value on 429; 'none' to omit")
    p.add_argument("--retry-after-ms", type=int, default=None)
    p.add_argument("--rate-503", type=float, default=0.0)
    p.add_argument("--rate-500", type=float, default=0.0)
    p.add_argument("--burst-5xx", type=int, default=0)
    p.add_argument("--slow-every", type=int, default=0)
    p.add_argument("--slow-seconds", type=float, default=0.0)
    p.add_argument("--reset-every", type=int, default=0)
    p.add_argument("--no-usage", action="store_true")
    p.add_argument("--truncate", action="store_true")
    p.add_argument("--should-retry-false", action="store_true")
    p.add_argument("--status-400-model", action="append", default=[], help="repeatable")
    p.add_argument("--unknown-model", action="append", default=[], help="404 model_not_found; repeatable")
    p.add_argument("--rate-malformed", type=float, default=0.0, help="share of 200s with a malformed body")
    p.add_argument("--malformed", default="mixed", help="kind of malformed body (mixed: each in turn)")
    p.add_argument("--rate-reset", type=float, default=0.0, help="share of connections reset")
    p.add_argument("--drip-seconds", type=float, default=0.0, help="send 200 bodies one byte per N s")
    p.add_argument("--hold-after", type=int, default=0, help="hold chat requests after the first N")
    p.add_argument(
        "--judge-prefers", choices=("A", "B"), default=None, help="answer every judge request for this slot"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the probabilistic faults")
    p.add_argument(
        "--suite",
        default=None,
        metavar="PATH",
        help="answer like the simulator for the Suite in this test module (sim_responder)",
    )
    p.add_argument(
        "--suite-seed", type=int, default=0, help="the simulator's seed for --suite (the run's --gauge-seed)"
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry: serve until SIGTERM/SIGINT, after printing ``PORT <n>`` on stdout."""
    a = _parser().parse_args(argv)
    plan = FaultPlan(
        status_401=a.status_401,
        expected_key=a.expected_key,
        rate_429=a.rate_429,
        retry_after=None if a.retry_after.lower() == "none" else a.retry_after,
        retry_after_ms=a.retry_after_ms,
        rate_503=a.rate_503,
        rate_500=a.rate_500,
        burst_5xx=a.burst_5xx,
        slow_every=a.slow_every,
        slow_seconds=a.slow_seconds,
        reset_every=a.reset_every,
        no_usage=a.no_usage,
        truncate=a.truncate,
        should_retry_false=a.should_retry_false,
        status_400_models=frozenset(a.status_400_model),
        unknown_models=frozenset(a.unknown_model),
        rate_malformed=a.rate_malformed,
        malformed=a.malformed,
        rate_reset=a.rate_reset,
        drip_seconds=a.drip_seconds,
        hold_after=a.hold_after,
        judge_prefers=a.judge_prefers,
        seed=a.seed,
    )
    models = [m for m in a.models.split(",") if m]
    responder: Responder | None = None
    if a.suite is not None:
        from .simserver import sim_responder

        responder = sim_responder(Path(a.suite).resolve(), a.suite_seed)
    server = LoopbackServer(
        responder, latency=a.latency, faults=plan, path_prefix=a.prefix, port=a.port, models=models
    )
    done = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    server.start()
    print(f"PORT {server.port}", flush=True)
    try:
        while not done.wait(0.5):
            pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
