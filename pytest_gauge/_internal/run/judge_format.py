"""How the judge is asked for JSON: the ``response_format``
chain and the once-per-model fallback when a gateway or model rejects the parameter.

By default (``Judge(response_format="auto")``) the judge is sent a strict ``json_schema`` format with
the verdict's schema, then ``json_object``, then the prompt alone. An error whose body names
``response_format`` (or ``json_schema`` / ``json_object`` / a grammar), whatever its status (a
llama.cpp-style server answers 500), moves that judge model one step down the chain for the rest of the
run. The decision is taken once per judge model per run: under xdist the first worker to ask holds the
model's lock in the run folder while it probes, and the others adopt what it found; it is also kept
beside the response cache, so a re-run of an unchanged suite sends no refused request. The verdict
records the format it was asked with, so the controller can say in the terminal and in
``conclusion.md`` which models fell back.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..gateway.endpoint import configured_base_url
from ..gateway.errors import GatewayError, ReplayMiss, rejects_format
from ..gateway.store import Store, content_key
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
    "format_scope",
    "rejects_format",
]


class JudgeFormats:
    """Per judge model, the chain position reached (shared by every suite of the run; thread-safe, since
    fixtures may call from another thread than the engine's).

    ``run``: the run folder's store of decisions shared by the xdist workers (None in a single process);
    ``kept``: decisions kept beside the response cache for later runs (None with the cache off), under
    ``scope`` (the gateway: a decision holds for one server)."""

    def __init__(
        self, run: Store | None = None, kept: Store | None = None, scope: str = "", reuse: bool = True
    ) -> None:
        self._level: dict[str, int] = {}
        self._lock = threading.Lock()
        self._probes: dict[str, asyncio.Lock] = {}
        self._settled: set[str] = set()
        self.reasons: dict[tuple[str, str], str] = {}
        self._run = run
        self._kept = kept
        self._scope = scope
        self._reuse = reuse  # read kept decisions (--gauge-cache use), else only write them

    def _key(self, model: str) -> str:
        return content_key({"judge_format": model, "scope": self._scope})

    @contextlib.asynccontextmanager
    async def run_lock(self, model: str) -> AsyncIterator[None]:
        """The model's run-wide probe lock (a file lock in the run folder; nothing in a single process)."""
        if self._run is None:
            yield
            return
        async with self._run.lock(self._key(model), max_poll=0.05):
            yield

    def adopt(self, model: str, chain: FormatChain) -> None:
        """Take the decision another worker of this run (or an earlier run on this gateway) reached: the
        format that worked, if this chain has it."""
        key = self._key(model)
        labels = [format_label(f) for f in chain]
        for store in (self._run, self._kept if self._reuse else None):
            entry = store.get(key) if store is not None else None
            if entry is not None and entry.get("format") in labels:
                with self._lock:
                    self._level[model] = max(self._level.get(model, 0), labels.index(entry["format"]))
                self._settled.add(model)
                return

    def _publish(self, model: str, chain: FormatChain) -> None:
        label = format_label(chain[min(self.level(model), len(chain) - 1)])
        entry = {"model": model, "scope": self._scope, "format": label}
        for store in (self._run, self._kept):
            if store is not None:
                store.put(self._key(model), entry)

    def settled(self, model: str) -> bool:
        """Whether a call of ``model`` has succeeded with the format reached: until then its judge calls go
        one at a time, so a refused format costs one refused request, not one per call in flight."""
        return model in self._settled

    def probe(self, model: str) -> asyncio.Lock:
        """The lock the first judge calls of ``model`` take (on the engine's event loop)."""
        with self._lock:
            return self._probes.setdefault(model, asyncio.Lock())

    def settle(self, model: str, chain: FormatChain = (None,)) -> None:
        """A call of ``model`` worked at the level reached: the decision, for every worker and later runs."""
        self._settled.add(model)
        self._publish(model, chain)

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
    """One judge call in JSON mode: the chain's format the run has reached for ``model``; a refusal
    naming ``response_format`` moves the model one step down the chain (once per run) and asks again.
    Returns the result and the label of the format it was asked with."""
    if not formats.settled(model):
        async with formats.probe(model), formats.run_lock(model):  # one call at a time, run-wide,
            chain = format_chain(judge.response_format)
            if not formats.settled(model):  # until a format has worked
                formats.adopt(model, chain)
            if not formats.settled(model):
                answer = await _ask_judge(formats, judge, caller, model, messages, seed)
                formats.settle(model, chain)
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
                api=judge.api,
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


def format_scope(backend: str, environ: Mapping[str, str]) -> str:
    """Which server a kept JSON-mode decision holds for: the live gateway's base URL, else the backend."""
    return f"live {configured_base_url(environ)}" if backend == "live" else backend
