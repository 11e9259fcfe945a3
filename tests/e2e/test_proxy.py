"""The recording proxy as a server (docs/protocol.md#the-recording-proxy), through the official ``openai``
and ``anthropic`` SDKs: refused without the run's token (401, the SDK's typed error), streaming re-sent
from whole answers, gateway errors in the format's shape and not retried by the client, the client's
environment read from inside a child process; and a plain test's SDK calls through ``gauge_proxy`` in a
run on the simulator: every request in the ledger with its tokens and its test, a re-run from the cache.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import openai
import pytest

from pytest_gauge._internal.gateway.errors import GatewayError
from pytest_gauge._internal.gateway.gateway import CallContext, WireReply
from pytest_gauge._internal.gateway.proxy import (
    ProxyRoute,
    RecordingProxy,
    WireRequest,
    client_environment,
    new_proxy_token,
)
from pytest_gauge._internal.gateway.wire import Api, wire_format
from pytest_gauge._internal.records import ChatResult, LedgerRecord
from tests.helpers import read_jsonl, run_inprocess
from tests.sdks import ANTHROPIC_INSTALL, require_sdk, sdk_http

CTX = CallContext("suite", "t1", "transcript/t1/agent-a/0")
TOOL_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "lookup", "arguments": '{"q": "refund"}'},
}


def _written(api: Api) -> bool:
    """Whether the wire format's module is written yet: its tests run then."""
    try:
        wire_format(api).error_body(401, "x", "authentication")
    except NotImplementedError:
        return False
    return True


def _needs(api: Api) -> None:
    if not _written(api):
        pytest.skip(f"the {api} wire format is not written yet (gateway/wire/)")


def _anthropic() -> ModuleType:
    return require_sdk("anthropic", ANTHROPIC_INSTALL)


def _completion(model: str, tool: bool) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": None if tool else "Refunds take 30 days."}
    if tool:
        message["tool_calls"] = [TOOL_CALL]
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if tool else "stop"}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }


class FakeCalls:
    """A unit's calls answered here (what the proxy does, not the gateway): each call kept, a chat
    completion written in the request's format, or ``fail`` raised."""

    def __init__(self, tool: bool = False, fail: GatewayError | None = None) -> None:
        self.tool = tool
        self.fail = fail
        self.seq = 0
        self.seen: list[tuple[int, str, str, Api, dict[str, Any]]] = []
        self.headers: list[dict[str, str]] = []

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    async def call(self, request: WireRequest) -> WireReply:
        seq, role, model, api, body = request.seq, request.role, request.model, request.api, request.body
        self.seen.append((seq, role, model, api, body))
        self.headers.append(dict(request.headers or {}))
        if self.fail is not None:
            raise self.fail
        response = wire_format(api).from_completion(_completion(model, self.tool), body)
        record = LedgerRecord(
            "run", f"{CTX.work}#{seq}", 1, "ok", CTX.suite, CTX.task_id, "agent", model, "single", CTX.work,
            None, False, 0.0, "stop", False, None,
        )  # fmt: skip
        return WireReply(response, ChatResult("", (), "stop"), record)


@pytest.fixture
def proxy() -> Iterator[RecordingProxy]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    served = RecordingProxy(new_proxy_token(), loop)
    yield served
    served.close()
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    loop.close()


def _openai(route: ProxyRoute, key: str | None = None) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=route.openai_base_url, api_key=key or route.token, http_client=sdk_http(openai)
    )


@pytest.mark.parametrize("api", ["chat", "responses", "anthropic"])
def test_requests_without_the_runs_token_are_refused(proxy: RecordingProxy, api: Api) -> None:
    _needs(api)
    calls = FakeCalls()
    route = proxy.register(CTX, calls=calls)
    with pytest.raises(Exception) as refused:  # another run's token: the SDK's typed error
        _send(api, route, new_proxy_token(), stream=False)
    assert getattr(refused.value, "status_code", None) == 401, refused.value
    assert type(refused.value).__name__ == "AuthenticationError" and route.token not in str(refused.value)
    path = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "anthropic": "/v1/messages"}[api]
    bare = http.client.HTTPConnection("127.0.0.1", route.port, timeout=10)  # no token at all
    bare.request("POST", route.base_url.split(str(route.port), 1)[1] + path, body=b'{"model": "m"}')
    answer = bare.getresponse()
    body = json.loads(answer.read())
    assert answer.status == 401 and answer.getheader("x-should-retry") == "false"
    expected = wire_format(api).error_body(401, "x", "authentication")
    assert body.keys() == expected.keys() and "proxy token" in json.dumps(body)
    assert calls.seen == []  # nothing reached the gateway
    _send(api, route, route.token, stream=False)
    assert [s[:4] for s in calls.seen] == [(1, "agent", "m", api)]


