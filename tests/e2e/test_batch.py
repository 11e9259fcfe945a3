"""Batched judging (``--gauge-batch judge``) against the loopback server's batch APIs: the same
records and reports as an unbatched run, the judge's cost halved at the default batch price, and an
expired, partly failed or absent batch endpoint falling back to ordinary calls with nothing lost."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_gauge.testing import LoopbackServer
from pytest_gauge.testing.batches import BatchFaults
from pytest_gauge.testing.simserver import sim_responder
from tests.e2e import test_live
from tests.helpers import normalised, read_jsonl, stable_report

CASES = test_live.CASES
KEY = test_live.KEY
PRICES = '{"sim-judge": {"input": 2.0, "output": 8.0}, "sim-agent-x": {"input": 1.0, "output": 1.0}}'


@pytest.fixture
def server(mini_suite: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopbackServer]:
    srv = LoopbackServer(sim_responder(mini_suite / "test_mini.py", seed=7)).start()
    monkeypatch.setenv("TAOTOKEN_API_KEY", KEY)
    monkeypatch.setenv("TAOTOKEN_BASE_URL", srv.base_url)
    monkeypatch.setenv("GAUGE_PRICES", PRICES)
    yield srv
    srv.stop()


def outputs(folder: Path, judge_cost: tuple[str, str] = ("", "")) -> dict[str, Any]:
    """What must not change with batching: the records and the reports (volatile fields out), the
    judge's cost in them written as ``judge_cost[1]`` where it is ``judge_cost[0]``."""
    out: dict[str, Any] = {}
    for path in sorted(folder.rglob("*.jsonl")):
        if path.name != "agent_runs.jsonl":
            out[str(path.relative_to(folder))] = normalised(read_jsonl(path))
    for path in sorted((folder / "reports").iterdir()):
        if path.suffix in (".md", ".json") and path.name != "token_cost.md":
            text = stable_report(path)
            out[path.name] = text.replace(*judge_cost) if judge_cost[0] else text
    return out


def judge_cost(folder: Path) -> float:
    return round(sum(r["cost"] for r in judge_lines(folder) if r["cost"]), 6)


def judge_lines(folder: Path) -> list[dict[str, Any]]:
    return [r for r in read_jsonl(folder / "agent_runs.jsonl") if r["role"] == "judge"]


def test_batched_judging_gives_the_same_records_at_half_the_judge_cost(
    pytester: pytest.Pytester, server: LoopbackServer
) -> None:
    test_live.live(pytester, "--gauge-out", "plain").assert_outcomes(passed=CASES)
    plain_requests = server.requests_total
    server.reset_counters()
    test_live.live(pytester, "--gauge-out", "batched", "--gauge-batch", "judge").assert_outcomes(passed=CASES)
    plain, batched = pytester.path / "plain" / "mini", pytester.path / "batched" / "mini"
    assert judge_cost(batched) == pytest.approx(judge_cost(plain) / 2, abs=2e-6)
    assert outputs(batched, (f"{judge_cost(batched):g}", f"{judge_cost(plain):g}")) == outputs(plain)
    assert server.batches.created >= 1 and server.batches.requests == CASES
    assert server.by_path.get("/v1/chat/completions", 0) == plain_requests - CASES  # judge calls batched
    lines = judge_lines(batched)
    assert len(lines) == CASES and all(r.get("batched") is True and r["status"] == "ok" for r in lines)
    assert not any("batched" in r for r in judge_lines(plain))
    others = [r for r in read_jsonl(batched / "agent_runs.jsonl") if r["role"] != "judge"]
    assert not any("batched" in r for r in others)


@pytest.mark.parametrize(
    "faults",
    [BatchFaults(ending="expired"), BatchFaults(fail_every=3), BatchFaults(ending="cancelled", polls=2)],
    ids=["expired", "partly-failed", "cancelled"],
)
def test_an_unfinished_batch_falls_back_to_ordinary_calls(
    pytester: pytest.Pytester, server: LoopbackServer, faults: BatchFaults
) -> None:
    test_live.live(pytester, "--gauge-out", "plain").assert_outcomes(passed=CASES)
    plain_requests = server.requests_total
    server.reset_counters()
    server.batches.faults = faults
    test_live.live(pytester, "--gauge-out", "batched", "--gauge-batch", "judge").assert_outcomes(passed=CASES)
    plain, batched = pytester.path / "plain" / "mini", pytester.path / "batched" / "mini"
    assert outputs(batched, (f"{judge_cost(batched):g}", f"{judge_cost(plain):g}")) == outputs(plain)
    lines = judge_lines(batched)
    assert len(lines) == CASES and {r["status"] for r in lines} == {"ok"}  # nothing lost, none twice
    batched_calls = [r for r in lines if r.get("batched")]
    assert 0 < len(batched_calls) < CASES  # the batch answered some, the ordinary calls the rest
    assert server.batches.requests == len(batched_calls)
    assert server.by_path["/v1/chat/completions"] == plain_requests - len(batched_calls)


def test_a_gateway_without_batches_is_called_the_ordinary_way(
    pytester: pytest.Pytester, server: LoopbackServer
) -> None:
    server.batches.faults = BatchFaults(available=False)
    test_live.live(pytester, "--gauge-batch", "judge").assert_outcomes(passed=CASES)
    lines = judge_lines(pytester.path / "gauge-out" / "mini")
    assert len(lines) == CASES and not any("batched" in r for r in lines)
    assert server.by_path.get("/v1/files", 0) == 1  # found absent once, not tried again


def test_a_batch_past_its_deadline_is_cancelled_and_its_calls_sent(
    pytester: pytest.Pytester, server: LoopbackServer
) -> None:
    server.batches.faults = BatchFaults(hold=True)
    result = test_live.live(pytester, "--gauge-batch", "judge", "--gauge-batch-deadline", "0.01")
    result.assert_outcomes(passed=CASES)
    lines = judge_lines(pytester.path / "gauge-out" / "mini")
    assert len(lines) == CASES and {r["status"] for r in lines} == {"ok"}
    assert not any("batched" in r for r in lines)
    assert all(b.status == "cancelled" for b in server.batches.batches.values())
