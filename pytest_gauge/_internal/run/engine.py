"""The scheduler: concurrent execution of gauge work inside one process, ahead of the test items that
assert on it. The work itself (a transcript, a verdict, a case record) is
:mod:`pytest_gauge._internal.run.work`.

A live suite is I/O-bound, and one blocking call per test cannot reach the gateway's floor (see
benchmarks/README.md), so each process runs an asyncio loop in a background thread:

* **work units** are transcripts (task, agent, sample) and judgments (case, judge, repeat); a
  judgment depends on its case's two transcripts;
* a **look-ahead driver** walks every selected case's work in collection order, each transcript
  pulled a look-ahead's worth of units early (:mod:`.plan`), going on from the
  case a test item last asked for (so each xdist worker works ahead of its own items), and keeps up
  to ``2 × max_concurrency`` units in progress; a judgment waits for its transcripts, and a unit for
  its own model's limit (a 429's wait, its ``--gauge-rpm MODEL=N`` bucket, its adaptive slot while the
  model is slowed by 429s), without holding one of those places; the gateway's shared slots bound the
  requests actually in flight;
* every unit is **claimed through the run's work store** (:mod:`pytest_gauge._internal.files.work_store`): the
  process that takes the key's claim produces it, appends the result to its log, and every other
  process waits for the entry. So no work is done twice across workers, and the outcome does not
  depend on which worker ran which test. Claims are locks on one empty file per unit (taken only
  under xdist), entries lines of one log per process. A process alone in its run (no xdist, or one
  worker) claims in memory and keeps entries in memory (:meth:`WorkStore.keep`);
* a test item asks for its case with :meth:`Engine.outcome`, which produces the case's work now if
  nobody has claimed it, moves the look-ahead there, and blocks until its record is ready;
* at the end, a worker lets the units it has started finish before it stops (unless Ctrl-C), since
  another worker may be waiting for them.

Results are a pure function of the requests (and the sim's seed), so they are identical to a
sequential run whatever the concurrency.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import sys
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..files.work_store import WorkStore
from ..gateway.call_priority import reset_call_chain, set_call_chain
from ..gateway.errors import GatewayError, RunStopped
from ..gateway.limits import reset_model_wait_hook, set_model_wait_hook
from ..gateway.store import content_key
from ..records import (
    CaseRecord,
    JudgmentResult,
    TranscriptResult,
    WorkFailure,
    WorkResult,
    work_result_from_json,
)
from ..suite.cases import Case
from .looks import LookClosed, LookGate
from .plan import long_chains_first
from .work import SuiteRuntime, build_record

if TYPE_CHECKING:
    from ..gateway.gateway import GatewayShared

__all__ = ["CaseOutcome", "Engine", "SuiteRuntime"]


def _resolve(waiter: asyncio.Future[bool], grown: bool = True) -> None:
    if not waiter.done():
        waiter.set_result(grown)


def _failure(exc: GatewayError) -> WorkFailure:
    return WorkFailure(str(exc), exc.fatal, type(exc).__name__)


@dataclass(frozen=True)
class CaseOutcome:
    """What a test item needs: the record, or the error that prevented it (``fatal``: stop the run)."""

    record: CaseRecord | None
    error: str | None = None
    fatal: bool = False
    kind: str | None = None  # the gateway error's class name (e.g. BudgetExhausted)


async def _cancel_others() -> None:
    """Cancel every task of the running loop but the caller's, and wait until they have ended."""
    current = asyncio.current_task()
    tasks = [t for t in asyncio.all_tasks() if t is not current]
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def _produce_again(exc: BaseException) -> bool:
    """Whether a unit whose production raised ``exc`` may be produced again: after a stop, a closed look
    or a cancellation, yes (nothing was stored); after an error inside pytest-gauge, no: the case that
    needs the unit gets the same error, and the calls the unit already paid for are not sent twice."""
    return isinstance(exc, (RunStopped, LookClosed, asyncio.CancelledError, KeyboardInterrupt, SystemExit))


STOP_GRACE = 2.0
"""Seconds a stopping process waits for its attempts in flight before it abandons them."""

STORE_WATCH = 0.002
"""Seconds between two reads of the work store's logs while a unit waits for another process's work."""