def _send(api: Api, route: ProxyRoute, key: str, *, stream: bool) -> Any:
    """One request of ``api``'s format through the official SDK, ``key`` as its token."""
    ask = [{"role": "user", "content": "How long for a refund?"}]
    if api == "anthropic":
        anthropic = _anthropic()
        client = anthropic.Anthropic(
            base_url=route.anthropic_base_url,
            auth_token=key or "unused",
            api_key=None,
            http_client=sdk_http(anthropic),
        )
        if not key:
            client = client.with_options(default_headers={"Authorization": anthropic.Omit()})
        if stream:
            with client.messages.stream(model="m", max_tokens=64, messages=ask) as events:
                return events.get_final_message()
        return client.messages.create(model="m", max_tokens=64, messages=ask)
    client = openai.OpenAI(base_url=route.openai_base_url, api_key=key, http_client=sdk_http(openai))
    if api == "responses":
        if stream:
            with client.responses.stream(model="m", input="How long for a refund?") as events:
                return events.get_final_response()
        return client.responses.create(model="m", input="How long for a refund?")
    if stream:
        return list(client.chat.completions.create(model="m", messages=ask, stream=True))
    return client.chat.completions.create(model="m", messages=ask)


@pytest.mark.parametrize("api", ["chat", "responses", "anthropic"])
def test_a_stream_is_the_whole_answer_resent_as_events(proxy: RecordingProxy, api: Api) -> None:
    _needs(api)
    calls = FakeCalls()
    route = proxy.register(CTX, calls=calls)
    whole, streamed = (
        _send(api, route, route.token, stream=False),
        _send(api, route, route.token, stream=True),
    )
    assert _text(api, whole) == _text(api, streamed) == "Refunds take 30 days."
    assert all("stream" not in s[4] and "stream_options" not in s[4] for s in calls.seen)
    assert [s[0] for s in calls.seen] == [1, 2]


def test_a_clients_beta_header_is_passed_on_and_nothing_else(proxy: RecordingProxy) -> None:
    """Claude Code sends beta body fields with ``anthropic-beta``: the proxy passes that header to the
    gateway (the format's ``passed_headers``); the client's other headers, its token above all, stay."""
    anthropic = _anthropic()
    calls = FakeCalls()
    route = proxy.register(CTX, calls=calls)
    client = anthropic.Anthropic(
        base_url=route.anthropic_base_url,
        http_client=sdk_http(anthropic),
        auth_token=route.token,
        default_headers={"anthropic-beta": "context-management-2025-06-27", "x-session": "s-1"},
    )
    client.messages.create(model="m", max_tokens=64, messages=[{"role": "user", "content": "hi"}])
    _openai(route).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}], extra_headers={"anthropic-beta": "x"}
    )
    assert calls.headers == [{"anthropic-beta": "context-management-2025-06-27"}, {}]


def _text(api: Api, reply: Any) -> str:
    if api == "anthropic":
        return "".join(b.text for b in reply.content if b.type == "text")
    if api == "responses":
        return str(reply.output_text)
    if isinstance(reply, list):
        return "".join(c.choices[0].delta.content or "" for c in reply if c.choices)
    return str(reply.choices[0].message.content)


