"""One set of limits across hosts: the Redis limiter against a real ``redis-server``
started on a loopback port (Debian's ``redis-server``; ``.ci/run`` installs it when missing)."""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_gauge._internal.gateway.errors import BudgetExhausted
from pytest_gauge._internal.gateway.redis_limits import LimitsUnavailable, RedisLimits
from pytest_gauge.testing import LoopbackServer
from pytest_gauge.testing.simserver import sim_responder

pytest.importorskip("redis", reason="the redis extra (pip install 'pytest-gauge[redis]')")
if shutil.which("redis-server") is None and "CI" not in __import__("os").environ:
    pytest.skip("redis-server is not installed (apt-get install redis-server)", allow_module_level=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    """A fresh ``redis-server`` on a free loopback port (no persistence), stopped after the test."""
    port = _free_port()
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    try:
        import redis

        client = redis.Redis.from_url(url)
        for _ in range(200):  # bounded: up to ~10 s for the server to answer
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        else:
            pytest.fail("redis-server did not start")
        client.close()
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_slots_are_shared_by_every_client_of_a_run(redis_url: str) -> None:
    hosts = [RedisLimits(redis_url, "run-a").slots(4) for _ in range(3)]  # three "hosts"
    other_run = RedisLimits(redis_url, "run-b").slots(4)
    inside = {"now": 0, "peak": 0, "other": 0}

    async def call(slots: object, key: str) -> None:
        async with slots.slot():  # type: ignore[attr-defined]
            inside[key] += 1
            inside["peak"] = max(inside["peak"], inside["now"])
            await asyncio.sleep(0.01)
            inside[key] -= 1

    async def main() -> None:
        await asyncio.gather(
            *(call(hosts[i % 3], "now") for i in range(30)), *(call(other_run, "other") for _ in range(4))
        )

    asyncio.run(main())
    assert inside["peak"] == 4  # 30 calls from 3 clients, never more than 4 at once; other runs apart
    assert sum(h.waits for h in hosts) > 0


HOLDER = """
import asyncio, sys
from pytest_gauge._internal.gateway.redis_limits import RedisLimits

async def main():
    slots = RedisLimits(sys.argv[1], "run-kill", lease=3.0).slots(2)
    async with slots.slot():
        async with slots.slot():
            print("held", flush=True)
            await asyncio.sleep(600)

asyncio.run(main())
"""


@pytest.mark.slow
def test_killing_a_host_frees_its_slots_within_the_lease_time(redis_url: str) -> None:
    """A process holding both slots (renewing its leases) is killed with SIGKILL: no release ever runs,
    yet the slots come free when the leases expire on the server."""
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, redis_url], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        limits = RedisLimits(redis_url, "run-kill", lease=3.0)
        assert limits.scripts.run("acquire", "slots", 2, 3.0, "probe") == 0  # both held
    finally:
        holder.kill()
        holder.wait(timeout=10)
    slots = limits.slots(2)

    async def take_both() -> None:
        async with slots.slot(), slots.slot():
            pass

    asyncio.run(asyncio.wait_for(take_both(), timeout=30))  # freed by the server's clock, not a release
    assert slots.waits > 0


def test_budget_reservations_never_pass_the_limit(redis_url: str) -> None:
    hosts = [RedisLimits(redis_url, "run-budget").budget(None, 1000, 0.5) for _ in range(2)]
    taken = []
    with pytest.raises(BudgetExhausted, match="run budget 1000 tokens"):
        for i in range(100):
            taken.append(hosts[i % 2].reserve("t1", 0.001, 150))
    assert len(taken) == 6  # 6 x 150 <= 1000 < 7 x 150
    hosts[0].settle(taken[0], 0.001, 40)  # the real spend was less: its reservation frees 110 tokens
    taken.append(hosts[1].reserve("t1", 0.001, 150))
    with pytest.raises(BudgetExhausted, match=r"task t2 budget \$0.5"):
        hosts[0].reserve("t2", 0.6, 1)


def test_the_token_bucket_makes_callers_wait(redis_url: str) -> None:
    rate = RedisLimits(redis_url, "run-rate").rate(rpm=60.0, tpm=None)  # 1 request per second, burst 1
    assert float(rate.scripts.run("take", "rate", 60.0, 0, 1)) == 0.0
    wait = float(rate.scripts.run("take", "rate", 60.0, 0, 1))
    assert 0.0 < wait <= 1.0


