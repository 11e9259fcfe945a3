"""A hostile model server on 127.0.0.1, for testing HTTP clients: it reads each request and writes back,
over a raw socket, one of the deliberately broken answers of :data:`HOSTILE` (bad chunk sizes,
conflicting or non-digit lengths, a gzip bomb, stalls, resets, 1xx first, garbage, an HTTP/2 or TLS
answer on a plain port, ...), byte for byte. Each case says what a correct client ends with: the
answer's body (``expect="answer"``: the bytes are odd but legal), a clear, bounded error
(``expect="error"``: an exception, or at least no 200 with the completion), or either of those
(``expect="either"``), never a 200 with a wrong body.

``with HostileServer("chunk_size_negative") as srv: client.post(srv.base_url + "/chat/completions")``;
``srv.case`` may be changed between requests. The well-behaved server with status-level faults (429,
5xx, malformed JSON bodies, drips, resets) is :class:`~.server.LoopbackServer`; this one writes what no
HTTP library would, so it writes by hand on purpose.
"""

from __future__ import annotations

import asyncio
import functools
import gzip
import json
import socket
import struct
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Literal

__all__ = ["HOSTILE", "OK_BODY", "Hostile", "HostileServer", "gzip_bomb"]

HOST = "127.0.0.1"
OK_BODY = json.dumps(
    {
        "id": "chatcmpl-hostile",
        "object": "chat.completion",
        "created": 0,
        "model": "hostile-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    },
    separators=(",", ":"),
).encode()
"""The chat completion every case carries (whole, cut, or wrapped): what a correct client returns."""
_BROTLI_OK = bytes.fromhex(
    "1bf700608cc374a33d7f84726c3619029bbbfedd09d5f74648d85194286697a9c3d267b61be2007cdb4da693d55fe761"
    "20859650961b8c9d8985b9fd0ef789741d3de5fa861bd92507136e0f22409c509b1313b08c0064f678b20d9445dd0233"
    "865606fa03e1c4511eebe846acf31b5f2fd5fbe4f7b2d65672ed711a2e1f4b981eb054cd915a1f"
)  # brotli.compress(OK_BODY), kept as bytes so the server needs no brotli package
BOMB_BYTES = 64 << 20
"""What the gzip bomb inflates to: far past any client's body bound (64 MiB of zeros, 64 KiB sent)."""


@dataclass(frozen=True)
class Hostile:
    """One hostile answer: the ``parts`` written in order (bytes, or a float: a pause of that many
    seconds), then how the connection ends (``close``; ``reset``: an RST; ``hold``: open and silent
    until the server stops), and what a correct client ends with."""

    parts: tuple[bytes | float, ...]
    expect: Literal["answer", "error", "either"]
    end: Literal["close", "reset", "hold", "keep"] = "close"
    why: str = ""


def _head(status: str, *headers: str) -> bytes:
    return ("\r\n".join([f"HTTP/1.1 {status}", *headers]) + "\r\n\r\n").encode()


def _ok(*headers: str, body: bytes = OK_BODY, status: str = "200 OK") -> bytes:
    """A well-formed answer, its length added unless the headers frame it already."""
    framed = any(h.lower().startswith(("content-length", "transfer-encoding")) for h in headers)
    length = () if framed else (f"Content-Length: {len(body)}",)
    return _head(status, "Content-Type: application/json", *headers, *length) + body


def _chunk(data: bytes, size: bytes | None = None) -> bytes:
    return (size if size is not None else b"%x" % len(data)) + b"\r\n" + data + b"\r\n"


@functools.cache
def gzip_bomb() -> bytes:
    """:data:`BOMB_BYTES` of zeros, gzipped (made once, on first use: under a second)."""
    return gzip.compress(bytes(BOMB_BYTES))


_CHUNKED = "Transfer-Encoding: chunked"
_HALF = len(OK_BODY) // 2

HOSTILE: dict[str, Hostile] = {
    # ----- framing that is odd but legal: a correct client returns OK_BODY
    "ok": Hostile((_ok(),), "answer", "keep", "a well-formed answer on a kept connection (the control)"),
    "pieces": Hostile(
        (_ok()[:7], 0.02, _ok()[7:40], 0.02, _ok()[40:]), "answer", why="the answer in pieces, apart"
    ),
    "chunked": Hostile(
        (_ok(_CHUNKED, body=_chunk(OK_BODY[:_HALF]) + _chunk(OK_BODY[_HALF:]) + b"0\r\n\r\n"),),
        "answer",
        "keep",
        "a chunked body in two chunks",
    ),
    "chunk_extensions_and_trailer": Hostile(
        (_ok(_CHUNKED, body=b"%x;ext=1\r\n%s\r\n0\r\nx-trailer: 1\r\n\r\n" % (len(OK_BODY), OK_BODY)),),
        "answer",
        why="a chunk extension and a trailer",
    ),
    "until_close": Hostile(
        (_head("200 OK", "Content-Type: application/json", "Connection: close") + OK_BODY,),
        "answer",
        why="no length: the body ends with the connection",
    ),
    "gzip": Hostile((_ok("Content-Encoding: gzip", body=gzip.compress(OK_BODY)),), "answer", why="gzip body"),
    "brotli": Hostile((_ok("Content-Encoding: br", body=_BROTLI_OK),), "answer", why="brotli body (br)"),
    "interim_100": Hostile(
        (_head("100 Continue"), _ok()), "answer", why="an unasked 100 Continue before the answer"
    ),
    "interim_103": Hostile(
        (_head("103 Early Hints", "Link: </x>; rel=preload"), _ok()), "answer", why="103 Early Hints first"
    ),
    # ----- broken framing: a correct client raises a clear error, never a 200 with a wrong body
    "chunk_size_negative": Hostile(
        (_ok(_CHUNKED, body=_chunk(OK_BODY, b"-2") + b"0\r\n\r\n"),), "error", why="chunk size -2"
    ),
    "chunk_size_not_hex": Hostile(
        (_ok(_CHUNKED, body=_chunk(OK_BODY, b"zz") + b"0\r\n\r\n"),), "error", why="chunk size zz"
    ),
    "chunk_size_underscore": Hostile(
        (_ok(_CHUNKED, body=_chunk(OK_BODY, b"1_0") + b"0\r\n\r\n"),), "error", why="chunk size 1_0"
    ),
    "chunk_size_huge": Hostile(
        (_ok(_CHUNKED, body=_chunk(OK_BODY, b"ffffffffffffffffffff")),), "error", why="a 2**80-byte chunk"
    ),
    "chunked_truncated": Hostile(
        (_ok(_CHUNKED, body=_chunk(OK_BODY)),), "error", why="chunked, closed before the last chunk"
    ),
    "length_conflicting": Hostile(
        (_ok(f"Content-Length: {len(OK_BODY)}", f"Content-Length: {len(OK_BODY) + 5}"),),
        "error",
        why="two different Content-Length headers",
    ),
    "length_and_chunked": Hostile(
        (_ok(f"Content-Length: {len(OK_BODY)}", _CHUNKED, body=_chunk(OK_BODY) + b"0\r\n\r\n"),),
        "error",
        why="Content-Length and Transfer-Encoding: chunked together (request smuggling's shape)",
    ),
    "length_underscore": Hostile(
        (_ok(f"Content-Length: {len(OK_BODY) // 10}_{len(OK_BODY) % 10}"),), "error", why="length 24_8"
    ),
    "length_plus": Hostile((_ok(f"Content-Length: +{len(OK_BODY)}"),), "error", why="length +248"),
    "length_negative": Hostile((_ok("Content-Length: -1"),), "error", why="length -1"),
    "length_hex": Hostile((_ok(f"Content-Length: 0x{len(OK_BODY):x}"),), "error", why="length 0xf8"),
    "length_unicode_digits": Hostile(
        (_ok("Content-Length: " + str(len(OK_BODY)).translate(str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩"))),),
        "error",
        why="length in Arabic-Indic digits (int() would take them)",
    ),
    "length_short": Hostile(
        (_ok(f"Content-Length: {len(OK_BODY) + 100}"),), "error", why="closed 100 bytes before the length"
    ),
    "length_huge": Hostile(
        (_head("200 OK", "Content-Type: application/json", f"Content-Length: {1 << 40}"), bytes(4 << 20)),
        "error",
        "hold",
        "a 1 TiB length, 4 MiB sent, then silence: the client's body bound, or its read timeout",
    ),
    "gzip_bomb": Hostile((), "error", why=f"gzip inflating to {BOMB_BYTES >> 20} MiB"),  # parts: see _parts
    "gzip_corrupt": Hostile(
        (_ok("Content-Encoding: gzip", body=gzip.compress(OK_BODY)[:-12] + b"garbage!"),),
        "error",
        why="a gzip body cut and spoiled",
    ),
    "encoding_unknown": Hostile(
        (_ok("Content-Encoding: x-gauge-squash", body=OK_BODY[::-1]),),
        "error",
        why="a body in a Content-Encoding nobody knows",
    ),
    "status_2000": Hostile((_ok(status="2000 OK"),), "error", why="a four-digit status"),
    "status_not_digits": Hostile((_ok(status="2x0 OK"),), "error", why="a status that is not digits"),
    "version_bad": Hostile((b"HTTP/9.9 200 OK\r\nContent-Length: 2\r\n\r\n{}",), "error", why="HTTP/9.9"),
    "header_no_colon": Hostile(
        (_head("200 OK", "Content-Type application/json", f"Content-Length: {len(OK_BODY)}") + OK_BODY,),
        "error",
        why="a header line without a colon",
    ),
    "header_huge": Hostile(
        (_head("200 OK", "X-Big: " + "a" * (1 << 20), f"Content-Length: {len(OK_BODY)}") + OK_BODY,),
        "error",
        why="a 1 MiB header line",
    ),
    "headers_many": Hostile(
        (_ok(*(f"X-H{i}: {i}" for i in range(10_000))),), "error", why="10,000 header lines"
    ),
    "switching_protocols": Hostile(
        (_head("101 Switching Protocols", "Upgrade: h2c", "Connection: Upgrade"), b"\x00" * 64),
        "error",
        why="an unasked 101 and binary after it",
    ),
    # ----- not HTTP/1.1 at all
    "garbage": Hostile(
        (b"\x8f\x00\xffthis is not HTTP at all\r\n\r\n\x00\x01",), "error", why="bytes, not HTTP"
    ),
    "html_no_head": Hostile((b"<html><body>Please log in</body></html>",), "error", why="a page, no status"),
    "http2": Hostile(
        (struct.pack(">I", 6)[1:] + b"\x04\x00\x00\x00\x00\x00" + b"\x00\x03\x00\x00\x00\x64",),
        "error",
        "hold",
        "an HTTP/2 server's SETTINGS frame on a plain port (an h2-only server)",
    ),
    "tls": Hostile(
        (b"\x15\x03\x03\x00\x02\x02\x46",), "error", why="a TLS alert record (a TLS-only port spoken plain)"
    ),
    # ----- the connection misbehaves
    "close_before_answer": Hostile((), "error", why="the connection closed without a word"),
    "reset_before_answer": Hostile((), "error", "reset", "an RST instead of an answer"),
    "reset_mid_body": Hostile((_ok()[:-_HALF],), "error", "reset", "an RST halfway through the body"),
    "stall_before_answer": Hostile((), "error", "hold", "the request read, then silence"),
    "stall_mid_head": Hostile((_ok()[:20],), "error", "hold", "half a status line, then silence"),
    "stall_mid_body": Hostile((_ok()[:-_HALF],), "error", "hold", "half the body, then silence"),
    "trailing_garbage": Hostile(
        (_ok() + b"\x00garbage after the answer\r\n",),
        "either",
        "keep",
        "a correct answer, then garbage on the kept connection (the next request must not read it)",
    ),
}
"""Every hostile case by name."""


async def _parts(hostile: Hostile) -> Sequence[bytes | float]:
    if hostile is HOSTILE["gzip_bomb"]:
        return (_ok("Content-Encoding: gzip", body=await asyncio.to_thread(gzip_bomb)),)
    return hostile.parts


class HostileServer:
    """A raw-socket server on 127.0.0.1 answering every request with the hostile case ``case`` (a name
    of :data:`HOSTILE` or a :class:`Hostile`), from its own event loop in a background thread."""

    def __init__(self, case: str | Hostile = "ok", *, path_prefix: str = "/v1") -> None:
        self.case = case
        self.path_prefix = path_prefix
        self.port = 0
        self.connections = 0
        self.requests: list[bytes] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stop: asyncio.Event | None = None

    @property
    def hostile(self) -> Hostile:
        return HOSTILE[self.case] if isinstance(self.case, str) else self.case

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}{self.path_prefix}"

    def start(self) -> HostileServer:
        """Bind a free port and serve from a background thread; returns self."""
        ready = threading.Event()
        loop = self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=lambda: loop.run_until_complete(self._serve(ready)), daemon=True
        )
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("HostileServer did not start")
        return self

    def stop(self) -> None:
        """Close the listener and every connection (held ones included), then join the thread."""
        loop, thread, stop = self._loop, self._thread, self._stop
        if loop is None or thread is None or stop is None:
            return
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)
        loop.close()
        self._loop = self._thread = None

    def __enter__(self) -> HostileServer:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    async def _serve(self, ready: threading.Event) -> None:
        self._stop = asyncio.Event()
        server = await asyncio.start_server(self._connection, HOST, 0)
        self.port = int(server.sockets[0].getsockname()[1])
        ready.set()
        await self._stop.wait()
        server.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Each request of the connection read (head, then its Content-Length of body), answered with
        the case; the connection then ended as the case says."""
        self.connections += 1
        try:
            while request := await _read_request(reader):
                self.requests.append(request)
                hostile = self.hostile
                for part in await _parts(hostile):
                    if isinstance(part, float):
                        await asyncio.sleep(part)
                    else:
                        writer.write(part)
                        await writer.drain()
                if hostile.end == "reset":
                    sock = writer.get_extra_info("socket")
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    writer.transport.abort()
                    return
                if hostile.end == "hold":
                    await asyncio.Event().wait()  # until the server stops
                if hostile.end != "keep":
                    break
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        except asyncio.CancelledError:  # the server stops: its held connections end here
            pass
        finally:
            writer.close()


async def _read_request(reader: asyncio.StreamReader) -> bytes:
    """One request's bytes (the clients under test send well-formed ones); b"" at the connection's end."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return b""
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    return head + await reader.readexactly(length)
