"""JSON mode that survives real servers: a refusal of ``response_format`` is
recognised by its body whatever the status (a llama.cpp-style server answers 500), never retried, and the
fallback is decided once per judge model per run across xdist workers (and kept for a re-run)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_gauge._internal.gateway.errors import GatewayError, rejects_format
from pytest_gauge.testing import FaultPlan, LoopbackServer
from pytest_gauge.testing.simserver import sim_responder
from tests.helpers import read_jsonl, run_inprocess

KEY = "sk-gauge-json-mode-5e1d"
CASES = 5 * 3 * 2
REFUSE_500 = FaultPlan(reject_response_formats=frozenset({"json_schema"}), reject_format_status=500)


@pytest.fixture
def server(mini_suite: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopbackServer]:
    srv = LoopbackServer(sim_responder(mini_suite / "test_mini.py", seed=7), faults=REFUSE_500).start()
    monkeypatch.setenv("TAOTOKEN_API_KEY", KEY)
    monkeypatch.setenv("TAOTOKEN_BASE_URL", srv.base_url)
    yield srv
    srv.stop()


def judge_formats(server: LoopbackServer) -> list[str]:
    judged = [b for b in server.bodies if b.get("model") == "sim-judge"]
    return [str((b.get("response_format") or {}).get("type")) for b in judged]


@pytest.mark.parametrize("status", [400, 422, 500, 501])
def test_a_refusal_is_known_by_its_body_whatever_the_status(status: int) -> None:
    for body in ("'response_format' is not supported", "json_schema: unsupported", "failed to parse grammar"):
        assert rejects_format(GatewayError(f"{status} x: {body}", "fix", status=status))
    assert not rejects_format(GatewayError(f"{status} x: the model is overloaded", "fix", status=status))
    assert not rejects_format(GatewayError("429 response_format", "fix", status=429))


@pytest.mark.slow
def test_a_500_refusing_json_schema_costs_one_request_per_judge_model_in_a_two_worker_run(
    pytester: pytest.Pytester, server: LoopbackServer
) -> None:
    args = ("suites", "-p", "no:cacheprovider", "--gauge-backend", "live", "-n", "2")
    result = pytester.runpytest_subprocess(*args)
    result.assert_outcomes(passed=CASES)
    kinds = judge_formats(server)
    assert kinds.count("json_schema") == 1  # one refused request for the run, not one per worker
    assert server.requests_by_status.get(500) == 1  # and never retried
    records = read_jsonl(pytester.path / "gauge-out" / "mini" / "pairs" / "pair_results.jsonl")
    assert len(records) == CASES and all(r["judge_choice"] != "error" for r in records)
    assert {r["judge_response_format"] for r in records} == {"json_object"}
    assert "retry later" not in result.stdout.str()
    before = len(server.bodies)
    again = pytester.runpytest_subprocess(*args)
    again.assert_outcomes(passed=CASES)
    assert len(server.bodies) == before  # the re-run sends nothing, not even the refused format


def test_pytest_gauge_doctor_probes_the_judges_json_mode_like_the_cli(
    pytester: pytest.Pytester, mini_suite: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with LoopbackServer(faults=REFUSE_500) as srv:  # answers any model (the sim responder knows no pings)
        monkeypatch.setenv("TAOTOKEN_API_KEY", KEY)
        monkeypatch.setenv("TAOTOKEN_BASE_URL", srv.base_url)
        result = run_inprocess(pytester, "suites", "--gauge-doctor")
        kinds = judge_formats(srv)
    out = result.stdout.str()
    assert result.ret == 0, out
    assert kinds == ["json_schema", "json_object"]
    assert "judge (mini) model sim-judge: answered a 1-token chat call with response_format json_object" in (
        out
    )
    assert "response_format json_schema refused (500 Internal Server Error" in out
    cause = out.split("json_schema refused (", 1)[1].split("); fix:", 1)[0]
    assert len(cause) <= 100  # the refusal's first line, cut: never the server's whole validation error
    assert KEY not in out
