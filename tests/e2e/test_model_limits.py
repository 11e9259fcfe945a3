"""Rate limits per model: ``--gauge-rpm``/``--gauge-tpm`` take ``MODEL=N`` beside the
run-wide value, a model's own bucket makes only that model wait, and a 429 halves only that model's
concurrency (one slot back per success)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from pytest_gauge._internal.gateway.limits import ModelPacer, ModelRates
from pytest_gauge._internal.options import resolve_options
from pytest_gauge._internal.process.workers import controller_paths, worker_options


def test_per_model_limits_from_the_command_line_and_the_ini(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ngauge_rpm =\n    100\n    slow-model=6\ngauge_tpm = big=1000\n")
    config = pytester.parseconfig("--gauge-rpm", "slow-model=3", "--gauge-rpm", "other=12")
    opts = resolve_options(config)
    assert opts.rpm == 100 and opts.rpm_models == (("other", 12.0), ("slow-model", 3.0))  # the flag wins
    assert opts.tpm is None and opts.tpm_models == (("big", 1000.0),)
    assert worker_options(opts, controller_paths(opts)) == opts  # they reach the workers whole


@pytest.mark.parametrize("bad", ["=5", "m=0", "m=x", "-3"])
def test_a_bad_rate_names_the_flag(pytester: pytest.Pytester, bad: str) -> None:
    result = pytester.runpytest_inprocess("--gauge-rpm", bad, "--co")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--gauge-rpm" in result.stderr.str()


def test_a_models_own_bucket_makes_only_that_model_wait(tmp_path: Path) -> None:
    rates = ModelRates.in_folder(tmp_path, {"limited": 120.0}, {})  # two at once, then one per 0.5 s

    async def run() -> None:
        for _ in range(20):
            await rates.acquire("free", 10)  # no limit of its own: never waits
        for _ in range(3):
            await rates.acquire("limited", 10)  # the third waits for the limited model's window

    asyncio.run(run())
    assert set(rates.limiters) == {"limited"}
    assert rates.limiters["limited"].waited_s > 0.25


def test_a_429_halves_only_that_models_concurrency_and_successes_grow_it_back() -> None:
    pacer = ModelPacer(8)
    pacer.slowed("a")
    pacer.slowed("a")
    assert pacer.limit["a"] == 2 and pacer.limit.get("b", pacer.ceiling) == 8
    for _ in range(3):
        pacer.succeeded("a")
    assert pacer.limit["a"] == 5
    for _ in range(10):
        pacer.succeeded("a")
    assert pacer.limit["a"] == 8
    for _ in range(5):
        pacer.slowed("a")
    assert pacer.limit["a"] == 1  # never below one request in flight

    async def in_flight() -> int:
        most = 0

        async def one() -> None:
            nonlocal most
            async with pacer.slot("a"):
                most = max(most, pacer.active["a"])
                await asyncio.sleep(0.01)

        await asyncio.gather(*(one() for _ in range(4)))
        return most

    assert asyncio.run(in_flight()) == 1


def test_a_first_call_retrying_a_429_does_not_hold_back_the_other_models(tmp_path: Path) -> None:
    """Until one call works, a process sends one call at a time (a bad key reaches the server once); a
    429 shows the key and URL work, so the other models' calls go while the limited one waits."""
    from pytest_gauge._internal.gateway.gateway import CallContext
    from pytest_gauge.testing import LoopbackServer, ResponderError, completion
    from tests.e2e.test_gateway import BODY, make_gateway, run_closing

    answered: list[str] = []

    def answer(body: dict[str, object]) -> dict[str, object]:
        # the limited model is rate limited until the free ones are answered: were they held back behind
        # its first call, it would run out of retries (the order does not depend on the machine's speed)
        if body["model"] == "limited" and answered.count("free") < 3:
            raise ResponderError(429, "rate limit", headers={"llm_provider-retry-after": "0.2"})
        answered.append(str(body["model"]))
        return completion("ok")

    async def both(gw: Any) -> None:
        async def one(model: str, i: int) -> None:
            ctx = CallContext("s", f"t{i}", f"transcript/t{i}/{model}/0")
            await gw.chat(ctx, 1, "agent", model, dict(BODY))

        limited = asyncio.ensure_future(one("limited", 0))
        await asyncio.sleep(0)  # the limited call takes the first-call gate
        await asyncio.gather(limited, *(one("free", i) for i in range(3)))

    with LoopbackServer(answer) as server:
        gw = make_gateway(tmp_path, server, retries=25)  # 5 s of 429s at most
        run_closing(gw, both(gw))
    assert answered == ["free", "free", "free", "limited"]  # the free calls did not wait out its 429s
