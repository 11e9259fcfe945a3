"""Many gateway calls in flight per worker, and concurrency changes nothing but speed.

Live runs against the loopback server (answering like the simulator), cache off. No timing assertions:
speed is measured by ``benchmarks/bench_throughput.py``.
"""

from __future__ import annotations

import asyncio
import gc
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_gauge._internal.files.work_store import WorkStore
from pytest_gauge._internal.gateway.ledger import Ledger
from pytest_gauge._internal.gateway.limits import ConcurrencySlots
from pytest_gauge._internal.process.state import render_progress
from pytest_gauge._internal.records import LedgerRecord, Usage
from pytest_gauge.testing import LoopbackServer
from pytest_gauge.testing.simserver import sim_responder
from tests.helpers import normalised, numbered_task, read_jsonl, run_inprocess

TASKS = 12  # 36 independent transcripts: enough to keep 32 calls in flight
CASES = TASKS * 3 * 2  # tasks x pairs x orders
KEY = "sk-throughput-test"

SUITE = """
from pytest_gauge import Judge, ModelAgent, SimAgent, SimJudge, Suite, UserSimulator

suite = Suite(
    agents=[
        ModelAgent("agent_x", "sim-agent-x", sim=SimAgent(skill=0.85)),
        ModelAgent("agent_y", "sim-agent-y", sim=SimAgent(skill=0.8, verbosity=1.4)),
        ModelAgent("agent_z", "sim-agent-z", sim=SimAgent(skill=0.4)),
    ],
    judge=Judge("sim-judge", sim=SimJudge(noise=0.15)),
    user=UserSimulator("sim-user", max_turns=1),
)
"""