_LOCAL_CLAIM = -1  # the token of a claim that needs no lock (see Engine._exclusive)

DONE_KEPT = 1024
"""Finished units whose results a process shares with several processes keeps in memory (the most
recent; at least four look-aheads' worth): an older one is read back from the run's work store if a case
still needs it, so a worker's memory does not grow with the suite."""

READY_KEPT = 256
"""Case outcomes made ahead of their items kept at most (the oldest dropped: its item then asks the loop,
which reads the results again); a case another worker runs is never asked for here."""


@dataclass(frozen=True, slots=True)
class _TranscriptUnit:
    """The transcript of (task, agent, sample) in one suite; ``key`` is its work-store key."""

    key: str
    suite: str
    task_id: str
    agent: str
    sample: int


@dataclass(frozen=True, slots=True)
class _JudgeUnit:
    """One verdict (judge model index, repeat) of one case; it depends on the case's two transcripts."""

    key: str
    suite: str
    case: Case
    judge: int
    repeat: int


_Unit = _TranscriptUnit | _JudgeUnit


def _is_transcript(unit: _Unit) -> bool:
    return isinstance(unit, _TranscriptUnit)


async def _nothing() -> None:
    """An awaitable with no result: a look-ahead unit that has nothing to do."""


class _Place:
    """One of the look-ahead driver's places, held by one unit: given back while the unit waits for
    its transcripts (taken again before it starts) or its model's own limit (taken again only if one
    is free), freed when it ends."""

    def __init__(self, gate: asyncio.Semaphore) -> None:
        self.gate = gate
        self.held = True
        self.closed = False
        self.waiting = 0

    def give_back(self) -> None:
        if self.held:
            self.gate.release()
            self.held = False

    async def take(self) -> None:
        if not self.held and not self.closed:
            await self.gate.acquire()
            self.held = True
            if self.closed:  # the unit ended meanwhile (a lent wait outlived it)
                self.give_back()

    @contextlib.asynccontextmanager
    async def lent(self) -> AsyncIterator[None]:
        """The place is free for other work while the body waits (nested waits share one release)."""
        self.waiting += 1
        self.give_back()
        try:
            yield
        finally:
            self.waiting -= 1
            if self.waiting == 0:
                await self.take_if_free()

    async def take_if_free(self) -> None:
        """Take the place back only if one is free now (never suspends): a unit that has started may
        hold what the places' holders wait for (the judge's format lock, a claim another process polls),
        so waiting for a place here can deadlock; the unit goes on without one instead."""
        if not self.held and not self.closed and not self.gate.locked():
            await self.gate.acquire()  # free: returns at once
            self.held = True

    def close(self) -> None:
        self.closed = True
        self.give_back()


