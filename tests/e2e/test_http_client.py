"""The gateway's own HTTP/1.1 client for plain ``http://`` gateways (gateway/http_client.py) over real
sockets on loopback: the loopback model server, and a server of canned bytes for every framing
(Content-Length, chunked in odd pieces, to the end of the connection, gzip, a 1xx first), keep-alive and
its ends, the body bound, the connection cap, cancellation, and the typed failures ModelClient makes of
what goes wrong; which URLs it serves (plain http without a proxy) and which stay on httpx2."""

from __future__ import annotations

import asyncio
import gzip
import json
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from pytest_gauge.gateway import http_client
from pytest_gauge.gateway.http_client import PlainHttpPool, ProtocolFault
from pytest_gauge.gateway.response import BadResponse
from pytest_gauge.gateway.transport import (
    APIConnectionError,
    InternalServerError,
    ModelClient,
    RateLimitError,
    plain_origin,
)
from pytest_gauge.testing import LoopbackServer

Answer = Callable[[bytes], bytes | list[bytes] | None]
"""What the canned server writes for one request (its whole bytes): bytes, pieces written apart, or
None to close the connection without a word."""

OK_BODY = b'{"ok":true}'


def answer(status: int, body: bytes, *headers: str, reason: str = "OK", version: str = "HTTP/1.1") -> bytes:
    head = [f"{version} {status} {reason}", *headers]
    if not any(h.lower().startswith(("content-length", "transfer-encoding")) for h in headers):
        head.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def chunked(body: bytes, size: int) -> bytes:
    out = b"".join(
        b"%x;ext=1\r\n%s\r\n" % (len(body[i : i + size]), body[i : i + size])
        for i in range(0, len(body), size)
    )
    return out + b"0\r\nx-trailer: 1\r\n\r\n"


class Canned:
    """A loopback server answering each request (read whole by its Content-Length) with ``respond``;
    counts connections and requests."""

    def __init__(self, respond: Answer) -> None:
        self.respond = respond
        self.connections = 0
        self.ended = 0  # connections the client closed (or that ended otherwise)
        self.requests: list[bytes] = []
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> Canned:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()

    @property
    def port(self) -> int:
        assert self.server is not None
        return int(self.server.sockets[0].getsockname()[1])

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                )
                request = head + await reader.readexactly(length)
                self.requests.append(request)
                out = self.respond(request)
                if out is None:
                    break
                for piece in out if isinstance(out, list) else [out]:
                    writer.write(piece)
                    await writer.drain()
                    await asyncio.sleep(0.005)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.ended += 1
            writer.close()


def run(
    respond: Answer, body: Callable[[PlainHttpPool, Canned], Awaitable[Any]], cap: int | None = None
) -> Any:
    async def main() -> Any:
        async with Canned(respond) as canned:
            return await body(PlainHttpPool("127.0.0.1", canned.port, cap), canned)

    return asyncio.run(main())


async def post(pool: PlainHttpPool, body: bytes = b'{"q":1}') -> http_client.HttpAnswer:
    return await pool.post("/v1/chat/completions?x=1", {"Content-Type": "application/json"}, body)


@pytest.mark.parametrize(
    "written",
    [
        answer(200, OK_BODY, "X-Cost: 0.5"),
        [
            answer(200, OK_BODY, "X-Cost: 0.5")[:7],
            answer(200, OK_BODY, "X-Cost: 0.5")[7:30],
            answer(200, OK_BODY, "X-Cost: 0.5")[30:],
        ],
        b"HTTP/1.1 100 Continue\r\n\r\n" + answer(200, OK_BODY, "X-Cost: 0.5"),
        answer(200, chunked(OK_BODY, 3), "Transfer-Encoding: chunked", "X-Cost: 0.5"),
        [
            answer(200, chunked(OK_BODY, 4), "Transfer-Encoding: chunked", "X-Cost: 0.5")[:60],
            answer(200, chunked(OK_BODY, 4), "Transfer-Encoding: chunked", "X-Cost: 0.5")[60:],
        ],
        answer(200, gzip.compress(OK_BODY), "Content-Encoding: gzip", "X-Cost: 0.5"),
    ],
    ids=["length", "length-in-pieces", "after-100", "chunked", "chunked-in-pieces", "gzip"],
)
def test_every_framing_gives_the_same_answer_and_keeps_the_connection(written: bytes | list[bytes]) -> None:
    async def body(pool: PlainHttpPool, canned: Canned) -> tuple[list[Any], int]:
        answers = [await post(pool) for _ in range(3)]
        return [(a.status, a.body, a.headers["x-cost"]) for a in answers], canned.connections

    answers, connections = run(lambda _: written, body)
    assert answers == [(200, OK_BODY, "0.5")] * 3
    assert connections == 1


