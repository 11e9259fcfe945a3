"""Limits that hold for the whole run, across every xdist worker: requests in flight, requests and
tokens per minute, and the spending budget.

All state lives in the run folder on local disk. In-flight requests are N slot files, each held with
a file lock (:mod:`pytest_gauge._internal.files.locks`) while a request is out, so at most N requests are in
flight whatever the number of workers (and a dead worker's slots free themselves). Rate limits and
the budget are small JSON states updated under an exclusive file lock. :class:`Budget` is the one
reserve/settle mechanism: over the run folder's file for the run and its tasks, over this process's
memory (:class:`LocalState`) for one test's ``gauge_budget``; the Redis limiters
(:mod:`.redis_limits`) keep the same Protocols.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import hashlib
import json
import os
import threading
import time
import weakref
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..files.folders import RunFolder
from ..files.locks import lock_file, unlock_file
from ..records.json_types import JSONObject
from .call_priority import WaitLine
from .errors import BudgetExhausted

__all__ = [
    "Budget",
    "BudgetLimits",
    "ConcurrencySlots",
    "FileLimits",
    "InFlightLimit",
    "LocalState",
    "ModelPacer",
    "ModelRates",
    "RateLimit",
    "RateLimiter",
    "Reservation",
    "RunLimits",
    "SharedState",
    "SpendLimit",
    "StateStore",
    "model_key",
    "model_wait",
    "output_tokens_cap",
    "prompt_tokens_estimate",
    "reset_model_wait_hook",
    "set_model_wait_hook",
]


class InFlightLimit(Protocol):
    """Requests in flight across the run: :class:`ConcurrencySlots` (lock files) or Redis leases."""

    def slot(self) -> AbstractAsyncContextManager[None]:
        """Hold one of the run's slots while a request is out."""

    def close(self) -> None:
        """Give back what this process holds."""


class RateLimit(Protocol):
    """Requests and tokens per minute across the run: :class:`RateLimiter` (a shared file) or Redis."""

    waited_s: float  # seconds this process waited for the bucket

    async def acquire(self, tokens: int) -> None:
        """Wait until one request of about ``tokens`` tokens fits the limits."""

    def correct(self, estimated: int, actual: int) -> None:
        """Charge the difference once a call's real token count is known."""


class SpendLimit(Protocol):
    """The run's and each task's budget, reserved before a call and settled after it: :class:`Budget`
    (a shared file) or Redis reservations."""

    @property
    def active(self) -> bool:
        """Whether any limit is set (else nothing is reserved)."""

    def reserve(self, task_id: str, usd: float, tokens: int) -> Reservation:
        """Reserve a call's worst case, or raise :class:`BudgetExhausted` when it would pass a limit."""

    def settle(self, r: Reservation, usd: float, tokens: int) -> None:
        """Replace a reservation with what the call really spent."""


class RunLimits(Protocol):
    """Where a run's three limits live, built once per process: :class:`FileLimits` (the run folder) or
    :class:`~pytest_gauge._internal.gateway.redis_limits.RedisLimits` (one Redis server for every host)."""

    def slots(self, n: int) -> InFlightLimit:
        """At most ``n`` requests in flight across the run."""

    def rate(self, rpm: float | None, tpm: float | None) -> RateLimit:
        """The run's requests- and tokens-per-minute buckets."""

    def budget(self, usd: float | None, tokens: int | None, task_usd: float | None) -> SpendLimit:
        """The run's and each task's budget."""

    def model_rates(self, rpm: Mapping[str, float], tpm: Mapping[str, float]) -> ModelRates:
        """Each model's own buckets (``--gauge-rpm/--gauge-tpm MODEL=N``)."""


class StateStore(Protocol):
    """A small JSON-like state changed atomically: :class:`SharedState` (a file under a file lock, every
    process of the run) or :class:`LocalState` (this process's memory)."""

    def update(self, fn: Callable[[JSONObject], Any]) -> Any:
        """Apply ``fn`` to the state (mutating it in place), alone, and return what it returns."""


