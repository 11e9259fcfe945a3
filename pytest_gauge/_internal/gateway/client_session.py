"""aiohttp, the package's one HTTP library, as its clients use it (the model client, the HTTP agents):
a session per event loop (TLS from the process's one context, proxies from the environment, a connection
cap), bodies read with their bound applied while reading, and every failure named by its cause (a refused
connection, a TLS failure, an answer that is not HTTP/1.1, a body cut short, a reset).

Imported only when a request goes over a socket: a run on the in-process simulator or answered from the
cache never imports aiohttp (about 0.2 s of CPU per process)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypedDict

import aiohttp
from aiohttp.helpers import basicauth_from_netrc, get_env_proxy_for_url, netrc_from_env
from yarl import URL

from .response import BadResponse
from .tls import tls_context

__all__ = ["Fault", "LoopSession", "Route", "fault_of", "read_bounded"]

CONNECT, TLS, PROTOCOL, RESET, TIMEOUT, REDIRECT = (
    "connect",
    "tls",
    "protocol",
    "reset",
    "timeout",
    "redirect",
)


class Route(TypedDict, total=False):
    """What the environment says for one origin, as ``ClientSession.request`` keywords."""

    proxy: URL
    proxy_auth: aiohttp.BasicAuth | None
    auth: aiohttp.BasicAuth


class LoopSession:
    """An ``aiohttp.ClientSession`` for the running event loop, made on first use: a client used again
    under a new ``asyncio.run`` (a test, a CLI command) drops the old loop's connections and connects
    again instead of failing with 'attached to a different loop'."""

    def __init__(self, max_connections: int | None = None) -> None:
        self.max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._routes: dict[tuple[str, str | None, int | None], Route] = {}

    def get(self) -> aiohttp.ClientSession:
        """The running loop's session (TLS through :func:`tls_context`, at most ``max_connections``
        open, none of aiohttp's own redirects); what the environment says per origin is :meth:`route`."""
        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop or self._session.closed:
            self._abandon()
            connector = aiohttp.TCPConnector(
                limit=self.max_connections or 100, limit_per_host=0, ssl=tls_context()
            )
            self._session = aiohttp.ClientSession(connector=connector, auto_decompress=True)
            self._loop = loop
            self._routes = {}
        return self._session

    def route(self, url: str, headers: Mapping[str, str]) -> Route:
        """The request's ``proxy``/``proxy_auth`` (``HTTP(S)_PROXY``, ``NO_PROXY``) and ``~/.netrc``
        ``auth`` (when ``headers`` carry no Authorization), as aiohttp's ``trust_env`` finds them, but
        looked up once per origin for the session's life: ``trust_env`` does it on every request, two
        thread hops each (about a third of a call's CPU on a busy machine)."""
        target = URL(url)
        origin = (target.scheme, target.host, target.port)
        found = self._routes.get(origin)
        if found is None:
            found = self._routes[origin] = _from_environment(target)
        if "auth" in found and any(k.lower() == "authorization" for k in headers):
            without = found.copy()
            del without["auth"]
            return without
        return found

    async def aclose(self) -> None:
        """Close the kept connections (the server sees them end); a later request opens new ones."""
        session, self._session, self._loop = self._session, None, None
        if session is not None and not session.closed:
            await session.close()

    def _abandon(self) -> None:
        """Forget a session whose loop is gone: its sockets are aborted, not awaited (no loop to await)."""
        session, self._session = self._session, None
        if session is None or session.closed:
            return
        connector = session.connector
        session.detach()
        if connector is not None:
            for protocols in list(connector._conns.values()):
                for protocol, _ in protocols:
                    transport = protocol.transport
                    if transport is not None:
                        with contextlib.suppress(RuntimeError):  # the old loop is closed
                            transport.abort()
            connector._conns.clear()
            connector._closed = True


def _from_environment(url: URL) -> Route:
    """The proxy and the netrc credentials the environment names for ``url`` (aiohttp's own lookups)."""
    found: Route = {}
    with contextlib.suppress(LookupError):
        found["proxy"], found["proxy_auth"] = get_env_proxy_for_url(url)
    if url.host is not None:
        with contextlib.suppress(LookupError):
            found["auth"] = basicauth_from_netrc(netrc_from_env(), url.host)
    return found


@dataclass(frozen=True)
class Fault:
    """Why no usable answer came: ``kind`` (connect, tls, protocol, reset, timeout) and the
    cause in words, for the error's message and the diagnosis."""

    kind: str
    cause: str

    @property
    def is_timeout(self) -> bool:
        return self.kind == TIMEOUT


def fault_of(exc: BaseException) -> Fault | None:
    """The cause of a failed request as a :class:`Fault`, or None when ``exc`` is not a transport failure
    (a bug, a cancellation)."""
    if isinstance(exc, aiohttp.ClientConnectorCertificateError | aiohttp.ClientSSLError | ssl.SSLError):
        return Fault(TLS, f"the TLS handshake failed: {_words(exc)}")
    if isinstance(exc, aiohttp.ClientConnectorError):
        return Fault(CONNECT, f"could not connect to {exc.host}:{exc.port}: {_os_words(exc.os_error)}")
    if isinstance(exc, TimeoutError):  # aiohttp's ServerTimeoutError and asyncio's are both TimeoutError
        return Fault(TIMEOUT, "no answer in time")
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return Fault(RESET, "the server closed the connection before the whole answer")
    if isinstance(exc, aiohttp.ClientPayloadError):
        return Fault(PROTOCOL, f"the answer's body is malformed or cut short: {_words(exc)}")
    if isinstance(exc, aiohttp.ClientResponseError):  # the status line or headers could not be parsed
        return Fault(PROTOCOL, f"the answer is not valid HTTP/1.1: {_words(exc)}")
    if isinstance(exc, aiohttp.ClientOSError | ConnectionError):
        return Fault(RESET, f"the connection failed: {_os_words(exc)}")
    if isinstance(exc, aiohttp.ClientError):
        return Fault(PROTOCOL, f"{type(exc).__name__}: {_words(exc)}")
    return None


def _words(exc: BaseException) -> str:
    """An exception's message on one short line (aiohttp's parser errors quote the offending bytes)."""
    message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return " ".join(str(message).split()).removesuffix(" ^")[:200]  # llhttp marks the spot with a caret


def _os_words(exc: BaseException) -> str:
    """An OS error as its system message ("Connection refused"), else its text."""
    number = getattr(exc, "errno", None)
    return os.strerror(number) if isinstance(number, int) and number > 0 else _words(exc)


async def read_bounded(response: aiohttp.ClientResponse, limit: int, *, truncate: bool = False) -> bytes:
    """The decoded body, refused (:class:`BadResponse`) as soon as it passes ``limit`` bytes, or with
    ``truncate`` (an error body: only its start is quoted) cut there. A declared length past the limit is
    refused before any byte is read; a compressed body is counted as it is decoded (a gzip bomb stops at
    the limit)."""
    declared = response.content_length
    if not truncate and declared is not None and declared > limit:
        raise BadResponse(f"the body is {declared} bytes, more than the {limit} accepted", "")
    encoded = response.headers.get("content-encoding", "identity").lower() not in ("", "identity")
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_any():
        size += len(chunk)
        if size > limit:
            if truncate:
                chunks.append(chunk[: len(chunk) - (size - limit)])
                break
            what = "decoded body" if encoded else "body"
            raise BadResponse(f"the {what} is more than the {limit} bytes accepted", "")
        chunks.append(chunk)
    return b"".join(chunks)
