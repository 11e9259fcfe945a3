"""The loopback gateway, driven through the real ``openai`` client (raw HTTP only for bad requests)."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from pytest_gauge.testing import (
    FaultPlan,
    LoopbackServer,
    ResponderError,
    ServerProcess,
    completion,
    scheduled_fault,
    tool_call,
)
from tests.sdks import sdk_http

KEY = "sk-loopback-test"
HELLO = [{"role": "user", "content": "hello world"}]


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as srv:
        yield srv


def client(srv: LoopbackServer | ServerProcess, **kw: Any) -> openai.OpenAI:
    kw.setdefault("max_retries", 0)
    kw.setdefault("http_client", sdk_http(openai))
    return openai.OpenAI(api_key=kw.pop("api_key", KEY), base_url=kw.pop("base_url", srv.base_url), **kw)


def chat(c: openai.OpenAI, model: str = "m-agent", messages: Any = HELLO, **kw: Any) -> Any:
    return c.chat.completions.create(model=model, messages=messages, **kw)


def raw_post(url: str, data: bytes) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(url, data=data, method="POST", headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


# ------------------------------------------------------------------------------------------ normal path


def test_normal_completion_usage_and_counters(server: LoopbackServer) -> None:
    with client(server) as c:
        r = chat(c)
    assert r.object == "chat.completion"
    assert r.model == "m-agent"
    assert r.id.startswith("chatcmpl-")
    assert r.created > 0
    assert r.choices[0].message.role == "assistant"
    assert r.choices[0].message.content == "ok: hello world"
    assert r.choices[0].finish_reason == "stop"
    # "hello world" = 11 chars -> 11//4+1 = 3; "ok: hello world" = 15 chars -> 15//4+1 = 4
    assert r.usage is not None
    assert (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens) == (3, 4, 7)
    assert server.requests_total == 1
    assert server.statuses == [200]
    assert server.requests_by_status == {200: 1}
    assert server.by_path == {"/v1/chat/completions": 1}
    assert server.bodies == [{"model": "m-agent", "messages": HELLO}]
    assert server.headers_seen[0]["authorization"] == f"Bearer {KEY}"
    assert server.in_flight == 0
    assert server.max_in_flight == 1
    server.reset_counters()
    assert (server.requests_total, server.statuses, server.bodies, server.by_path) == (0, [], [], {})


def test_default_responder_truncates_to_40_chars_and_counts_all_messages(server: LoopbackServer) -> None:
    long = "abcdefghij" * 6  # 60 chars
    messages = [
        {"role": "system", "content": "sys!"},  # 4
        {"role": "user", "content": "first"},  # 5
        {"role": "assistant", "content": "reply"},  # 5
        {"role": "user", "content": [{"type": "text", "text": long}]},  # 60 (content parts)
    ]
    with client(server) as c:
        r = chat(c, messages=messages)
    content = "ok: " + long[:40]
    assert r.choices[0].message.content == content
    assert r.usage is not None
    assert r.usage.prompt_tokens == 74 // 4 + 1 == 19
    assert r.usage.completion_tokens == 44 // 4 + 1 == 12


def test_keep_alive_reuses_one_connection(server: LoopbackServer) -> None:
    with client(server) as c:
        for _ in range(5):
            chat(c)
    assert server.requests_total == 5
    assert server.connections_total == 1


def test_models_route(server: LoopbackServer) -> None:
    with client(server) as c:
        ids = [m.id for m in c.models.list()]
    assert ids == ["loopback-model"]
    assert server.by_path == {"/v1/models": 1}


def test_tool_calls_and_custom_responder_pass_through() -> None:
    def responder(body: dict[str, Any]) -> dict[str, Any]:
        return completion(
            None,
            tool_calls=[tool_call("call_1", "refund", {"order_id": 123})],
            usage={"prompt_tokens": 10, "completion_tokens": 5},
        )

    with LoopbackServer(responder) as srv, client(srv) as c:
        r = chat(c)
    assert r.choices[0].finish_reason == "tool_calls"
    calls = r.choices[0].message.tool_calls
    assert calls is not None and len(calls) == 1
    assert calls[0].id == "call_1"
    assert calls[0].function.name == "refund"
    assert json.loads(calls[0].function.arguments) == {"order_id": 123}
    assert r.usage is not None and (r.usage.prompt_tokens, r.usage.total_tokens) == (10, 15)
    assert r.id == "chatcmpl-loopback-1" and r.model == "m-agent"


def test_responder_error_and_crash_become_error_responses() -> None:
    def responder(body: dict[str, Any]) -> dict[str, Any]:
        if body["messages"][-1]["content"] == "too long":
            raise ResponderError(400, "maximum context length exceeded", code="context_length_exceeded")
        raise KeyError("boom")

    with LoopbackServer(responder) as srv, client(srv) as c:
        with pytest.raises(openai.BadRequestError) as bad:
            chat(c, messages=[{"role": "user", "content": "too long"}])
        with pytest.raises(openai.InternalServerError) as crash:
            chat(c)
    assert bad.value.code == "context_length_exceeded"
    assert "KeyError" in crash.value.message
    assert srv.statuses == [400, 500]


# ------------------------------------------------------------------------------------------ error paths


def test_status_401_every_request() -> None:
    with LoopbackServer(faults=FaultPlan(status_401=True)) as srv, client(srv) as c:
        with pytest.raises(openai.AuthenticationError) as exc:
            chat(c)
        with pytest.raises(openai.AuthenticationError):
            c.models.list()
    assert exc.value.status_code == 401
    assert exc.value.code == "invalid_api_key"
    assert isinstance(exc.value.body, dict)
    assert exc.value.body["message"] == "Incorrect API key provided"
    assert KEY not in str(exc.value)
    assert srv.statuses == [401, 401]


def test_expected_key_mismatch_is_401_and_match_is_200() -> None:
    with LoopbackServer(faults=FaultPlan(expected_key=KEY)) as srv:
        with client(srv, api_key=KEY[:-1]) as bad, pytest.raises(openai.AuthenticationError):
            chat(bad)
        with client(srv, api_key="sk-other") as bad, pytest.raises(openai.AuthenticationError):
            chat(bad)
        with client(srv) as good:
            assert chat(good).choices[0].message.content == "ok: hello world"
    assert srv.statuses == [401, 401, 200]


def test_doubled_v1_is_404_with_openai_style_message(server: LoopbackServer) -> None:
    with client(server, base_url=server.base_url + "/v1") as c, pytest.raises(openai.NotFoundError) as exc:
        chat(c)
    body = exc.value.body
    assert isinstance(body, dict)
    assert body["message"] == "Invalid URL (POST /v1/v1/chat/completions)"
    assert body["type"] == "invalid_request_error"
    assert server.statuses == [404]
    assert server.by_path == {"/v1/v1/chat/completions": 1}


def test_429_carries_retry_after_headers() -> None:
    plan = FaultPlan(rate_429=1.0, retry_after="7", retry_after_ms=250)
    with LoopbackServer(faults=plan) as srv, client(srv) as c:
        with pytest.raises(openai.RateLimitError) as exc:
            chat(c)
        assert exc.value.response.headers["retry-after"] == "7"
        assert exc.value.response.headers["retry-after-ms"] == "250"
        assert exc.value.code == "rate_limit_exceeded"
        srv.faults = FaultPlan(rate_429=1.0, retry_after=None)
        with pytest.raises(openai.RateLimitError) as exc2:
            chat(c)
        assert "retry-after" not in exc2.value.response.headers
        assert "retry-after-ms" not in exc2.value.response.headers
    assert srv.statuses == [429, 429]


def test_with_raw_response_sees_headers_on_success(server: LoopbackServer) -> None:
    with client(server) as c:
        raw = c.chat.completions.with_raw_response.create(model="m", messages=HELLO)
    assert raw.status_code == 200
    assert raw.headers["x-request-id"] == "req_loopback_1"
    assert raw.parse().choices[0].message.content == "ok: hello world"


def test_burst_5xx_then_success() -> None:
    with LoopbackServer(faults=FaultPlan(burst_5xx=2)) as srv, client(srv) as c:
        for _ in range(2):
            with pytest.raises(openai.InternalServerError) as exc:
                chat(c)
            assert exc.value.status_code == 503
        assert chat(c).choices[0].message.content == "ok: hello world"
    assert srv.statuses == [503, 503, 200]


def test_should_retry_false_stops_client_retries() -> None:
    plan = FaultPlan(burst_5xx=5, should_retry_false=True)
    with LoopbackServer(faults=plan) as srv, client(srv, max_retries=3) as c:
        with pytest.raises(openai.InternalServerError) as exc:
            chat(c)
    assert exc.value.response.headers["x-should-retry"] == "false"
    assert srv.requests_total == 1  # the client obeyed the header and did not retry


def test_slow_response_beyond_client_timeout() -> None:
    # the fast request with a timeout long enough on a loaded machine, the slow one far below its sleep
    plan = FaultPlan(slow_every=2, slow_seconds=60.0)
    with LoopbackServer(faults=plan) as srv, client(srv, timeout=30) as c, client(srv, timeout=0.2) as short:
        assert chat(c).choices[0].message.content == "ok: hello world"  # request 1 is not slow
        with pytest.raises(openai.APITimeoutError):
            chat(short)  # request 2 sleeps 60 s (cancelled when the server stops)
        assert srv.requests_total == 2
    assert srv.by_path == {"/v1/chat/completions": 2}


def test_reset_every_drops_the_connection() -> None:
    with LoopbackServer(faults=FaultPlan(reset_every=2)) as srv, client(srv) as c:
        chat(c)
        with pytest.raises(openai.APIConnectionError) as exc:
            chat(c)
        assert not isinstance(exc.value, openai.APITimeoutError)
        chat(c)
    assert srv.statuses == [200, 0, 200]
    assert srv.requests_by_status == {200: 2, 0: 1}


def test_no_usage() -> None:
    with LoopbackServer(faults=FaultPlan(no_usage=True)) as srv, client(srv) as c:
        r = chat(c)
    assert r.usage is None
    assert r.choices[0].message.content == "ok: hello world"


def test_truncate_gives_length_and_half_content() -> None:
    with LoopbackServer(faults=FaultPlan(truncate=True)) as srv, client(srv) as c:
        r = chat(c)
    assert r.choices[0].finish_reason == "length"
    assert r.choices[0].message.content == "ok: hel"  # first 15 // 2 = 7 chars of "ok: hello world"


def test_status_400_models() -> None:
    plan = FaultPlan(status_400_models=frozenset({"ghost-model"}))
    with LoopbackServer(faults=plan) as srv, client(srv) as c:
        with pytest.raises(openai.BadRequestError) as exc:
            chat(c, model="ghost-model")
        assert chat(c, model="real-model").model == "real-model"
    assert isinstance(exc.value.body, dict)
    assert exc.value.body["message"] == "The model `ghost-model` does not exist"
    assert exc.value.param == "model"
    assert srv.statuses == [400, 200]


def test_stream_is_the_same_answer_as_chunks(server: LoopbackServer) -> None:
    with client(server) as c:
        chunks = list(chat(c, stream=True, stream_options={"include_usage": True}))
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text == "ok: hello world"
    assert [ch.choices[0].finish_reason for ch in chunks if ch.choices][-1] == "stop"
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens == 7
    assert server.statuses == [200] and server.bodies[0]["stream"] is True


def test_malformed_json_is_400(server: LoopbackServer) -> None:
    url = server.base_url + "/chat/completions"
    status, body = raw_post(url, b'{"model": "m", "messages": [')
    assert status == 400 and body["error"]["type"] == "invalid_request_error"
    status, _ = raw_post(url, b'["not", "an", "object"]')
    assert status == 400
    status, _ = raw_post(url, b'{"messages": []}')  # no model
    assert status == 400
    assert server.statuses == [400, 400, 400]
    assert len(server.bodies) == 1  # the model-less one parsed as an object


def test_rates_are_seeded_and_reproducible() -> None:
    plan = FaultPlan(rate_429=0.3, rate_503=0.1, rate_500=0.1, seed=7)
    with LoopbackServer(faults=plan) as srv, client(srv) as c:
        for _ in range(30):
            try:
                chat(c)
            except openai.APIStatusError:
                pass
        first = srv.statuses
        srv.reset_counters()  # restarts the fault schedule at request 1
        for _ in range(30):
            try:
                chat(c)
            except openai.APIStatusError:
                pass
        second = srv.statuses
    expected = {None: 200, "429": 429, "503": 503, "500": 500}
    assert first == second == [expected[scheduled_fault(plan, n)] for n in range(1, 31)]
    assert len(set(first)) == 4


def test_529_is_drawn_last_and_keeps_older_schedules() -> None:
    old = FaultPlan(rate_429=0.3, rate_503=0.1, seed=7)
    new = FaultPlan(rate_429=0.3, rate_503=0.1, rate_529=0.3, seed=7)
    drawn = [scheduled_fault(new, n) for n in range(1, 41)]
    assert all(
        d == o
        for d, o in zip(drawn, [scheduled_fault(old, n) for n in range(1, 41)], strict=True)
        if d != "529"
    )
    n = drawn.index("529") + 1
    with LoopbackServer(faults=new) as srv, client(srv) as c:
        for _ in range(n - 1):
            try:
                chat(c)
            except openai.APIStatusError:
                pass
        with pytest.raises(openai.InternalServerError) as exc:
            chat(c)
    assert exc.value.status_code == 529
    assert srv.statuses[-1] == 529


def test_x_api_key_is_the_key_without_a_bearer() -> None:
    with LoopbackServer(faults=FaultPlan(expected_key=KEY)) as srv:
        ok, _ = raw_post_headers(srv.base_url + "/chat/completions", {"x-api-key": KEY})
        bad, _ = raw_post_headers(srv.base_url + "/chat/completions", {"x-api-key": "sk-other"})
    assert (ok, bad) == (200, 401)


def raw_post_headers(url: str, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
    data = json.dumps({"model": "m", "messages": HELLO}).encode()
    req = urllib.request.Request(
        url, data=data, method="POST", headers={"content-type": "application/json", **headers}
    )
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_scheduled_fault_rates_match_probabilities() -> None:
    plan = FaultPlan(rate_429=0.2, rate_503=0.1, rate_500=0.05, burst_5xx=3, seed=11)
    draws = [scheduled_fault(plan, n) for n in range(1, 20_004)]
    assert draws[:3] == ["burst_503"] * 3
    rest = draws[3:]
    n = len(rest)
    kinds: tuple[tuple[Any, float], ...] = (("429", 0.2), ("503", 0.1), ("500", 0.05))
    for kind, p in kinds:
        sd = (p * (1 - p) / n) ** 0.5
        assert abs(rest.count(kind) / n - p) < 5 * sd
    other = FaultPlan(rate_429=0.2, rate_503=0.1, rate_500=0.05, burst_5xx=3, seed=12)
    assert [scheduled_fault(other, k) for k in range(4, 200)] != draws[3:199]


def test_admin_routes_are_not_counted(server: LoopbackServer) -> None:
    with client(server) as c:
        chat(c)
    with urllib.request.urlopen(server.root_url + "/__gauge__/stats?full=1", timeout=5) as resp:
        stats = json.loads(resp.read())
    assert stats["requests_total"] == 1
    assert stats["requests_by_status"] == {"200": 1}
    assert stats["bodies"] == [{"model": "m-agent", "messages": HELLO}]
    assert server.requests_total == 1


# ------------------------------------------------------------------------------------------ concurrency


async def _fire(srv: LoopbackServer, calls: int, concurrency: int) -> list[str]:
    sem = asyncio.Semaphore(concurrency)
    async with openai.AsyncOpenAI(api_key=KEY, base_url=srv.base_url, max_retries=0) as c:

        async def one(i: int) -> str:
            async with sem:
                msgs: Any = [{"role": "user", "content": f"q{i}"}]
                r = await c.chat.completions.create(model="m", messages=msgs)
                return r.choices[0].message.content or ""

        return await asyncio.gather(*(one(i) for i in range(calls)))


def test_max_in_flight_with_32_concurrent() -> None:
    with LoopbackServer() as srv:
        srv.gather(32)  # held until all 32 are open at once: a deterministic lower bound, whatever the load
        out = asyncio.run(_fire(srv, 32, 32))
        assert out == [f"ok: q{i}" for i in range(32)]
        assert srv.requests_total == 32
        assert (srv.max_in_flight, srv.gather_timed_out) == (32, False)
        assert srv.in_flight == 0


def test_max_in_flight_equals_concurrency_4() -> None:
    with LoopbackServer() as srv:
        srv.gather(4)
        asyncio.run(_fire(srv, 12, 4))
        assert (srv.max_in_flight, srv.gather_timed_out) == (4, False)
        assert srv.statuses == [200] * 12


def test_200_calls_with_semaphore_32() -> None:
    with LoopbackServer() as srv:
        srv.gather(32)
        out = asyncio.run(_fire(srv, 200, 32))
        assert sorted(out) == sorted(f"ok: q{i}" for i in range(200))
        assert srv.requests_total == 200
        assert srv.requests_by_status == {200: 200}
        assert (srv.max_in_flight, srv.gather_timed_out) == (32, False)


def test_gather_lets_warm_up_calls_pass_and_gives_up_after_its_timeout(server: LoopbackServer) -> None:
    server.gather(2, after=1)
    with client(server) as c:
        assert chat(c).choices[0].message.content == "ok: hello world"  # request 1 is not held
    asyncio.run(_fire(server, 2, 2))  # requests 2 and 3 are held until both are open
    assert (server.max_in_flight, server.gather_timed_out) == (2, False)
    server.gather(5, timeout=0.2)
    asyncio.run(_fire(server, 1, 1))  # 5 never come: released by the timeout, which is reported
    assert server.gather_timed_out and server.statuses == [200] * 4


# ------------------------------------------------------------------------------------------ subprocess


def test_subprocess_mode_prints_port_and_serves_stats() -> None:
    args = ["--latency", "0.01", "--expected-key", KEY, "--status-400-model", "ghost"]
    with ServerProcess(args) as proc:
        assert proc.port > 0
        with client(proc) as c:
            assert chat(c).choices[0].message.content == "ok: hello world"
            with pytest.raises(openai.BadRequestError):
                chat(c, model="ghost")
        with client(proc, api_key="wrong") as bad, pytest.raises(openai.AuthenticationError):
            chat(bad)
        stats = proc.stats()
        assert stats["requests_total"] == 3
        assert stats["statuses"] == [200, 400, 401]
        assert stats["by_path"] == {"/v1/chat/completions": 3}
        assert stats["faults"]["status_400_models"] == ["ghost"]
        proc.set_faults(FaultPlan(rate_429=1.0, retry_after_ms=5))
        proc.reset_counters()
        with client(proc) as c, pytest.raises(openai.RateLimitError) as exc:
            chat(c)
        assert exc.value.response.headers["retry-after-ms"] == "5"
        assert proc.stats()["statuses"] == [429]
        child = proc.proc
    assert child is not None and child.returncode is not None  # stopped and reaped
