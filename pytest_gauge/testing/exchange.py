"""One exchange of the loopback server as its fault catalogue (:mod:`.faults`) sees it: the request as
read (aiohttp parses it) and the answer to write, or a connection reset. No HTTP is written here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Request", "Response"]


@dataclass
class Request:
    """One request as read: method, target (path and query), path, query, lower-case headers, body."""

    method: str
    target: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Response:
    """What to answer: a status and JSON payload (or raw bytes), extra headers, or a connection reset."""

    status: int
    payload: Any
    headers: dict[str, str] = field(default_factory=dict)
    reset: bool = False
    raw: bytes | None = None  # sent as is instead of the JSON of ``payload`` (malformed bodies)
