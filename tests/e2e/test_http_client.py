"""The model client (gateway/transport.py, over aiohttp) on real sockets on loopback: the loopback model
server, and a server of canned bytes for every framing (Content-Length, chunked in odd pieces, to the end
of the connection, gzip, brotli, a 1xx first), keep-alive and its ends, the body bound, the connection
cap, cancellation, and a hostile server's answers (bad chunk sizes, conflicting or non-digit lengths, a
gzip bomb, stalls, resets, garbage, HTTP/2 and TLS answers on a plain port), each a typed failure naming
its cause within a bounded time."""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import brotli
import pytest

from pytest_gauge._internal.gateway import transport
from pytest_gauge._internal.gateway.response import BadResponse
from pytest_gauge._internal.gateway.tls import tls_context
from pytest_gauge._internal.gateway.transport import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    InternalServerError,
    ModelClient,
    RateLimitError,
)
from pytest_gauge.testing import LoopbackServer
from pytest_gauge.testing.certs import self_signed

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
    respond: Answer, body: Callable[[ModelClient, Canned], Awaitable[Any]], cap: int | None = None
) -> Any:
    """``body(client, canned)`` with a model client of ``canned``'s server (10 s timeout: every case ends
    well before it, or it is the failure)."""

    async def main() -> Any:
        async with Canned(respond) as canned:
            client = ModelClient(
                f"http://127.0.0.1:{canned.port}/v1", "sk-test", timeout=10, max_connections=cap
            )
            try:
                return await body(client, canned)
            finally:
                await client.aclose()

    return asyncio.run(main())


async def post(client: ModelClient, body: bytes = b'{"q":1}') -> tuple[bytes, Any]:
    return await client.post("chat/completions", body)


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
        answer(200, brotli.compress(OK_BODY), "Content-Encoding: br", "X-Cost: 0.5"),
    ],
    ids=["length", "length-in-pieces", "after-100", "chunked", "chunked-in-pieces", "gzip", "br"],
)
def test_every_framing_gives_the_same_answer_and_keeps_the_connection(written: bytes | list[bytes]) -> None:
    async def body(client: ModelClient, canned: Canned) -> tuple[list[Any], int]:
        answers = [await post(client) for _ in range(3)]
        return [(b, h["x-cost"]) for b, h in answers], canned.connections

    answers, connections = run(lambda _: written, body)
    assert answers == [(OK_BODY, "0.5")] * 3
    assert connections == 1


def test_the_request_names_the_target_the_headers_the_key_and_the_length() -> None:
    async def body(client: ModelClient, canned: Canned) -> bytes:
        client.query = {"api-version": "7"}
        await post(client, b'{"q":"\xc3\xa9"}')
        return canned.requests[0]

    sent = run(lambda _: answer(200, OK_BODY), body)
    head, _, content = sent.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /v1/chat/completions?api-version=7 HTTP/1.1"
    fields = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    assert fields["host"].startswith("127.0.0.1:")
    assert fields["content-type"] == "application/json"
    assert fields["content-length"] == str(len(content))
    assert fields["authorization"] == "Bearer sk-test"
    assert fields["user-agent"].startswith("pytest-gauge/")
    assert content == b'{"q":"\xc3\xa9"}'


@pytest.mark.parametrize(
    "written",
    [answer(200, OK_BODY, "Connection: close"), answer(200, OK_BODY, version="HTTP/1.0")],
    ids=["connection-close", "http-1.0"],
)
def test_a_connection_that_cannot_be_trusted_again_is_not_reused(written: bytes) -> None:
    async def body(client: ModelClient, canned: Canned) -> tuple[list[bytes], int]:
        answers = [(await post(client))[0] for _ in range(2)]
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
            client = ModelClient(f"http://127.0.0.1:{canned.port}/v1", "k", timeout=10)
            try:
                return (await post(client))[0]
            finally:
                await client.aclose()

    assert asyncio.run(main()) == OK_BODY