def test_tool_calls_pass_through_streaming_or_not(proxy: RecordingProxy) -> None:
    calls = FakeCalls(tool=True)
    route = proxy.register(CTX, calls=calls, seed=42)
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    client = _openai(route)
    ask = [{"role": "user", "content": "refund?"}]
    whole = client.chat.completions.create(model="m", messages=ask, tools=tools)
    assert whole.choices[0].message.tool_calls[0].model_dump() == TOOL_CALL
    with client.chat.completions.stream(model="m", messages=ask, tools=tools) as events:
        final = events.get_final_completion()
    call = final.choices[0].message.tool_calls[0]
    assert (call.id, call.function.name, call.function.arguments) == ("call_1", "lookup", '{"q": "refund"}')
    assert calls.seen[0][4]["tools"] == tools and calls.seen[0][4]["seed"] == 42  # the route's seed added
    seeded = client.chat.completions.create(model="m", messages=ask, seed=7)
    assert seeded and calls.seen[-1][4]["seed"] == 7  # the client's own kept


def test_gateway_errors_come_back_typed_and_are_not_retried(proxy: RecordingProxy) -> None:
    secret = "sk-upstream-secret-4242"
    fail = GatewayError(f"429 rate limited (key {secret})", "lower --gauge-rpm", status=429)
    calls = FakeCalls(fail=fail)
    route = proxy.register(CTX, calls=calls)
    with pytest.raises(openai.RateLimitError) as limited:
        _openai(route).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    assert "lower --gauge-rpm" in str(limited.value) and secret not in str(limited.value)
    assert len(calls.seen) == 1  # x-should-retry: false, despite the SDK's two retries
    calls.fail = GatewayError("timed out", "raise --gauge-timeout")
    with pytest.raises(openai.APIStatusError) as timed_out:
        _openai(route).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    assert timed_out.value.status_code == 502


def test_closed_routes_and_other_paths_are_404(proxy: RecordingProxy) -> None:
    route = proxy.register(CTX, calls=FakeCalls())
    with pytest.raises(openai.NotFoundError):
        _openai(route).models.list()
    route.close()
    with pytest.raises(openai.NotFoundError):
        _openai(route).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])