def test_the_request_bytes_name_the_host_the_target_the_headers_and_the_length() -> None:
    async def body(pool: PlainHttpPool, canned: Canned) -> bytes:
        await post(pool, b'{"q":"\xc3\xa9"}')
        return canned.requests[0]

    sent = run(lambda _: answer(200, OK_BODY), body)
    head, _, content = sent.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /v1/chat/completions?x=1 HTTP/1.1"
    assert lines[1].startswith("Host: 127.0.0.1:")
    assert "Content-Type: application/json" in lines
    assert f"Content-Length: {len(content)}" in lines
    assert content == b'{"q":"\xc3\xa9"}'


@pytest.mark.parametrize(
    "written",
    [
        answer(200, OK_BODY, "Connection: close"),
        answer(200, OK_BODY, version="HTTP/1.0"),
        answer(200, OK_BODY) + b"extra",
    ],
    ids=["connection-close", "http-1.0", "bytes-past-the-answer"],
)
def test_a_connection_that_cannot_be_trusted_again_is_not_reused(written: bytes) -> None:
    async def body(pool: PlainHttpPool, canned: Canned) -> tuple[list[bytes], int]:
        answers = [(await post(pool)).body for _ in range(2)]
        return answers, canned.connections

    answers, connections = run(lambda _: written, body)
    assert answers == [OK_BODY, OK_BODY]
    assert connections == 2


def test_a_body_to_the_end_of_the_connection_is_read_whole() -> None:
    class Closing(Canned):
        async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            for piece in (b"HTTP/1.1 200 OK\r\nX-Cost: 1\r\n\r\n", b'{"ok":', b"true}"):
                writer.write(piece)
                await writer.drain()
                await asyncio.sleep(0.005)
            writer.close()

    async def main() -> bytes:
        async with Closing(lambda _: None) as canned:
            pool = PlainHttpPool("127.0.0.1", canned.port)
            return (await post(pool)).body

    assert asyncio.run(main()) == OK_BODY


def test_a_2xx_body_past_the_bound_is_refused_and_an_error_body_cut_there() -> None:
    big = b"x" * 5000

    async def body(pool: PlainHttpPool, canned: Canned) -> Any:
        with pytest.raises(BadResponse, match="5000 bytes, more than the 1000"):
            await pool.post("/", {}, b"", limit=1000)
        with pytest.raises(BadResponse, match="more than the 1000 bytes"):
            await pool.post("/", {}, b"", limit=1000)  # chunked: no length declared
        cut = await pool.post("/", {}, b"", limit=1000)
        bomb_error = None
        try:
            await pool.post("/", {}, b"", limit=1000)
        except BadResponse as exc:
            bomb_error = exc.problem
        return cut, bomb_error

    answers = iter(
        [
            answer(200, big),
            answer(200, chunked(big, 700), "Transfer-Encoding: chunked"),
            answer(500, big, reason="Internal Server Error"),
            answer(200, gzip.compress(big), "Content-Encoding: gzip"),
        ]
    )
    cut, bomb_error = run(lambda _: next(answers), body)
    assert (cut.status, cut.body) == (500, b"x" * 1000)
    assert bomb_error == "the decoded body is more than the 1000 bytes accepted"


