"""The loopback server's ``/v1/responses`` route, driven through the official ``openai`` SDK's
``client.responses.create`` (whole and ``stream=True``): the same answers and faults as Chat Completions
(429 with waits, 5xx, 529, malformed bodies, truncation -> incomplete, missing usage, drip, unknown
model, refused key), in the Responses shapes, each fault giving the SDK's typed error."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from pytest_gauge._internal.gateway.response import BadResponse
from pytest_gauge._internal.gateway.wire import wire_format
from pytest_gauge.testing import FaultPlan, LoopbackServer, completion, tool_call
from pytest_gauge.testing.faults import MALFORMED_BY_API
from tests.sdks import sdk_http

R = wire_format("responses")
KEY = "sk-loopback-responses"


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as srv:
        yield srv


def client(srv: LoopbackServer, **kw: Any) -> openai.OpenAI:
    kw.setdefault("max_retries", 0)
    kw.setdefault("http_client", sdk_http(openai))
    return openai.OpenAI(api_key=kw.pop("api_key", KEY), base_url=srv.base_url, **kw)


def create(c: openai.OpenAI, **kw: Any) -> Any:
    kw.setdefault("model", "m-agent")
    kw.setdefault("input", "hello world")
    return c.responses.create(**kw)


def post(srv: LoopbackServer, body: dict[str, Any]) -> tuple[int, bytes]:
    data = json.dumps(body).encode()
    req = urllib.request.Request(
        srv.base_url + "/responses", data=data, method="POST", headers={"content-type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_a_response_with_usage_and_counters(server: LoopbackServer) -> None:
    with client(server) as c:
        r = create(c, instructions="Be brief.", max_output_tokens=50)
    assert r.object == "response" and r.status == "completed" and r.id.startswith("resp_")
    assert r.output_text == "ok: hello world" and r.model == "m-agent" and r.instructions == "Be brief."
    assert r.usage is not None and (r.usage.input_tokens, r.usage.output_tokens, r.usage.total_tokens) == (
        6,
        4,
        10,
    )
    assert server.by_path == {"/v1/responses": 1} and server.statuses == [200]
    assert server.bodies[0]["input"] == "hello world"


def test_a_stream_is_the_same_answer_as_events(server: LoopbackServer) -> None:
    with client(server) as c:
        whole = create(c)
        events = list(create(c, stream=True))
        with c.responses.stream(model="m-agent", input="hello world") as helper:
            final = helper.get_final_response()
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == whole.output_text == final.output_text == "ok: hello world"
    assert events[-1].type == "response.completed" and events[-1].response.usage == whole.usage
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert server.statuses == [200, 200, 200] and server.bodies[1]["stream"] is True


def test_function_calls_both_ways() -> None:
    seen: list[dict[str, Any]] = []

    def responder(body: dict[str, Any]) -> dict[str, Any]:
        seen.append(body)
        if body["messages"][-1]["role"] == "tool":
            return completion("Refunded.")
        return completion(None, tool_calls=[tool_call("call_9", "refund", {"order_id": "1"})])

    tools = [{"type": "function", "name": "refund", "parameters": {"type": "object"}, "strict": False}]
    with LoopbackServer(responder) as srv, client(srv) as c:
        first = create(c, input="refund order 1", tools=tools)
        (call,) = first.output
        assert call.type == "function_call" and call.call_id == "call_9" and call.name == "refund"
        assert json.loads(call.arguments) == {"order_id": "1"}
        follow = [
            {"role": "user", "content": "refund order 1"},
            {
                "type": "function_call",
                "call_id": call.call_id,
                "name": call.name,
                "arguments": call.arguments,
            },
            {"type": "function_call_output", "call_id": call.call_id, "output": '{"ok": true}'},
        ]
        second = create(c, input=follow, tools=tools, stream=True)
        events = list(second)
    assert events[-1].response.output_text == "Refunded."
    assert seen[0]["tools"] == [
        {"type": "function", "function": {"name": "refund", "parameters": {"type": "object"}}}
    ]
    assert seen[1]["messages"][1]["tool_calls"][0]["id"] == "call_9"
    assert seen[1]["messages"][2] == {"role": "tool", "tool_call_id": "call_9", "content": '{"ok": true}'}


def test_truncation_is_incomplete_at_max_output_tokens() -> None:
    with LoopbackServer(faults=FaultPlan(truncate=True)) as srv, client(srv) as c:
        r = create(c, input="hello world, a longer question")
        events = list(create(c, input="hello world, a longer question", stream=True))
    assert r.status == "incomplete" and r.incomplete_details is not None
    assert r.incomplete_details.reason == "max_output_tokens"
    assert (
        r.output_text
        == "ok: hello world, a longer question"[: len("ok: hello world, a longer question") // 2]
    )
    assert events[-1].type == "response.incomplete" and events[-1].response.output_text == r.output_text
    assert R.completion(r.model_dump())["choices"][0]["finish_reason"] == "length"


def test_missing_usage_and_token_details() -> None:
    with LoopbackServer(faults=FaultPlan(no_usage=True)) as srv, client(srv) as c:
        r = create(c)
        last = list(create(c, stream=True))[-1]
    assert r.usage is None and last.response.usage is None and R.usage(r.model_dump()) is None
    with LoopbackServer(faults=FaultPlan(cached_tokens=2, reasoning_tokens=3)) as srv:
        status, raw = post(srv, {"model": "m", "input": "hello world, a longer question"})
    usage = R.usage(R.parse_response(raw))
    assert status == 200 and usage is not None
    assert (usage.cached_tokens, usage.reasoning_tokens) == (2, 3)


def test_429_carries_its_waits_and_is_the_sdks_rate_limit_error() -> None:
    plan = FaultPlan(rate_429=1.0, retry_after="7", retry_after_ms=7000)
    with LoopbackServer(faults=plan) as srv, client(srv) as c, pytest.raises(openai.RateLimitError) as exc:
        create(c)
    assert exc.value.response.headers["retry-after"] == "7"
    assert exc.value.response.headers["retry-after-ms"] == "7000"
    assert exc.value.code == "rate_limit_exceeded" and srv.statuses == [429]


@pytest.mark.parametrize(
    ("plan", "error", "status"),
    [
        (FaultPlan(rate_503=1.0), openai.InternalServerError, 503),
        (FaultPlan(rate_500=1.0), openai.InternalServerError, 500),
        (FaultPlan(rate_529=1.0), openai.InternalServerError, 529),
        (FaultPlan(unknown_models=frozenset({"m-agent"})), openai.NotFoundError, 404),
        (FaultPlan(expected_key="sk-other"), openai.AuthenticationError, 401),
    ],
)
def test_status_faults_are_the_sdks_typed_errors(
    plan: FaultPlan, error: type[openai.APIStatusError], status: int
) -> None:
    for stream in (False, True):
        with LoopbackServer(faults=plan) as srv, client(srv) as c, pytest.raises(error) as exc:
            create(c, stream=stream)
        assert exc.value.status_code == status
        body = exc.value.body
        assert isinstance(body, dict) and set(body) == {"message", "type", "param", "code"}  # OpenAI's shape


def test_retries_ride_out_a_5xx_burst() -> None:
    # one 503 and one retry: the SDK's own backoff (0.5 s and up, no wait header) is the test's cost
    with LoopbackServer(faults=FaultPlan(burst_5xx=1)) as srv, client(srv, max_retries=1) as c:
        r = create(c)
    assert r.output_text == "ok: hello world" and srv.statuses == [503, 200]


def test_previous_response_id_is_a_clear_400(server: LoopbackServer) -> None:
    with client(server) as c, pytest.raises(openai.BadRequestError) as exc:
        create(c, previous_response_id="resp_1")
    assert "keeps none" in exc.value.message and server.statuses == [400]


@pytest.mark.parametrize("kind", sorted(MALFORMED_BY_API["responses"]))
def test_malformed_bodies_are_refused_by_the_responses_check(kind: str) -> None:
    with LoopbackServer(faults=FaultPlan(rate_malformed=1.0, malformed=kind)) as srv:
        status, raw = post(srv, {"model": "m", "input": "hi"})
    assert status == 200
    with pytest.raises(BadResponse):
        R.parse_response(raw)


def test_a_dripped_stream_is_read_event_by_event() -> None:
    with LoopbackServer(faults=FaultPlan(drip_seconds=0.0005)) as srv, client(srv) as c:
        stream = create(c, stream=True)
        first = next(iter(stream))
        stream.close()
    assert first.type == "response.created" and first.response.status == "in_progress"


def test_a_drip_slower_than_the_read_timeout_is_a_timeout() -> None:
    with LoopbackServer(faults=FaultPlan(drip_seconds=2.0)) as srv, client(srv, timeout=0.3) as c:
        with pytest.raises(openai.APITimeoutError):
            create(c)