def prompt_tokens_estimate(body: Mapping[str, Any]) -> int:
    """The prompt tokens of a request body of any wire format before it is sent (its messages' text,
    Messages' ``system``, Responses' ``instructions`` and ``input``, its tools' JSON; four characters a
    token): what the rate limits and the budgets reserve with :func:`output_tokens_cap`. A chat body's
    estimate is its messages' and tools' alone, as it always was."""
    messages = body.get("messages") or []
    tools = body.get("tools")
    chars = sum(len(str(m.get("content") or "")) for m in messages) + (len(json.dumps(tools)) if tools else 0)
    for key in ("system", "instructions", "input"):  # never in a chat body
        part = body.get(key)
        if part:
            chars += len(part) if isinstance(part, str) else len(json.dumps(part))
    return chars // 4 + 1


def output_tokens_cap(body: Mapping[str, Any]) -> int:
    """The most output tokens a request body allows: ``max_tokens`` (Chat, Messages) or
    ``max_output_tokens`` (Responses); 0 when it sets none."""
    cap = body.get("max_tokens") or body.get("max_output_tokens") or 0
    return int(cap) if isinstance(cap, int | float) and not isinstance(cap, bool) else 0


@dataclass(eq=False)
class _Waiter:
    """One local caller waiting for a slot: ``wake`` is done once ``slot`` is set (handed over or found
    by the poll)."""

    wake: asyncio.Future[None]
    slot: int | None = None


