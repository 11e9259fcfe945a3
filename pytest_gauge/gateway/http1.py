"""Reading one HTTP/1.1 request from an asyncio stream and a response's bytes, for the model client's
in-process ``Serve`` (:mod:`.http_client`) alone: the recording proxy is served by aiohttp. This module
goes with that in-process path, which the model client is leaving (the simulator is called directly)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from http import HTTPStatus
from urllib.parse import urlsplit

__all__ = ["MAX_REQUEST_BYTES", "HttpRequest", "MalformedRequest", "read_request", "response_bytes"]

MAX_HEAD_BYTES = 64 << 10
MAX_REQUEST_BYTES = 32 << 20
"""The largest request body accepted: an agent program's whole context, tool outputs included."""


@dataclass(frozen=True)
class HttpRequest:
    """One request as read: method, path (no query), lower-case headers, body, keep-alive or not."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    keep_alive: bool


class MalformedRequest(Exception):
    """Not well-formed HTTP/1.1, or past the bounds: answered 400, then the connection is closed."""


async def read_request(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter | None = None
) -> HttpRequest | None:
    """Read one request; None on a clean end of the connection between requests. A client asking
    ``Expect: 100-continue`` (curl, for bodies over 1 KiB) is told to go on (through ``writer``) before
    its body is read, instead of waiting its own timeout."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial.strip():
            return None
        raise MalformedRequest("truncated request head") from None
    except asyncio.LimitOverrunError:
        raise MalformedRequest("request head too large") from None
    lines = head[:-4].decode("latin-1").lstrip("\r\n").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3:
        raise MalformedRequest("malformed request line")
    method, target, version = parts
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            raise MalformedRequest("malformed header line")
        headers[name.strip().lower()] = value.strip()
    if writer is not None and headers.get("expect", "").lower() == "100-continue":
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        await writer.drain()
    body = await _read_body(reader, headers)
    conn = headers.get("connection", "").lower()
    keep_alive = conn != "close" if version == "HTTP/1.1" else conn == "keep-alive"
    return HttpRequest(method.upper(), urlsplit(target).path, headers, body, keep_alive)


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    """The body: chunked, or ``content-length`` bytes (none without one), at most MAX_REQUEST_BYTES."""
    try:
        if "chunked" in headers.get("transfer-encoding", "").lower():
            return await _read_chunked(reader)
        length = int(headers.get("content-length", "0"))
        if not 0 <= length <= MAX_REQUEST_BYTES:
            raise MalformedRequest(f"content-length {length} is outside 0..{MAX_REQUEST_BYTES}")
        return await reader.readexactly(length) if length else b""
    except ValueError:
        raise MalformedRequest("bad content-length or chunk size") from None
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        raise MalformedRequest("truncated request body") from None


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";", 1)[0].strip(), 16)
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
                pass
            return b"".join(chunks)
        total += size
        if total > MAX_REQUEST_BYTES:
            raise MalformedRequest(f"the body is more than {MAX_REQUEST_BYTES} bytes")
        chunks.append(await reader.readexactly(size))
        await reader.readexactly(2)


def response_bytes(status: int, body: bytes, headers: dict[str, str], keep_alive: bool) -> bytes:
    """A whole response (status line, headers with content-length, body)."""
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:
        reason = "Unknown"
    lines = [
        f"HTTP/1.1 {status} {reason}",
        *(f"{k}: {v}" for k, v in headers.items()),
        f"content-length: {len(body)}",
        f"connection: {'keep-alive' if keep_alive else 'close'}",
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
