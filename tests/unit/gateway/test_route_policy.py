"""The route policy (gateway/route_policy.py): the models and caps a program's proxy route accepts, per
wire format, as a pure function of the policy and the request body."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_gauge._internal.gateway.route_policy import RoutePolicy, refusal, route_policy
from pytest_gauge._internal.gateway.wire import Api, wire_format

POLICY = route_policy(("claude-main", "claude-small", None), max_tokens=8000, max_n=1)
ASK = [{"role": "user", "content": "hi"}]


def _body(api: Api, model: str, max_tokens: int | None = None, **extra: Any) -> dict[str, Any]:
    if api == "anthropic":
        return {"model": model, "max_tokens": max_tokens or 100, "messages": ASK, **extra}
    if api == "responses":
        out: dict[str, Any] = {"model": model, "input": "hi", **extra}
        return out | ({"max_output_tokens": max_tokens} if max_tokens else {})
    return {"model": model, "messages": ASK, **extra} | ({"max_tokens": max_tokens} if max_tokens else {})


@pytest.mark.parametrize("api", ["chat", "anthropic", "responses"])
def test_declared_models_within_the_caps_pass(api: Api) -> None:
    for model in ("claude-main", "claude-small"):
        assert refusal(POLICY, wire_format(api), _body(api, model, 8000)) is None
    assert POLICY.models == frozenset({"claude-main", "claude-small"})  # an agent without model: skipped


@pytest.mark.parametrize("api", ["chat", "anthropic", "responses"])
def test_another_model_is_refused_naming_the_allowed_ones(api: Api) -> None:
    why = refusal(POLICY, wire_format(api), _body(api, "gpt-big"))
    assert why is not None and "'gpt-big'" in why and "claude-main, claude-small" in why


@pytest.mark.parametrize("api", ["chat", "anthropic", "responses"])
def test_output_tokens_over_the_cap_are_refused(api: Api) -> None:
    why = refusal(POLICY, wire_format(api), _body(api, "claude-main", 8001))
    assert why is not None and "8001" in why and "8000" in why


def test_more_than_one_choice_is_refused_and_chats_newer_token_field_counts() -> None:
    chat = wire_format("chat")
    assert "n=3" in str(refusal(POLICY, chat, _body("chat", "claude-main", n=3)))
    assert refusal(POLICY, chat, _body("chat", "claude-main", n=1)) is None
    newer = {"model": "claude-main", "messages": ASK, "max_completion_tokens": 9000}
    assert "9000" in str(refusal(POLICY, chat, newer))


def test_an_open_policy_and_an_unreadable_body() -> None:
    anything = RoutePolicy()
    assert refusal(anything, wire_format("chat"), _body("chat", "any-model", 10**6)) is None
    # a Messages body without max_tokens cannot be checked: refused rather than sent unchecked
    unreadable = {"model": "claude-main", "messages": ASK}
    assert "cannot be checked" in str(refusal(POLICY, wire_format("anthropic"), unreadable))