def test_a_2xx_body_past_the_bound_is_refused_and_an_error_body_cut_there(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(transport, "MAX_BODY_BYTES", 100_000)
    big = b"x" * 500_000

    async def body(client: ModelClient, canned: Canned) -> Any:
        with pytest.raises(BadResponse, match="500000 bytes, more than the 100000"):
            await post(client)
        with pytest.raises(BadResponse, match="more than the 100000 bytes"):
            await post(client)  # chunked: no length declared
        with pytest.raises(InternalServerError) as cut:
            await post(client)
        with pytest.raises(BadResponse) as bomb:
            await post(client)
        return cut.value, bomb.value.problem

    answers = iter(
        [
            answer(200, big),
            answer(200, chunked(big, 70_000), "Transfer-Encoding: chunked"),
            answer(500, big, reason="Internal Server Error"),
            answer(200, gzip.compress(b"x" * (50 << 20)), "Content-Encoding: gzip"),  # 50 MB from 50 kB
        ]
    )
    cut, bomb_problem = run(lambda _: next(answers), body)
    assert cut.body == "x" * 100_000
    assert bomb_problem == "the decoded body is more than the 100000 bytes accepted"


HOSTILE = {
    "silent-close": None,
    "close-in-body": [answer(200, OK_BODY)[:-4], None],
    "not-http": b"SSH-2.0-OpenSSH_9.6\r\n\r\n",
    "garbage": b"\x00\xff\xfe garbage \r\n\r\n",
    "bad-length": answer(200, b"abc", "Content-Length: many"),
    "non-ascii-length": answer(200, b"abc", "Content-Length: \u0663".encode().decode("latin-1")),
    "underscore-length": answer(200, b"abcdefghijklmnopqrstuvwxyz0", "Content-Length: 2_7"),
    "conflicting-lengths": answer(200, b"abc", "Content-Length: 3", "Content-Length: 5"),
    "long-chunk": answer(200, b"3\r\nabcdef\r\n0\r\n\r\n", "Transfer-Encoding: chunked"),
    "bad-chunk-size": answer(200, b"zz\r\n", "Transfer-Encoding: chunked"),
    "negative-chunk-size": answer(200, b"-2\r\nab\r\n0\r\n\r\n", "Transfer-Encoding: chunked"),
    "bad-gzip": answer(200, b"not gzip", "Content-Encoding: gzip"),
    "status-2000": answer(2000, OK_BODY),
    "http2-preface": b"\x00\x00\x12\x04\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00\x64\x00\x04\x00\x10\x00\x00",
    "tls-alert": b"\x15\x03\x01\x00\x02\x02\x46",
    "only-1xx": [b"HTTP/1.1 100 Continue\r\n\r\n", None],
}


@pytest.mark.parametrize("written", list(HOSTILE.values()), ids=list(HOSTILE))
def test_a_hostile_answer_is_a_connection_error_naming_its_cause(written: Any) -> None:
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
            client = ModelClient(f"http://127.0.0.1:{canned.port}/v1", "sk-test", timeout=10)
            try:
                with pytest.raises(APIConnectionError) as caught:
                    await client.post("chat/completions", b"{}")
            finally:
                await client.aclose()
            return caught.value

    error = asyncio.run(main())
    assert not isinstance(error, APITimeoutError)  # each ends at once, not at the timeout
    assert error.url.endswith("/v1/chat/completions")
    assert error.cause.startswith(("the answer", "the server closed", "the connection failed")), error.cause
    assert "\n" not in error.cause and len(error.cause) <= 300
    assert "sk-test" not in str(error) + error.cause + str(error.__cause__)


def test_a_stalled_answer_ends_at_the_timeout() -> None:
    async def body(client: ModelClient, canned: Canned) -> None:
        with pytest.raises(TimeoutError):
            await client.post("chat/completions", b"{}", timeout=0.2)

    run(lambda _: [answer(200, OK_BODY)[:20]], body)  # the rest never comes


def test_a_redirect_is_a_status_error_not_followed() -> None:
    async def body(client: ModelClient, canned: Canned) -> tuple[APIStatusError, int]:
        with pytest.raises(APIStatusError) as caught:
            await post(client)
        return caught.value, len(canned.requests)

    error, requests = run(lambda _: answer(302, b"moved", "Location: http://127.0.0.1:1/elsewhere"), body)
    assert (error.status_code, error.headers["location"], requests) == (
        302,
        "http://127.0.0.1:1/elsewhere",
        1,
    )


def test_no_server_is_a_connection_error_naming_the_address() -> None:
    async def main() -> APIConnectionError:
        async with Canned(lambda _: None) as canned:
            port = canned.port
        client = ModelClient(f"http://127.0.0.1:{port}/v1", "sk-test")
        with pytest.raises(APIConnectionError) as caught:
            await client.post("chat/completions", b"{}")
        await client.aclose()
        return caught.value

    error = asyncio.run(main())
    assert error.cause.startswith(f"could not connect to 127.0.0.1:{error.url.split(':')[2].split('/')[0]}")


def test_statuses_are_the_typed_errors_with_the_servers_message_and_headers() -> None:
    error_body = json.dumps({"error": {"message": "slow down", "type": "rate_limit_error"}}).encode()
    answers = iter(
        [
            answer(429, error_body, "Retry-After: 2", "Content-Type: application/json", reason="Too Many"),
            answer(503, "bégin".encode("latin-1"), "Content-Type: text/plain; charset=latin-1"),
        ]
    )

    async def body(client: ModelClient, canned: Canned) -> tuple[APIStatusError, APIStatusError]:
        with pytest.raises(RateLimitError) as limited:
            await post(client)
        with pytest.raises(InternalServerError) as down:
            await post(client)
        return limited.value, down.value

    limited, down = run(lambda _: next(answers), body)
    assert str(limited) == "Error code: 429 - slow down"
    assert limited.headers["retry-after"] == "2"
    assert down.body == "bégin"


def test_the_cap_holds_connections() -> None:
    async def body(client: ModelClient, canned: Canned) -> tuple[int, list[int]]:
        done: list[int] = []

        async def one(i: int) -> None:
            await post(client, json.dumps({"i": i}).encode())
            done.append(i)

        await asyncio.gather(*(one(i) for i in range(8)))
        return canned.connections, done

    connections, done = run(lambda _: [answer(200, OK_BODY)], body, cap=2)
    assert connections == 2
    assert sorted(done) == list(range(8))


def test_a_cancelled_request_gives_its_place_back() -> None:
    answers: Iterator[list[bytes]] = iter([[], [answer(200, OK_BODY)]])  # the first is never answered

    async def body(client: ModelClient, canned: Canned) -> tuple[bytes, int]:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.1):
                await post(client)
        waiting = asyncio.ensure_future(post(client))  # cap 1: it needed the cancelled one's place
        return (await asyncio.wait_for(waiting, 5))[0], canned.connections

    body_bytes, connections = run(lambda _: next(answers), body, cap=1)
    assert (body_bytes, connections) == (OK_BODY, 2)


