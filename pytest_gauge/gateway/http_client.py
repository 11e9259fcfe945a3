"""The model calls' own HTTP/1.1 client for plain ``http://`` gateways (a LiteLLM proxy, vLLM or Ollama on
loopback or a private network, the loopback test server): keep-alive connections on asyncio protocols, at
most ``max_connections``, one request at a time on each, the answer parsed from the bytes as they arrive
(Content-Length, chunked or to the end of the connection; gzip and deflate decoded), bounded.

Why not httpx2 here: on loopback a call's HTTP work is most of its CPU, and httpx2's layers (httpcore2,
h11, anyio, a probe of every idle connection per request) cost about ten times this client's per call
(``benchmarks/bench_throughput.py`` prints the CPU per call). ``https://`` and proxied gateways stay on
httpx2 (:mod:`.transport` decides), where TLS, certificates and proxy settings are its business.

Failures are the transport's typed ones: no connection or a connection lost before the whole answer is
:class:`~.transport.APIConnectionError` (the OS error as ``__cause__``); a body past the bound is
:class:`~.response.BadResponse`. Nothing is retried here: a retry is the gateway's, and in its ledger.
"""

from __future__ import annotations

import asyncio
import collections
import select
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .http1 import MalformedRequest, read_request, response_bytes
from .response import MAX_BODY_BYTES, BadResponse

__all__ = ["HttpAnswer", "PlainHttpPool", "ProtocolFault", "Serve"]

MAX_HEAD_BYTES = 64 << 10
"""The largest status line and headers accepted."""

STALE_AFTER = 1.0
"""Seconds idle after which a kept connection's socket is checked before it is reused: a server that
closed it meanwhile (uvicorn's keep-alive timeout is 5 s) would otherwise fail the next request."""


class ProtocolFault(ConnectionError):
    """The server's bytes are not an HTTP/1.1 answer, or the connection ended before the whole of it."""


@dataclass(frozen=True)
class HttpAnswer:
    """One answer: status, headers (names lower-case, repeated ones joined by ``, ``), the body (decoded
    from gzip/deflate; cut at the bound when asked to truncate)."""

    status: int
    headers: Mapping[str, str]
    body: bytes

    @property
    def charset(self) -> str:
        """The content type's charset, else UTF-8 (how the body's text is read)."""
        for part in self.headers.get("content-type", "").split(";")[1:]:
            name, _, value = part.partition("=")
            if name.strip().lower() == "charset" and value.strip():
                return value.strip().strip('"')
        return "utf-8"


