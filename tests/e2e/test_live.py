"""The live gateway path against a real HTTP server on loopback that speaks the OpenAI wire format,
answers like the simulator, and injects faults."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_gauge._internal.run.judge import JUDGE_SYSTEM_PROMPT
from pytest_gauge.testing import FaultPlan, LoopbackServer
from pytest_gauge.testing.simserver import sim_responder
from tests.helpers import DATA, MINI_INI, SharedRun, SharedRuns, normalised, read_jsonl, run_inprocess

CASES = 5 * 3 * 2
KEY = "sk-gauge-SECRET-4f9c2a7e1b"
NAMES = ("agent_x", "agent_y", "agent_z", "sim-agent-x", "sim-agent-y", "sim-agent-z")


@pytest.fixture
def server(mini_suite: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopbackServer]:
    srv = LoopbackServer(sim_responder(mini_suite / "test_mini.py", seed=7)).start()
    monkeypatch.setenv("TAOTOKEN_API_KEY", KEY)
    monkeypatch.setenv("TAOTOKEN_BASE_URL", srv.base_url)
    yield srv
    srv.stop()


def live(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """A live run of the mini suite against the server, cache off: in this process unless it starts
    xdist workers."""
    if "-n" not in args:
        return run_inprocess(pytester, "suites", "--gauge-backend", "live", "--gauge-cache", "off", *args)
    return pytester.runpytest_subprocess(
        "suites", "-p", "no:cacheprovider", "--gauge-backend", "live", "--gauge-cache", "off", *args
    )


@pytest.mark.slow
def test_faults_are_survived_and_results_equal_a_clean_run(
    pytester: pytest.Pytester, server: LoopbackServer
) -> None:
    live(pytester, "--gauge-out", "clean").assert_outcomes(passed=CASES)
    clean_requests = server.requests_total
    server.reset_counters()
    server.faults = FaultPlan(rate_429=0.10, retry_after="0", rate_503=0.05, seed=3)  # honoured: no wait
    live(pytester, "--gauge-out", "faulty", "-n", "2").assert_outcomes(passed=CASES)
    by_status = server.requests_by_status
    assert by_status.get(429, 0) > 0 and by_status.get(503, 0) > 0
    assert server.requests_total == clean_requests + by_status[429] + by_status[503]
    faulty = pytester.path / "faulty" / "mini"
    clean = pytester.path / "clean" / "mini"
    assert normalised(read_jsonl(faulty / "pairs/pair_results.jsonl")) == normalised(
        read_jsonl(clean / "pairs/pair_results.jsonl")
    )
    ledger = read_jsonl(faulty / "agent_runs.jsonl")
    assert len(ledger) == server.requests_total  # every attempt recorded, none twice
    statuses = {r["status"] for r in ledger}
    assert {"ok", "http_429", "http_503"} <= statuses
    retried = [r for r in ledger if r["attempt"] > 1]
    assert retried and all(r["call_id"] for r in retried)


@pytest.mark.slow
def test_wrong_key_stops_the_run_once(pytester: pytest.Pytester, server: LoopbackServer) -> None:
    server.faults = FaultPlan(expected_key="sk-the-right-one")
    result = live(pytester, "-n", "2")
    assert result.ret != 0
    out = result.stdout.str()
    assert "TAOTOKEN_API_KEY" in out and "401" in out
    assert server.requests_total <= 2  # at most one request per worker
    assert KEY not in out + result.stderr.str()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("suffix", "fix"), [("/v1/v1", "/v1/v1"), ("/chat/completions", "/chat/completions")]
)
def test_bad_base_url_path_is_diagnosed(
    pytester: pytest.Pytester, server: LoopbackServer, monkeypatch: pytest.MonkeyPatch, suffix: str, fix: str
) -> None:
    monkeypatch.setenv("TAOTOKEN_BASE_URL", server.base_url.removesuffix("/v1") + suffix)
    result = live(
        pytester
    )  # one request per process at most: with workers, test_wrong_key_stops_the_run_once
    assert result.ret != 0
    out = result.stdout.str()
    assert "404" in out and "did you mean" in out and fix in out
    assert server.requests_total == 1


def test_tracking_query_in_base_url_is_refused_before_any_request(
    pytester: pytest.Pytester, server: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TAOTOKEN_BASE_URL", server.base_url + "?utm_source=x")
    result = live(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "utm_source" in result.stderr.str() + result.stdout.str()
    assert server.base_url in result.stderr.str() + result.stdout.str()
    assert server.requests_total == 0


@pytest.mark.slow  # the full tier only: a subprocess live run with -vv and junit (~5 s CPU)
def test_key_never_appears_in_any_output(pytester: pytest.Pytester, server: LoopbackServer) -> None:
    server.faults = FaultPlan(rate_429=0.1, retry_after="0", seed=1)
    result = pytester.runpytest_subprocess(
        "suites", "-p", "no:cacheprovider", "--gauge-backend", "live", "--junitxml", "junit.xml", "-l", "-vv"
    )
    result.assert_outcomes(passed=CASES)
    assert KEY not in result.stdout.str() + result.stderr.str()
    for path in pytester.path.rglob("*"):
        if path.is_file() and "suites" not in path.parts:
            assert KEY.encode() not in path.read_bytes(), path
    assert (pytester.path / ".gauge-cache").is_dir()  # the cache was written and checked too


def test_judge_never_sees_agent_or_model_names(pytester: pytest.Pytester, server: LoopbackServer) -> None:
    live(pytester).assert_outcomes(passed=CASES)
    judge_bodies = [b for b in server.bodies if b["messages"][0]["content"] == JUDGE_SYSTEM_PROMPT]
    assert len(judge_bodies) == CASES
    others = [b for b in server.bodies if b not in judge_bodies]
    assert any(
        "I am agent_y, running on sim-agent-y" in (m.get("content") or "")
        for b in others
        for m in b["messages"]
    ), "the self-naming agent should have named itself in the conversation the judge then saw"
    for body in judge_bodies:
        text = json.dumps(body["messages"]).lower()
        for name in NAMES:
            assert name not in text


RECORD_IMPORTS = """
import os, sys
from pathlib import Path