def test_aclose_closes_the_kept_connections_and_a_later_call_opens_a_new_one() -> None:
    """The end of a run (the engine's wind-down awaits each gateway's ``aclose``): the server sees the
    kept connection end, rather than a socket left to the garbage collector."""

    async def body(client: ModelClient, canned: Canned) -> tuple[int, int, int]:
        await post(client)
        await post(client)
        kept = canned.connections - canned.ended
        await client.aclose()
        for _ in range(200):  # bounded: the server reads the close within a few loop passes
            if canned.ended == canned.connections:
                break
            await asyncio.sleep(0.005)
        closed = canned.connections - canned.ended
        await post(client)
        return kept, closed, canned.connections

    assert run(lambda _: answer(200, OK_BODY), body) == (1, 0, 2)


def test_the_loopback_model_server_gets_the_key_the_query_and_at_most_the_cap() -> None:
    with LoopbackServer(latency=0.02) as server:
        client = ModelClient(server.base_url, "sk-plain-key", max_connections=3, query={"api-version": "7"})

        async def main() -> list[dict[str, Any]]:
            body = {"model": "loopback-model", "messages": [{"role": "user", "content": "hi"}]}
            sent = [client.post("chat/completions", json.dumps(body).encode()) for _ in range(10)]
            try:
                return [json.loads(answer_body) for answer_body, _ in await asyncio.gather(*sent)]
            finally:
                await client.aclose()

        answers = asyncio.run(main())
        assert [a["object"] for a in answers] == ["chat.completion"] * 10
        assert server.max_in_flight == 3
        seen = server.headers_seen[0]
        assert seen["authorization"] == "Bearer sk-plain-key"
        assert seen["user-agent"].startswith("pytest-gauge/")
        assert server.log[0].query == "api-version=7"


