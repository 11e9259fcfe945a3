"""Diagnoses of real error bodies, through the real ``openai`` client against the
loopback server: each names the cause and the fix in at most two lines."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from pytest_gauge._internal.cli import main
from pytest_gauge._internal.gateway.errors import (
    ConfigurationError,
    GatewayError,
    KeyRejected,
    ModelNotFound,
    ModelStopped,
)
from pytest_gauge._internal.gateway.gateway import CallContext, Gateway
from pytest_gauge.testing import LoopbackServer, ResponderError, completion
from tests.e2e.test_gateway import BODY, ledger, make_gateway, run_closing


def answer(body: dict[str, Any]) -> dict[str, Any]:
    model = body["model"]
    if model == "no-db":
        raise ResponderError(400, "No connected db.", type="no_db_connection", code="400")
    if model == "nameless":
        raise ResponderError(
            400,
            "Invalid model name passed in model=nameless. Call `/v1/models` to view available models for\n"
            "your key.\n\nReceived Model Group=nameless",
        )
    if model == "small-window":
        raise ResponderError(
            400,
            "This model's maximum context length is 4096 tokens. However, your messages resulted in 5162"
            " tokens. Please reduce the length of the messages.",
            code="context_length_exceeded",
        )
    if model == "locked":
        raise ResponderError(401, "Authentication Error, key not allowed to access model", type="auth_error")
    return completion("ok")


def calls(gw: Gateway, models: list[str], role: str = "agent") -> list[Any]:
    """One call per model in one event loop; each result or the error it raised."""

    async def run() -> list[Any]:
        out: list[Any] = []
        for i, model in enumerate(models):
            try:
                out.append(
                    await gw.chat(CallContext("s", "t1", f"transcript/t1/a/{i}"), 1, role, model, BODY)
                )
            except GatewayError as exc:
                out.append(exc)
        return out

    return run_closing(gw, run())


@pytest.fixture
def server() -> Any:
    with LoopbackServer(answer) as srv:
        yield srv


def lines(error: GatewayError) -> int:
    return len(error.message().splitlines())


def test_a_proxys_no_connected_db_is_a_rejected_key_that_stops_the_run(
    tmp_path: Path, server: LoopbackServer
) -> None:
    (error, again) = calls(make_gateway(tmp_path, server), ["no-db", "no-db"])
    assert isinstance(error, KeyRejected) and error.fatal and again is error  # one request, not two
    assert "rejected the API key (No connected db.)" in error.cause and "TAOTOKEN_API_KEY" in error.fix
    assert "response_format" not in error.message() and lines(error) == 1
    assert server.requests_total == 1


def test_an_invalid_model_name_stops_that_model_after_one_request(
    tmp_path: Path, server: LoopbackServer
) -> None:
    results = calls(make_gateway(tmp_path, server), ["m", "nameless", "nameless", "m"])
    error = results[1]
    assert isinstance(error, ModelNotFound) and isinstance(results[2], ModelStopped)  # not sent again
    assert not isinstance(results[3], GatewayError)  # the other model goes on
    assert server.requests_total == 3
    assert "doctor --models NAME" in error.fix and "lists them" not in error.fix
    assert lines(error) == 1  # the gateway's newlines folded


@pytest.mark.parametrize(
    ("role", "fix"),
    [
        ("judge", "Judge(context_tokens=...)"),
        ("user_sim", "UserSimulator(max_tokens=...)"),
        ("agent", "the agent's max_tokens"),
    ],
)
def test_a_context_length_error_names_the_role_the_tokens_and_what_to_lower(
    tmp_path: Path, server: LoopbackServer, role: str, fix: str
) -> None:
    (error,) = calls(make_gateway(tmp_path, server, retries=0), ["small-window"], role=role)
    assert isinstance(error, GatewayError)
    assert f"context too long for the {role} model 'small-window' (the prompt has 5162 tokens)" in error.cause
    assert fix in error.fix and lines(error) == 1


def test_a_key_rejected_for_one_model_stops_only_that_model(tmp_path: Path, server: LoopbackServer) -> None:
    results = calls(make_gateway(tmp_path, server), ["m", "locked", "m", "locked"])
    error = results[1]
    assert isinstance(error, ModelNotFound) and not error.fatal and isinstance(results[3], ModelStopped)
    assert "(key rejected for this model)" in results[3].cause
    assert "for the agent model 'locked' only" in error.cause
    assert not isinstance(results[2], GatewayError)
    assert [r.status for r in ledger(tmp_path)] == ["ok", "http_401", "ok"]


def test_a_rejected_key_before_any_success_still_stops_the_run(
    tmp_path: Path, server: LoopbackServer
) -> None:
    (error, after) = calls(make_gateway(tmp_path, server), ["locked", "m"])
    assert isinstance(error, ConfigurationError) and error.fatal and after is error


def test_doctor_offers_the_bare_host_when_the_gateway_path_does_not_answer() -> None:
    with LoopbackServer() as srv:
        host = srv.base_url.removesuffix("/v1")
        env = {"TAOTOKEN_API_KEY": "sk-doctor", "TAOTOKEN_BASE_URL": host + "/api"}
        out = io.StringIO()
        main(["doctor", "--models", "loopback-model"], environ=env, out=out, err=io.StringIO())
    report = out.getvalue()
    assert f"use TAOTOKEN_BASE_URL={host}/v1 (it answers" in report, report
    assert "neither" not in report


def test_doctor_checks_each_roles_key_and_probes_with_it() -> None:
    env = {"TAOTOKEN_API_KEY": "sk-run-0001", "TAOTOKEN_JUDGE_API_KEY": "sk-judge-0002"}
    with LoopbackServer() as srv:
        env["TAOTOKEN_BASE_URL"] = srv.base_url
        env["TAOTOKEN_JUDGE_MODEL"] = "loopback-model"
        out = io.StringIO()
        status = main(["doctor", "--models", "loopback-model"], environ=env, out=out, err=io.StringIO())
        sent = [r.headers.get("authorization") for r in srv.log if r.body]
    report = out.getvalue()
    assert status == 0, report
    assert "TAOTOKEN_JUDGE_API_KEY: is set (value not shown): judge calls send it" in report
    assert sent == ["Bearer sk-judge-0002"] and "sk-judge-0002" not in report
