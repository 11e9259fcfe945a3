"""The loopback server's HTTP/1.1 on the wire: reading a request (keep-alive, Content-Length or chunked
bodies, bounded), encoding a response, and dripping a body byte by byte.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_HEADER_BYTES",
    "BadRequest",
    "Request",
    "Response",
    "drip",
    "encode_response",
    "read_request",
]

MAX_HEADER_BYTES = 1 << 20
MAX_BODY_BYTES = 64 << 20


@dataclass
class Request:
    """One HTTP/1.1 request as read: method, target (path and query), lower-case headers, body."""

    method: str
    target: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes
    keep_alive: bool


@dataclass
class Response:
    """What to answer: a status and JSON payload (or raw bytes), extra headers, or a connection reset."""

    status: int
    payload: Any
    headers: dict[str, str] = field(default_factory=dict)
    reset: bool = False
    raw: bytes | None = None  # sent as is instead of the JSON of ``payload`` (malformed bodies)


class BadRequest(Exception):
    """A request that is not well-formed HTTP/1.1 (answered 400, then the connection closes)."""


async def read_request(reader: asyncio.StreamReader) -> Request | None:
    """Read one HTTP/1.1 request; None on a clean EOF between requests."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial.strip():
            return None
        raise BadRequest("truncated request head") from exc
    except asyncio.LimitOverrunError as exc:
        raise BadRequest("request head too large") from exc
    lines = head[:-4].decode("latin-1").split("\r\n")
    while lines and not lines[0]:  # tolerate stray CRLF between requests
        lines.pop(0)
    parts = lines[0].split(" ") if lines else []
    if len(parts) != 3:
        raise BadRequest("malformed request line")
    method, target, version = parts
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            raise BadRequest("malformed header line")
        headers[name.strip().lower()] = value.strip()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = await read_chunked(reader)
    else:
        try:
            length = int(headers.get("content-length", "0"))
        except ValueError as exc:
            raise BadRequest("bad content-length") from exc
        if length < 0 or length > MAX_BODY_BYTES:
            raise BadRequest("bad content-length")
        body = await reader.readexactly(length) if length else b""
    conn = headers.get("connection", "").lower()
    keep_alive = conn != "close" if version == "HTTP/1.1" else conn == "keep-alive"
    split = urlsplit(target)
    return Request(method.upper(), target, split.path, split.query, headers, body, keep_alive)


async def read_chunked(reader: asyncio.StreamReader) -> bytes:
    """A chunked request body, bounded by :data:`MAX_BODY_BYTES`."""
    chunks: list[bytes] = []
    total = 0
    while True:
        size_line = await reader.readuntil(b"\r\n")
        try:
            size = int(size_line.split(b";", 1)[0].strip(), 16)
        except ValueError as exc:
            raise BadRequest("bad chunk size") from exc
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
                pass
            return b"".join(chunks)
        total += size
        if total > MAX_BODY_BYTES:
            raise BadRequest("body too large")
        chunks.append(await reader.readexactly(size))
        await reader.readexactly(2)


def encode_response(resp: Response, keep_alive: bool, request_id: str) -> bytes:
    """The response's bytes: status line, headers, JSON (or raw) body."""
    body = resp.raw if resp.raw is not None else json.dumps(resp.payload).encode("utf-8")
    try:
        reason = HTTPStatus(resp.status).phrase
    except ValueError:
        reason = "Unknown"
    lines = [
        f"HTTP/1.1 {resp.status} {reason}",
        f"content-type: {resp.headers.pop('content-type', 'application/json')}",
        f"content-length: {len(body)}",
        f"connection: {'keep-alive' if keep_alive else 'close'}",
        f"x-request-id: {request_id}",
        "server: gauge-loopback",
    ]
    lines.extend(f"{k}: {v}" for k, v in resp.headers.items())
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


async def drip(writer: asyncio.StreamWriter, data: bytes, every: float) -> None:
    """The head at once, then the body one byte every ``every`` seconds (a server that never times out
    a read, yet never finishes the answer)."""
    head, sep, body = data.partition(b"\r\n\r\n")
    writer.write(head + sep)
    await writer.drain()
    for i in range(len(body)):
        await asyncio.sleep(every)
        writer.write(body[i : i + 1])
        await writer.drain()