def test_the_client_environment_read_from_inside_a_child(
    proxy: RecordingProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = "sk-the-gateway-key-0987654321"
    monkeypatch.setenv("TAOTOKEN_API_KEY", key)
    monkeypatch.setenv("TAOTOKEN_AGENT_API_KEY", key + "-agent")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-not-for-the-client")
    route = proxy.register(CTX, calls=FakeCalls())
    child = subprocess.run(
        [sys.executable, "-c", "import json, os; print(json.dumps(dict(os.environ)))"],
        env=client_environment(route),
        capture_output=True,
        text=True,
        check=True,
    )
    seen: dict[str, str] = json.loads(child.stdout)
    assert key not in child.stdout and "sk-ant-not-for-the-client" not in child.stdout
    assert seen["OPENAI_API_KEY"] == seen["ANTHROPIC_AUTH_TOKEN"] == route.token
    assert seen["OPENAI_BASE_URL"] == route.openai_base_url and "ANTHROPIC_API_KEY" not in seen


# ----- a run on the simulator: a plain test's SDK calls through gauge_proxy --------------------------

CLIENT_TEST = """
import openai
import pytest

from pytest_gauge._internal.gateway.proxy import ProxyRoute

ASK = [{{"role": "user", "content": "How long do customers have to ask for a refund?"}}]


def test_sdk_calls(gauge_proxy: ProxyRoute) -> None:
    client = openai.OpenAI(base_url=gauge_proxy.openai_base_url, api_key=gauge_proxy.token)
    whole = client.chat.completions.create(model="sim-agent", messages=ASK, max_tokens=64)
    chunks = list(client.chat.completions.create(model="sim-agent", messages=ASK, max_tokens=65, stream=True))
    assert whole.choices[0].message.content and chunks[-1].usage.total_tokens > 0
    if {responses}:
        assert client.responses.create(model="sim-agent", input="Refunds?", max_output_tokens=64).output_text
        with client.responses.stream(model="sim-agent", input="Refunds?", max_output_tokens=65) as events:
            assert events.get_final_response().output_text
    if {messages}:
        import anthropic

        claude = anthropic.Anthropic(base_url=gauge_proxy.anthropic_base_url, auth_token=gauge_proxy.token)
        assert claude.messages.create(model="sim-agent", max_tokens=64, messages=ASK).content
        with claude.messages.stream(model="sim-agent", max_tokens=65, messages=ASK) as events:
            assert events.get_final_message().content
"""


def test_a_tests_sdk_calls_through_gauge_proxy_are_in_the_ledger_then_cached(
    anthropic_sdk: ModuleType, pytester: pytest.Pytester
) -> None:
    """(``anthropic_sdk``, a session fixture, imports the SDK before ``pytester``'s snapshot of
    ``sys.modules``, so the in-process run's test finds it imported and it stays for later tests.)"""
    responses, messages = _written("responses"), _written("anthropic")
    pytester.makeini("[pytest]\ngauge_backend = sim\ngauge_prices =\n    sim-agent 1 2\n")
    pytester.makepyfile(test_client=CLIENT_TEST.format(responses=responses, messages=messages))
    calls = 2 + 2 * responses + 2 * messages
    first = _ledger(pytester)
    assert [r.call_id for r in first] == [f"test_client.py::test_sdk_calls#{n}" for n in range(1, calls + 1)]
    assert all(
        r.status == "ok" and r.role == "agent" and r.work == "test_client.py::test_sdk_calls" for r in first
    )
    assert all(r.usage is not None and r.usage.total_tokens > 0 and r.cost for r in first)
    assert not any(r.cache_hit for r in first)
    apis = ["chat"] * 2 + ["responses"] * 2 * responses + ["anthropic"] * 2 * messages
    assert [r.api for r in first] == apis  # the wire format on each line
    again = _ledger(pytester)
    assert [r.call_id for r in again] == [r.call_id for r in first] and all(r.cache_hit for r in again)


def _ledger(pytester: pytest.Pytester) -> list[LedgerRecord]:
    result = run_inprocess(pytester, "-n", "0", "--gauge-no-progress")
    assert result.ret == 0, result.stdout.str()
    path: Path = pytester.path / "gauge-out" / "_tests" / "agent_runs.jsonl"
    return [LedgerRecord.from_json(row) for row in read_jsonl(path)]


# ----- a suite's program agent on the simulator: its calls are its transcript's ---------------------

PROGRAM = """
import sys

import openai

model, prompt = sys.argv[1], sys.argv[2]
client = openai.OpenAI()  # OPENAI_BASE_URL and OPENAI_API_KEY: the proxy's, from the plugin
chunks = client.chat.completions.create(
    model=model, messages=[{"role": "user", "content": prompt}], max_tokens=80, stream=True
)
print("".join(c.choices[0].delta.content or "" for c in chunks if c.choices))
"""

PROGRAM_SUITE = """
import sys
from pathlib import Path

from pytest_gauge import CommandAgent, Judge, ModelAgent, Suite, UserSimulator

ARGV = (sys.executable, str(Path(__file__).parent / "agent.py"), "{model}", "{prompt}")
suite = Suite(
    agents=[
        CommandAgent("prog", ARGV, model="sim-prog"),
        ModelAgent("model", "sim-model"),
    ],
    judge=Judge("sim-judge"),
    user=UserSimulator("sim-user", max_turns=1),
    orders="seeded",
)
"""


def test_a_program_agents_calls_go_through_the_proxy_as_its_transcripts(pytester: pytest.Pytester) -> None:
    folder = pytester.path / "suites" / "prog"
    folder.mkdir(parents=True)
    task = {
        "task_id": "t1",
        "category": "information_retrieval",
        "task_prompt": "Name the plan tiers.",
        "success_criteria": [],
    }
    (folder / "tasks.jsonl").write_text(json.dumps({"format_version": 1}) + "\n" + json.dumps(task) + "\n")
    (folder / "agent.py").write_text(PROGRAM)
    (folder / "test_prog.py").write_text(PROGRAM_SUITE)
    pytester.makeini("[pytest]\ngauge_backend = sim\n")
    result = run_inprocess(pytester, "suites", "-n", "0", "--gauge-no-progress")
    assert result.ret == 0, result.stdout.str()
    rows = [
        LedgerRecord.from_json(r)
        for r in read_jsonl(pytester.path / "gauge-out" / "prog" / "agent_runs.jsonl")
    ]
    work = "transcript/t1/prog/0"
    mine = [r for r in rows if r.work == work]
    assert {r.role for r in mine} == {"agent", "user_sim"} and all(r.status == "ok" for r in mine)
    ids = [r.call_id for r in mine]
    assert len(set(ids)) == len(ids)  # the program's calls are numbered with the transcript's own
    program_calls = [r for r in mine if r.role == "agent"]
    assert [r.model for r in program_calls] == ["sim-prog"] and program_calls[0].usage is not None


def test_on_replay_a_client_reaches_its_own_proxy_and_nothing_else(proxy: RecordingProxy) -> None:
    from pytest_gauge._internal.gateway import backends

    other = socket.create_server(("127.0.0.1", 0))
    route = proxy.register(CTX, calls=FakeCalls())
    was_active = backends.replay_guard.active
    try:
        backends.install_replay_guard()
        reply = _openai(route).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        assert reply.choices[0].message.content == "Refunds take 30 days."
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", other.getsockname()[1]), timeout=5)
    finally:
        backends.replay_guard.active = was_active
        other.close()
    proxy.close()
    assert ("127.0.0.1", route.port) not in backends.replay_guard.allowed  # a closed proxy is no exception


TWO_WORKERS = """
import hashlib
import os
from pathlib import Path

import openai
import pytest


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_route(gauge_proxy, n: int) -> None:
    client = openai.OpenAI(base_url=gauge_proxy.openai_base_url, api_key=gauge_proxy.token)
    ask = [{"role": "user", "content": f"Question {n}?"}]
    assert client.chat.completions.create(model="sim-agent", messages=ask, max_tokens=32).choices
    seen = Path("tokens") / f"{n}-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}"
    seen.parent.mkdir(exist_ok=True)
    seen.write_text(hashlib.sha256(gauge_proxy.token.encode()).hexdigest())
"""


@pytest.mark.slow
def test_every_worker_serves_the_controllers_token(pytester: pytest.Pytester) -> None:
    """Under xdist each worker has its own proxy, all with the one token the controller made."""
    pytester.makeini("[pytest]\ngauge_backend = sim\n")
    pytester.makepyfile(test_two=TWO_WORKERS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", "--gauge-no-progress")
    result.assert_outcomes(passed=4)
    tokens = {p.name: p.read_text() for p in (pytester.path / "tokens").iterdir()}
    assert len({name.split("-")[1] for name in tokens}) == 2 and len(set(tokens.values())) == 1
    rows = [
        LedgerRecord.from_json(r)
        for r in read_jsonl(pytester.path / "gauge-out" / "_tests" / "agent_runs.jsonl")
    ]
    assert sorted(r.call_id for r in rows) == [f"test_two.py::test_route[{n}]#1" for n in range(1, 5)]


def test_a_bug_behind_the_proxy_is_a_500_naming_it(proxy: RecordingProxy) -> None:
    class Broken(FakeCalls):
        async def call(self, request: WireRequest) -> WireReply:
            raise RuntimeError("boom")

    route = proxy.register(CTX, calls=Broken())
    with pytest.raises(openai.InternalServerError, match="internal error \\(RuntimeError: boom\\)"):
        _openai(route).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])


