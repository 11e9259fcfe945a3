"""The recording proxy against hostile clients, over raw sockets on loopback: each malformed, oversized
or stalled request ends in a clear, bounded answer (400, 401, 408, 413) or a closed connection, never in
a request the gateway sees, a dropped connection without a word, or a connection held forever."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from pytest_gauge._internal.gateway.gateway import CallContext, WireReply
from pytest_gauge._internal.gateway.proxy import (
    MAX_REQUEST_BYTES,
    ProxyRoute,
    RecordingProxy,
    WireRequest,
    new_proxy_token,
)
from pytest_gauge._internal.gateway.wire import wire_format
from pytest_gauge._internal.records import ChatResult, LedgerRecord

CTX = CallContext("suite", "t1", "transcript/t1/agent-a/0")
READ_TIMEOUT = 0.5
BODY = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()


class Calls:
    """A unit's calls answered here with a fixed chat completion; each request kept."""

    def __init__(self) -> None:
        self.seq = 0
        self.seen: list[dict[str, Any]] = []

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    async def call(self, request: WireRequest) -> WireReply:
        self.seen.append(request.body)
        completion = {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": request.model,
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
        response = wire_format(request.api).from_completion(completion, request.body)
        record = LedgerRecord(
            "run", f"{CTX.work}#{request.seq}", 1, "ok", CTX.suite, CTX.task_id, "agent", request.model,
            "single", CTX.work, None, False, 0.0, "stop", False, None,
        )  # fmt: skip
        return WireReply(response, ChatResult("", (), "stop"), record)


@pytest.fixture
def served() -> Iterator[tuple[ProxyRoute, Calls]]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    proxy = RecordingProxy(new_proxy_token(), loop, read_timeout=READ_TIMEOUT)
    calls = Calls()
    yield proxy.register(CTX, calls=calls), calls
    proxy.close()
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    loop.close()


def _head(route: ProxyRoute, *lines: str, token: bool = True, path: str = "/v1/chat/completions") -> bytes:
    prefix = route.base_url.split(str(route.port), 1)[1]
    auth = [f"Authorization: Bearer {route.token}"] if token else []
    head = [f"POST {prefix}{path} HTTP/1.1", "Host: 127.0.0.1", *auth, *lines]
    return ("\r\n".join(head) + "\r\n\r\n").encode()


def _exchange(route: ProxyRoute, *pieces: bytes, pause: float = 0.0) -> tuple[bytes, float]:
    """Send ``pieces`` (``pause`` seconds apart), then read until the proxy closes the connection:
    everything it said, and how long the connection lasted."""
    start = time.monotonic()
    with socket.create_connection(("127.0.0.1", route.port), timeout=10) as conn:
        for piece in pieces:
            conn.sendall(piece)
            time.sleep(pause)
        said = b""
        try:
            while chunk := conn.recv(65536):
                said += chunk
        except ConnectionResetError:
            pass
    return said, time.monotonic() - start


def _status(said: bytes) -> int:
    return int(said.split(b" ", 2)[1])


def _json_of(said: bytes) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(said.partition(b"\r\n\r\n")[2])
    return loaded


def test_a_well_formed_request_is_answered(served: tuple[ProxyRoute, Calls]) -> None:
    route, calls = served
    head = _head(route, "Content-Type: application/json", f"Content-Length: {len(BODY)}", "Connection: close")
    said, _ = _exchange(route, head + BODY)
    assert _status(said) == 200 and b'"content":"ok"' in said and len(calls.seen) == 1


def test_a_deeply_nested_body_is_a_clear_400(served: tuple[ProxyRoute, Calls]) -> None:
    route, calls = served
    body = b'{"model": "m", "messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    said, _ = _exchange(route, _head(route, f"Content-Length: {len(body)}", "Connection: close") + body)
    assert _status(said) == 400 and "nested too deeply" in _json_of(said)["error"]["message"]
    assert calls.seen == []


def test_100_continue_only_after_the_token_is_checked(served: tuple[ProxyRoute, Calls]) -> None:
    route, calls = served
    expect = (f"Content-Length: {len(BODY)}", "Expect: 100-continue")
    with socket.create_connection(("127.0.0.1", route.port), timeout=10) as conn:
        conn.sendall(_head(route, *expect, token=False))
        said = conn.recv(65536)
    assert _status(said) == 401 and b"100 Continue" not in said  # told no before sending the body
    with socket.create_connection(("127.0.0.1", route.port), timeout=10) as conn:
        conn.sendall(_head(route, *expect, "Connection: close"))
        assert conn.recv(64) == b"HTTP/1.1 100 Continue\r\n\r\n"
        conn.sendall(BODY)
        assert _status(conn.recv(65536)) == 200
    assert len(calls.seen) == 1


@pytest.mark.parametrize("length", ["2_7", "+27", "0x1b", "27 27", "\u0662\u0667", "-27", "27, 28"])
def test_a_content_length_that_is_not_digits_is_refused(
    served: tuple[ProxyRoute, Calls], length: str
) -> None:
    route, calls = served
    said, _ = _exchange(route, _head(route, f"Content-Length: {length}") + BODY[:27])
    assert _status(said) == 400 and calls.seen == []


def test_conflicting_lengths_are_refused(served: tuple[ProxyRoute, Calls]) -> None:
    route, calls = served
    twice = _head(route, f"Content-Length: {len(BODY)}", f"Content-Length: {len(BODY) + 1}")
    said, _ = _exchange(route, twice + BODY + b"x")
    assert _status(said) == 400 and calls.seen == []
    both = _head(route, f"Content-Length: {len(BODY)}", "Transfer-Encoding: chunked")
    said, _ = _exchange(route, both + b"%x\r\n%s\r\n0\r\n\r\n" % (len(BODY), BODY))
    assert _status(said) == 400 and calls.seen == []


@pytest.mark.parametrize("size", [b"-2", b"zz", b"1_0"])
def test_a_bad_chunk_size_is_refused(served: tuple[ProxyRoute, Calls], size: bytes) -> None:
    route, calls = served
    said, _ = _exchange(route, _head(route, "Transfer-Encoding: chunked") + size + b"\r\n" + BODY + b"\r\n")
    assert _status(said) == 400 and calls.seen == []


def test_garbage_is_a_400_and_no_traceback(
    served: tuple[ProxyRoute, Calls], caplog: pytest.LogCaptureFixture
) -> None:
    route, _ = served
    said, _ = _exchange(route, b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 64)
    assert _status(said) == 400 and said.endswith(b"Received HTTPS traffic on an HTTP port")
    said, _ = _exchange(route, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
    assert _status(said) in (400, 505), said
    said, _ = _exchange(route, b"\x00\xff garbage \r\n\r\n")
    assert _status(said) == 400
    assert [r for r in caplog.records if r.exc_info] == []


def test_a_client_stalling_mid_head_loses_its_connection(served: tuple[ProxyRoute, Calls]) -> None:
    route, calls = served
    said, lasted = _exchange(route, _head(route, f"Content-Length: {len(BODY)}")[:40])
    assert said == b"" and READ_TIMEOUT <= lasted < READ_TIMEOUT + 5 and calls.seen == []


def test_a_client_stalling_mid_body_gets_a_408(served: tuple[ProxyRoute, Calls]) -> None:
    route, calls = served
    said, lasted = _exchange(route, _head(route, f"Content-Length: {len(BODY)}") + BODY[:10])
    assert _status(said) == 408 and "within" in _json_of(said)["error"]["message"]
    assert READ_TIMEOUT <= lasted < READ_TIMEOUT + 5 and calls.seen == []


def test_an_idle_kept_connection_is_closed(served: tuple[ProxyRoute, Calls]) -> None:
    route, calls = served
    said, lasted = _exchange(route, _head(route, f"Content-Length: {len(BODY)}") + BODY)
    assert _status(said) == 200 and READ_TIMEOUT <= lasted < READ_TIMEOUT + 5 and len(calls.seen) == 1


def test_a_body_past_the_bound_is_a_413(served: tuple[ProxyRoute, Calls]) -> None:
    route, calls = served
    said, _ = _exchange(route, _head(route, f"Content-Length: {MAX_REQUEST_BYTES + 1}") + BODY)
    assert _status(said) == 413 and str(MAX_REQUEST_BYTES) in _json_of(said)["error"]["message"]
    piece = b"x" * (1 << 20)
    chunks = b"".join(
        b"%x\r\n%s\r\n" % (len(piece), piece) for _ in range(MAX_REQUEST_BYTES // len(piece) + 1)
    )
    said, _ = _exchange(route, _head(route, "Transfer-Encoding: chunked") + chunks + b"0\r\n\r\n")
    assert _status(said) == 413 and calls.seen == []


def test_a_refused_request_is_answered_without_its_body(served: tuple[ProxyRoute, Calls]) -> None:
    route, calls = served
    with socket.create_connection(("127.0.0.1", route.port), timeout=10) as conn:
        conn.sendall(_head(route, f"Content-Length: {len(BODY)}", token=False))
        assert _status(conn.recv(65536)) == 401  # the body never sent
        conn.sendall(BODY)  # sent late, read and dropped: the connection serves the next request
        conn.sendall(_head(route, f"Content-Length: {len(BODY)}", "Connection: close") + BODY)
        said = b""
        while chunk := conn.recv(65536):
            said += chunk
    assert _status(said) == 200 and len(calls.seen) == 1
