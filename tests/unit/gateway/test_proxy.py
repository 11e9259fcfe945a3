"""The recording proxy's pure parts: route paths, the tokens a request presents, the environment built
for a client (docs/protocol.md#the-recording-proxy), the token's way to the workers."""

from __future__ import annotations

import asyncio

import pytest

from pytest_gauge._internal.gateway.gateway import CallContext
from pytest_gauge._internal.gateway.proxy import (
    ProxyRoute,
    RecordingProxy,
    client_environment,
    new_proxy_token,
    parse_route_path,
    presented_tokens,
)
from pytest_gauge._internal.gateway.redact import redact
from pytest_gauge._internal.options import GaugeOptions
from pytest_gauge._internal.process.workers import PROXY_TOKEN_KEY, controller_paths

WORK = "0123456789abcdef"


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (f"/w/{WORK}/v1/chat/completions", (WORK, "chat")),
        (f"/w/{WORK}/chat/completions", (WORK, "chat")),
        (f"/w/{WORK}/v1/responses", (WORK, "responses")),
        (f"/w/{WORK}/responses/", (WORK, "responses")),
        (f"/w/{WORK}/v1/messages", (WORK, "anthropic")),
        (f"/w/{WORK}/messages", (WORK, "anthropic")),
        (f"/w/{WORK}/v1/messages/count_tokens", (WORK, None)),
        (f"/w/{WORK}/v1/models", (WORK, None)),
        (f"/w/{WORK}", (WORK, None)),
        ("/v1/chat/completions", None),
        ("/w/nothex/v1/chat/completions", None),
        (f"/w/{WORK}0/v1/chat/completions", None),
    ],
)
def test_route_paths(path: str, expected: tuple[str, str | None] | None) -> None:
    assert parse_route_path(path) == expected


def test_presented_tokens() -> None:
    assert presented_tokens({"authorization": "Bearer abc"}) == ["abc"]
    assert presented_tokens({"authorization": "bearer  abc "}) == ["abc"]
    assert presented_tokens({"x-api-key": "xyz"}) == ["xyz"]
    assert presented_tokens({"authorization": "Bearer a", "x-api-key": "b"}) == ["a", "b"]
    assert presented_tokens({"authorization": "Basic abc"}) == []
    assert presented_tokens({}) == []


def _route(token: str) -> ProxyRoute:
    loop = asyncio.new_event_loop()
    loop.close()  # never run: the route's URLs and environment need no server
    proxy = RecordingProxy(token, loop)
    return ProxyRoute(CallContext("s", "t", "transcript/t/a/0"), "agent", 4321, WORK, token, proxy)


def test_route_urls_and_repr_hide_the_token() -> None:
    token = new_proxy_token()
    route = _route(token)
    assert route.openai_base_url == f"http://127.0.0.1:4321/w/{WORK}/v1"
    assert route.anthropic_base_url == f"http://127.0.0.1:4321/w/{WORK}"
    assert token not in repr(route)
    assert new_proxy_token() != token and len(token) > 40


def test_client_environment_holds_no_gateway_key() -> None:
    key, judge_key, other = "sk-gateway-key-0123456789", "judge-key-abcdefgh", "ant-secret-zyxwvuts"
    environ = {
        "PATH": "/usr/bin",
        "HOME": "/home/me",
        "TAOTOKEN_API_KEY": key,
        "TAOTOKEN_JUDGE_API_KEY": judge_key,
        "TAOTOKEN_BASE_URL": "https://gw.example/api",
        "ANTHROPIC_API_KEY": other,
        "ANTHROPIC_AUTH_TOKEN": "stale",
        "OPENAI_BASE_URL": "https://elsewhere.example/v1",
        "MY_COPY": key,  # any variable holding a known secret
        "HEADER": f"Bearer {judge_key}",
        "SOME_SERVICE_TOKEN": "short",  # not a key's name, not a known secret: kept
        "NO_PROXY": "internal.example",
    }
    token = new_proxy_token()
    env = client_environment(_route(token), environ)
    assert all(s not in v for v in env.values() for s in (key, judge_key, other))
    assert {
        "TAOTOKEN_API_KEY",
        "TAOTOKEN_JUDGE_API_KEY",
        "ANTHROPIC_API_KEY",
        "MY_COPY",
        "HEADER",
    }.isdisjoint(env)
    assert env["OPENAI_BASE_URL"] == f"http://127.0.0.1:4321/w/{WORK}/v1"
    assert env["ANTHROPIC_BASE_URL"] == f"http://127.0.0.1:4321/w/{WORK}"
    assert env["OPENAI_API_KEY"] == env["ANTHROPIC_AUTH_TOKEN"] == token
    assert env["NO_PROXY"] == "internal.example,127.0.0.1,localhost"
    assert env["no_proxy"] == "127.0.0.1,localhost"
    assert env["PATH"] == "/usr/bin" and env["SOME_SERVICE_TOKEN"] == "short"
    assert env["TAOTOKEN_BASE_URL"] == "https://gw.example/api"  # a URL is no secret


def test_the_proxy_token_is_redacted_once_a_process_knows_it() -> None:
    from pytest_gauge._internal.process.state import GaugeState

    state = GaugeState(GaugeOptions(), run_id="r1")
    assert state.proxy_token not in redact(f"the client sent {state.proxy_token}")
    assert state.proxy_token not in repr(state)


def test_the_controller_hands_workers_its_token() -> None:
    paths = controller_paths(GaugeOptions(), "gauge-proxy-abc")
    assert paths[PROXY_TOKEN_KEY] == "gauge-proxy-abc"
    assert "gauge-proxy-abc" not in str(paths["gauge_options"])  # never in the options
    assert PROXY_TOKEN_KEY not in controller_paths(GaugeOptions())