def pytest_sessionfinish(session):
    name = os.environ.get("PYTEST_XDIST_WORKER", "controller")
    Path("imports-" + name + ".txt").write_text(f"openai={'openai' in sys.modules}")
"""


def shared_live_run(shared_runs: SharedRuns, server: LoopbackServer) -> tuple[SharedRun, dict[str, Any]]:
    """One fault-free live ``-n 2`` run under a two-slot cap (each worker's imports recorded by its
    conftest), made once per session for the three tests that read it (a subprocess -n 2 run costs about
    6 s CPU), with what its server saw: requests, agent and user bodies, the most in flight. The server
    holds requests after the first until two are open, so two in flight is reached whatever the load."""

    def setup(folder: Path) -> None:
        shutil.copytree(DATA / "mini", folder / "suites" / "mini")
        (folder / "pytest.ini").write_text(MINI_INI, encoding="utf-8")
        (folder / "conftest.py").write_text(RECORD_IMPORTS, encoding="utf-8")
        server.reset_counters()
        server.gather(2, after=1, timeout=120.0)

    def after(folder: Path) -> None:
        seen = {
            "requests_total": server.requests_total,
            "agent_and_user": sum(
                1 for b in server.bodies if b["messages"][0]["content"] != JUDGE_SYSTEM_PROMPT
            ),
            "max_in_flight": server.max_in_flight,
            "gather_timed_out": server.gather_timed_out,
        }
        (folder / "server.json").write_text(json.dumps(seen), encoding="utf-8")

    run = shared_runs.get(
        "live-n2-cap2", setup, "suites", "--gauge-backend", "live", "--gauge-cache", "off", "-n", "2",
        "--gauge-max-concurrency", "2", env={"TAOTOKEN_API_KEY": KEY, "TAOTOKEN_BASE_URL": server.base_url},
        after=after,
    )  # fmt: skip
    outcomes = pytest.RunResult(run.ret, run.stdout.splitlines(), [], 0.0).parseoutcomes()
    assert (run.ret, {k: v for k, v in outcomes.items() if k != "warnings"}) == (0, {"passed": CASES}), (
        run.stdout[-3000:]
    )
    return run, json.loads((run.path / "server.json").read_text(encoding="utf-8"))


@pytest.mark.slow
def test_global_concurrency_limit_holds_across_workers(
    shared_runs: SharedRuns, server: LoopbackServer
) -> None:
    """Two workers share two request slots: never more than two in flight, and two are reached: a cap
    kept per worker would let both workers open two each."""
    _, seen = shared_live_run(shared_runs, server)
    assert (seen["max_in_flight"], seen["gather_timed_out"]) == (2, False)


@pytest.mark.slow
def test_requests_seen_equal_ledger_and_one_generation_per_transcript(
    shared_runs: SharedRuns, server: LoopbackServer
) -> None:
    run, seen = shared_live_run(shared_runs, server)
    ledger = read_jsonl(run.path / "gauge-out" / "mini" / "agent_runs.jsonl")
    assert len(ledger) == seen["requests_total"]
    assert seen["agent_and_user"] == sum(1 for r in ledger if r["role"] in ("agent", "user_sim"))
    assert len({r["work"] for r in ledger if r["role"] != "judge"}) == 15


@pytest.mark.slow
def test_live_workers_make_their_calls_without_importing_openai(
    shared_runs: SharedRuns, server: LoopbackServer
) -> None:
    """The call path is the package's own HTTP client: a live -n 2 run's workers answer every case over
    the network and never import the SDK (about a second of CPU per process), nor does the controller."""
    run, seen = shared_live_run(shared_runs, server)
    assert seen["requests_total"] > 0
    records = {p.name: p.read_text() for p in run.path.glob("imports-*.txt")}
    assert set(records) == {"imports-gw0.txt", "imports-gw1.txt", "imports-controller.txt"}
    assert set(records.values()) == {"openai=False"}
