"""The hostile server (pytest_gauge/testing/hostile.py) writes what each case says, checked with aiohttp's
own client as the reference: the legal oddities give the completion; the broken ones an exception,
another status or a body no JSON reader takes (never other JSON under a 200); each within a bounded
time (a body bound and a read timeout being the client's part, as they are the model client's)."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Iterator

import aiohttp
import pytest

from pytest_gauge.testing.hostile import HOSTILE, OK_BODY, HostileServer

BOUND = 8 << 20


async def _outcome(server: HostileServer) -> str:
    """``answer`` (200 with the completion), ``wrong`` (200 with other JSON: the danger) or ``error``
    (an exception, another status, or a body no JSON reader takes)."""
    timeout = aiohttp.ClientTimeout(total=10, sock_read=1)
    try:
        async with aiohttp.ClientSession(timeout=timeout) as session:
            async with session.post(server.base_url + "/chat/completions", json={"model": "m"}) as resp:
                body = b""
                while chunk := await resp.content.read(1 << 20):
                    body += chunk
                    if len(body) > BOUND:
                        return "error"
                if resp.status != 200:
                    return "error"
                return "answer" if body == OK_BODY else "wrong" if _json(body) else "error"
    except (aiohttp.ClientError, TimeoutError):
        return "error"


def _json(body: bytes) -> bool:
    try:
        json.loads(body)
    except ValueError:
        return False
    return True


@pytest.fixture(scope="module")
def server() -> Iterator[HostileServer]:
    with HostileServer() as served:
        yield served


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_each_case_ends_as_it_says(server: HostileServer, case: str) -> None:
    server.case = case
    start = time.monotonic()
    outcome = asyncio.run(_outcome(server))
    expected = {"answer": {"answer"}, "error": {"error"}, "either": {"answer", "error"}}[HOSTILE[case].expect]
    assert outcome in expected and time.monotonic() - start < 8


def test_a_reset_is_an_rst_and_a_hold_stays_open(server: HostileServer) -> None:
    request = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
    server.case = "reset_before_answer"
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as conn:
        conn.sendall(request)
        with pytest.raises(ConnectionResetError):
            conn.recv(10)
    server.case = "stall_mid_body"
    with socket.create_connection(("127.0.0.1", server.port), timeout=0.5) as conn:
        conn.sendall(request)
        time.sleep(0.2)
        assert conn.recv(65536).startswith(b"HTTP/1.1 200 OK")
        with pytest.raises(TimeoutError):
            conn.recv(10)
