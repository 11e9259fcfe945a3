"""What the ``gauge_client`` fixture hands to your own tests: gateway calls that go through the same
limits, cache and ledger as the suite's own calls."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from ..gateway.gateway import CallContext
from ..run.dialogue import ChatResult
from .state import GaugeState

__all__ = ["GaugeClient"]


class GaugeClient:
    """A small synchronous client over the run's gateway (first suite's backend)."""

    _counter = itertools.count(1)

    def __init__(self, state: GaugeState) -> None:
        self._state = state
        engine = state.engine
        assert engine is not None
        if not engine.runtimes:
            raise RuntimeError(
                "gauge_client needs a collected Suite in the run (it uses that suite's backend)"
            )
        self._runtime = next(iter(engine.runtimes.values()))
        self.openai = self._runtime.gateway.client

    def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        model: str,
        role: str = "agent",
        task_id: str = "adhoc",
        temperature: float = 0.0,
        max_tokens: int = 256,
    ) -> ChatResult:
        """Send one chat completion; recorded in the ledger under ``adhoc/<n>`` work."""
        engine = self._state.engine
        assert engine is not None
        n = next(self._counter)
        ctx = CallContext(self._runtime.name, task_id, f"adhoc/{self._state.worker_id}/{n}")
        body = {"messages": messages, "temperature": temperature, "max_tokens": max_tokens}
        coro = self._runtime.gateway.chat(ctx, 1, role, model, body)
        return asyncio.run_coroutine_threadsafe(coro, engine._loop).result()