class _Reading:
    """The parse of one answer from the bytes fed to it: head, then the body by its framing. ``done``
    once whole; ``feed`` raises :class:`ProtocolFault` or :class:`BadResponse`."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.truncate = False  # a 2xx body past the limit is refused; an error body is cut there
        self.buffer = bytearray()
        self.status = 0
        self.headers: dict[str, str] = {}
        self.keep_alive = True
        self.framing = ""  # "length" | "chunked" | "close", once the head is read
        self.remaining = 0  # body bytes (length) or bytes of the current chunk still to come
        self.chunks: list[bytes] = []
        self.size = 0
        self.done = False
        self.received = False  # any byte at all (a reused connection the server had closed sends none)

    def feed(self, data: bytes) -> None:
        self.received = True
        self.buffer += data
        if not self.framing and not self._head():
            return
        if self.framing == "length":
            self._take_length()
        elif self.framing == "chunked":
            self._take_chunks()
        else:
            self._keep(bytes(self.buffer))
            self.buffer.clear()

    def eof(self) -> None:
        """The server closed the connection: the end of a to-the-end body, else a fault."""
        if self.framing == "close" and not self.done:
            self.keep_alive = False
            self.done = True
            return
        if not self.done:
            raise ProtocolFault("the server closed the connection before the whole answer")

    def _head(self) -> bool:
        """Read the status line and headers once they are all here (informational 1xx answers skipped)."""
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buffer) > MAX_HEAD_BYTES:
                    raise ProtocolFault("the answer's headers are too large")
                return False
            lines = bytes(self.buffer[:end]).decode("latin-1").split("\r\n")
            del self.buffer[: end + 4]
            version, status = _status_line(lines[0])
            if 100 <= status < 200:
                continue
            self.status, self.headers = status, _header_fields(lines[1:])
            self.truncate = not 200 <= status < 300
            connection = self.headers.get("connection", "").lower()
            self.keep_alive = "close" not in connection and (
                version == "HTTP/1.1" or "keep-alive" in connection
            )
            self._framing()
            return True

    def _framing(self) -> None:
        if "chunked" in self.headers.get("transfer-encoding", "").lower():
            self.framing = "chunked"
            return
        length = self.headers.get("content-length")
        if length is None and self.status in (204, 304):
            length = "0"
        if length is None:
            self.framing, self.keep_alive = "close", False
            return
        if not length.strip().isdigit():
            raise ProtocolFault(f"the answer's content-length is {length!r}")
        self.framing, self.remaining = "length", int(length)
        if not self.truncate and self.remaining > self.limit:
            raise BadResponse(f"the body is {self.remaining} bytes, more than the {self.limit} accepted", "")
        if self.remaining == 0:
            self.done = True

    def _take_data(self) -> bool:
        """Keep up to ``remaining`` of the buffered bytes as body; whether that run of data is whole."""
        piece = bytes(self.buffer[: self.remaining])
        del self.buffer[: self.remaining]
        self.remaining -= len(piece)
        self._keep(piece)
        return self.remaining == 0

    def _take_length(self) -> None:
        if self.buffer and self._take_data():
            self.done = True

    def _take_chunks(self) -> None:
        while not self.done:
            if self.remaining > 0:
                if not self.buffer:
                    return
                if self._take_data():
                    self.remaining = -1  # the CRLF after the chunk's data
                continue
            line_end = self.buffer.find(b"\r\n")
            if line_end < 0:
                if len(self.buffer) > MAX_HEAD_BYTES:
                    raise ProtocolFault("a chunk's size line is too long")
                return
            line = bytes(self.buffer[:line_end])
            del self.buffer[: line_end + 2]
            if self.remaining == -1:  # the empty line closing a chunk's data
                if line:
                    raise ProtocolFault("a chunk's data is longer than its size")
                self.remaining = 0
            elif self.remaining == -2:  # trailers, up to an empty line
                self.done = not line
            else:
                size = _chunk_size(line)
                self.remaining = size if size else -2

    def _keep(self, piece: bytes) -> None:
        if self.done or not piece:
            return
        self.size += len(piece)
        if self.size > self.limit:
            if not self.truncate:
                raise BadResponse(f"the body is more than the {self.limit} bytes accepted", "")
            piece = piece[: len(piece) - (self.size - self.limit)]
            self.size = self.limit
            self.done, self.keep_alive = True, False
        self.chunks.append(piece)

    def answer(self) -> HttpAnswer:
        body = b"".join(self.chunks)
        coding = self.headers.get("content-encoding", "").strip().lower()
        if coding in ("gzip", "x-gzip", "deflate"):
            body = _decompressed(body, self.limit, self.truncate)
        elif coding not in ("", "identity"):
            raise ProtocolFault(f"the answer's content-encoding {coding!r} is not supported")
        return HttpAnswer(self.status, self.headers, body)


def _status_line(line: str) -> tuple[str, int]:
    version, _, rest = line.partition(" ")
    code = rest[:3]
    if not version.startswith("HTTP/1.") or not code.isdigit():
        raise ProtocolFault(f"not an HTTP/1.1 answer: {line[:80]!r}")
    return version, int(code)


def _header_fields(lines: list[str]) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in lines:
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise ProtocolFault(f"a malformed header line: {line[:80]!r}")
        key = name.lower()
        fields[key] = f"{fields[key]}, {value.strip()}" if key in fields else value.strip()
    return fields


def _chunk_size(line: bytes) -> int:
    text = line.split(b";", 1)[0].strip()
    try:
        return int(text, 16)
    except ValueError:
        raise ProtocolFault(f"a bad chunk size {text[:20]!r}") from None


def _decompressed(body: bytes, limit: int, truncate: bool) -> bytes:
    """A gzip or zlib/raw deflate body decoded, never past ``limit`` bytes (a small body can expand)."""
    for wbits in (47, -15):  # gzip or zlib (auto-detected), else raw deflate
        inflater = zlib.decompressobj(wbits)
        try:
            out = inflater.decompress(body, limit + 1)
        except zlib.error:
            continue
        if len(out) > limit:
            if truncate:
                return out[:limit]
            raise BadResponse(f"the decoded body is more than the {limit} bytes accepted", "")
        return out
    raise ProtocolFault("the answer's compressed body does not decode")


class _Connection(asyncio.Protocol):
    """One keep-alive connection: a request written whole, its answer read by a :class:`_Reading`."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.reading: _Reading | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.closed = False
        self.idle_since = time.monotonic()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        reading = self.reading
        if reading is None:  # bytes nobody asked for: the connection cannot be trusted again
            self.close()
            return
        try:
            reading.feed(data)
        except (ProtocolFault, BadResponse) as exc:
            self._wake(exc)
            return
        if reading.done:
            self._wake(None)

    def eof_received(self) -> bool:
        self._ended(None)
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self._ended(exc)

    def _ended(self, exc: Exception | None) -> None:
        self.closed = True
        reading = self.reading
        if reading is None or reading.done:
            return
        try:
            reading.eof()
        except ProtocolFault as fault:
            if exc is not None:
                fault.__cause__ = exc
            self._wake(fault)
            return
        self._wake(None)

    def _wake(self, exc: BaseException | None) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            if exc is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(exc)

    async def exchange(self, data: bytes, limit: int) -> _Reading:
        """Send ``data`` (a whole request) and wait for the whole answer."""
        assert self.transport is not None
        if self.closed:  # the server closed it between its hand-over and now: no answer could come
            raise ProtocolFault("the server closed the connection before the request was sent")
        reading = self.reading = _Reading(limit)
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(data)
        try:
            await self.waiter
        finally:
            self.waiter = None
        return reading

    def rest(self) -> None:
        """Back in the pool: no answer expected until the next request."""
        self.reading = None
        self.idle_since = time.monotonic()

    def reusable(self) -> bool:
        """Whether the connection can take another request (whole answer read, kept alive, open)."""
        reading = self.reading
        return (
            not self.closed
            and reading is not None
            and reading.done
            and reading.keep_alive
            and not reading.buffer
        )

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            try:
                self.transport.abort()
            except RuntimeError:  # its loop is closed: the socket goes with the transport
                pass

    def stale(self, now: float) -> bool:
        """Closed, or idle a while and its socket readable (the server's close is waiting to be read)."""
        if self.closed:
            return True
        if now - self.idle_since < STALE_AFTER or self.transport is None:
            return False
        sock = self.transport.get_extra_info("socket")
        if sock is None:
            return False
        readable, _, _ = select.select([sock], [], [], 0)
        return bool(readable)


