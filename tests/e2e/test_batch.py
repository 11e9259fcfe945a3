"""Batched judging (``--gauge-batch judge``) against the loopback server's batch APIs: the same
records and reports as an unbatched run, the judge's cost halved at the default batch price, and an
expired, partly failed or absent batch endpoint falling back to ordinary calls with nothing lost."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_gauge._internal.cli import main
from pytest_gauge._internal.gateway.batch import Batcher, BatchSettings
from pytest_gauge._internal.gateway.doctor import Target, run_checks
from pytest_gauge._internal.gateway.errors import BudgetExhausted, GatewayError
from pytest_gauge._internal.gateway.gateway import CallContext, GatewayShared
from pytest_gauge._internal.gateway.limits import output_tokens_cap, prompt_tokens_estimate
from pytest_gauge._internal.records.prices import BATCH_SHARE
from pytest_gauge.testing import LoopbackServer
from pytest_gauge.testing.batches import BatchFaults
from pytest_gauge.testing.simserver import sim_responder
from tests.e2e import test_live
from tests.e2e.test_gateway import BODY, ledger, make_gateway, run_closing
from tests.helpers import normalised, read_jsonl, run_inprocess, stable_report

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


def outputs(folder: Path) -> dict[str, Any]:
    """What must not change with batching: the records and the reports (volatile fields out), their
    dollar amounts masked (the judge's cost is the one thing batching changes: checked apart)."""
    out: dict[str, Any] = {}
    for path in sorted(folder.rglob("*.jsonl")):
        if path.name != "agent_runs.jsonl":
            out[str(path.relative_to(folder))] = normalised(read_jsonl(path))
    for path in sorted((folder / "reports").iterdir()):
        if path.suffix == ".json":
            out[path.name] = _costless(json.loads(stable_report(path)))
        elif path.suffix == ".md" and path.name != "token_cost.md":
            out[path.name] = re.sub(r"\$\d[\d,]*\.\d+", "$X", stable_report(path))
    return out


def _costless(value: Any) -> Any:
    """A JSON value with every field about cost or spending masked."""
    if isinstance(value, dict):
        return {
            k: "X" if ("cost" in k or "spent" in k or "usd" in k) else _costless(v) for k, v in value.items()
        }
    if isinstance(value, list):
        return [_costless(v) for v in value]
    return value


def judge_cost(folder: Path) -> float:
    return round(float(sum(r["cost"] for r in judge_lines(folder) if r["cost"])), 6)


def judge_lines(folder: Path) -> list[dict[str, Any]]:
    return [r for r in read_jsonl(folder / "agent_runs.jsonl") if r["role"] == "judge"]


def test_batched_judging_gives_the_same_records_at_half_the_judge_cost(
    pytester: pytest.Pytester, server: LoopbackServer
) -> None:
    test_live.live(pytester, "--gauge-out", "plain").assert_outcomes(passed=CASES)
    plain_requests = server.requests_total
    server.reset_counters()
    result = test_live.live(pytester, "--gauge-out", "batched", "--gauge-batch", "judge")
    result.assert_outcomes(passed=CASES)
    assert f"; {CASES} answered in batches, at the batch price" in result.stdout.str()
    plain, batched = pytester.path / "plain" / "mini", pytester.path / "batched" / "mini"
    assert judge_cost(batched) == pytest.approx(judge_cost(plain) / 2, abs=2e-6)
    assert outputs(batched) == outputs(plain)
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
    assert outputs(batched) == outputs(plain)
    lines = judge_lines(batched)
    assert len(lines) == CASES and {r["status"] for r in lines} == {"ok"}  # nothing lost, none twice
    batched_calls = [r for r in lines if r.get("batched")]
    assert len(batched_calls) < CASES  # the batches answered some (half of each, or all but every 3rd)
    assert server.batches.requests == len(batched_calls)
    assert server.by_path["/v1/chat/completions"] == plain_requests - len(batched_calls)


def test_a_gateway_without_batches_is_called_the_ordinary_way(
    pytester: pytest.Pytester, server: LoopbackServer
) -> None:
    server.batches.faults = BatchFaults(available=False)
    result = test_live.live(pytester, "--gauge-batch", "judge")
    result.assert_outcomes(passed=CASES)
    warning = f"no batch endpoint at {server.base_url} (OpenAI batches (/files + /batches)) (HTTP 404"
    assert warning in result.stdout.str() and "answered in batches" not in result.stdout.str()
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


@pytest.mark.parametrize(
    ("api", "route"), [("anthropic", "/v1/messages/batches"), ("responses", "/v1/batches")]
)
def test_a_judge_of_each_wire_format_batches_in_its_own_batch_api(
    pytester: pytest.Pytester, mini_suite: Path, monkeypatch: pytest.MonkeyPatch, api: str, route: str
) -> None:
    module = mini_suite / "test_mini.py"
    text = module.read_text(encoding="utf-8")
    judge = 'judge=Judge("sim-judge", sim=SimJudge(noise=0.15))'
    assert judge in text
    module.write_text(text.replace(judge, judge[:-1] + f', api="{api}")'), encoding="utf-8")
    with LoopbackServer(sim_responder(module, seed=7)) as srv:
        monkeypatch.setenv("TAOTOKEN_API_KEY", KEY)
        monkeypatch.setenv("TAOTOKEN_BASE_URL", srv.base_url)
        monkeypatch.setenv("GAUGE_PRICES", PRICES)
        test_live.live(pytester, "--gauge-out", "plain").assert_outcomes(passed=CASES)
        srv.batches.faults = BatchFaults(fail_every=4)
        test_live.live(pytester, "--gauge-out", "batched", "--gauge-batch", "judge").assert_outcomes(
            passed=CASES
        )
        paths = srv.by_path
        requests = srv.batches.requests
    plain, batched = pytester.path / "plain" / "mini", pytester.path / "batched" / "mini"
    assert outputs(batched) == outputs(plain)
    lines = judge_lines(batched)
    assert {r["api"] for r in lines} == {api} and len(lines) == CASES
    assert 0 < len([r for r in lines if r.get("batched")]) == requests < CASES  # every 4th fell back
    assert paths.get(route, 0) >= 1


def test_batched_answers_are_cached_so_a_replay_sends_nothing(
    pytester: pytest.Pytester, server: LoopbackServer
) -> None:
    args = ("suites", "--gauge-cache", "use", "--gauge-batch", "judge")
    run_inprocess(pytester, *args, "--gauge-backend", "live", "--gauge-out", "live").assert_outcomes(
        passed=CASES
    )
    sent = server.requests_total
    run_inprocess(pytester, *args, "--gauge-backend", "replay", "--gauge-out", "replay").assert_outcomes(
        passed=CASES
    )
    assert server.requests_total == sent and server.batches.created >= 1
    live, replay = pytester.path / "live" / "mini", pytester.path / "replay" / "mini"
    assert all(r.get("batched") for r in judge_lines(live))
    assert all(r["cache_hit"] and "batched" not in r for r in judge_lines(replay))
    records = {
        f: normalised(read_jsonl(d / "pairs/pair_results.jsonl")) for f, d in (("l", live), ("r", replay))
    }
    assert records["l"] == records["r"]


def test_doctor_probes_the_batch_endpoint_of_each_judge_format(tmp_path: Path) -> None:
    with LoopbackServer() as srv:
        env = {"TAOTOKEN_API_KEY": "sk-doctor-key", "TAOTOKEN_BASE_URL": srv.base_url}
        targets = [
            Target("j1", "judge (a)"),
            Target("j2", "judge (b)", api="anthropic"),
            Target("a", "agent"),
        ]
        found = {c.message.split(":")[0]: c for c in run_checks(env, targets=targets, batch=True)}
        srv.batches.faults = BatchFaults(available=False)
        absent = [c for c in run_checks(env, targets=targets, batch=True) if c.topic == "batch"]
        plain = [c for c in run_checks(env, targets=targets) if c.topic == "batch"]
        paths = srv.by_path
    assert found["OpenAI batches (/files + /batches)"].status == "ok"
    assert found["Message Batches"].status == "ok"
    assert [c.status for c in absent] == ["warn", "warn"]
    assert all("no batch endpoint" in c.message and "ordinary way" in c.message for c in absent)
    assert plain == [] and paths["/v1/batches"] == 2 and paths["/v1/messages/batches"] == 2
    out = io.StringIO()
    with LoopbackServer() as srv:
        env = {"TAOTOKEN_API_KEY": "sk-doctor-key", "TAOTOKEN_BASE_URL": srv.base_url}
        assert main(["doctor", "--models", "m", "--batch"], environ=env, out=out, err=io.StringIO()) == 0
    assert "ok    batch: OpenAI batches" in out.getvalue() and "sk-doctor-key" not in out.getvalue()


def test_the_budget_counts_a_batch_before_it_is_sent(tmp_path: Path) -> None:
    """Four judge calls gathered in one batch with a budget for two at the batch price: two are sent in
    the batch, two fail as over budget without being sent, and the answered ones are batched lines."""
    with LoopbackServer() as srv:
        gw = make_gateway(tmp_path, srv, prices={"m": (1000.0, 1000.0)})
        cap = output_tokens_cap(BODY)
        worst = gw.resources.prices.cost("m", prompt_tokens_estimate(BODY) + cap, cap) or 0.0
        gw = make_gateway(tmp_path, srv, prices={"m": (1000.0, 1000.0)}, budget_usd=2.5 * worst * BATCH_SHARE)
        batcher = Batcher(BatchSettings(frozenset({"judge"}), deadline=60.0, window=0.05))
        gw.shared = GatewayShared(gw.settings, dataclasses.replace(gw.resources, batcher=batcher))

        async def judge(i: int) -> Any:
            try:
                return await gw.chat(CallContext("s", "t", f"judge/c{i}/0/0"), 1, "judge", "m", BODY)
            except GatewayError as exc:
                return exc

        async def run() -> list[Any]:
            return await asyncio.gather(*(judge(i) for i in range(4)))

        results = run_closing(gw, run())
        sent = srv.batches.requests
        chat = srv.by_path.get("/v1/chat/completions", 0)
    assert [isinstance(r, BudgetExhausted) for r in results] == [False, False, True, True]
    assert sent == 2 and chat == 0 and batcher.batches_sent == 1
    rows = ledger(tmp_path)
    assert [r.status for r in rows] == ["ok", "ok"] and all(r.batched for r in rows)


@pytest.mark.slow  # two xdist workers in a subprocess
def test_each_xdist_worker_batches_its_own_judge_calls(
    pytester: pytest.Pytester, server: LoopbackServer
) -> None:
    test_live.live(pytester, "--gauge-out", "plain").assert_outcomes(passed=CASES)
    args = ("--gauge-out", "batched", "--gauge-batch", "judge", "-n", "2")
    test_live.live(pytester, *args).assert_outcomes(passed=CASES)
    plain, batched = pytester.path / "plain" / "mini", pytester.path / "batched" / "mini"
    assert outputs(batched) == outputs(plain)
    lines = judge_lines(batched)
    assert len(lines) == CASES and all(r.get("batched") for r in lines)
    assert {r["worker"] for r in lines} == {"gw0", "gw1"} and server.batches.created >= 2


def test_an_adaptive_run_waits_for_the_batches_of_its_looks(
    pytester: pytest.Pytester, server: LoopbackServer
) -> None:
    """Each look's judge calls go in batches and the look waits for them: the same looks, records and
    reports as the unbatched adaptive run."""
    gate = (
        "--gauge-adaptive",
        "--gauge-adaptive-look",
        "2",
        "--gauge-gate",
        "upper(judge_error_rate) <= 0.5",
    )
    test_live.live(pytester, "--gauge-out", "plain", *gate)
    test_live.live(pytester, "--gauge-out", "batched", "--gauge-batch", "judge", *gate)
    plain, batched = pytester.path / "plain" / "mini", pytester.path / "batched" / "mini"
    assert outputs(batched) == outputs(plain)
    lines = judge_lines(batched)
    assert lines and all(r.get("batched") for r in lines) and server.batches.created >= 2


def test_gauge_doctor_with_gauge_batch_probes_the_batch_endpoint(
    pytester: pytest.Pytester, server: LoopbackServer
) -> None:
    result = run_inprocess(pytester, "suites", "--gauge-doctor", "--gauge-batch", "judge")
    assert "ok    batch: OpenAI batches (/files + /batches): the gateway answers GET /v1/batches" in (
        result.stdout.str()
    )
    assert server.by_path.get("/v1/batches") == 1 and server.batches.created == 0  # nothing created
    plain = run_inprocess(pytester, "suites", "--gauge-doctor")
    assert "batch:" not in plain.stdout.str() and server.by_path.get("/v1/batches") == 1
