"""Adaptive runs end to end: the controller's decision after each look, the cases not needed skipped and
never paid for, the same stop whatever ``-n`` and a warm cache replays it. The looks and decisions alone
are tests/unit/analysis/test_adaptive.py; the statistics (boundaries, the decision rule, error control)
tests/unit/analysis/test_sequential.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_gauge.testing import LoopbackServer
from pytest_gauge.testing.simserver import sim_responder
from tests.acceptance.test_eval_suites import copy_suites, main_job
from tests.helpers import SharedRuns, normalised, numbered_task, read_jsonl, run_inprocess, stable_report

TASKS = 24
CASES = TASKS * 2  # one pair, both orders
SUITE = """
from pytest_gauge import Judge, ModelAgent, SimAgent, SimJudge, Suite, UserSimulator

suite = Suite(
    agents=[
        ModelAgent("agent_x", "sim-agent-x", sim=SimAgent(skill=0.9)),
        ModelAgent("agent_z", "sim-agent-z", sim=SimAgent(skill=0.3)),
    ],
    judge=Judge("sim-judge", sim=SimJudge(noise=0.1)),
    user=UserSimulator("sim-user", max_turns=1),
    gates=[
        "judge_error_rate <= 0.3",
        "upper(position_bias) <= 0.95",
        "lower(elo(agent_x) - elo(agent_z)) >= 0",
    ],
)
"""


@pytest.fixture
def suite_module(pytester: pytest.Pytester) -> Path:
    folder = pytester.path / "suites" / "ad"
    folder.mkdir(parents=True)
    lines = [json.dumps({"format_version": 1})] + [json.dumps(numbered_task(i)) for i in range(TASKS)]
    (folder / "tasks.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    module = folder / "test_ad.py"
    module.write_text(SUITE, encoding="utf-8")
    pytester.makeini("[pytest]\ngauge_backend = sim\ngauge_seed = 7\n")
    return module


def adaptive(pytester: pytest.Pytester, out: str, *args: str) -> pytest.RunResult:
    return run_inprocess(
        pytester, "suites", "--gauge-adaptive", "--gauge-adaptive-look", "3", "--gauge-out", out,
        "--gauge-no-progress", "-rs", *args,
    )  # fmt: skip


def adaptive_block(out: Path) -> dict[str, object]:
    block = json.loads((out / "reports" / "metrics.json").read_text())["adaptive"]
    assert isinstance(block, dict)
    return block


# ----- the plan and the gate --------------------------------------------------------------------


# ----- runs -------------------------------------------------------------------------------------


def test_a_clear_suite_stops_early_skips_the_rest_and_pays_for_none_of_it(
    pytester: pytest.Pytester, suite_module: Path
) -> None:
    result = adaptive(pytester, "out")
    assert result.ret == 0, result.stdout.str()
    outcomes = result.parseoutcomes()
    block = adaptive_block(pytester.path / "out" / "ad")
    stop, planned = block["stopped_after_look"], block["planned_looks"]
    assert isinstance(stop, int) and isinstance(planned, int) and stop < planned == 8
    assert outcomes["passed"] == 2 * 3 * stop + 3  # the cases of the looks run, and the 3 gates
    assert outcomes["skipped"] == CASES - 2 * 3 * stop
    result.stdout.fnmatch_lines([f"*not needed: every gate decided after {3 * stop} of {TASKS} tasks*"])
    out = pytester.path / "out" / "ad"
    run_tasks = {r["task_id"] for r in read_jsonl(out / "pairs" / "pair_results.jsonl")}
    assert len(run_tasks) == 3 * stop
    assert {r["task_id"] for r in read_jsonl(out / "agent_runs.jsonl")} == run_tasks  # no call past the stop
    gates = json.loads((out / "reports" / "metrics.json").read_text())["gates"]
    assert {g["status"] for g in gates} == {"pass"} and all("decided at look" in g["message"] for g in gates)
    conclusion = (out / "reports" / "conclusion.md").read_text()
    assert "## Adaptive run" in conclusion and f"stopped after look {stop} of 8" in conclusion
    assert block["decided_last"] in {g["expr"] for g in gates}
    saved = block["not_spent"]
    assert isinstance(saved, dict) and saved["calls"] > 0


def test_a_warm_cache_replays_the_same_looks(pytester: pytest.Pytester, suite_module: Path) -> None:
    cold = adaptive(pytester, "cold", "--gauge-cache", "use", "--gauge-cache-dir", "cache")
    warm = adaptive(pytester, "warm", "--gauge-cache", "use", "--gauge-cache-dir", "cache")
    assert cold.ret == warm.ret == 0
    assert adaptive_block(pytester.path / "cold" / "ad") == adaptive_block(pytester.path / "warm" / "ad")
    ledger = read_jsonl(pytester.path / "warm" / "ad" / "agent_runs.jsonl")
    assert ledger and all(r["cache_hit"] for r in ledger)  # nothing sent: the same looks, replayed


def test_a_budget_stop_ends_the_looks_with_undecided_gates_inconclusive(
    pytester: pytest.Pytester, suite_module: Path
) -> None:
    result = adaptive(pytester, "out", "--gauge-cache", "off", "--gauge-budget-tokens", "8000")
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # the cases the budget refused
    out = pytester.path / "out" / "ad"
    block = adaptive_block(out)
    assert block["budget_ran_out"] is True and block["stopped_after_look"] == 2
    result.stdout.fnmatch_lines(["*not run: the budget ran out during look 2*"])
    gates = json.loads((out / "reports" / "metrics.json").read_text())["gates"]
    undecided = [g for g in gates if g["status"] == "inconclusive"]
    assert undecided and all("the budget ran out during look 2" in g["message"] for g in undecided)
    assert all(g["needed_n"] for g in undecided if g["value"] is not None)  # how many more tasks


def test_a_gate_only_the_last_look_decides_keeps_the_run_going_and_says_so(
    pytester: pytest.Pytester, suite_module: Path
) -> None:
    result = adaptive(pytester, "out", "--gauge-cache", "off", "--gauge-gate", "judge_error_rate == 0")
    assert result.ret == 0
    assert result.parseoutcomes()["passed"] == CASES + 4 and "skipped" not in result.parseoutcomes()
    block = adaptive_block(pytester.path / "out" / "ad")
    assert block["stopped_after_look"] is None and block["tasks_run"] == TASKS
    assert block["waits_for_last_look"] == ["judge_error_rate == 0: '==' is only decided at the last look"]


@pytest.mark.slow  # the full tier only: a baseline run and an adaptive run (~4.3 s CPU)
def test_a_baseline_delta_gate_is_decided_look_by_look(pytester: pytest.Pytester, suite_module: Path) -> None:
    assert run_inprocess(pytester, "suites", "--gauge-out", "base", "--gauge-no-progress").ret == 0
    gate = "lower(delta(success_rate(agent_x))) >= -0.5"
    result = adaptive(pytester, "out", "--gauge-baseline", "base", "--gauge-gate", gate)
    assert result.ret == 0, result.stdout.str()
    out = pytester.path / "out" / "ad"
    stop = adaptive_block(out)["stopped_after_look"]
    assert isinstance(stop, int) and stop < 8
    gates = {g["expr"]: g for g in json.loads((out / "reports" / "metrics.json").read_text())["gates"]}
    assert gates[gate]["status"] == "pass" and "decided at look" in gates[gate]["message"]
    assert gates[gate]["n"] <= 3 * stop  # the tasks run so far, paired with the baseline's same tasks


def test_adaptive_shards_are_refused(pytester: pytest.Pytester, suite_module: Path) -> None:
    result = adaptive(pytester, "out", "--gauge-shard", "1/2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--gauge-adaptive with --gauge-shard" in result.stderr.str()


# ----- the example suite against the loopback server (stops early, same verdict) ---------------------


@pytest.fixture
def example_server(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopbackServer]:
    copy_suites(pytester.path)
    module = pytester.path / "eval_suites" / "example" / "test_example.py"
    srv = LoopbackServer(sim_responder(module, seed=20261129)).start()
    monkeypatch.setenv("TAOTOKEN_API_KEY", "sk-adaptive-test")
    monkeypatch.setenv("TAOTOKEN_BASE_URL", srv.base_url)
    yield srv
    srv.stop()


@pytest.mark.slow
def test_the_example_suite_gives_the_full_runs_verdicts_with_fewer_requests(
    pytester: pytest.Pytester, example_server: LoopbackServer, shared_runs: SharedRuns
) -> None:
    """Against the loopback server, adaptive with -n 0 and -n 2: the full run's gate statuses (the main
    CI job's run of the same suite and seed, shared with tests/acceptance/test_eval_suites.py) with
    fewer requests than that run sent (both with a cold response cache), stopping after the same look
    with the same records, ledger and reports."""
    full = main_job(shared_runs, "0", pytester).path / "out" / "example"
    full_requests = sum(1 for r in read_jsonl(full / "agent_runs.jsonl") if not r["cache_hit"])
    common = ("eval_suites/example", "--gauge-backend", "live", "--gauge-no-progress", "--gauge-adaptive")
    single = run_inprocess(pytester, *common, "--gauge-out", "n0", "--gauge-cache-dir", "cache0")
    single_requests = example_server.requests_total
    example_server.reset_counters()
    pair = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", *common, "--gauge-out", "n2", "--gauge-cache-dir", "cache2", "-n", "2"
    )
    assert single.ret == pair.ret == 0

    def statuses(out: Path) -> dict[str, str]:
        gates = json.loads((out / "reports" / "metrics.json").read_text())["gates"]
        return {g["expr"]: g["status"] for g in gates}

    n0, n2 = pytester.path / "n0" / "example", pytester.path / "n2" / "example"
    assert statuses(n0) == statuses(n2) == statuses(full)
    assert single_requests == example_server.requests_total < full_requests
    assert isinstance(adaptive_block(n0)["stopped_after_look"], int)
    for name in ("pairs/pair_results.jsonl", "agent_runs.jsonl"):  # the same look, the same calls
        assert normalised(read_jsonl(n0 / name)) == normalised(read_jsonl(n2 / name)), name
    for report in ("conclusion.md", "metrics.json", "pairwise_table.md", "token_cost.md"):
        assert stable_report(n0 / "reports" / report) == stable_report(n2 / "reports" / report), report
