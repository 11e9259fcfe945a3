"""The three-format suite of tests/e2e/test_three_apis.py (an ``api="anthropic"`` judge, an
``api="responses"`` agent, a chat agent) run live against the loopback server answering like its
simulator, with 429s and Anthropic's 529s on every route: each role reaches its own path, the faults are
retried and every attempt lands on the ledger, and the verdicts equal the offline run's."""

from __future__ import annotations

import pytest

from pytest_gauge.testing import FaultPlan, LoopbackServer
from pytest_gauge.testing.simserver import sim_responder
from tests.e2e.test_three_apis import CASES, three_apis, three_run
from tests.helpers import SharedRuns, normalised, read_jsonl, run_inprocess

KEY = "sk-gauge-SECRET-three-7d1e"


@pytest.mark.slow
@pytest.mark.parametrize("workers", ["0", "2"])
def test_live_with_faults_equals_offline(
    pytester: pytest.Pytester, shared_runs: SharedRuns, monkeypatch: pytest.MonkeyPatch, workers: str
) -> None:
    three_apis(pytester.path)
    module = pytester.path / "suites" / "three" / "test_three.py"
    plan = FaultPlan(rate_429=0.08, rate_529=0.06, retry_after="0", seed=5)
    with LoopbackServer(sim_responder(module, seed=7), faults=plan) as srv:
        monkeypatch.setenv("TAOTOKEN_API_KEY", KEY)
        monkeypatch.setenv("TAOTOKEN_BASE_URL", srv.base_url)
        live = ("suites", "--gauge-backend", "live", "--gauge-cache", "off")
        if workers == "0":
            result = run_inprocess(pytester, *live)
        else:  # two xdist workers sharing the server's faults in whatever order their calls come
            result = pytester.runpytest_subprocess("-p", "no:randomly", *live, "-n", workers)
        by_path, by_status, total = srv.by_path, srv.requests_by_status, srv.requests_total
    result.assert_outcomes(passed=CASES)
    assert set(by_path) == {"/v1/chat/completions", "/v1/messages", "/v1/responses"}
    assert by_status.get(429, 0) > 0 and by_status.get(529, 0) > 0
    out = pytester.path / "gauge-out" / "three"
    ledger = read_jsonl(out / "agent_runs.jsonl")
    assert len(ledger) == total  # every attempt, the retried ones too
    judge = [r for r in ledger if r["role"] == "judge"]
    assert {r["api"] for r in judge} == {"anthropic"} and by_path["/v1/messages"] == len(judge)
    assert {r["status"] for r in judge} <= {"ok", "http_429", "http_529"}
    assert len([r for r in judge if r["status"] == "ok"]) == CASES
    offline = three_run(shared_runs, "0").path / "gauge-out" / "three"
    assert normalised(read_jsonl(out / "pairs" / "pair_results.jsonl")) == normalised(
        read_jsonl(offline / "pairs" / "pair_results.jsonl")
    )
    assert KEY not in result.stdout.str()
