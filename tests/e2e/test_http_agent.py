"""``HttpAgent`` against a small loopback HTTP agent service the test starts (a
thread, bounded timeouts): the body template per turn, the session carried from the response body or a
header, headers read from the environment and never shown, retries, the gateway-style diagnoses, what
each turn records (status, latency, attempts, usage), and one pytest run of a suite comparing it with a
model agent on the simulator."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from pytest_gauge import HttpAgent
from pytest_gauge._internal.run.http_agent import HttpAgentFailed, HttpSession
from pytest_gauge._internal.suite.http_agent import MISSING, extract, fill_headers, render_body
from tests.helpers import read_jsonl, run_inprocess

TOKEN = "agent-service-token-5d1e"
Answer = Callable[[dict[str, Any], dict[str, str], int], tuple[int, Any, dict[str, str]]]
"""(status, JSON or raw bytes, headers); a header ``x-no-length`` sends the body to the connection's end."""


class AgentService:
    """A loopback agent service: ``answer(body, headers, n)`` gives (status, JSON, headers) for the n-th
    request (1-based); every request's body and headers are kept."""

    def __init__(self, answer: Answer, delay: float = 0.0) -> None:
        self.answer, self.delay = answer, delay
        self.seen: list[tuple[dict[str, Any], dict[str, str]]] = []
        service = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                headers = {k.lower(): v for k, v in self.headers.items()}
                service.seen.append((body, headers))
                time.sleep(service.delay)
                status, data, extra = service.answer(body, headers, len(service.seen))
                raw = data if isinstance(data, bytes) else json.dumps(data).encode("utf-8")
                self.send_response(status)
                for key, value in {"content-type": "application/json", **extra}.items():
                    self.send_header(key, value)
                if "x-no-length" not in extra:
                    self.send_header("content-length", str(len(raw)))
                self.end_headers()
                try:
                    self.wfile.write(raw)
                except ConnectionError:  # the client stopped reading: what the bound is for
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/chat"
        # shutdown() waits out one poll of serve_forever: 0.5 s by default, on every test's teardown
        threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def service() -> Iterator[Callable[..., AgentService]]:
    started: list[AgentService] = []

    def start(answer: Answer, delay: float = 0.0) -> AgentService:
        started.append(AgentService(answer, delay))
        return started[-1]

    yield start
    for s in started:
        s.close()


def echo(body: dict[str, Any], headers: dict[str, str], n: int) -> tuple[int, dict[str, Any], dict[str, str]]:
    text = f"turn {n}: you said {body['input']}"
    return (
        200,
        {"output": {"text": text}, "usage": {"input_tokens": 10 * n, "output_tokens": n}},
        {"x-session": f"s-{n}"},
    )


def test_template_path_and_headers_helpers() -> None:
    values = {"messages": [{"role": "user", "content": "hi"}], "last_user_message": "hi", "session": None}
    template = {"m": "{messages}", "q": "Q: {last_user_message}", "s": "{session}", "n": [1, "{session}x"]}
    assert render_body(template, values) == {"m": values["messages"], "q": "Q: hi", "s": None, "n": [1, "x"]}
    reply = {"choices": [{"message": {"content": "ok"}}]}
    assert extract(reply, "choices.0.message.content") == "ok" and extract(reply, "choices.1") is MISSING
    headers, missing = fill_headers(
        {"Authorization": "Bearer ${A_TOKEN}", "X-B": "${B_VAR}"}, {"A_TOKEN": "t"}
    )
    assert headers == {"Authorization": "Bearer t", "X-B": ""} and missing == ["B_VAR"]
    with pytest.raises(ValueError, match="names neither"):
        HttpAgent("a", "http://127.0.0.1:1/x", body={"x": 1})
    with pytest.raises(ValueError, match="http"):
        HttpAgent("a", "ftp://x/y")