@pytest.mark.parametrize(
    "written",
    [
        None,  # closed without a word
        [answer(200, OK_BODY)[:-4], None],  # closed within the body
        b"SSH-2.0-OpenSSH_9.6\r\n\r\n",  # not HTTP
        answer(200, b"abc", "Content-Length: many"),
        answer(200, b"3\r\nabcdef\r\n0\r\n\r\n", "Transfer-Encoding: chunked"),  # chunk longer than its size
        answer(200, b"zz\r\n", "Transfer-Encoding: chunked"),
        answer(200, b"not gzip", "Content-Encoding: gzip"),
        answer(200, OK_BODY, "Content-Encoding: br"),
        answer(200, OK_BODY, " Folded: header"),
    ],
    ids=[
        "silent-close",
        "close-in-body",
        "not-http",
        "bad-length",
        "long-chunk",
        "bad-chunk-size",
        "bad-gzip",
        "br",
        "folded-header",
    ],
)
def test_what_is_not_a_whole_answer_is_a_connection_error_naming_the_cause(written: Any) -> None:
    class Once(Canned):
        async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.connections += 1
            await reader.readuntil(b"\r\n\r\n")
            for piece in written if isinstance(written, list) else [written]:
                if piece is None:
                    break
                writer.write(piece)
                await writer.drain()
            else:
                await asyncio.sleep(0.05)
            writer.close()

    async def main() -> APIConnectionError:
        async with Once(lambda _: None) as canned:
            client = ModelClient(f"http://127.0.0.1:{canned.port}/v1", "sk-test")
            with pytest.raises(APIConnectionError) as caught:
                await client.post("chat/completions", b"{}")
            return caught.value

    error = asyncio.run(main())
    assert isinstance(error.__cause__, ProtocolFault)
    assert error.url.endswith("/v1/chat/completions")
    assert "sk-test" not in str(error) + str(error.__cause__)


def test_no_server_is_a_connection_error_with_the_os_error_as_cause() -> None:
    async def main() -> BaseException:
        async with Canned(lambda _: None) as canned:
            port = canned.port
        client = ModelClient(f"http://127.0.0.1:{port}/v1", "sk-test")
        with pytest.raises(APIConnectionError) as caught:
            await client.post("chat/completions", b"{}")
        return caught.value

    assert isinstance(asyncio.run(main()).__cause__, ConnectionRefusedError)


def test_statuses_are_the_typed_errors_with_the_servers_message_and_headers() -> None:
    error_body = json.dumps({"error": {"message": "slow down", "type": "rate_limit_error"}}).encode()
    answers = iter(
        [
            answer(
                429,
                error_body,
                "Retry-After: 2",
                "Content-Type: application/json",
                reason="Too Many Requests",
            ),
            answer(503, "bégin".encode("latin-1"), "Content-Type: text/plain; charset=latin-1"),
        ]
    )

    async def main() -> tuple[BaseException, BaseException]:
        async with Canned(lambda _: next(answers)) as canned:
            client = ModelClient(f"http://127.0.0.1:{canned.port}/v1", "sk-test")
            with pytest.raises(RateLimitError) as limited:
                await client.post("chat/completions", b"{}")
            with pytest.raises(InternalServerError) as down:
                await client.post("chat/completions", b"{}")
            return limited.value, down.value

    limited, down = asyncio.run(main())
    assert str(limited) == "Error code: 429 - slow down"
    assert limited.headers["retry-after"] == "2"  # type: ignore[attr-defined]
    assert down.body == "bégin"  # type: ignore[attr-defined]


def test_the_cap_holds_connections_and_waiters_are_served_in_order() -> None:
    async def body(pool: PlainHttpPool, canned: Canned) -> tuple[int, list[int]]:
        done: list[int] = []

        async def one(i: int) -> None:
            await post(pool, json.dumps({"i": i}).encode())
            done.append(i)

        await asyncio.gather(*(one(i) for i in range(8)))
        return canned.connections, done

    def respond(_: bytes) -> list[bytes]:
        return [answer(200, OK_BODY)]

    connections, done = run(respond, body, cap=2)
    assert connections == 2
    assert sorted(done) == list(range(8))
    assert done[2:] == sorted(done[2:])  # the six that waited were served first come, first served