class Engine:
    """Runs all gauge work of this process on a background event loop (see the module docstring)."""

    def __init__(
        self,
        runtimes: dict[str, SuiteRuntime],
        cases: Sequence[Case],
        work_store: WorkStore,
        *,
        lookahead: int,
        worker_count: int = 1,
        progress: Callable[[], None] | None = None,
        looks: LookGate | None = None,
    ) -> None:
        self.runtimes = runtimes
        self.looks = looks  # an adaptive run: no unit starts before the controller opens its look
        self.cases = {f"{c.suite}::{c.case_id}": c for c in cases}
        self.store = work_store
        self.lookahead = max(1, lookahead)
        self._futures: dict[str, asyncio.Future[WorkResult]] = {}
        self._background: set[asyncio.Future[object]] = set()
        self._transcripts: dict[tuple[str, str, str, int], _TranscriptUnit] = {}
        self._judges: dict[str, list[_JudgeUnit]] = {}
        self._order = self._plan(cases)
        self._first_unit = self._case_positions(cases)
        self._demanded: int | None = None  # where the look-ahead goes next: a test item's case (any thread)
        # The only process of the run doing work (no xdist, or one worker): a claim is the local future
        # alone and entries stay in memory (WorkStore.keep): no lock and no write per unit.
        self._exclusive = worker_count <= 1
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run_loop, name="gauge-engine", daemon=True)
        self._driver: concurrent.futures.Future[None] | None = None
        self._stopping = False
        self._interrupted = False  # Ctrl-C reached a test item's wait
        self._producing: dict[str, asyncio.Future[None]] = {}  # units this process is producing now
        self._awaiting_store: list[asyncio.Future[bool]] = []  # units waiting for another process's work
        # Outcomes of cases whose every unit this process already holds, made on the engine's loop when
        # the last one finished: a test item takes its outcome from here without a round trip through
        # the loop (each round trip waits for the busy engine thread to hand over the GIL).
        self._ready: dict[str, CaseOutcome] = {}
        self._asked: set[str] = set()  # cases whose items asked (from the items' thread)
        self._done_order: OrderedDict[str, None] = OrderedDict()  # finished units, oldest first (xdist)
        self.done_units = 0
        self.total_units = len(self._order)
        self._progress = progress

    # ----- planning -------------------------------------------------------------------------
    def _transcript_unit(self, suite: str, task_id: str, agent: str, sample: int) -> _TranscriptUnit:
        ident = (suite, task_id, agent, sample)
        unit = self._transcripts.get(ident)
        if unit is None:  # keys are hashes of JSON: computed once per unit, not at every use
            key = content_key(["transcript", suite, task_id, agent, sample])
            unit = self._transcripts[ident] = _TranscriptUnit(key, suite, task_id, agent, sample)
        return unit

    def _case_transcripts(self, case: Case) -> tuple[_TranscriptUnit, _TranscriptUnit]:
        """The case's two transcripts: the left agent's, then the right agent's."""
        return (
            self._transcript_unit(case.suite, case.task_id, case.left, case.sample),
            self._transcript_unit(case.suite, case.task_id, case.right, case.sample),
        )

    def _judge_units(self, case: Case) -> list[_JudgeUnit]:
        ident = f"{case.suite}::{case.case_id}"
        units = self._judges.get(ident)
        if units is None:
            judge = self.runtimes[case.suite].suite.judge
            units = self._judges[ident] = [
                _JudgeUnit(content_key(["judge", case.suite, case.case_id, j, r]), case.suite, case, j, r)
                for j in range(len(judge.models()))
                for r in range(judge.repeats)
            ]
        return units

    def _look(self, unit: _Unit) -> int:
        """The unit's look in an adaptive run (0 otherwise: never waits)."""
        if self.looks is None:
            return 0
        task_id = unit.task_id if isinstance(unit, _TranscriptUnit) else unit.case.task_id
        return self.looks.plan.look_of(unit.suite, task_id)

    def _plan(self, cases: Sequence[Case]) -> list[_Unit]:
        """Every selected case's units in collection order (each transcript once, before its first
        judgment), each transcript pulled a look-ahead's worth of units early (:mod:`.plan`), look by
        look in an adaptive run."""
        order: list[_Unit] = []
        seen: set[str] = set()
        for case in cases:
            for unit in self._case_transcripts(case):
                if unit.key not in seen:
                    seen.add(unit.key)
                    order.append(unit)
            order.extend(self._judge_units(case))
        looks: dict[int, list[_Unit]] = {}
        for planned in order:
            looks.setdefault(self._look(planned), []).append(planned)
        return [
            u
            for look in sorted(looks)
            for u in long_chains_first(looks[look], _is_transcript, self.lookahead)
        ]

    def _case_positions(self, cases: Sequence[Case]) -> dict[str, int]:
        """Each case's first unit's place in the plan (where the look-ahead goes when its item asks)."""
        place = {unit.key: i for i, unit in enumerate(self._order)}
        return {f"{c.suite}::{c.case_id}": min(place[u.key] for u in self._case_units(c)) for c in cases}

    def _case_units(self, case: Case) -> list[_Unit]:
        """The case's units: its two transcripts (left, right), then its verdicts."""
        return [*self._case_transcripts(case), *self._judge_units(case)]

    # ----- loop and thread ------------------------------------------------------------------
    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The engine's event loop, where the process's gateways (and its recording proxy) run."""
        return self._loop

    def _run_loop(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    def start(self) -> None:
        self._thread.start()
        self._driver = asyncio.run_coroutine_threadsafe(self._drive(), self._loop)

    def submit(self, coro: Awaitable[Any]) -> concurrent.futures.Future[Any]:
        """Run a coroutine on the engine's loop, where the gateway's shared state lives (the fixtures'
        calls from users' own tests go through it like the engine's own)."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop)  # type: ignore[arg-type]

    def request_stop(self, grace: float = STOP_GRACE) -> None:
        """Ctrl-C or SIGTERM (this process's, or the controller's stop file): no new attempt starts from
        now on; attempts in flight get up to ``grace`` seconds to be answered, then they are cancelled
        (their ledger line says ``interrupted``). Returns once nothing is in flight."""
        if not self._thread.is_alive():
            return
        gateways = self._refuse_new_work()

        async def cut() -> None:
            deadline = self._loop.time() + grace
            while any(s.state.in_flight for s in gateways) and self._loop.time() < deadline:
                await asyncio.sleep(0.02)
            await _cancel_others()

        try:
            self.submit(cut()).result(grace + 5.0)
        except (concurrent.futures.TimeoutError, concurrent.futures.CancelledError, RuntimeError):
            pass

    def _refuse_new_work(self) -> list[GatewayShared]:
        """From now on no unit starts and no attempt is sent (each gateway refuses with RunStopped);
        safe from any thread: two flags the loop reads. Returns the gateways' shared states."""
        self._stopping = True
        gateways = {id(rt.gateway.shared): rt.gateway.shared for rt in self.runtimes.values()}
        for shared in gateways.values():
            shared.state.stopping = True
        return list(gateways.values())

    def stop(self, timeout: float = 5.0, drain: float = 60.0) -> None:
        """Start no new work, then cancel what is left and stop the loop; files already written stay whole.

        With other processes in the run (xdist) and no Ctrl-C, the units this process has started are
        first allowed to finish (up to ``drain`` seconds): another worker may need them, and cancelling
        one would make that worker send its calls again, beside an attempt the ledger never saw.
        """
        if not self._thread.is_alive():
            return
        interrupted = self._interrupted or isinstance(sys.exc_info()[1], KeyboardInterrupt)
        if interrupted:
            self.request_stop()
        self._stopping = True
        wait = 0.0 if interrupted or self._exclusive else drain
        try:
            self.submit(self._wind_down(wait)).result(timeout + wait)
        except (concurrent.futures.TimeoutError, RuntimeError):
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self._loop.close()  # now, not from a finalizer after the interpreter closed its file descriptors

    async def _wind_down(self, wait: float) -> None:
        """Let the units this process started finish (up to ``wait`` s), cancel every other task, then
        close the gateways' connections."""
        started = [f for f in self._producing.values() if not f.done()]
        if started and wait > 0:
            await asyncio.wait(started, timeout=wait)
        await _cancel_others()
        for gateway in {id(rt.gateway): rt.gateway for rt in self.runtimes.values()}.values():
            await gateway.aclose()

    # ----- scheduling -----------------------------------------------------------------------
    async def _report_progress(self, every: float = 1.0) -> None:
        while self._progress is not None:
            self._progress()
            await asyncio.sleep(every)

    async def _drive(self) -> None:
        """The look-ahead driver: walk the plan, keeping at most ``lookahead`` units in progress.

        It goes on from the case a test item last asked for (:meth:`outcome`), so under xdist each
        worker works ahead of the items it runs (xdist hands each worker its own stretch of the
        collection), then takes up the units it passed over; a unit another worker has is skipped at
        its claim. In an adaptive run it walks the looks in order and never jumps."""
        gate = asyncio.Semaphore(self.lookahead)
        self._keep(asyncio.ensure_future(self._report_progress()))
        visited = bytearray(len(self._order))
        cursor = 0
        for _ in range(len(self._order)):
            cursor = self._next_unvisited(visited, cursor)
            unit = self._order[cursor]
            visited[cursor] = 1
            if self._stopping or not await self._look_open(unit):
                break  # in look order: once a look is not needed, neither is any later one
            await gate.acquire()
            self._keep(asyncio.ensure_future(self._ahead(unit, gate)))

    def _next_unvisited(self, visited: bytearray, cursor: int) -> int:
        """The next unit to dispatch: from the case a test item asked for since (if any), else from
        ``cursor``; the first not yet dispatched, going round the plan."""
        demanded, self._demanded = self._demanded, None
        if demanded is not None and self.looks is None:
            cursor = demanded
        n = len(visited)
        while visited[cursor % n]:
            cursor += 1
        return cursor % n

    async def _ahead(self, unit: _Unit, gate: asyncio.Semaphore) -> None:
        """Produce one unit ahead of demand, holding one of the driver's places (released at the end)."""
        place = _Place(gate)
        try:
            if isinstance(unit, _JudgeUnit):
                # A judgment first waits for its two transcripts (dispatched before it, in order)
                # without a place, so that the places go to work that can send calls now: otherwise
                # judgments waiting on transcripts fill the look-ahead and starve the gateway.
                place.give_back()
                await self._transcripts_of(unit.case)
                await place.take()
            # While the unit waits for its own model's limit (a 429's wait, its bucket, its adaptive
            # slot), its place is lent to other work: one rate-limited model must not fill the
            # look-ahead with waiting units and so slow every other model of the run.
            token = set_model_wait_hook(place.lent)
            chain = set_call_chain(self._chain(unit))  # its calls get slots before shorter chains'
            try:
                await self._obtain(unit, wait=False)
            finally:
                reset_call_chain(chain)
                reset_model_wait_hook(token)
        except Exception:
            pass  # the demand path meets the same outcome (see _produce_again)
        finally:
            place.close()

    def _chain(self, unit: _Unit) -> int:
        """The calls on the unit's longest chain, its judgment's included: a dialogue's two per turn
        (agent, user) plus one, a judgment's one. Its calls wait for a slot ahead of shorter chains',
        so long dialogues start first and the run does not end on one while the other slots idle."""
        if isinstance(unit, _JudgeUnit):
            return 1
        runtime = self.runtimes[unit.suite]
        task = runtime.tasks.get(unit.task_id)
        turns = (task.max_turns if task is not None else None) or runtime.suite.user.max_turns
        return 2 * turns + 1

    def _keep(self, task: asyncio.Future[object]) -> None:
        """Hold a reference to a background task until it ends (the loop keeps only weak ones)."""
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # ----- claims: each unit is produced once in the whole run --------------------------------
    def _obtain(self, unit: _Unit, *, wait: bool = True) -> Awaitable[WorkResult | None]:
        """The unit's result; shared by every local caller. ``wait=False`` (the look-ahead): skip if
        another process holds the claim, or another task of this one already produces it (the
        look-ahead moves on; the demand path will wait for it)."""
        future = self._futures.get(unit.key)
        if future is not None and wait:
            return future
        if not wait:
            # Never hold a look-ahead place while waiting for work another task produces: that task
            # may itself wait for a place (after a 429's lent wait), or poll a claim another process
            # holds whose producer waits for one of that process's places: a deadlock across workers.
            return _nothing() if future is not None else self._try_claim(unit)
        future = asyncio.ensure_future(self._claim_or_wait(unit))
        self._hold(unit, future)
        return future

    def _hold(self, unit: _Unit, future: asyncio.Future[WorkResult]) -> None:
        """Keep the unit's shared result; once a judgment's is in, its case may be ready (:meth:`_note`)."""
        self._futures[unit.key] = future
        if isinstance(unit, _JudgeUnit):
            future.add_done_callback(lambda _: self._note(unit.case))
        if not self._exclusive:  # every result is also in the work store: keep only the recent ones
            future.add_done_callback(lambda done: self._settled(unit.key, done))

    def _settled(self, key: str, future: asyncio.Future[WorkResult]) -> None:
        """A unit's result is in: keep the :data:`DONE_KEPT` most recent results, forget older ones
        (their entries stay in the work store, where a later use reads them). A failed or cancelled
        unit is kept: its error is the outcome its cases get."""
        if future.cancelled() or future.exception() is not None:
            return
        self._done_order[key] = None
        self._done_order.move_to_end(key)
        while len(self._done_order) > max(DONE_KEPT, 4 * self.lookahead):
            old, _ = self._done_order.popitem(last=False)
            kept = self._futures.get(old)
            if kept is not None and kept.done() and not kept.cancelled() and kept.exception() is None:
                del self._futures[old]

    def _lock(self, key: str) -> int | None:
        """The key's cross-process claim (a token to unlock), or None if another process holds it."""
        return _LOCAL_CLAIM if self._exclusive else self.store.try_lock(key)

    def _unlock(self, fd: int) -> None:
        if fd != _LOCAL_CLAIM:
            self.store.unlock(fd)

    def _stored(self, key: str, fresh: bool = True) -> WorkResult | None:
        """The result another process wrote to the run's work store, if any (never, when exclusive:
        then ``_futures`` holds every result of the run); ``fresh=False``: from the logs as last read."""
        if self._exclusive:
            return None
        entry = self.store.get(key, fresh=fresh)
        return None if entry is None else work_result_from_json(entry)

    async def _try_claim(self, unit: _Unit) -> WorkResult | None:
        result = self._stored(unit.key)
        if result is not None or self._stopping:
            return result
        fd = self._lock(unit.key)
        if fd is None:
            return None
        future: asyncio.Future[WorkResult] = asyncio.get_running_loop().create_future()
        self._hold(unit, future)
        try:
            result = self._stored(unit.key) or await self._produce_and_store(unit)
            future.set_result(result)
            return result
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # mark retrieved
            if _produce_again(exc):
                del self._futures[unit.key]
            raise
        finally:
            self._unlock(fd)

    async def _claim_or_wait(self, unit: _Unit) -> WorkResult:
        """The unit's result: stored, or produced here once its claim is free. Woken by another
        process's new entries, a waiter looks only at the logs just read (the watcher read them); it
        tries the claim again (a dead claimant's) at most every ``delay``, not at every entry."""
        loop = asyncio.get_running_loop()
        delay, grown, next_try = 0.002, False, 0.0
        while True:
            result = self._stored(unit.key, fresh=not grown)
            if result is not None:
                return result
            if self._stopping:
                raise asyncio.CancelledError  # winding down: start nothing new
            if not grown or loop.time() >= next_try:
                fd = self._lock(unit.key)
                if fd is not None:
                    try:
                        return self._stored(unit.key) or await self._produce_and_store(unit)
                    finally:
                        self._unlock(fd)
                next_try = loop.time() + delay
                delay = min(delay * 1.5, 0.05)
            grown = await self._store_grows(max(0.0, next_try - loop.time()))

    async def _store_grows(self, timeout: float) -> bool:
        """Wait until the work store gains an entry (another process finished a unit) or ``timeout``
        passes (a claim may also have been given back without one: its process died). One watcher per
        process reads the logs every :data:`STORE_WATCH` s while anything waits, so a waiting unit wakes
        about as soon as its entry is written instead of at its next poll (up to 50 ms later). True
        when the store grew."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[bool] = loop.create_future()
        if not self._awaiting_store:
            self._keep(asyncio.ensure_future(self._watch_store()))
        self._awaiting_store.append(waiter)
        timer = loop.call_later(timeout, _resolve, waiter, False)
        try:
            return await waiter
        finally:
            timer.cancel()

    async def _watch_store(self) -> None:
        while self._awaiting_store:
            await asyncio.sleep(STORE_WATCH)
            self._awaiting_store = [w for w in self._awaiting_store if not w.done()]
            if self._awaiting_store and self.store.refresh():
                for waiter in self._awaiting_store:
                    _resolve(waiter)
                self._awaiting_store = []

    async def _produce_and_store(self, unit: _Unit) -> WorkResult:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._producing[unit.key] = done
        try:
            result: WorkResult
            try:
                result = await self._produce(unit)
            except RunStopped:
                raise  # a stop is not the work's outcome: nothing is stored, a re-run produces it
            except GatewayError as exc:
                result = _failure(exc)
            if self._exclusive:
                self.store.keep(unit.key, result.to_json())
            else:
                self.store.put(unit.key, result.to_json())
            self.done_units += 1
            return result
        finally:
            del self._producing[unit.key]
            done.set_result(None)

    # ----- the work and its dependencies -----------------------------------------------------
    async def _transcripts_of(self, case: Case) -> tuple[WorkResult, WorkResult]:
        """A case's two transcripts (left, right), produced here if nobody has claimed them."""
        left, right = await asyncio.gather(*(self._obtain(u) for u in self._case_transcripts(case)))
        assert left is not None and right is not None  # waiting claims always resolve
        return left, right

    async def _look_open(self, unit: _Unit) -> bool:
        """Wait until the unit's look is open (an adaptive run); False when the run stopped before it."""
        return self.looks is None or await self.looks.opened(self._look(unit))

    async def _produce(self, unit: _Unit) -> TranscriptResult | JudgmentResult | WorkFailure:
        if not await self._look_open(unit):
            raise LookClosed(unit.key)
        runtime = self.runtimes[unit.suite]
        if isinstance(unit, _TranscriptUnit):
            return await runtime.transcript(unit.task_id, unit.agent, unit.sample)
        left, right = await self._transcripts_of(unit.case)
        if not isinstance(left, TranscriptResult):
            return left  # the transcript's failure is this judgment's failure
        if not isinstance(right, TranscriptResult):
            return right
        return await runtime.judgment(unit.case, unit.judge, unit.repeat, left.transcript, right.transcript)

    def _note(self, case: Case) -> None:
        """If this process holds every result of the case, make its outcome now, for :meth:`outcome`
        (not for a case its item already asked for: the loop makes that one)."""
        case_id = f"{case.suite}::{case.case_id}"
        if case_id in self._asked:
            return
        results: list[WorkResult] = []
        for unit in self._case_units(case):
            future = self._futures.get(unit.key)
            if future is None or not future.done() or future.cancelled() or future.exception() is not None:
                return  # not all here yet, or produced by another process: the item asks the loop
            results.append(future.result())
        left, right, *judges = results
        self._ready[case_id] = self._outcome_of(case, left, right, judges)
        while len(self._ready) > READY_KEPT:  # the items' thread pops too: a change under us is a retry
            try:
                self._ready.pop(next(iter(self._ready)), None)
            except RuntimeError:
                continue

    async def _case_outcome(self, case: Case) -> CaseOutcome:
        left, right = await self._transcripts_of(case)
        judges = [await self._obtain(u) for u in self._judge_units(case)]
        return self._outcome_of(case, left, right, judges)

    def _outcome_of(
        self, case: Case, left: WorkResult, right: WorkResult, judges: Sequence[WorkResult | None]
    ) -> CaseOutcome:
        """The case's record from its two transcripts and its verdicts, or the first failure among them."""
        verdicts: list[JudgmentResult] = []
        for result in (left, right, *judges):
            if isinstance(result, WorkFailure):
                return CaseOutcome(None, result.error, result.fatal, result.kind)
            if isinstance(result, JudgmentResult):
                verdicts.append(result)
        assert isinstance(left, TranscriptResult) and isinstance(right, TranscriptResult)
        assert len(verdicts) == len(judges), "a judge unit resolved to a transcript"
        return CaseOutcome(build_record(self.runtimes[case.suite], case, left, right, verdicts))

    def outcome(
        self, case_id: str, poll: float = 0.25, waiting: Callable[[], None] | None = None
    ) -> CaseOutcome:
        """Block until the case's record is ready (Ctrl-C interrupts the wait at once); ``waiting`` is
        called every ``poll`` seconds meanwhile (the progress line of a case that takes minutes)."""
        self._asked.add(case_id)
        ready = self._ready.pop(case_id, None)
        if ready is not None:
            return ready
        self._demanded = self._first_unit[case_id]  # the look-ahead goes on from here
        future = self.submit(self._case_outcome(self.cases[case_id]))
        while True:
            try:
                result = future.result(timeout=poll)
                assert isinstance(result, CaseOutcome)
                return result
            except concurrent.futures.TimeoutError:
                if waiting is not None:
                    waiting()
                continue
            except BaseException as exc:
                if isinstance(exc, KeyboardInterrupt):
                    # before the cancel: it frees the case's slots, which the look-ahead must not
                    # fill with new requests in the moment before the stop (a request paid after Ctrl-C)
                    self._interrupted = True
                    self._refuse_new_work()
                future.cancel()
                raise