Serve = Callable[[str, str, bytes], tuple[int, str, bytes]]
"""An in-process server (the simulator's): (method, path, body) → (status, content type, body)."""


class _InProcessConnection:
    """A connection to an in-process server: the request's bytes read as a server reads them, the
    server's answer written as HTTP/1.1 bytes and read by the same :class:`_Reading` as the network's."""

    closed = False

    def __init__(self, serve: Serve) -> None:
        self.serve = serve

    async def exchange(self, data: bytes, limit: int) -> _Reading:
        reader = asyncio.StreamReader()
        reader.feed_data(data)
        reader.feed_eof()
        try:
            request = await read_request(reader)  # the recording proxy's server-side reader
        except MalformedRequest as exc:
            raise ProtocolFault(f"the in-process server could not read the request: {exc}") from None
        if request is None:
            raise ProtocolFault("no request reached the in-process server")
        status, kind, content = self.serve(request.method, request.path, request.body)
        reading = _Reading(limit)
        reading.feed(response_bytes(status, content, {"content-type": kind}, keep_alive=True))
        if not reading.done:
            raise ProtocolFault("the in-process server's answer is not whole")
        return reading

    def reusable(self) -> bool:
        return True

    def rest(self) -> None:
        """Nothing to reset: each exchange reads its own answer."""

    def stale(self, now: float) -> bool:
        return False

    def close(self) -> None:
        """Nothing to close."""