def test_a_models_own_bucket_is_shared_by_every_host_of_the_run(redis_url: str) -> None:
    """--gauge-rpm MODEL=N with --gauge-limits: one bucket per model on the server, not one per host."""
    from pytest_gauge._internal.gateway.limits import model_key

    hosts = [RedisLimits(redis_url, "run-models").model_rates({"limited": 60.0}, {}) for _ in range(2)]
    other_run = RedisLimits(redis_url, "run-other").model_rates({"limited": 60.0}, {})

    async def main() -> None:
        await hosts[0].acquire("limited", 10)  # the burst of one request
        await other_run.acquire("limited", 10)  # another run's bucket of its own: no wait
        for _ in range(20):
            await hosts[1].acquire("free", 10)  # no bucket of its own: never waits
        await hosts[1].acquire("limited", 10)  # the other host waits for the same window

    asyncio.run(main())
    assert hosts[0].limiters["limited"].waited_s == 0.0 and other_run.limiters["limited"].waited_s == 0.0
    assert hosts[1].limiters["limited"].waited_s > 0.5 and set(hosts[1].limiters) == {"limited"}
    client = RedisLimits(redis_url, "run-models").client
    assert client.exists(f"gauge:run-models:rate:{model_key('limited')}")
    assert not client.exists("gauge:run-models:rate")  # the run-wide bucket is not the model's


def test_a_lost_server_stops_calls_and_an_absent_one_is_a_usage_error(
    redis_url: str, pytester: pytest.Pytester, mini_suite: Path
) -> None:
    limits = RedisLimits(redis_url, "run-lost")
    slots, budget = limits.slots(2), limits.budget(1.0, None, None)
    budget.reserve("t1", 0.01, 10)
    limits.client.shutdown(nosave=True)
    with pytest.raises(LimitsUnavailable, match="cannot be reached") as err:
        budget.reserve("t1", 0.01, 10)
    assert err.value.fatal

    async def take() -> None:
        async with slots.slot():
            pass

    with pytest.raises(LimitsUnavailable):
        asyncio.run(take())
    result = pytester.runpytest_subprocess("suites", "-p", "no:cacheprovider", "--gauge-limits", redis_url)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*pytest-gauge: the limits server redis://127.0.0.1:*cannot be reached*"])


@pytest.mark.slow
def test_two_pytest_processes_share_one_concurrency_limit_and_one_budget(
    redis_url: str, pytester: pytest.Pytester, mini_suite: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two runs (two hosts) with --gauge-max-concurrency 4 each, sharing one Redis limiter: the server
    never sees more than 4 requests in flight; with a token budget, their tokens stay within it plus the
    calls in flight."""
    srv = LoopbackServer(sim_responder(mini_suite / "test_mini.py", seed=7)).start()
    monkeypatch.setenv("TAOTOKEN_API_KEY", "sk-redis-limits-test")
    monkeypatch.setenv("TAOTOKEN_BASE_URL", srv.base_url)
    try:
        common = ["-m", "pytest", "suites", "-p", "no:cacheprovider", "-p", "no:randomly", "--gauge-backend",
                  "live", "--gauge-cache", "off", "--gauge-limits", redis_url, "--gauge-max-concurrency", "4",
                  "--gauge-no-progress"]  # fmt: skip
        procs = [
            pytester.popen(
                [sys.executable, *common, "--gauge-run-id", "shared", "--gauge-out", f"host{i}", *extra],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
            for i, extra in enumerate((["-n", "2"], []))
        ]
        outputs = [p.communicate(timeout=600)[0].decode() for p in procs]
        assert [p.returncode for p in procs] == [0, 0], outputs
        assert srv.requests_total > 8
        assert 1 <= srv.max_in_flight <= 4
        srv.reset_counters()
        budget = 6000
        procs = [
            pytester.popen(
                [
                    sys.executable,
                    *common,
                    "--gauge-run-id",
                    "budget",
                    "--gauge-out",
                    f"b{i}",
                    "--gauge-budget-tokens",
                    str(budget),
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
            for i in range(2)
        ]
        outputs = [p.communicate(timeout=600)[0].decode() for p in procs]
    finally:
        srv.stop()
    assert any("budget exhausted" in out for out in outputs), outputs[0][-2000:]
    spent = 0
    for i in range(2):
        for line in (pytester.path / f"b{i}" / "mini" / "agent_runs.jsonl").read_text().splitlines():
            usage = json.loads(line).get("usage") or {}
            parts = ("input_tokens", "cached_input_tokens", "cache_write_tokens", "output_tokens")
            spent += sum(int(usage.get(name) or 0) for name in parts)  # the ledger's usage convention
    assert 0 < spent <= budget + 4 * 2048  # the budget plus at most the 4 calls in flight