def test_turns_carry_the_session_headers_and_record_what_happened(
    service: Callable[..., AgentService],
) -> None:
    svc = service(echo)
    agent = HttpAgent(
        "svc",
        svc.url,
        body={"input": "{last_user_message}", "history": "{messages}", "session": "{session}"},
        reply_path="output.text",
        session_header="x-session",
        headers={"Authorization": "Bearer ${SVC_TOKEN}"},
        timeout=5.0,
    )
    session = HttpSession(agent, environ={"SVC_TOKEN": TOKEN})
    history = [{"role": "user", "content": "first"}]
    one = asyncio.run(session.turn(history))
    history += [{"role": "assistant", "content": one.reply}, {"role": "user", "content": "second"}]
    two = asyncio.run(session.turn(history))
    assert (one.reply, two.reply) == ("turn 1: you said first", "turn 2: you said second")
    (body1, head1), (body2, _) = svc.seen
    assert body1 == {"input": "first", "history": [{"role": "user", "content": "first"}], "session": None}
    assert body2["session"] == "s-1" and len(body2["history"]) == 3
    assert head1["authorization"] == f"Bearer {TOKEN}"
    record = two.record()
    assert record["status"] == 200 and record["attempts"] == 1 and record["session"] == "s-2"
    assert record["usage"] == {"input_tokens": 20, "output_tokens": 2} and record["latency_s"] >= 0
    assert TOKEN not in json.dumps([t.record() for t in session.turns])


