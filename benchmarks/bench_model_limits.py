"""A rate-limited model must not slow the others (issue 25, point 4).

Two models share one gateway (one process, the run's concurrency limit): ``free`` answers every request,
``limited`` answers 429 with ``llm_provider-retry-after`` to most of its requests, as LiteLLM's proxy does
under a per-model ``rpm``. The benchmark times the span of the ``free`` model's calls with the limited
model's 429s and without them (the same calls, the same server latency) and fails when the span with
the 429s is more than 10% longer.

    python benchmarks/bench_model_limits.py            # 120 calls per model
    python benchmarks/bench_model_limits.py --calls 40
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import openai

from pytest_gauge.gateway.gateway import (
    CallContext,
    Gateway,
    GatewayResources,
    GatewaySettings,
    GatewayShared,
)
from pytest_gauge.gateway.ledger import Ledger
from pytest_gauge.gateway.limits import Budget, ConcurrencySlots, ModelPacer, RateLimiter, SharedState
from pytest_gauge.records.prices import PriceTable
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=120, help="calls per model (default 120)")
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args(argv)
    plain = min(measure(False, args.calls, args.concurrency) for _ in range(2))
    limited = min(measure(True, args.calls, args.concurrency) for _ in range(2))
    ratio = limited / plain
    print(f"free model's span: {plain:.2f}s without the other model's 429s, {limited:.2f}s with them")
    print(f"ratio {ratio:.3f} (target <= {TARGET:.2f}): {'ok' if ratio <= TARGET else 'MISSED'}")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
