"""One gateway path for three wire formats: ``Gateway.call`` / ``Gateway.chat(api=)``
through the gateway's own HTTP client against the loopback server's /v1/messages and /v1/responses: the
format's path and headers, the one usage convention and its cost by hand, the ledger's ``api``, the
cache (keys, entries, hits), and Anthropic's error shapes and 529."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pytest_gauge._internal.gateway.cassettes import scrub_entry
from pytest_gauge._internal.gateway.errors import GatewayError
from pytest_gauge._internal.gateway.gateway import CACHE_FORMAT_VERSION, CallContext, Gateway, WireReply
from pytest_gauge._internal.gateway.store import content_key
from pytest_gauge._internal.gateway.wire import wire_format
from pytest_gauge._internal.records import Api
from pytest_gauge._internal.records.prices import Price, PriceTable
from pytest_gauge.testing import FaultPlan, LoopbackServer
from tests.e2e.test_gateway import BODY, KEY, ledger, make_gateway, run_closing

CTX = CallContext("s", "t1", "transcript/t1/a/0")
PRICE = Price(3.0, 15.0, cached_input=0.3, cache_write=3.75, cache_write_1h=6.0)


def gateway(tmp_path: Path, server: LoopbackServer, **kw: Any) -> Gateway:
    auth = kw.pop("auth", "bearer")
    gw = make_gateway(tmp_path, server, **kw)
    shared = replace(
        gw.shared,
        settings=replace(gw.settings, anthropic_auth=auth),
        resources=replace(gw.resources, prices=PriceTable({"claude-x": PRICE, "m": PRICE})),
    )
    return Gateway(suite="s", client_factory=gw._client_factory, backend_id=gw.backend_id, shared=shared)


def chat(gw: Gateway, *apis: Api, model: str = "claude-x") -> list[Any]:
    """One judge call per ``api``, in order, on one event loop (the client is bound to it)."""

    async def calls() -> list[Any]:
        return [await gw.chat(CTX, 1, "judge", model, dict(BODY), api) for api in apis]

    return run_closing(gw, calls())


def test_a_messages_answer_with_cache_reads_and_writes_costs_what_the_hand_says(tmp_path: Path) -> None:
    plan = FaultPlan(cached_tokens=2000, cache_write_tokens=1000, cache_write_1h_tokens=400)
    with LoopbackServer(faults=plan) as server:
        body = {"messages": [{"role": "user", "content": "word " * 16000}], "max_tokens": 16}  # holds them
        gw = gateway(tmp_path, server)
        result = run_closing(gw, gw.chat(CTX, 1, "judge", "claude-x", body, "anthropic"))
        seen = server.headers_seen[-1]
        paths = server.by_path
    (line,) = [json.loads(x) for x in (tmp_path / "run" / "ledger-main.jsonl").read_text().splitlines()[1:]]
    usage = line["usage"]
    assert line["api"] == "anthropic" and line["status"] == "ok"
    assert (usage["cached_input_tokens"], usage["cache_write_tokens"], usage["cache_write_1h_tokens"]) == (
        2000,
        1000,
        400,
    )
    sent = usage["raw"]  # the Messages usage object as the server sent it
    assert sent["cache_read_input_tokens"] == 2000 and sent["cache_creation_input_tokens"] == 1000
    assert usage["input_tokens"] == sent["input_tokens"]  # Messages' input excludes reads and writes
    by_hand = (
        usage["input_tokens"] * 3.0 + 2000 * 0.3 + 600 * 3.75 + 400 * 6.0 + usage["output_tokens"] * 15.0
    ) / 1e6
    assert line["cost"] == pytest.approx(by_hand, rel=1e-12) and result.cost == line["cost"]
    assert seen["anthropic-version"] == "2023-06-01" and seen["authorization"] == f"Bearer {KEY}"
    assert "x-api-key" not in seen and paths == {"/v1/messages": 1}


def test_call_posts_the_formats_body_and_gives_its_response_and_view(tmp_path: Path) -> None:
    with LoopbackServer() as server:
        gw = gateway(tmp_path, server)
        fmt = wire_format("responses")
        body = fmt.request_body({**BODY, "model": "m"})

        async def both() -> tuple[WireReply, Any]:
            reply = await gw.call(CTX, 1, "agent", "m", "responses", body)
            return reply, await gw.chat(CallContext("s", "t1", "transcript/t1/b/0"), 1, "agent", "m", BODY)

        reply, chatted = run_closing(gw, both())
        paths = server.by_path
    assert isinstance(reply, WireReply) and reply.response["object"] == "response"
    assert reply.result.content == fmt.completion(reply.response)["choices"][0]["message"]["content"]
    assert reply.record.api == "responses" and reply.record.usage is not None
    assert chatted.content and paths == {"/v1/responses": 1, "/v1/chat/completions": 1}
    assert [r.api for r in ledger(tmp_path) if r.status == "ok"] == ["responses", "chat"]


def test_x_api_key_auth_sends_the_key_in_its_header(tmp_path: Path) -> None:
    with LoopbackServer() as server:
        chat(gateway(tmp_path, server, auth="x-api-key"), "anthropic")
        seen = server.headers_seen[-1]
    assert seen["x-api-key"] == KEY and "authorization" not in seen


def test_each_format_has_its_cache_entry_and_chat_keys_are_unchanged(tmp_path: Path) -> None:
    with LoopbackServer() as server:
        gw = gateway(tmp_path, server, cache="use")
        replies = chat(gw, "chat", "anthropic", "responses", "chat", "anthropic", "responses")
        sent = server.requests_total
    assert sent == 3 and replies[3:] == replies[:3]  # one request per format, then three cache hits
    hits = [r for r in ledger(tmp_path) if r.cache_hit]
    assert [r.api for r in hits] == ["chat", "anthropic", "responses"]
    body = {**BODY, "model": "claude-x"}
    material = {"format_version": CACHE_FORMAT_VERSION, "backend": gw.backend_id, "scope": 0}
    fields: tuple[str, ...] = (
        "model",
        "messages",
        "temperature",
        "top_p",
        "seed",
        "max_tokens",
        "stop",
        "response_format",
    )
    fields = (*fields, "tools", "tool_choice")
    chat_key = content_key({**material, **{k: body.get(k) for k in fields}})  # the key of every version
    assert gw.cache_key(body, CTX) == chat_key
    entry = json.loads(next((tmp_path / "cache").rglob(f"{hits[1].request}.json")).read_text())
    assert entry["api"] == "anthropic" and entry["response"]["type"] == "message"


def test_a_passed_header_is_sent_and_keys_the_cache_and_others_are_not(tmp_path: Path) -> None:
    """A proxied client's ``anthropic-beta`` goes to the gateway beside its own headers and is part of the
    cache key (the flag changes what the body means); a header the format does not pass is dropped."""
    with LoopbackServer() as server:
        gw = gateway(tmp_path, server, cache="use")
        body = wire_format("anthropic").request_body({**BODY, "model": "claude-x"})
        beta = {"Anthropic-Beta": "context-management-2025-06-27", "x-session": "s-1"}

        async def calls() -> list[WireReply]:
            plain = await gw.call(CTX, 1, "agent", "claude-x", "anthropic", dict(body))
            flagged = await gw.call(CTX, 2, "agent", "claude-x", "anthropic", dict(body), beta)
            again = await gw.call(CTX, 3, "agent", "claude-x", "anthropic", dict(body), beta)
            return [plain, flagged, again]

        plain, flagged, again = run_closing(gw, calls())
        seen = server.headers_seen
    assert len(seen) == 2 and "anthropic-beta" not in seen[0]  # the third call was a cache hit
    assert seen[1]["anthropic-beta"] == "context-management-2025-06-27" and "x-session" not in seen[1]
    assert seen[1]["authorization"] == f"Bearer {KEY}"  # the gateway's key, never the client's
    assert plain.record.request != flagged.record.request == again.record.request and again.record.cache_hit
    entry = json.loads(next((tmp_path / "cache").rglob(f"{flagged.record.request}.json")).read_text())
    exported = scrub_entry(entry)  # what a cassette keeps: the passed headers too, or its replay misses
    assert exported["passed_header_values"] == {"anthropic-beta": "context-management-2025-06-27"}


def test_an_entry_of_another_format_is_refused_as_damaged(tmp_path: Path) -> None:
    with LoopbackServer() as server:
        gw = gateway(tmp_path, server, cache="use")
        chat(gw, "anthropic")
        (path,) = [p for p in (tmp_path / "cache").rglob("*") if p.is_file() and p.suffix == ".json"]
        entry = json.loads(path.read_text())
        path.write_text(json.dumps({**entry, "api": "responses"}))
        gw = gateway(tmp_path, server, cache="use")  # a new client for the new event loop
        chat(gw, "anthropic")
        sent = server.requests_total
    assert sent == 2 and gw.state.damaged_entries == 1
    assert "stores a 'responses' response" in (gw.state.first_damaged or "")


def test_anthropic_529_is_retried_then_named_overloaded(tmp_path: Path) -> None:
    with LoopbackServer(faults=FaultPlan(rate_529=1.0)) as server:
        with pytest.raises(GatewayError) as caught:
            chat(gateway(tmp_path, server, retries=2, cap=0.1), "anthropic")
        sent = server.requests_total
    assert sent == 3  # a server fault: retried
    assert "529 the provider is overloaded, still after 3 attempts" in caught.value.cause
    assert caught.value.cause.endswith(": Overloaded")  # Anthropic's error body, read
    assert [r.status for r in ledger(tmp_path) if r.status != "sent"] == ["http_529"] * 3


def test_anthropic_error_bodies_are_read_for_the_diagnosis() -> None:
    from pytest_gauge._internal.gateway.diagnosis import error_type, server_message
    from pytest_gauge._internal.gateway.transport import RateLimitError, status_error

    body = {
        "type": "error",
        "error": {"type": "rate_limit_error", "message": "Number of request tokens  exceeded"},
    }
    exc = status_error(429, {}, json.dumps(body), "http://127.0.0.1/v1/messages")
    assert isinstance(exc, RateLimitError)
    assert str(exc) == "Error code: 429 - Number of request tokens  exceeded"  # as the SDK said it
    assert server_message(exc) == "Number of request tokens exceeded"  # whitespace folded
    assert error_type(exc) == "rate_limit_error"
