"""How the judge is asked for JSON (issue 14, extended by issue 20 point 4): the ``response_format``
chain and the once-per-model fallback when a gateway or model rejects the parameter.

By default (``Judge(response_format="auto")``) the judge is sent a strict ``json_schema`` format with
the verdict's schema, then ``json_object``, then the prompt alone. A 400/422 whose message names
``response_format`` (or ``json_schema`` / ``json_object``) moves that judge model one step down the
chain for the rest of the run in this process; the verdict records the format it was asked with, so the
controller can say in the terminal and in ``conclusion.md`` which models fell back.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..gateway.errors import GatewayError, ReplayMiss, rejects_format
from ..suite.response_format import (
    AUTO,
    JSON_OBJECT,
    JSON_SCHEMA,
    VERDICT_SCHEMA,
    FormatChain,
    format_chain,
    format_label,
)

if TYPE_CHECKING:
    from ..suite.declare import Judge
    from .dialogue import ChatCaller, ChatResult

__all__ = [
    "AUTO",
    "JSON_OBJECT",
    "JSON_SCHEMA",
    "VERDICT_SCHEMA",
    "FormatChain",
    "JudgeFormats",
    "ask_judge",
    "format_chain",
    "format_label",
    "rejects_format",
]


class JudgeFormats:
    """Per judge model, the chain position this process has reached (shared by every suite of the run;
    thread-safe, since fixtures may call from another thread than the engine's)."""

    def __init__(self) -> None:
        self._level: dict[str, int] = {}
        self._lock = threading.Lock()
        self._probes: dict[str, asyncio.Lock] = {}
        self._settled: set[str] = set()
        self.reasons: dict[tuple[str, str], str] = {}

    def settled(self, model: str) -> bool:
        """Whether a call of ``model`` has succeeded with the format reached: until then its judge calls go
        one at a time, so a refused format costs one refused request, not one per call in flight."""
        return model in self._settled

    def probe(self, model: str) -> asyncio.Lock:
        """The lock the first judge calls of ``model`` take (on the engine's event loop)."""
        with self._lock:
            return self._probes.setdefault(model, asyncio.Lock())

    def settle(self, model: str) -> None:
        self._settled.add(model)

    def level(self, model: str) -> int:
        with self._lock:
            return self._level.get(model, 0)

    def reject(self, model: str, level: int, chain: Sequence[Any], exc: GatewayError) -> int | None:
        """Record that ``model`` refused the format at ``level``; the next level to try, or None when the
        chain is exhausted (the error then stands)."""
        if level + 1 >= len(chain):
            return None
        with self._lock:
            reached = max(self._level.get(model, 0), level + 1)
            self._level[model] = reached
            self.reasons.setdefault((model, format_label(chain[level])), exc.cause)
        return reached


async def ask_judge(
    formats: JudgeFormats,
    judge: Judge,
    caller: ChatCaller,
    model: str,
    messages: list[dict[str, str]],
    seed: int | None = None,
) -> tuple[ChatResult, str]:
    """One judge call in JSON mode: the chain's format this process has reached for ``model``; a 400
    naming ``response_format`` moves the model one step down the chain (once per run) and asks again.
    Returns the result and the label of the format it was asked with."""
    if not formats.settled(model):
        async with formats.probe(model):  # one call at a time until a format has worked
            if not formats.settled(model):
                answer = await _ask_judge(formats, judge, caller, model, messages, seed)
                formats.settle(model)
                return answer
    return await _ask_judge(formats, judge, caller, model, messages, seed)


async def _ask_judge(
    formats: JudgeFormats,
    judge: Judge,
    caller: ChatCaller,
    model: str,
    messages: list[dict[str, str]],
    seed: int | None,
) -> tuple[ChatResult, str]:
    chain = format_chain(judge.response_format)
    level = formats.level(model)
    missed: ReplayMiss | None = None
    while True:
        fmt = chain[min(level, len(chain) - 1)]
        try:
            result = await caller(
                "judge",
                model,
                messages,
                temperature=judge.temperature,
                max_tokens=judge.max_tokens,
                seed=seed,
                response_format=fmt,
            )
        except ReplayMiss as exc:  # the recording may have fallen back: look for it, remember nothing
            missed = missed or exc
            if level + 1 >= len(chain):
                raise missed from None
            level += 1
            continue
        except GatewayError as exc:
            after = formats.reject(model, level, chain, exc) if rejects_format(exc) else None
            if after is None:
                raise
            level = after
            continue
        return result, format_label(fmt)