Connection = _Connection | _InProcessConnection


class PlainHttpPool:
    """Keep-alive connections to one ``http://`` origin, at most ``max_connections`` (None: no cap) at
    once; a request past the cap waits for the first connection handed back (first come, first served).
    ``serve``: an in-process server instead of the network (the simulator)."""

    def __init__(
        self, host: str, port: int, max_connections: int | None = None, *, serve: Serve | None = None
    ) -> None:
        self.host, self.port = host, port
        self.serve = serve
        self.authority = host if port == 80 else f"{host}:{port}"
        if ":" in host and not host.startswith("["):  # an IPv6 literal
            self.authority = f"[{host}]" if port == 80 else f"[{host}]:{port}"
        self.max_connections = max_connections
        self._idle: list[Connection] = []
        self._open = 0
        self._waiters: collections.deque[asyncio.Future[Connection | None]] = collections.deque()
        self._loop: asyncio.AbstractEventLoop | None = None

    async def post(
        self,
        target: str,
        headers: Mapping[str, str],
        content: bytes,
        limit: int = MAX_BODY_BYTES,
    ) -> HttpAnswer:
        """POST ``content`` to ``target`` (path and query) with ``headers`` (besides Host and
        Content-Length); the answer, a 2xx body refused past ``limit`` (:class:`BadResponse`), any other
        cut there (only its start is quoted). Raises :class:`OSError` (:class:`ProtocolFault` among
        them) when no whole answer came."""
        lines = [f"POST {target} HTTP/1.1", f"Host: {self.authority}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        lines.append(f"Content-Length: {len(content)}")
        data = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + content
        connection = await self._acquire()
        try:
            reading = await connection.exchange(data, limit)
            answer = reading.answer()
        except BaseException:
            connection.close()
            self._release(None)
            raise
        self._release(connection if connection.reusable() else None)
        return answer

    async def _acquire(self) -> Connection:
        """A kept connection (the most recently used), else a new one; past the cap, the first one handed
        back, or the place of one closed."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # connections belong to the loop that made them: start afresh
            self._forget(loop)
        now = time.monotonic()
        while self._idle:
            connection = self._idle.pop()
            if not connection.stale(now):
                return connection
            connection.close()
            self._open -= 1
        if self.max_connections is not None and self._open >= self.max_connections:
            waiter: asyncio.Future[Connection | None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                handed = await waiter
            except BaseException:
                if waiter.done() and not waiter.cancelled():
                    self._release(waiter.result())  # handed over just as it was cancelled: pass it on
                elif waiter in self._waiters:
                    self._waiters.remove(waiter)
                raise
            if handed is not None:
                return handed
        else:
            self._open += 1  # a place taken; a waiter handed None already holds its place
        if self.serve is not None:
            return _InProcessConnection(self.serve)
        try:
            _, connection = await asyncio.get_running_loop().create_connection(
                _Connection, self.host, self.port
            )
        except BaseException:
            self._release(None)
            raise
        return connection

    def _release(self, connection: Connection | None) -> None:
        """Hand a connection (or, with None, the place of one closed) to the oldest waiter, else keep the
        connection for the next request (or free the place)."""
        if connection is not None:
            connection.rest()
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(connection)
                return
        if connection is None:
            self._open -= 1
        else:
            self._idle.append(connection)

    def close(self) -> None:
        """Close the kept connections (the end of a run; one still in use is closed when its request
        ends, or by its own close). A later request opens new ones."""
        self._forget(None)

    def _forget(self, loop: asyncio.AbstractEventLoop | None) -> None:
        """Drop what belonged to another event loop (a client used again under a new ``asyncio.run``)."""
        for connection in self._idle:
            connection.close()
        self._idle, self._open, self._loop = [], 0, loop
        self._waiters.clear()
