"""A model's first-call gate and the request slots: the calls waiting behind a model's first call lend
their look-ahead place (other models' work takes it), and the first call itself, which they all wait on,
gets the next free slot ahead of calls that queued before it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from pytest_gauge._internal.gateway.call_priority import set_call_chain
from pytest_gauge._internal.gateway.gateway import CallContext, Gateway
from pytest_gauge._internal.gateway.limits import set_model_wait_hook
from pytest_gauge.testing import LoopbackServer, completion
from tests.e2e.test_gateway import BODY, make_gateway, run_closing


def _order_and_lends(tmp_path: Path) -> tuple[list[str], list[str]]:
    """Through one slot: a call of ``a`` (the run's gates open), then three more of ``a`` and three of
    ``b`` (its first call), each a verdict (chain 1). The server's order of arrival, and which calls lent
    their place."""
    seen: list[str] = []

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        seen.append(str(body["messages"][0]["content"]))
        return completion("ok")

    lent: list[str] = []

    async def run(gw: Gateway) -> None:
        async def one(model: str, name: str) -> None:
            set_call_chain(1)

            @contextlib.asynccontextmanager
            async def lend() -> AsyncIterator[None]:
                lent.append(name)
                yield

            set_model_wait_hook(lend)
            body = dict(BODY, messages=[{"role": "user", "content": name}])
            await gw.chat(CallContext("s", name, f"judge/{name}"), 1, "judge", model, body)

        await one("a", "a0")
        calls = []
        for model, name in [("a", "a1"), ("a", "a2"), ("a", "a3"), ("b", "b0"), ("b", "b1"), ("b", "b2")]:
            calls.append(asyncio.ensure_future(one(model, name)))
            await asyncio.sleep(0.005)  # each one queues before the next starts
        await asyncio.gather(*calls)

    with LoopbackServer(answer, latency=0.05) as server:
        gw = make_gateway(tmp_path, server, concurrency=1)
        run_closing(gw, run(gw))
    return seen, lent


def test_a_models_first_call_goes_ahead_and_the_calls_behind_it_lend_their_places(tmp_path: Path) -> None:
    seen, lent = _order_and_lends(tmp_path)
    # b0 queued after a2 and a3 but goes first: b1 and b2 wait on it, not on the slot
    assert seen == ["a0", "a1", "b0", "a2", "a3", "b1", "b2"]
    assert {"b1", "b2"} <= set(lent)  # waiting at b's gate, their places went to other work
    assert not {"a1", "a2", "a3"} & set(lent)  # a's gate was open: nothing to lend for
