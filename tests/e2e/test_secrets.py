"""Secrets never leave the run: a gateway that quotes the key back in an error body
gets it redacted at one choke point (gateway/redact.py) before the terminal, a record, a report, junit or
the HTML page sees it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_gauge._internal.gateway.errors import GatewayError
from pytest_gauge._internal.gateway.redact import known_secrets, redact, redact_known, register_secret
from pytest_gauge.testing import FaultPlan, LoopbackServer
from pytest_gauge.testing.simserver import sim_responder

KEY = "tt-live-7Qm2xK9vB4nR8sLw3pZ6"  # no common token shape: only the known-key rule can find it
JUDGE_KEY = "judge-Hd8Kq2mX7vN4rT9w"


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TAOTOKEN_API_KEY", KEY)
    monkeypatch.setenv("TAOTOKEN_JUDGE_API_KEY", JUDGE_KEY)


@pytest.mark.usefixtures("env")
def test_redact_removes_every_known_key_whole_and_cut() -> None:
    text = f"got {KEY} and {JUDGE_KEY[:-1]} and a run {KEY[5:14]} and {KEY[:7]}"
    out = redact(text)
    assert KEY[5:13] not in out and JUDGE_KEY[:8] not in out and "***" in out
    assert out.endswith(KEY[:7])  # 7 characters are too common to be the key
    assert {KEY, JUDGE_KEY} <= set(known_secrets())


@pytest.mark.parametrize(
    "text",
    [
        "Authorization: Bearer abcdefgh12345",
        '{"x-api-key": "zz93kfj3lsk2"}',
        "api_key=0a9s8d7f6g5h",
        "key sk-proj-Aq3Zr8Lm2Wx9",
        "token sk-ant-api03-Aq3Zr8Lm2Wx9",
        "<td>authorization: Basic dXNlcjpwYXNz</td>",
        "ghp_0123456789abcdefghij",
    ],
)
def test_redact_removes_token_shapes_and_is_idempotent(text: str) -> None:
    out = redact(text)
    secret = text.rsplit(" ", 1)[-1].strip('"}<>/td').split("=")[-1]
    assert secret not in out and "***" in out
    assert redact(out) == out


def test_redact_leaves_ordinary_text_alone() -> None:
    text = "sk-learn is fine; the bearer of news; a key idea: x"
    assert redact(text) == text


def test_registered_secret_and_model_replies() -> None:
    register_secret("reg1st3red-s3cret-value")
    assert redact_known("reply quotes reg1st3red-s3cret-value") == "reply quotes ***"


@pytest.mark.usefixtures("env")
def test_gateway_errors_are_redacted_when_made() -> None:
    err = GatewayError(f"400 Bad Request: Authorization: Bearer {KEY}", f"check {KEY[3:20]}")
    assert KEY[3:11] not in str(err) and KEY[3:11] not in repr(err) and "Bearer ***" in str(err)


@pytest.fixture
def echo_server(mini_suite: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopbackServer]:
    srv = LoopbackServer(sim_responder(mini_suite / "test_mini.py", seed=7)).start()
    monkeypatch.setenv("TAOTOKEN_API_KEY", KEY)
    monkeypatch.setenv("TAOTOKEN_JUDGE_API_KEY", JUDGE_KEY)
    monkeypatch.setenv("TAOTOKEN_BASE_URL", srv.base_url)
    yield srv
    srv.stop()


@pytest.mark.slow
@pytest.mark.parametrize("last", ["json", "text", "html"])
def test_key_echoed_in_error_bodies_is_written_nowhere(
    pytester: pytest.Pytester, echo_server: LoopbackServer, last: str
) -> None:
    """Acceptance: the key echoed back in a 400/422/500 body (JSON message, plain text, HTML) and then a
    404 (which stops the run, so one shape per run): zero occurrences, whole or in 8-character runs, in
    every file of the output, cache and junit, and in what the run printed."""
    shapes = [f"{status}:{shape}" for status in (400, 422, 500) for shape in ("json", "text", "html")]
    echo_server.faults = FaultPlan(echo_auth=(*shapes, f"404:{last}"))
    result = pytester.runpytest_subprocess(
        "suites", "-p", "no:cacheprovider", "--gauge-backend", "live", "--gauge-max-retries", "0",
        "--junitxml", "junit.xml", "-vv", "-rA",
    )  # fmt: skip
    assert result.ret != 0
    assert echo_server.requests_by_status.get(404) == 1 and len(echo_server.requests_by_status) == 4
    printed = result.stdout.str() + result.stderr.str()
    runs = {KEY[i : i + 8] for i in range(len(KEY) - 7)}
    assert not [r for r in runs if r in printed], printed[-3000:]
    written = [p for p in pytester.path.rglob("*") if p.is_file() and "suites" not in p.parts]
    assert any(p.name == "junit.xml" for p in written)
    for path in written:
        data = path.read_bytes()
        assert not [r for r in runs if r.encode() in data], path
    seen = printed + "".join(p.read_text(errors="replace") for p in written)
    assert "Authorization: Bearer ***" in seen  # the echoed key reached the records, masked