class ConcurrencySlots:
    """A cross-process counting semaphore made of ``n`` lock files.

    Each process opens the slot files once and keeps them open; a slot is taken with a non-blocking
    file lock on one this process does not already hold (the process tracks its own: a lock belongs
    to the open file, and a dead process's locks go with it). Local waiters queue by the chain of calls
    still behind theirs, longest first, then first in, first out (:mod:`.call_priority`), and only the
    queue polls the files: one timer (1 ms doubling to 20 ms) tries them for the head waiter, so
    waiting costs the same with one waiter or ``n``. A released slot goes straight to the head local
    waiter, its lock still held.

    So that no process starves, a process that waits says so by holding one of ``processes``
    ``hungry-<k>.lock`` files; a process holding its share of the slots (``n`` over itself and the
    others waiting) takes no more while another waits, and unlocks what it releases for them to find.
    """

    def __init__(self, folder: Path, n: int, processes: int = 1) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self._n = n
        self._processes = max(1, processes)
        self._paths = [folder / f"slot-{i}.lock" for i in range(n)]
        self._paths += [folder / f"hungry-{k}.lock" for k in range(self._processes)]
        self._fds: list[int | None] = [None] * len(self._paths)  # the slot files, then the hungry ones
        self._held: set[int] = set()  # slots this process holds
        self._queue: WaitLine[_Waiter] = WaitLine()  # longest call chain first, then oldest
        self._timer: asyncio.TimerHandle | None = None  # the next poll while the queue is not empty
        self._delay = 0.001
        self._hungry: int | None = None  # the hungry-<k>.lock this process holds while it waits
        self.waits = 0  # callers that found no free slot (or were past their share) and queued
        self._closer = weakref.finalize(self, _close_fds, self._fds)  # the files close with the object

    def _fd(self, i: int) -> int:
        fd = self._fds[i]
        if fd is None:
            fd = self._fds[i] = os.open(self._paths[i], os.O_RDWR | os.O_CREAT, 0o644)
        return fd

    def _lock(self, i: int) -> bool:
        return lock_file(self._fd(i), block=False)

    def _try_any(self) -> int | None:
        n = self._n
        start = os.getpid()  # processes start their scans at different files
        for k in range(n):
            i = (start + k) % n
            if i not in self._held and self._lock(i):
                self._held.add(i)
                return i
        return None

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        i = None
        if self._head() is None and self._may_hold(len(self._held) + 1):  # never ahead of local waiters
            i = self._try_any()
        if i is None:
            self.waits += 1
            i = await self._wait()
        try:
            yield
        finally:
            self._release(i)

    async def _wait(self) -> int:
        """Queue until a slot is handed over or found; a cancelled waiter gives back a slot it was
        handed and leaves the queue (the next waiter is then the one polled for)."""
        waiter = _Waiter(asyncio.get_running_loop().create_future())
        self._queue.append(waiter)
        if self._timer is None:
            self._schedule()
        try:
            await waiter.wake
        except BaseException:
            if waiter.slot is not None:
                self._release(waiter.slot)
            raise
        finally:
            with contextlib.suppress(ValueError):
                self._queue.remove(waiter)
            if not self._queue:
                self._idle()
        assert waiter.slot is not None
        return waiter.slot

    def _schedule(self) -> None:
        self._timer = asyncio.get_running_loop().call_later(self._delay, self._poll)
        self._delay = min(self._delay * 2, 0.02)

    def _poll(self) -> None:
        """For the head waiters, the slots other processes freed (within this process's share); then
        the next poll, if any waits."""
        self._timer = None
        self._set_hungry()
        while (waiter := self._head()) is not None and self._may_hold(len(self._held) + 1):
            if (i := self._try_any()) is None:
                break
            self._give(waiter, i)
            self._delay = 0.001  # slots are being freed: look again soon
        if self._head() is None:
            self._idle()
        else:
            self._schedule()

    def _head(self) -> _Waiter | None:
        """The head waiter (longest chain, then oldest) still waiting (cancelled ones dropped)."""
        while self._queue and self._queue[0].wake.done():
            self._queue.popleft()
        return self._queue[0] if self._queue else None

    def _give(self, waiter: _Waiter, i: int) -> None:
        self._queue.popleft()
        waiter.slot = i
        waiter.wake.set_result(None)

    def _idle(self) -> None:
        """Nobody waits here any more: no poll, not hungry."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._delay = 0.001
        if self._hungry is not None:
            unlock_file(self._fd(self._hungry))
            self._hungry = None

    def _release(self, i: int) -> None:
        waiter = self._head()
        if waiter is not None and self._may_hold(len(self._held)):
            self._give(waiter, i)  # the lock stays held: no unlock and lock again
            return
        unlock_file(self._fd(i))
        self._held.discard(i)

    def _may_hold(self, count: int) -> bool:
        """Whether this process may hold ``count`` slots: within the share of ``n`` among itself and the
        processes waiting (asked only past the smallest share, ``n`` over ``processes``)."""
        n, share = self._n, -(-self._n // self._processes)
        return count <= share or count <= -(-n // (1 + self._others_hungry()))

    def _set_hungry(self) -> None:
        """Say this process waits: hold a free ``hungry-<k>.lock`` (all taken: try again next poll)."""
        if self._hungry is None:
            self._hungry = next((k for k in self._hunger_files() if self._lock(k)), None)

    def _others_hungry(self) -> int:
        """How many other processes wait: the ``hungry-<k>.lock`` files locked by others."""
        count = 0
        for k in self._hunger_files():
            if k == self._hungry:
                continue
            if self._lock(k):
                unlock_file(self._fd(k))
            else:
                count += 1
        return count

    def _hunger_files(self) -> range:
        return range(self._n, self._n + self._processes)

    def close(self) -> None:
        """Close the slot files (releasing any slot still held)."""
        _close_fds(self._fds)
        self._held.clear()
        self._hungry = None


def _close_fds(fds: list[int | None]) -> None:
    for i, fd in enumerate(fds):
        if fd is not None:
            os.close(fd)
            fds[i] = None


class SharedState:
    """A JSON document updated atomically under an exclusive lock by any process of the run."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path

    def update(self, fn: Callable[[JSONObject], Any]) -> Any:
        """Apply ``fn`` to the state (mutating it in place) and return what it returns."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            lock_file(fd, block=True)
            with os.fdopen(os.dup(fd), "r+", encoding="utf-8") as fh:
                text = fh.read()
                state: JSONObject = json.loads(text) if text else {}
                result = fn(state)
                fh.seek(0)
                fh.truncate()
                fh.write(json.dumps(state, sort_keys=True))
            return result
        finally:
            unlock_file(fd)
            os.close(fd)

    def read(self) -> JSONObject:
        return dict(self.update(lambda s: dict(s)))


class LocalState:
    """The same atomic update as :class:`SharedState`, in this process's memory under a thread lock: a
    limit that only this process keeps (one test's ``gauge_budget``)."""

    def __init__(self) -> None:
        self._state: JSONObject = {}
        self._lock = threading.Lock()

    def update(self, fn: Callable[[JSONObject], Any]) -> Any:
        with self._lock:
            return fn(self._state)


class RateLimiter:
    """Requests-per-minute and tokens-per-minute token buckets shared by all workers."""

    def __init__(
        self, state: SharedState, rpm: float | None, tpm: float | None, *, per_model: bool = False
    ) -> None:
        self.state = state
        self.rpm = rpm
        self.tpm = tpm
        self.per_model = per_model  # one model's own bucket: its waits are inside model_wait()
        self.waited_s = 0.0

    def _take(self, tokens: int, now: float) -> float:
        def take(s: JSONObject) -> float:
            wait = 0.0
            for name, per_min, amount in (("req", self.rpm, 1), ("tok", self.tpm, tokens)):
                if not per_min:
                    continue
                rate = per_min / 60.0
                capacity = max(per_min / 60.0, float(amount), 1.0)
                level = s.get(f"{name}_level", capacity)
                last = s.get(f"{name}_ts", now)
                level = min(capacity, level + (now - last) * rate)
                if level < amount:
                    wait = max(wait, (amount - level) / rate)
                s[f"{name}_level"] = level
                s[f"{name}_ts"] = now
            if wait == 0.0:
                for name, per_min, amount in (("req", self.rpm, 1), ("tok", self.tpm, tokens)):
                    if per_min:
                        s[f"{name}_level"] -= amount
            return wait

        result: float = self.state.update(take)
        return result

    async def acquire(self, tokens: int) -> None:
        if not self.rpm and not self.tpm:
            return
        wait = self._take(tokens, time.time())
        if wait > 0:
            async with model_wait() if self.per_model else contextlib.nullcontext():
                while wait > 0:
                    self.waited_s += wait
                    await asyncio.sleep(min(wait, 1.0))
                    wait = self._take(tokens, time.time())

    def correct(self, estimated: int, actual: int) -> None:
        """After a call, charge the difference between the estimated and the real token count."""
        if not self.tpm or actual == estimated:
            return

        def fix(s: JSONObject) -> None:
            s["tok_level"] = s.get("tok_level", 0.0) - (actual - estimated)

        self.state.update(fix)


@dataclass
class Reservation:
    """A call's worst case held in the budget until it is settled."""

    usd: float
    tokens: int
    task_id: str


class BudgetLimits:
    """The run's and each task's spending limits, wherever their state is kept (here or on Redis)."""

    def __init__(self, usd: float | None, tokens: int | None, task_usd: float | None) -> None:
        self.usd = usd
        self.tokens = tokens
        self.task_usd = task_usd

    @property
    def active(self) -> bool:
        return bool(self.usd or self.tokens or self.task_usd)

    def describe(self) -> str:
        """The run's (or a test's) limits as a message says them: ``$0.010000 and 5000 tokens``."""
        parts = ([f"${self.usd:.6f}"] if self.usd is not None else []) + (
            [f"{self.tokens} tokens"] if self.tokens is not None else []
        )
        return " and ".join(parts)

    @staticmethod
    def refuse(refusal: str) -> BudgetExhausted:
        """The error for a call a limit refused (``refusal`` says which and how much is spent)."""
        return BudgetExhausted(
            f"budget exhausted: {refusal}; the call was not sent",
            "raise --gauge-budget-usd / --gauge-budget-tokens / --gauge-budget-task-usd, or use the cache",
        )


class Budget(BudgetLimits):
    """Run and per-task spending limits. A call reserves its worst case before it is sent; a call
    that would pass a limit is refused with :class:`BudgetExhausted`, so overshoot is bounded by the
    calls already in flight; once it is answered, :meth:`settle` replaces its reservation with what it
    spent. The state is the run folder's ``budget.json`` (every process) or a :class:`LocalState`
    (one test's ``gauge_budget``, its task the test's node id)."""

    def __init__(
        self, state: StateStore, usd: float | None, tokens: int | None, task_usd: float | None
    ) -> None:
        super().__init__(usd, tokens, task_usd)
        self.state = state

    def reserve(self, task_id: str, usd: float, tokens: int) -> Reservation:
        def take(s: JSONObject) -> str | None:
            spent_usd = s.get("spent_usd", 0.0) + s.get("reserved_usd", 0.0)
            spent_tok = s.get("spent_tokens", 0) + s.get("reserved_tokens", 0)
            task_spent = s.get("tasks", {}).get(task_id, 0.0)
            if self.usd is not None and spent_usd + usd > self.usd:
                return f"run budget ${self.usd:.4f}: spent ${s.get('spent_usd', 0.0):.4f} so far"
            if self.tokens is not None and spent_tok + tokens > self.tokens:
                return f"run budget {self.tokens} tokens: spent {s.get('spent_tokens', 0)} tokens so far"
            if self.task_usd is not None and task_spent + usd > self.task_usd:
                return f"task {task_id} budget ${self.task_usd:.4f}: spent ${task_spent:.4f} so far"
            s["reserved_usd"] = s.get("reserved_usd", 0.0) + usd
            s["reserved_tokens"] = s.get("reserved_tokens", 0) + tokens
            return None

        refusal = self.state.update(take)
        if refusal:
            raise self.refuse(refusal)
        return Reservation(usd, tokens, task_id)

    def settle(self, r: Reservation, usd: float, tokens: int) -> None:
        def fix(s: JSONObject) -> None:
            s["reserved_usd"] = s.get("reserved_usd", 0.0) - r.usd
            s["reserved_tokens"] = s.get("reserved_tokens", 0) - r.tokens
            s["spent_usd"] = s.get("spent_usd", 0.0) + usd
            s["spent_tokens"] = s.get("spent_tokens", 0) + tokens
            tasks = s.setdefault("tasks", {})
            tasks[r.task_id] = tasks.get(r.task_id, 0.0) + usd

        self.state.update(fix)


def model_key(model: str) -> str:
    """A model's name as a file or key name (its bucket's): the first 16 hex digits of its SHA-256."""
    return hashlib.sha256(model.encode("utf-8")).hexdigest()[:16]


class FileLimits:
    """The run's limits in the run folder on local disk (``slots/``, ``rate.json``, ``budget.json``),
    shared by the processes of one machine."""

    def __init__(self, run_dir: Path, processes: int = 1) -> None:
        self.run_dir = run_dir
        self.processes = processes  # the run's processes sharing the folder (xdist workers)

    def slots(self, n: int) -> ConcurrencySlots:
        return ConcurrencySlots(RunFolder(self.run_dir).slots, n, self.processes)

    def rate(self, rpm: float | None, tpm: float | None) -> RateLimiter:
        return RateLimiter(SharedState(RunFolder(self.run_dir).rate), rpm, tpm)

    def budget(self, usd: float | None, tokens: int | None, task_usd: float | None) -> Budget:
        return Budget(SharedState(RunFolder(self.run_dir).budget), usd, tokens, task_usd)

    def model_rates(self, rpm: Mapping[str, float], tpm: Mapping[str, float]) -> ModelRates:
        return ModelRates.in_folder(self.run_dir, rpm, tpm)


class ModelRates:
    """Each model's own RPM/TPM buckets (``--gauge-rpm MODEL=N``), beside the run-wide one, shared by all
    workers (run-folder files, :meth:`in_folder`) or by every host (Redis keys, ``RedisLimits``): a
    limited model waits for its own window, the others do not."""

    def __init__(self, limiters: Mapping[str, RateLimit]) -> None:
        self.limiters: dict[str, RateLimit] = dict(limiters)

    @classmethod
    def in_folder(cls, folder: Path, rpm: Mapping[str, float], tpm: Mapping[str, float]) -> ModelRates:
        """The buckets as ``rate-<model key>.json`` files in the run folder."""
        return cls(
            {
                model: RateLimiter(
                    SharedState(RunFolder(folder).model_rate(model_key(model))),
                    rpm.get(model),
                    tpm.get(model),
                )
                for model in sorted(set(rpm) | set(tpm))
            }
        )

    async def acquire(self, model: str, tokens: int) -> None:
        limiter = self.limiters.get(model)
        if limiter is not None:
            await limiter.acquire(tokens)

    def correct(self, model: str, estimated: int, actual: int) -> None:
        limiter = self.limiters.get(model)
        if limiter is not None:
            limiter.correct(estimated, actual)


WaitHook = Callable[[], AbstractAsyncContextManager[None]]
_WAIT_HOOK: contextvars.ContextVar[WaitHook | None] = contextvars.ContextVar("gauge_model_wait", default=None)


def set_model_wait_hook(hook: WaitHook | None) -> contextvars.Token[WaitHook | None]:
    """Set, for the current task and the tasks it starts, what a wait for one model's own limit is
    wrapped in (the engine's look-ahead gives the waiting work's place to other work meanwhile)."""
    return _WAIT_HOOK.set(hook)


def reset_model_wait_hook(token: contextvars.Token[WaitHook | None]) -> None:
    """Undo :func:`set_model_wait_hook`."""
    _WAIT_HOOK.reset(token)


def model_wait() -> AbstractAsyncContextManager[None]:
    """Around a wait for one model's own limit (its bucket, its adaptive slot, a 429's wait): the hook of
    :func:`set_model_wait_hook`, so one model's rate limit does not hold places other models could use."""
    hook = _WAIT_HOOK.get()
    return hook() if hook is not None else contextlib.nullcontext()


NOISE_WINDOW = 20
"""The outcomes a model's 429s without a wait hint are weighed against."""
NOISE_SHARE = 0.25
"""The share of 429s in that window from which they are a rate limit, not noise."""


class _PacerWaiter:
    """A call in line for one of its model's slots: ``handed`` once a freed slot was given to it
    (counted as active for it already); ``wake`` resolves on that, or on a nudge to look again."""

    __slots__ = ("handed", "wake")

    def __init__(self) -> None:
        self.handed = False
        self.wake: asyncio.Future[None] | None = None

    def nudge(self) -> None:
        if self.wake is not None and not self.wake.done():
            self.wake.set_result(None)


class ModelPacer:
    """Adaptive concurrency per model in this process: a model's requests in flight are capped at its
    own limit, halved on a rate limit and grown back one slot per success (up to ``ceiling``), so a
    rate-limited model slows itself, not the other models of the run.

    A rate limit is told apart from noise: a 429 with a wait hint (``Retry-After`` and kin) halves the
    limit; one without counts only when 429s are at least :data:`NOISE_SHARE` of the model's last
    :data:`NOISE_WINDOW` outcomes (a gateway's stray 429s, 5% at random, kept a 64-slot model at 42 on
    average when each one halved, against 48 for a client that ignores them).

    Calls wait in line, first come first served: a freed slot is handed to the oldest waiter, never taken
    by a later arrival (a waiter could otherwise lose its turn again and again: on the 3,156-call
    benchmark suite some waited 12 s, and their test items with them). Only while the model is slowed
    (its limit below the ceiling) is the wait a wait for the model's own limit, inside
    :func:`model_wait` (its look-ahead place lent to other models' work); at the ceiling the model
    already has as many requests going as the whole run may send, and a lent place would only let the
    look-ahead queue up more work behind it."""

    def __init__(self, ceiling: int) -> None:
        self.ceiling = max(1, ceiling)
        self.limit: dict[str, int] = {}
        self.active: dict[str, int] = {}
        self._waiters: dict[str, collections.deque[_PacerWaiter]] = {}
        self._recent: dict[str, collections.deque[bool]] = {}  # last outcomes: True for a 429

    def _full(self, model: str) -> bool:
        return self.active.get(model, 0) >= self.limit.get(model, self.ceiling)

    def _slowed(self, model: str) -> bool:
        return self.limit.get(model, self.ceiling) < self.ceiling

    def _hand_over(self, model: str) -> None:
        """Give the model's free slots to its oldest waiters (a slot was freed or its limit grew)."""
        waiters = self._waiters.get(model)
        while waiters and not self._full(model):
            waiter = waiters.popleft()
            waiter.handed = True
            self.active[model] = self.active.get(model, 0) + 1
            waiter.nudge()

    async def _wait_in_line(self, model: str) -> None:
        """Queue for a slot; return once one was handed over (a nudge after a 429 only re-decides whether
        the wait lends its place)."""
        waiter = _PacerWaiter()
        self._waiters.setdefault(model, collections.deque()).append(waiter)
        try:
            while not waiter.handed:
                waiter.wake = asyncio.get_running_loop().create_future()
                async with model_wait() if self._slowed(model) else contextlib.nullcontext():
                    await waiter.wake
        except BaseException:
            if waiter.handed:  # handed a slot, then cancelled: pass it on
                self._release(model)
            else:
                with contextlib.suppress(ValueError):
                    self._waiters[model].remove(waiter)
            raise

    def _release(self, model: str) -> None:
        self.active[model] -= 1
        self._hand_over(model)

    @contextlib.asynccontextmanager
    async def slot(self, model: str) -> AsyncIterator[None]:
        if self._full(model) or self._waiters.get(model):
            await self._wait_in_line(model)
        else:
            self.active[model] = self.active.get(model, 0) + 1
        try:
            yield
        finally:
            self._release(model)

    def slowed(self, model: str, hinted: bool = True) -> None:
        """A 429 for ``model`` (``hinted``: it said how long to wait): halve its limit (at least one
        request in flight) unless it is noise; its waiters then lend their places while they wait
        (nudged to look again)."""
        recent = self._outcome(model, limited=True)
        if not hinted and sum(recent) < NOISE_SHARE * NOISE_WINDOW:
            return
        self.limit[model] = max(1, self.limit.get(model, self.ceiling) // 2)
        for waiter in self._waiters.get(model, ()):
            waiter.nudge()

    def _outcome(self, model: str, *, limited: bool) -> collections.deque[bool]:
        """Note an answer in the model's recent outcomes (True for a 429); the window."""
        recent = self._recent.setdefault(model, collections.deque(maxlen=NOISE_WINDOW))
        recent.append(limited)
        return recent

    def succeeded(self, model: str) -> None:
        """A success for ``model``: one more slot, up to the ceiling."""
        self._outcome(model, limited=False)
        current = self.limit.get(model, self.ceiling)
        if current < self.ceiling:
            self.limit[model] = current + 1
            self._hand_over(model)
