"""A rate-limited model must not slow the others.

Two models share one gateway (one process, the run's concurrency limit): ``free`` answers every request,
``limited`` answers 429 with ``llm_provider-retry-after`` to most of its requests, as LiteLLM's proxy does
under a per-model ``rpm``. The benchmark times the span of the ``free`` model's calls with the limited
model's 429s and without them (the same calls, the same server latency) and fails when the span with
the 429s is more than 10% longer.

``--whole-run`` measures the same in a whole ``pytest`` run (a subprocess, ``--gauge-backend live``,
``-n 0``) of a generated three-agent suite against the loopback server answering like the simulator,
where ``sim-agent-z``'s calls get the 429s: the span of the two other agents' calls (from the ledger)
with and without them. That path adds the engine's look-ahead, which a waiting unit must not fill.

    python benchmarks/bench_model_limits.py            # 120 calls per model
    python benchmarks/bench_model_limits.py --calls 40
    python benchmarks/bench_model_limits.py --whole-run --tasks 24
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import openai

from pytest_gauge._internal.gateway.gateway import (
    CallContext,
    Gateway,
    GatewayResources,
    GatewaySettings,
    GatewayShared,
)
from pytest_gauge._internal.gateway.ledger import Ledger
from pytest_gauge._internal.gateway.limits import (
    Budget,
    ConcurrencySlots,
    ModelPacer,
    RateLimiter,
    SharedState,
)
from pytest_gauge._internal.records.prices import PriceTable
from pytest_gauge.testing import LoopbackServer, ResponderError, completion

TARGET = 1.10
BODY: dict[str, Any] = {"messages": [{"role": "user", "content": "hello"}], "max_tokens": 8}


def responder(limit: bool) -> Any:
    rng = random.Random(7)

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        if limit and body["model"] == "limited" and rng.random() < 0.7:
            raise ResponderError(
                429, "rate limit for model limited", headers={"llm_provider-retry-after": "0.2"}
            )
        return completion("ok")

    return answer


def gateway(folder: Path, server: LoopbackServer, concurrency: int) -> Gateway:
    shared = GatewayShared(
        GatewaySettings(
            run_id="bench", cache_mode="off", replay=False, max_retries=30, timeout=30.0, retry_after_cap=5.0
        ),
        GatewayResources(
            ledger=Ledger(folder, "main"),
            slots=ConcurrencySlots(folder / "slots", concurrency),
            rate=RateLimiter(SharedState(folder / "rate.json"), None, None),
            budget=Budget(SharedState(folder / "budget.json"), None, None, None),
            prices=PriceTable({}),
            cache=None,
            pacer=ModelPacer(concurrency),
        ),
    )
    client = openai.AsyncOpenAI(api_key="sk-bench", base_url=server.base_url, max_retries=0)
    return Gateway(suite="bench", client_factory=lambda: client, backend_id="bench", shared=shared)


async def free_span(gw: Gateway, calls: int) -> float:
    """Seconds from the first to the last ``free`` answer while both models' calls run at once."""
    done: list[float] = []

    async def one(model: str, i: int) -> None:
        await gw.chat(CallContext("bench", f"t{i}", f"transcript/t{i}/{model}/0"), 1, "agent", model, BODY)
        if model == "free":
            done.append(time.perf_counter())

    start = time.perf_counter()
    await asyncio.gather(*(one(m, i) for i in range(calls) for m in ("limited", "free")))
    return max(done) - start


def measure(limit: bool, calls: int, concurrency: int) -> float:
    with tempfile.TemporaryDirectory() as tmp, LoopbackServer(responder(limit), latency=0.02) as server:
        return asyncio.run(free_span(gateway(Path(tmp), server, concurrency), calls))


LIMITED = "sim-agent-z"  # the generated suite's third agent (benchmarks/bench_throughput.py's make_suite)
OTHERS = ("sim-agent-x", "sim-agent-y")


def _whole_responder(module: Path, limit: bool, wait: float) -> Any:
    from pytest_gauge.testing.simserver import sim_responder

    answer = sim_responder(module, 7)
    rng = random.Random(7)

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        if limit and body.get("model") == LIMITED and rng.random() < 0.7:
            raise ResponderError(
                429, f"rate limit for model {LIMITED}", headers={"llm_provider-retry-after": f"{wait:g}"}
            )
        return dict(answer(body))

    return respond


def whole_run(limit: bool, tasks: int, concurrency: int, wait: float = 0.5) -> tuple[float, int]:
    """The other agents' calls' span (first sent to last answered, from the ledger) in one live pytest
    run, and how many 429s the limited model got."""
    from bench_throughput import _pytest, make_suite

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        module = make_suite(root, tasks)
        with LoopbackServer(_whole_responder(module, limit, wait), latency=0.02) as server:
            env = {
                **os.environ,
                "TAOTOKEN_API_KEY": "sk-bench-not-a-secret",
                "TAOTOKEN_BASE_URL": server.base_url,
            }
            env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
            cmd = _pytest("suites", "--gauge-backend", "live", "--gauge-cache", "off", "-n", "0",
                          "--gauge-max-concurrency", str(concurrency), "--gauge-max-retries", "40",
                          "--gauge-out", "out")  # fmt: skip
            done = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=1800)
            if done.returncode != 0:
                raise SystemExit(f"the run failed (exit {done.returncode}):\n{done.stdout[-3000:]}")
        lines = (root / "out" / "bench" / "agent_runs.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines if line.strip()]
    others = [r for r in rows if r["model"] in OTHERS and r["status"] == "ok"]
    span = max(r["ts"] for r in others) - min(r["ts"] - r["latency_s"] for r in others)
    return span, sum(1 for r in rows if r["model"] == LIMITED and r.get("http_status") == 429)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=120, help="calls per model (default 120)")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--whole-run", action="store_true", help="a whole live pytest run instead")
    parser.add_argument("--tasks", type=int, default=24, help="--whole-run: tasks of the suite (default 24)")
    parser.add_argument("--wait", type=float, default=0.5, help="--whole-run: the 429s' retry-after (s)")
    args = parser.parse_args(argv)
    if args.whole_run:
        plain, _ = whole_run(False, args.tasks, args.concurrency)
        limited, n429 = whole_run(True, args.tasks, args.concurrency, args.wait)
        print(f"{LIMITED} got {n429} 429s in the limited run")
    else:
        plain = min(measure(False, args.calls, args.concurrency) for _ in range(2))
        limited = min(measure(True, args.calls, args.concurrency) for _ in range(2))
    ratio = limited / plain
    who = "the other agents'" if args.whole_run else "free model's"
    print(f"{who} span: {plain:.2f}s without the other model's 429s, {limited:.2f}s with them")
    print(f"ratio {ratio:.3f} (target <= {TARGET:.2f}): {'ok' if ratio <= TARGET else 'MISSED'}")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