async def _cancel_all() -> None:
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def test_closed_once_the_loop_has_stopped() -> None:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    served = RecordingProxy(new_proxy_token(), loop)
    route = served.register(CTX, calls=FakeCalls())
    assert _openai(route).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    asyncio.run_coroutine_threadsafe(_cancel_all(), loop).result(5)  # the engine ended first: its
    loop.call_soon_threadsafe(loop.stop)  # tasks cancelled (the connections' too), its loop stopped
    thread.join(5)
    served.close()
    loop.close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", route.port), timeout=5)
    with pytest.raises(RuntimeError, match="closed"):
        served.register(CTX, calls=FakeCalls())


def test_a_client_expecting_100_continue_is_told_to_go_on(proxy: RecordingProxy) -> None:
    calls = FakeCalls()
    route = proxy.register(CTX, calls=calls)
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x" * 2000}]}).encode()
    path = route.base_url.split(str(route.port), 1)[1] + "/v1/chat/completions"
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {route.token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nExpect: 100-continue\r\n"
        "Connection: close\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", route.port), timeout=10) as conn:
        conn.sendall(head.encode())
        assert conn.recv(64).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")  # before any body was sent
        conn.sendall(body)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 200 OK") and b"Refunds take 30 days." in answer
    assert len(calls.seen) == 1