def test_an_in_process_server_gets_the_request_and_its_answers_are_read_as_the_networks() -> None:
    """The simulator's way in: ``ModelClient(serve=...)`` hands the server method, path (no query) and
    body, and reads its answers as a socket's (status errors typed, a 2xx past the bound refused)."""
    seen: list[tuple[str, str, bytes]] = []
    answers = iter(
        [(200, "application/json", OK_BODY), (429, "application/json", b'{"error": {"message": "wait"}}')]
    )

    def serve(method: str, path: str, body: bytes) -> tuple[int, str, bytes]:
        seen.append((method, path, body))
        return next(answers)

    client = ModelClient("http://gauge-sim.invalid/v1", "k", query={"api-version": "1"}, serve=serve)

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
    """Sessions belong to the loop that made them: a client used under a second ``asyncio.run`` (a test,
    a CLI command) drops the first loop's connections and connects again, instead of failing."""
    with LoopbackServer() as server:
        client = ModelClient(server.base_url, "sk-plain-key", timeout=10.0)  # a reused dead connection hangs
        body = json.dumps({"model": "loopback-model", "messages": [{"role": "user", "content": "hi"}]})

        async def post(last: bool) -> bytes:
            try:
                return (await client.post("chat/completions", body.encode()))[0]
            finally:
                if last:  # the first loop's connections were dropped; the last one's are closed in it
                    await client.aclose()

        for last in (False, True):
            answer_body = asyncio.run(post(last))
            assert json.loads(answer_body)["object"] == "chat.completion"
        assert server.connections_total == 2


async def post_once(base_url: str, body: bytes) -> tuple[bytes, Any]:
    client = ModelClient(base_url, "sk-tls-key", timeout=10)
    try:
        return await client.post("chat/completions", body)
    finally:
        await client.aclose()


def test_https_is_served_with_a_trusted_certificate_and_refused_with_an_untrusted_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = self_signed(tmp_path)
    body = json.dumps({"model": "loopback-model", "messages": [{"role": "user", "content": "hi"}]}).encode()
    with LoopbackServer(tls=(str(cert), str(key))) as server:
        assert server.base_url.startswith("https://127.0.0.1:")
        tls_context.cache_clear()
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        answer_body, _ = asyncio.run(post_once(server.base_url, body))
        assert json.loads(answer_body)["object"] == "chat.completion"
        tls_context.cache_clear()
        monkeypatch.delenv("SSL_CERT_FILE")  # certifi's CAs do not know this certificate
        with pytest.raises(APIConnectionError) as caught:
            asyncio.run(post_once(server.base_url, body))
        tls_context.cache_clear()
    assert caught.value.cause.startswith("the TLS handshake failed: ")
    assert "certificate verify failed" in caught.value.cause