def test_a_cancelled_request_gives_its_place_back_and_closes_its_connection() -> None:
    answers: Iterator[list[bytes]] = iter([[], [answer(200, OK_BODY)]])  # the first is never answered

    async def body(pool: PlainHttpPool, canned: Canned) -> tuple[bytes, int]:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.1):
                await post(pool)
        waiting = asyncio.ensure_future(post(pool))  # cap 1: it needed the cancelled one's place
        return (await asyncio.wait_for(waiting, 5)).body, canned.connections

    def respond(_: bytes) -> list[bytes]:
        return next(answers)

    body_bytes, connections = run(respond, body, cap=1)
    assert (body_bytes, connections) == (OK_BODY, 2)


def test_an_idle_connection_the_server_closed_is_not_used_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server (in a thread) answers keep-alive, then closes the idle connection after 20 ms (a
    server's idle timeout) while the client's loop is blocked: the close is not yet read by the loop,
    so only the socket probe at reuse can see it."""
    monkeypatch.setattr(http_client, "STALE_AFTER", 0.0)
    listener = socket.create_server(("127.0.0.1", 0))
    connections: list[int] = []

    def serve() -> None:
        for _ in range(2):
            conn, _ = listener.accept()
            connections.append(1)
            with conn:
                data = b""
                while not data.endswith(b"\r\n\r\n{}"):
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                conn.sendall(answer(200, OK_BODY))
                time.sleep(0.02)

    server = threading.Thread(target=serve, daemon=True)
    server.start()

    async def main() -> list[bytes]:
        pool = PlainHttpPool("127.0.0.1", listener.getsockname()[1])
        first = (await pool.post("/", {}, b"{}")).body
        time.sleep(0.2)  # the loop blocked: the server's close waits unread in the socket
        second = (await pool.post("/", {}, b"{}")).body
        return [first, second]

    try:
        assert asyncio.run(main()) == [OK_BODY, OK_BODY]
    finally:
        server.join(5)
        listener.close()
    assert len(connections) == 2


def test_aclose_closes_the_kept_connections_and_a_later_call_opens_a_new_one() -> None:
    """The end of a run (the engine's wind-down awaits each gateway's ``aclose``): the server sees the
    kept connection end, rather than a socket left to the garbage collector."""

    async def main() -> tuple[int, int, int]:
        async with Canned(lambda request: answer(200, OK_BODY)) as canned:
            client = ModelClient(f"http://127.0.0.1:{canned.port}/v1", "k")
            await client.post("chat/completions", b"{}")
            await client.post("chat/completions", b"{}")
            kept = canned.connections - canned.ended
            await client.aclose()
            for _ in range(200):  # bounded: the server reads the close within a few loop passes
                if canned.ended == canned.connections:
                    break
                await asyncio.sleep(0.005)
            closed = canned.connections - canned.ended
            await client.post("chat/completions", b"{}")
            return kept, closed, canned.connections

    assert asyncio.run(main()) == (1, 0, 2)


def test_the_loopback_model_server_is_served_by_the_plain_client_with_the_key_and_the_cap() -> None:
    with LoopbackServer(latency=0.02) as server:
        client = ModelClient(server.base_url, "sk-plain-key", max_connections=3, query={"api-version": "7"})
        assert client.uses_plain_http

        async def main() -> list[dict[str, Any]]:
            body = {"model": "loopback-model", "messages": [{"role": "user", "content": "hi"}]}
            sent = [client.post("chat/completions", json.dumps(body).encode()) for _ in range(10)]
            return [json.loads(answer_body) for answer_body, _ in await asyncio.gather(*sent)]

        answers = asyncio.run(main())
        assert [a["object"] for a in answers] == ["chat.completion"] * 10
        assert server.connections_total == 3
        assert server.max_in_flight == 3
        seen = server.headers_seen[0]
        assert seen["authorization"] == "Bearer sk-plain-key"
        assert seen["user-agent"].startswith("pytest-gauge/")
        assert server.log[0].query == "api-version=7"


@pytest.mark.parametrize(
    ("url", "environ", "plain"),
    [
        ("http://127.0.0.1:4000/v1", {}, ("127.0.0.1", 4000)),
        ("http://models.internal/v1", {"HTTPS_PROXY": "http://proxy:3128"}, ("models.internal", 80)),
        ("http://models.internal/v1", {"HTTP_PROXY": "http://proxy:3128"}, None),
        ("http://models.internal/v1", {"all_proxy": "socks5://proxy:1080"}, None),
        ("https://taotoken.net/api/v1", {}, None),
        ("http://user:pw@127.0.0.1:4000/v1", {}, None),
        ("http://127.0.0.1:port/v1", {}, None),
    ],
)
def test_plain_http_without_a_proxy_is_the_own_clients_anything_else_httpx2s(
    url: str, environ: dict[str, str], plain: tuple[str, int] | None
) -> None:
    assert plain_origin(url, environ) == plain


def test_an_in_process_transport_stays_on_httpx2() -> None:
    import httpx2

    client = ModelClient(
        "http://gauge.invalid/v1", "k", transport=httpx2.MockTransport(lambda _: httpx2.Response(200))
    )
    assert not client.uses_plain_http


def test_an_in_process_server_gets_the_request_and_its_answers_are_read_as_the_networks() -> None:
    """The simulator's way in: ``ModelClient(serve=...)`` builds the same request bytes, the server sees
    method, path (no query) and body, and its answers are parsed like a socket's (status errors typed,
    a 2xx past the bound refused); httpx2 is not needed for it."""
    seen: list[tuple[str, str, bytes]] = []
    answers = iter(
        [(200, "application/json", OK_BODY), (429, "application/json", b'{"error": {"message": "wait"}}')]
    )

    def serve(method: str, path: str, body: bytes) -> tuple[int, str, bytes]:
        seen.append((method, path, body))
        return next(answers)

    client = ModelClient("http://gauge-sim.invalid/v1", "k", query={"api-version": "1"}, serve=serve)
    assert client.uses_plain_http

    async def main() -> tuple[bytes, BaseException]:
        body, _ = await client.post("chat/completions", b'{"q":1}')
        with pytest.raises(RateLimitError) as limited:
            await client.post("chat/completions", b'{"q":2}')
        return body, limited.value

    body, limited = asyncio.run(main())
    assert body == OK_BODY and str(limited) == "Error code: 429 - wait"
    assert seen == [
        ("POST", "/v1/chat/completions", b'{"q":1}'),
        ("POST", "/v1/chat/completions", b'{"q":2}'),
    ]


def test_a_client_used_again_under_a_new_event_loop_opens_new_connections() -> None:
    """Connections belong to the loop that made them: a client used under a second ``asyncio.run``
    (a test, a CLI command) drops the first loop's and connects again, instead of failing."""
    with LoopbackServer() as server:
        client = ModelClient(server.base_url, "sk-plain-key", timeout=10.0)  # a reused dead connection hangs
        body = json.dumps({"model": "loopback-model", "messages": [{"role": "user", "content": "hi"}]})
        for _ in range(2):
            answer_body, _ = asyncio.run(client.post("chat/completions", body.encode()))
            assert json.loads(answer_body)["object"] == "chat.completion"
        assert server.connections_total == 2


def test_a_connection_closed_before_its_request_is_written_fails_at_once() -> None:
    """The server's close can be read between a connection's hand-over and the request's write (a server
    that accepts and closes at once): the request fails then as a connection error, instead of being
    written to a closing socket and waiting out the timeout for an answer that cannot come."""

    async def main() -> None:
        async with Canned(lambda _: answer(200, OK_BODY)) as canned:
            loop = asyncio.get_running_loop()
            _, connection = await loop.create_connection(http_client._Connection, "127.0.0.1", canned.port)
            connection.eof_received()  # the close, read before the request goes out
            with pytest.raises(ProtocolFault, match="before the request was sent"):
                async with asyncio.timeout(5):
                    await connection.exchange(b"POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n", 1000)
            connection.close()

    asyncio.run(main())