@pytest.fixture
def suite_module(pytester: pytest.Pytester) -> Path:
    folder = pytester.path / "suites" / "tp"
    folder.mkdir(parents=True)
    lines = [json.dumps({"format_version": 1})] + [json.dumps(numbered_task(i)) for i in range(TASKS)]
    (folder / "tasks.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    module = folder / "test_tp.py"
    module.write_text(SUITE, encoding="utf-8")
    pytester.makeini("[pytest]\ngauge_seed = 7\n")
    return module


@pytest.fixture
def server(suite_module: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopbackServer]:
    srv = LoopbackServer(sim_responder(suite_module, seed=7)).start()
    monkeypatch.setenv("TAOTOKEN_API_KEY", KEY)
    monkeypatch.setenv("TAOTOKEN_BASE_URL", srv.base_url)
    yield srv
    srv.stop()


def live(pytester: pytest.Pytester, out: str, *args: str) -> pytest.RunResult:
    """A live run of the suite, cache off: in this process with ``-n 0`` (no interpreter start, no
    imports), in a subprocess when it starts workers."""
    common = (
        "suites",
        "--gauge-backend",
        "live",
        "--gauge-cache",
        "off",
        "--gauge-no-progress",
        "--gauge-out",
        out,
    )
    if "-n" in args and args[args.index("-n") + 1] == "0":
        result = run_inprocess(pytester, *common, *args)
    else:
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", *common, *args)
    result.assert_outcomes(passed=CASES)
    return result


@pytest.mark.slow
def test_many_calls_in_flight_with_the_cache_off(pytester: pytest.Pytester, server: LoopbackServer) -> None:
    """One process keeps the concurrency limit's 32 calls open at once: the server holds the calls after
    the warm-up calls (the process's first, and each model's first: sent alone) until 32 are open, so the
    bound does not depend on machine load (a client unable to do it leaves the server waiting until its
    deadline, which the test reports)."""
    server.gather(32, after=1, timeout=120.0, first_per_model=True)
    live(pytester, "out", "--gauge-max-concurrency", "32", "-n", "0")
    assert (server.max_in_flight, server.gather_timed_out) == (32, False)
    ledger = read_jsonl(pytester.path / "out" / "tp" / "agent_runs.jsonl")
    assert len(ledger) == server.requests_total  # every request recorded once


@pytest.mark.slow
def test_concurrency_and_workers_change_neither_calls_nor_results(
    pytester: pytest.Pytester, server: LoopbackServer
) -> None:
    server.latency = 0.005  # enough for calls to overlap, so completion order differs from the sequential run
    runs: dict[str, dict[str, object]] = {}
    # the sequential reference, and many calls in flight in each of two workers (one process with 32 in
    # flight is test_many_calls_in_flight_with_the_cache_off)
    for concurrency, workers in (("1", "0"), ("32", "2")):
        label = f"c{concurrency}-n{workers}"
        server.reset_counters()
        live(pytester, label, "--gauge-max-concurrency", concurrency, "-n", workers)
        out = pytester.path / label / "tp"
        ledger = read_jsonl(out / "agent_runs.jsonl")
        assert {r["status"] for r in ledger} == {"ok"} and not any(r["cache_hit"] for r in ledger)
        assert max(Counter(r["call_id"] for r in ledger).values()) == 1  # no call made twice
        assert server.requests_total == len(ledger)  # the gateway saw exactly the recorded calls
        assert server.max_in_flight <= int(concurrency)
        runs[label] = {
            "requests": server.requests_total,
            "bodies": sorted(json.dumps(b, sort_keys=True) for b in server.bodies),
            "pairs": normalised(read_jsonl(out / "pairs" / "pair_results.jsonl")),
            "ledger": normalised(ledger),
        }
    sequential = runs["c1-n0"]
    assert len(sequential["pairs"]) == CASES  # type: ignore[arg-type]
    for label, run in runs.items():
        for key in ("requests", "bodies", "pairs", "ledger"):
            assert run[key] == sequential[key], f"{label}: {key} differ from the sequential run"


# ----- the pieces the fast paths rely on ----------------------------------------------------------------


def test_slots_bound_requests_across_two_holders_and_hand_over(tmp_path: Path) -> None:
    """Two slot sets over one folder behave like two processes: 2 slots, 12 holders, never 3 at once."""
    a, b = ConcurrencySlots(tmp_path, 2), ConcurrencySlots(tmp_path, 2)
    inside, peak, done = 0, 0, 0

    async def hold(slots: ConcurrencySlots) -> None:
        nonlocal inside, peak, done
        async with slots.slot():
            inside += 1
            peak = max(peak, inside)
            await asyncio.sleep(0.01)
            inside -= 1
        done += 1

    async def main() -> None:
        await asyncio.gather(*(hold(a if i % 2 else b) for i in range(12)))

    asyncio.run(main())
    assert (peak, done) == (2, 12)
    assert a.waits + b.waits > 0  # they did contend


def test_kept_entries_are_seen_by_every_store_of_the_folder_while_the_keeper_lives(tmp_path: Path) -> None:
    keeper = WorkStore(tmp_path / "work")
    keeper.keep("ab12", {"ok": True})
    assert WorkStore(tmp_path / "work").get("ab12") == {"ok": True}
    assert WorkStore(tmp_path / "other").get("ab12") is None
    assert not (tmp_path / "work").exists()  # nothing was written
    del keeper
    gc.collect()
    assert WorkStore(tmp_path / "work").get("ab12") is None


@pytest.mark.parametrize("usage", [Usage(12, 5), None])
def test_ledger_lines_are_the_records_json(tmp_path: Path, usage: Usage | None) -> None:
    record = LedgerRecord(
        run_id="r1", call_id="judge/c/0/0#1", attempt=2, status="ok", suite="s", task_id="t", role="judge",
        model="m", strategy="single", work="judge/c/0/0", usage=usage, usage_missing=usage is None,
        latency_s=0.25, finish_reason="stop", cache_hit=False, cost=0.5, http_status=200,
    )  # fmt: skip
    ledger = Ledger(tmp_path, "gw3")
    ledger.append(record)
    ledger.close()
    (line,) = (tmp_path / "ledger-gw3.jsonl").read_text().splitlines()
    assert json.loads(line) == record.to_json()
    assert json.loads(line)["worker"] == "gw3" and json.loads(line)["usage"] == (
        {"input_tokens": 12, "output_tokens": 5, "reasoning_tokens": None}
        | {"cached_input_tokens": None, "cache_write_tokens": None, "cache_write_1h_tokens": None}
        if usage
        else None
    )


PROBE_CONFTEST = """
import json, sys

CONFIG = []


def pytest_configure(config):
    CONFIG.append(config)


def pytest_runtest_logreport(report):
    config = CONFIG[0]
    if hasattr(config, "workerinput") or "::gates[" not in report.nodeid:
        return  # the controller's view while it renders the outputs (gates are reported from there)
    dsession = config.pluginmanager.get_plugin("dsession")
    with open("controller-probe.json", "w") as fh:
        json.dump({"openai": "openai" in sys.modules, "workers": len(dsession.nodemanager.group)}, fh)
"""


@pytest.mark.slow
def test_xdist_controller_renders_alone_and_without_openai(
    pytester: pytest.Pytester, mini_suite: Path
) -> None:
    """Peak memory: the controller never imports openai while it renders the outputs. Its workers are
    still up then: each gate is a test item, which a worker runs once the controller has evaluated it
    (idle by then: their cases are done)."""
    pytester.makeconftest(PROBE_CONFTEST)
    result = pytester.runpytest_subprocess("suites", "-n", "2", "--gauge-gate", "lrs <= 1")
    assert result.ret == 0, result.stdout.str()
    probe = json.loads((pytester.path / "controller-probe.json").read_text())
    assert probe["openai"] is False


@pytest.mark.slow
def test_a_run_served_from_the_cache_never_builds_a_client(
    pytester: pytest.Pytester, mini_suite: Path
) -> None:
    """Clients are built on the first call that must be sent: a fully cached re-run builds none; the
    first run, which sends calls, does. Neither imports ``openai``, which the gateway's calls do not use
    (about 1 s of CPU per process), nor ``httpx2``, which the simulator's client does not use."""
    pytester.makeconftest(
        "import json, sys\n"
        "from pytest_gauge._internal.gateway import transport\n"
        "built = []\n"
        "make = transport.ModelClient.__init__\n"
        "def counted(self, *args, **kwargs):\n"
        "    built.append(1)\n"
        "    make(self, *args, **kwargs)\n"
        "transport.ModelClient.__init__ = counted\n"
        "def pytest_unconfigure(config):\n"
        "    with open('imported.json', 'w') as fh:\n"
        "        seen = {m: m in sys.modules for m in ('httpx2', 'openai')}\n"
        "        json.dump({'clients': len(built), **seen}, fh)\n"
    )
    probe = pytester.path / "imported.json"
    seen = []
    for _ in range(2):
        result = pytester.runpytest_subprocess("suites", "--gauge-cache", "use")
        assert result.ret == 0, result.stdout.str()
        seen.append(json.loads(probe.read_text()))
    assert seen == [
        {"clients": 1, "httpx2": False, "openai": False},
        {"clients": 0, "httpx2": False, "openai": False},
    ]


def test_progress_line_sums_every_process_and_estimates_the_live_calls_to_come() -> None:
    worker = {"done_units": 0, "total_units": 40, "live_calls": 0, "cached_calls": 0, "retries": 0}
    gw0 = {**worker, "done_units": 6, "live_calls": 15, "cached_calls": 3, "retries": 2, "tokens": 900}
    gw1 = {**worker, "done_units": 4, "live_calls": 10, "tokens": 600, "cost": 0.0125, "rate_limit_waits": 1}
    # 25 live calls over 10 finished units of 40: about 100 live calls in all
    assert render_progress([gw0, gw1]) == (
        "gauge: 10/40 work units, 25 of ~100 live calls (2 retries, 1 rate-limit waits), 3 cached,"
        " 1500 tokens, $0.0125 so far"
    )
    assert render_progress([worker]) == (
        "gauge: 0/40 work units, 0 live calls (0 retries, 0 rate-limit waits), 0 cached, 0 tokens,"
        " $0.0000 so far"
    )
    assert render_progress([]) is None