def test_retries_a_503_then_answers(service: Callable[..., AgentService]) -> None:
    def flaky(
        body: dict[str, Any], headers: dict[str, str], n: int
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        if n == 1:
            return 503, {"error": {"message": "warming up"}}, {"retry-after": "0"}
        return 200, {"reply": "ready", "session_id": "abc"}, {}

    svc = service(flaky)
    agent = HttpAgent("svc", svc.url, session_path="session_id", retry_wait=0.01)
    done = asyncio.run(HttpSession(agent).turn([{"role": "user", "content": "hi"}]))
    assert (done.reply, done.session, done.attempts, len(svc.seen)) == ("ready", "abc", 2, 2)


@pytest.mark.parametrize(
    ("status", "said", "fix"),
    [
        (
            401,
            "it rejected the request's credentials: bad token",
            "check the variables its headers read: SVC_TOKEN",
        ),
        (404, "404 Not Found from the agent service: bad token", "check HttpAgent(url=...)"),
        (422, "it refused the body: bad token", "check HttpAgent(body=...)"),
        (
            500,
            "500 Internal Server Error from the agent service after 2 attempts: bad token",
            "the agent service is failing: see its logs",
        ),
    ],
)
def test_failures_are_diagnosed_without_the_header_value(
    service: Callable[..., AgentService], status: int, said: str, fix: str
) -> None:
    svc = service(lambda body, headers, n: (status, {"error": {"message": f"bad token {TOKEN}"}}, {}))
    agent = HttpAgent("svc", svc.url, headers={"X-Token": "${SVC_TOKEN}"}, retries=1, retry_wait=0.01)
    with pytest.raises(HttpAgentFailed) as info:
        asyncio.run(
            HttpSession(agent, environ={"SVC_TOKEN": TOKEN}).turn([{"role": "user", "content": "hi"}])
        )
    text = str(info.value)
    assert said in text and f"Fix: {fix}" in text and TOKEN not in text and "\n" not in text


def test_a_timeout_a_refused_connection_and_a_missing_reply(service: Callable[..., AgentService]) -> None:
    slow = service(echo, delay=1.0)
    hi = [{"role": "user", "content": "hi"}]
    with pytest.raises(HttpAgentFailed, match=r"did not answer within 0\.2s, 1 attempts"):
        asyncio.run(
            HttpSession(
                HttpAgent("svc", slow.url, body={"input": "{last_user_message}"}, timeout=0.2, retries=0)
            ).turn(hi)
        )
    closed = HttpAgent("svc", "http://127.0.0.1:9/none", retries=0)
    with pytest.raises(
        HttpAgentFailed,
        match=r"could not reach the agent service after 1 attempts: could not connect to 127\.0\.0\.1:9",
    ):
        asyncio.run(HttpSession(closed).turn(hi))
    svc = service(echo)
    with pytest.raises(HttpAgentFailed, match=r"no text at reply_path 'reply' \(it has: output, usage\)"):
        asyncio.run(HttpSession(HttpAgent("svc", svc.url, body={"input": "{last_user_message}"})).turn(hi))
    unset = HttpAgent("svc", svc.url, headers={"Authorization": "Bearer ${GAUGE_UNSET_TOKEN_X}"})
    with pytest.raises(HttpAgentFailed, match="GAUGE_UNSET_TOKEN_X, which is not set"):
        asyncio.run(HttpSession(unset, environ={}).turn(hi))


def test_a_redirect_fails_the_turn_naming_its_location_and_is_not_followed(
    service: Callable[..., AgentService],
) -> None:
    moved = service(
        lambda body, headers, n: (302, {"output": {"text": "moved"}}, {"location": "http://x.test/v2"})
    )
    agent = HttpAgent("svc", moved.url, body={"input": "{last_user_message}"}, reply_path="output.text")
    with pytest.raises(
        HttpAgentFailed, match=r"302 Found from the agent service: a redirect to http://x\.test/v2"
    ):
        asyncio.run(HttpSession(agent).turn([{"role": "user", "content": "hi"}]))
    assert len(moved.seen) == 1


@pytest.mark.parametrize(
    ("data", "extra", "problem"),
    [
        (
            b'{"output": "' + b"x" * (9 << 20) + b'"}',
            {},
            r"the reply is 9437198 bytes, more than the 8388608",
        ),
        (b'{"output": "' + b"x" * (9 << 20) + b'"}', {"x-no-length": "1"}, "more than the 8388608 bytes"),
        (b"[" * 100_000 + b"]" * 100_000, {}, "nested too deeply to read"),
        (b"\xff\xfe not json", {}, r"the response is not JSON \(11 bytes\)"),
    ],
    ids=["declared-too-long", "too-long-while-read", "nested", "not-json"],
)
def test_a_malformed_reply_is_one_line_naming_what_is_wrong(
    service: Callable[..., AgentService], data: bytes, extra: dict[str, str], problem: str
) -> None:
    svc = service(lambda body, headers, n: (200, data, extra))
    agent = HttpAgent("svc", svc.url, body={"input": "{last_user_message}"}, retries=0, timeout=20)
    with pytest.raises(HttpAgentFailed, match=problem) as failed:
        asyncio.run(HttpSession(agent).turn([{"role": "user", "content": "hi"}]))
    assert "\n" not in str(failed.value) and len(str(failed.value)) < 400


SUITE = """
from pytest_gauge import HttpAgent, Judge, ModelAgent, SimAgent, Suite, UserSimulator

suite = Suite(
    agents=[
        ModelAgent("model_agent", "model-x", sim=SimAgent(skill=1.0)),
        HttpAgent("service", {url!r}, body={{"input": "{{last_user_message}}"}},
                  reply_path="output.text", session_header="x-session",
                  headers={{"Authorization": "Bearer ${{SVC_TOKEN}}"}}, timeout=5.0),
    ],
    judge=Judge("judge-model"),
    user=UserSimulator("user-model", max_turns=2),
)
"""


def test_a_suite_compares_an_http_agent_on_the_simulator(
    pytester: pytest.Pytester, service: Callable[..., AgentService], monkeypatch: pytest.MonkeyPatch
) -> None:
    svc = service(echo)
    folder = pytester.path / "suites" / "http"
    folder.mkdir(parents=True)
    task = {"task_id": "t1", "category": "multi_step", "task_prompt": "Say hello.",
            "success_criteria": [{"type": "contains_any", "phrases": ["you said"]}]}  # fmt: skip
    (folder / "tasks.jsonl").write_text('{"format_version": 1}\n' + json.dumps(task) + "\n", encoding="utf-8")
    (folder / "test_http_suite.py").write_text(SUITE.format(url=svc.url), encoding="utf-8")
    pytester.makeini("[pytest]\ngauge_backend = sim\ngauge_seed = 3\n")
    monkeypatch.setenv("SVC_TOKEN", TOKEN)
    run_inprocess(pytester, "suites", "--gauge-cache", "off").assert_outcomes(passed=2)
    [row] = read_jsonl(pytester.path / "gauge-out" / "http" / "agents" / "service.jsonl")
    assert row["final_reply"].startswith("turn ") and "you said" in row["final_reply"]
    assert row["score"]["task_success"] and [t["status"] for t in row["program_turns"]] == [200] * len(
        svc.seen
    )
    assert all(h["authorization"] == f"Bearer {TOKEN}" for _, h in svc.seen)
    written = "".join(
        p.read_text(encoding="utf-8") for p in (pytester.path / "gauge-out").rglob("*") if p.is_file()
    )
    assert TOKEN not in written
