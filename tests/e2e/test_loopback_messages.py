"""The loopback server's ``/v1/messages``, driven through the official ``anthropic`` SDK: answers plain and
streamed, tool use, the cache's token counts, and every fault of the chat route in Messages' own shapes,
each raised by the SDK as its typed error."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from pytest_gauge._internal.gateway.response import BadResponse
from pytest_gauge._internal.gateway.wire.anthropic import MESSAGES
from pytest_gauge.testing import FaultPlan, LoopbackServer, completion, scheduled_fault, tool_call
from pytest_gauge.testing.faults import MALFORMED_BY_API
from tests.sdks import ANTHROPIC_INSTALL, LazySDK, sdk_http

anthropic = LazySDK("anthropic", ANTHROPIC_INSTALL)  # imported by the first test that uses it

KEY = "sk-loopback-test"
HELLO = [{"role": "user", "content": "hello world"}]


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as srv:
        yield srv


def client(srv: LoopbackServer, **kw: Any) -> Any:
    """The SDK on the server (it adds ``/v1/messages`` to the root URL), its retries off."""
    kw.setdefault("max_retries", 0)
    kw.setdefault("http_client", sdk_http(anthropic))
    return anthropic.Anthropic(api_key=kw.pop("api_key", KEY), base_url=srv.root_url, **kw)


def create(c: Any, model: str = "claude-x", messages: Any = HELLO, **kw: Any) -> Any:
    return c.messages.create(model=model, max_tokens=kw.pop("max_tokens", 100), messages=messages, **kw)


def raises(srv: LoopbackServer, kind: Any, **kw: Any) -> Any:
    with client(srv) as c, pytest.raises(kind) as exc:
        create(c, **kw)
    return exc.value


def post(
    srv: LoopbackServer, body: dict[str, Any], headers: dict[str, str] | None = None
) -> tuple[int, bytes]:
    data = json.dumps(body).encode()
    heads = {"content-type": "application/json", **(headers or {})}
    req = urllib.request.Request(srv.base_url + "/messages", data=data, method="POST", headers=heads)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_a_message_with_usage_and_counters(server: LoopbackServer) -> None:
    with client(server) as c:
        m = create(c, system="Be brief.")
    assert (m.type, m.role, m.model, m.stop_reason) == ("message", "assistant", "claude-x", "end_turn")
    assert m.id.startswith("msg_") and [b.type for b in m.content] == ["text"]
    assert m.content[0].text == "ok: hello world"
    # prompt: "Be brief." + "hello world" = 20 chars -> 6 tokens; "ok: hello world" = 15 chars -> 4
    assert (m.usage.input_tokens, m.usage.output_tokens, m.usage.cache_read_input_tokens) == (6, 4, 0)
    assert server.by_path == {"/v1/messages": 1} and server.statuses == [200]
    assert (
        server.headers_seen[0].get("authorization") == f"Bearer {KEY}"
        or server.headers_seen[0].get("x-api-key") == KEY
    )
    assert server.stats()["chat_requests_total"] == 1  # one fault schedule for every wire format


def test_stream_adds_up_to_the_same_message(server: LoopbackServer) -> None:
    with client(server) as c:
        plain = create(c)
        with c.messages.stream(model="claude-x", max_tokens=100, messages=HELLO) as stream:
            text = "".join(stream.text_stream)
            final = stream.get_final_message()
    assert text == "ok: hello world"
    assert final.model_dump() == {**plain.model_dump(), "id": final.id}
    assert server.bodies[1]["stream"] is True


def test_tool_use_plain_and_streamed() -> None:
    def responder(body: dict[str, Any]) -> dict[str, Any]:
        last = body["messages"][-1]
        if last["role"] == "tool":
            return completion(f"The tool said {last['content']}.")
        return completion(None, tool_calls=[tool_call("call_7", "lookup", {"order_id": "123"})])

    tools = [{"name": "lookup", "description": "Find an order.", "input_schema": {"type": "object"}}]
    with LoopbackServer(responder) as srv, client(srv) as c:
        first = create(c, tools=tools)
        with c.messages.stream(model="claude-x", max_tokens=100, messages=HELLO, tools=tools) as stream:
            streamed = stream.get_final_message()
        (use,) = first.content
        history = [
            *HELLO,
            {"role": "assistant", "content": [use.model_dump(exclude_none=True)]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "shipped"}],
            },
        ]
        second = create(c, messages=history, tools=tools)
    assert first.stop_reason == "tool_use" and (use.name, use.input, use.id) == (
        "lookup",
        {"order_id": "123"},
        "call_7",
    )
    assert streamed.content[0].input == {"order_id": "123"} and streamed.stop_reason == "tool_use"
    assert second.content[0].text == "The tool said shipped." and second.stop_reason == "end_turn"
    assert srv.bodies[2]["tools"] == tools


def test_cache_reads_and_writes_are_messages_usage() -> None:
    plan = FaultPlan(cached_tokens=600, cache_write_tokens=300, cache_write_1h_tokens=100)
    big = completion("ok", usage={"prompt_tokens": 1000, "completion_tokens": 5})
    with LoopbackServer(lambda body: big, faults=plan) as srv, client(srv) as c:
        u = create(c).usage
    assert (u.input_tokens, u.cache_read_input_tokens, u.cache_creation_input_tokens) == (100, 600, 300)
    assert (u.cache_creation.ephemeral_5m_input_tokens, u.cache_creation.ephemeral_1h_input_tokens) == (
        200,
        100,
    )
    assert u.output_tokens == 5


def test_truncation_is_max_tokens() -> None:
    with LoopbackServer(faults=FaultPlan(truncate=True)) as srv, client(srv) as c:
        m = create(c)
    assert m.stop_reason == "max_tokens" and m.content[0].text == "ok: hel"


def test_missing_usage_is_missing() -> None:
    with LoopbackServer(faults=FaultPlan(no_usage=True)) as srv:
        status, raw = post(srv, {"model": "m", "max_tokens": 5, "messages": HELLO})
    assert status == 200 and "usage" not in json.loads(raw)
    assert MESSAGES.usage(MESSAGES.parse_response(raw)) is None


def test_429_has_its_wait_and_rate_limit_error() -> None:
    with LoopbackServer(faults=FaultPlan(rate_429=1.0, retry_after="7")) as srv:
        exc = raises(srv, anthropic.RateLimitError)
    assert exc.status_code == 429 and exc.response.headers["retry-after"] == "7"
    assert exc.body == {
        "type": "error",
        "error": {"type": "rate_limit_error", "message": exc.body["error"]["message"]},
    }
    assert "Rate limit" in exc.body["error"]["message"]


@pytest.mark.parametrize(
    ("plan", "status", "type_"),
    [
        (FaultPlan(rate_529=1.0), 529, "overloaded_error"),
        (FaultPlan(rate_500=1.0), 500, "api_error"),
        (FaultPlan(rate_503=1.0), 503, "api_error"),
        (FaultPlan(burst_5xx=1), 503, "api_error"),
    ],
)
def test_server_faults_are_internal_server_errors(plan: FaultPlan, status: int, type_: str) -> None:
    with LoopbackServer(faults=plan) as srv:
        exc = raises(srv, anthropic.InternalServerError)
    assert exc.status_code == status and exc.body["error"]["type"] == type_
    if status == 529 and hasattr(anthropic, "OverloadedError"):
        assert isinstance(exc, anthropic.OverloadedError)


def test_unknown_model_key_and_bad_requests() -> None:
    plan = FaultPlan(unknown_models=frozenset({"ghost"}), expected_key=KEY)
    with LoopbackServer(faults=plan) as srv:
        missing = raises(srv, anthropic.NotFoundError, model="ghost")
        with client(srv, api_key="sk-wrong") as c, pytest.raises(anthropic.AuthenticationError) as denied:
            create(c)
        ok, _ = post(srv, {"model": "m", "max_tokens": 5, "messages": HELLO}, {"x-api-key": KEY})
        no_max, raw = post(srv, {"model": "m", "messages": HELLO}, {"x-api-key": KEY})
    assert missing.body["error"]["type"] == "not_found_error" and "ghost" in missing.body["error"]["message"]
    assert denied.value.body["error"]["type"] == "authentication_error"
    assert ok == 200
    assert no_max == 400 and json.loads(raw)["error"] == {
        "type": "invalid_request_error",
        "message": json.loads(raw)["error"]["message"],
    }
    assert "max_tokens" in json.loads(raw)["error"]["message"]


@pytest.mark.parametrize("kind", sorted(MALFORMED_BY_API["anthropic"]))
def test_malformed_bodies_are_messages_shaped_and_refused(kind: str) -> None:
    with LoopbackServer(faults=FaultPlan(rate_malformed=1.0, malformed=kind)) as srv:
        status, raw = post(srv, {"model": "m", "max_tokens": 5, "messages": HELLO})
    assert status == 200 and raw == MALFORMED_BY_API["anthropic"][kind]
    with pytest.raises(BadResponse):
        MESSAGES.parse_response(raw)


def test_reset_and_drip_are_connection_errors() -> None:
    with LoopbackServer(faults=FaultPlan(rate_reset=1.0)) as srv:
        raises(srv, anthropic.APIConnectionError)
    with LoopbackServer(faults=FaultPlan(drip_seconds=0.5)) as srv, client(srv, timeout=0.3) as c:
        with pytest.raises(anthropic.APITimeoutError):
            create(c)


def test_faults_follow_one_schedule_across_formats() -> None:
    plan = FaultPlan(rate_429=0.5, seed=3)
    with LoopbackServer(faults=plan) as srv, client(srv) as c:
        for _ in range(6):
            try:
                create(c)
            except anthropic.RateLimitError:
                pass
        statuses = srv.statuses
    assert statuses == [429 if scheduled_fault(plan, n) == "429" else 200 for n in range(1, 7)]
    assert len(set(statuses)) == 2
