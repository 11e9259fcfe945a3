"""Concurrent execution of gauge work inside one process, ahead of the test items that assert on it.

A live suite is I/O-bound, and one blocking call per test cannot reach the gateway's floor (issue 8's
table), so each process runs an asyncio loop in a background thread:

* **work units** are transcripts (task, agent, sample) and judgments (case, judge, repeat); a
  judgment depends on its case's two transcripts;
* a **look-ahead driver** walks every selected case's work in collection order (each worker starting
  at a different offset) and keeps up to ``2 × max_concurrency`` units in progress; a judgment waits
  for its transcripts without holding one of those places; the gateway's shared slots bound the
  requests actually in flight;
* every unit is **claimed through the run's work store** (:mod:`pytest_gauge.gateway.store`): the process
  that takes the key's lock produces it, writes the result, and every other process waits for the
  file. So no work is done twice across workers, and the outcome does not depend on which worker
  ran which test. A process alone in its run (no xdist, or one worker) claims in memory and keeps
  entries in memory (:meth:`Store.keep`): no file is created per unit;
* a test item asks for its case with :meth:`Engine.outcome`, which bumps the case's work to the front
  and blocks until its record is ready;
* at the end, a worker lets the units it has started finish before it stops (unless Ctrl-C), since
  another worker may be waiting for them.

Results are a pure function of the requests (and the sim's seed), so they are identical to a
sequential run whatever the concurrency.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import sys
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..gateway.errors import GatewayError, RunStopped
from ..gateway.gateway import CallContext, Gateway
from ..gateway.store import Store, content_key
from ..records import CaseRecord, Judgment, Transcript, Turn, Usage
from ..suite.cases import Case
from ..suite.declare import BestOf, CallableAgent, ModelAgent, Reflection, Suite
from ..suite.rules import Score, score
from ..suite.tasks import Task
from ..suite.tools import ToolExecutor
from .dialogue import REFLECTION_PROMPT, ChatResult, DialogueConfig, run_dialogue
from .judge import Redactor, build_judge_messages, parse_verdict, slots
from .judge_format import JudgeFormats, ask_judge

__all__ = ["CaseOutcome", "Engine", "SuiteRuntime"]


@dataclass
class Spend:
    """Tokens and nominal cost of a unit of work (None cost: a model without a price)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = 0.0

    def add(self, usage: Usage | None, cost: float | None) -> None:
        if usage is not None:
            self.input_tokens += usage.prompt_tokens
            self.output_tokens += usage.completion_tokens
            self.cost = None if (self.cost is None or cost is None) else self.cost + cost

    def to_json(self) -> dict[str, Any]:
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens, "cost": self.cost}


class WorkCaller:
    """The :class:`~.dialogue.ChatCaller` of one unit of work: numbers its calls, sums spend."""

    def __init__(self, gateway: Gateway, ctx: CallContext) -> None:
        self.gateway = gateway
        self.ctx = ctx
        self.seq = 0
        self.spend = Spend()

    async def __call__(
        self,
        role: str,
        model: str,
        messages: list[dict[str, Any]],
        *,
        temperature: float,
        max_tokens: int,
        tools: list[dict[str, Any]] | None = None,
        seed: int | None = None,
        response_format: dict[str, Any] | None = None,
    ) -> ChatResult:
        self.seq += 1
        body = {
            "messages": messages,
            "temperature": temperature,
            "max_tokens": max_tokens,
            "tools": tools,
            "tool_choice": "auto" if tools else None,
            "seed": seed,
            "response_format": response_format,
        }
        result = await self.gateway.chat(self.ctx, self.seq, role, model, body)
        self.spend.add(result.usage, result.cost)
        return result


@dataclass
class SuiteRuntime:
    """One suite as this process runs it: declaration, tasks, gateway and judge view."""

    name: str
    suite: Suite
    tasks: dict[str, Task]
    gateway: Gateway
    formats: JudgeFormats = field(default_factory=JudgeFormats)
    redactor: Redactor = field(init=False)
    _scored: OrderedDict[tuple[str, str, int], tuple[Transcript, Score]] = field(
        init=False, default_factory=OrderedDict
    )

    def __post_init__(self) -> None:
        names = [a.name for a in self.suite.agents]
        names += [a.model for a in self.suite.agents if a.model]
        self.redactor = Redactor(names)

    def scored(self, entry: dict[str, Any], keep: int = 256) -> tuple[Transcript, Score]:
        """A finished transcript entry parsed and scored by the task's rules, remembered for the next
        few cases: every transcript is judged in ``2 x (agents - 1)`` cases, mostly one after another."""
        data = entry["transcript"]
        key = (data["task_id"], data["agent"], data["sample"])
        hit = self._scored.get(key)
        if hit is not None:
            self._scored.move_to_end(key)
            return hit
        task = self.tasks[data["task_id"]]
        transcript = Transcript.from_json(data)
        hit = (transcript, score(task.success_criteria, task.hard_constraints, transcript))
        self._scored[key] = hit
        if len(self._scored) > keep:
            self._scored.popitem(last=False)
        return hit

    def _dialogue_config(self, agent_name: str, sample: int, seed: int | None) -> DialogueConfig:
        agent = self.suite.agent(agent_name)
        user = self.suite.user
        return DialogueConfig(
            agent_name=agent.name,
            agent_model=agent.model if isinstance(agent, ModelAgent) else None,
            agent_system_prompt=agent.system_prompt if isinstance(agent, ModelAgent) else "",
            agent_temperature=agent.temperature if isinstance(agent, ModelAgent) else 0.0,
            agent_max_tokens=agent.max_tokens if isinstance(agent, ModelAgent) else 0,
            agent_fn=agent.fn if isinstance(agent, CallableAgent) else None,
            user_model=user.model,
            user_temperature=user.temperature,
            user_max_tokens=user.max_tokens,
            user_extra_prompt=user.extra_prompt,
            max_turns=user.max_turns,
            tool_step_limit=self.suite.tool_step_limit,
            agent_seed=seed,
            user_seed=seed,
        )

    def _executor(self, task: Task) -> ToolExecutor | None:
        if not task.tools:
            return None
        return ToolExecutor([t for t in self.suite.tools if t.name in task.tools], self.suite.tool_timeout)

    async def transcript(self, task_id: str, agent_name: str, sample: int) -> dict[str, Any]:
        """The transcript of (task, agent, sample); compute tiers spend their extra calls in this work."""
        task = self.tasks[task_id]
        agent = self.suite.agent(agent_name)
        strategy = agent.strategy if isinstance(agent, ModelAgent) else None
        label = strategy.label if strategy is not None else "single"
        work = f"transcript/{task_id}/{agent_name}/{sample}"
        caller = WorkCaller(self.gateway, CallContext(self.name, task_id, work, label))
        base_seed = sample if sample else None

        async def one(seed: int | None) -> Transcript:
            cfg = self._dialogue_config(agent_name, sample, seed)
            return await run_dialogue(task, sample, cfg, caller, self._executor(task), strategy=label)

        if isinstance(strategy, BestOf):
            candidates = [await one(base_seed if i == 0 else sample * 1000 + i) for i in range(strategy.n)]
            transcript = await self._select(task, candidates, strategy, caller)
        else:
            transcript = await one(base_seed)
            if isinstance(strategy, Reflection) and isinstance(agent, ModelAgent):
                transcript = await self._reflect(agent, transcript, strategy.rounds, caller, base_seed)
        verdict = score(task.success_criteria, task.hard_constraints, transcript)
        return {
            "ok": True,
            "transcript": transcript.to_json(),
            "spend": caller.spend.to_json(),
            "score": verdict.to_json(task.success_criteria, task.hard_constraints),
        }

    async def _select(
        self, task: Task, candidates: list[Transcript], strategy: BestOf, caller: WorkCaller
    ) -> Transcript:
        """Best-of-n selection: the rule verifier's highest reward (first on ties), or a judge knockout."""
        if strategy.selector == "verifier":
            rewards = [score(task.success_criteria, task.hard_constraints, t).reward for t in candidates]
            return candidates[rewards.index(max(rewards))]
        best = candidates[0]
        for challenger in candidates[1:]:
            messages = build_judge_messages(task, best, challenger, self.redactor)
            result, _ = await self.ask_judge(caller, self.suite.judge.model, messages)
            if parse_verdict(result.content, result.finish_reason).choice == "B":
                best = challenger
        return best

    async def _reflect(
        self, agent: ModelAgent, transcript: Transcript, rounds: int, caller: WorkCaller, seed: int | None
    ) -> Transcript:
        """Reflection rounds: the agent revises its final reply; the revision replaces it."""
        history: list[dict[str, Any]] = [{"role": "system", "content": agent.system_prompt}]
        for turn in transcript.turns:
            if turn.role in ("user", "assistant") and turn.content and not turn.tool_calls:
                history.append({"role": turn.role, "content": turn.content})
        reply = transcript.final_reply
        for _ in range(rounds):
            result = await caller(
                "agent",
                agent.model,
                [*history, {"role": "user", "content": REFLECTION_PROMPT}],
                temperature=agent.temperature,
                max_tokens=agent.max_tokens,
                seed=seed,
            )
            history += [
                {"role": "user", "content": REFLECTION_PROMPT},
                {"role": "assistant", "content": result.content},
            ]
            reply = result.content
        turns = list(transcript.turns)
        if turns and turns[-1].role == "assistant":
            turns[-1] = Turn("assistant", reply)
        else:
            turns.append(Turn("assistant", reply))
        return replace(transcript, turns=turns, final_reply=reply)

    async def ask_judge(
        self, caller: WorkCaller, model: str, messages: list[dict[str, str]], seed: int | None = None
    ) -> tuple[ChatResult, str]:
        """One judge call in JSON mode with the run's format fallback (:func:`.judge_format.ask_judge`)."""
        return await ask_judge(self.formats, self.suite.judge, caller, model, messages, seed)

    async def judgment(
        self, case: Case, judge_index: int, repeat: int, left: Transcript, right: Transcript
    ) -> dict[str, Any]:
        task = self.tasks[case.task_id]
        model = self.suite.judge.models()[judge_index]
        work = f"judge/{case.case_id}/{judge_index}/{repeat}"
        caller = WorkCaller(self.gateway, CallContext(self.name, case.task_id, work))
        slot_a, slot_b = slots(case.order, left, right)
        messages = build_judge_messages(task, slot_a, slot_b, self.redactor)
        seed = repeat if self.suite.judge.repeats > 1 else None
        result, fmt = await self.ask_judge(caller, model, messages, seed)
        verdict = parse_verdict(result.content, result.finish_reason)
        judgment = verdict.as_judgment(model, repeat, fmt)
        return {"ok": True, "judgment": judgment.__dict__, "spend": caller.spend.to_json()}


def _error_entry(exc: GatewayError) -> dict[str, Any]:
    return {"ok": False, "error": str(exc), "fatal": exc.fatal, "kind": type(exc).__name__}


@dataclass(frozen=True)
class CaseOutcome:
    """What a test item needs: the record, or the error that prevented it (``fatal``: stop the run)."""

    record: CaseRecord | None
    error: str | None = None
    fatal: bool = False


async def _cancel_others() -> None:
    """Cancel every task of the running loop but the caller's, and wait until they have ended."""
    current = asyncio.current_task()
    tasks = [t for t in asyncio.all_tasks() if t is not current]
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


STOP_GRACE = 2.0
"""Seconds a stopping process waits for its attempts in flight before it abandons them."""

_LOCAL_CLAIM = -1  # the "file descriptor" of a claim that needs no lock file (see Engine._exclusive)


@dataclass(frozen=True)
class _Work:
    key: str
    kind: str  # "transcript" | "judge"
    suite: str
    args: tuple[Any, ...]


class Engine:
    """Runs all gauge work of this process on a background event loop (see the module docstring)."""

    def __init__(
        self,
        runtimes: dict[str, SuiteRuntime],
        cases: Sequence[Case],
        work_store: Store,
        *,
        lookahead: int,
        worker_index: int = 0,
        worker_count: int = 1,
        progress: Callable[[], None] | None = None,
    ) -> None:
        self.runtimes = runtimes
        self.cases = {f"{c.suite}::{c.case_id}": c for c in cases}
        self.store = work_store
        self.lookahead = max(1, lookahead)
        self._futures: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._background: set[asyncio.Future[Any]] = set()
        self._transcripts: dict[tuple[str, str, str, int], _Work] = {}
        self._judges: dict[str, list[_Work]] = {}
        self._order = self._plan(cases, worker_index, worker_count)
        # The only process of the run doing work (no xdist, or one worker): a claim is the local future
        # alone and entries stay in memory (Store.keep), so no lock file and no entry file is created
        # per unit (file creation is the slow part of the store on many disks).
        self._exclusive = worker_count <= 1
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run_loop, name="gauge-engine", daemon=True)
        self._driver: concurrent.futures.Future[None] | None = None
        self._stopping = False
        self._interrupted = False  # Ctrl-C reached a test item's wait
        self._producing: dict[str, asyncio.Future[None]] = {}  # units this process is producing now
        self.done_units = 0
        self.total_units = len(self._order)
        self._progress = progress

    # ----- planning -------------------------------------------------------------------------
    def _transcript_work(self, suite: str, task_id: str, agent: str, sample: int) -> _Work:
        ident = (suite, task_id, agent, sample)
        work = self._transcripts.get(ident)
        if work is None:  # keys are hashes of JSON: computed once per unit, not at every use
            key = content_key(["transcript", suite, task_id, agent, sample])
            work = self._transcripts[ident] = _Work(key, "transcript", suite, (task_id, agent, sample))
        return work

    def _judge_works(self, case: Case) -> list[_Work]:
        ident = f"{case.suite}::{case.case_id}"
        works = self._judges.get(ident)
        if works is None:
            works = self._judges[ident] = self._new_judge_works(case)
        return works

    def _new_judge_works(self, case: Case) -> list[_Work]:
        judge = self.runtimes[case.suite].suite.judge
        return [
            _Work(
                content_key(["judge", case.suite, case.case_id, j, r]),
                "judge",
                case.suite,
                (f"{case.suite}::{case.case_id}", j, r),
            )
            for j in range(len(judge.models()))
            for r in range(judge.repeats)
        ]

    def _plan(self, cases: Sequence[Case], worker_index: int, worker_count: int) -> list[_Work]:
        order: list[_Work] = []
        seen: set[str] = set()
        for case in cases:
            for agent in (case.left, case.right):
                w = self._transcript_work(case.suite, case.task_id, agent, case.sample)
                if w.key not in seen:
                    seen.add(w.key)
                    order.append(w)
            order.extend(self._judge_works(case))
        if worker_count > 1 and order:
            start = len(order) * worker_index // worker_count
            order = order[start:] + order[:start]
        return order

    # ----- loop and thread ------------------------------------------------------------------
    def _run_loop(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    def start(self) -> None:
        self._thread.start()
        self._driver = asyncio.run_coroutine_threadsafe(self._drive(), self._loop)

    def _submit(self, coro: Awaitable[Any]) -> concurrent.futures.Future[Any]:
        return asyncio.run_coroutine_threadsafe(coro, self._loop)  # type: ignore[arg-type]

    def submit(self, coro: Awaitable[Any]) -> concurrent.futures.Future[Any]:
        """Run a coroutine on the engine's loop, where the gateway's shared state lives (the fixtures'
        calls from users' own tests go through it like the engine's own)."""
        return self._submit(coro)

    def request_stop(self, grace: float = STOP_GRACE) -> None:
        """Ctrl-C or SIGTERM (this process's, or the controller's stop file): no new attempt starts from
        now on; attempts in flight get up to ``grace`` seconds to be answered, then they are cancelled
        (their ledger line says ``interrupted``). Returns once nothing is in flight."""
        if not self._thread.is_alive():
            return
        self._stopping = True
        gateways = {id(rt.gateway.shared): rt.gateway.shared for rt in self.runtimes.values()}
        for shared in gateways.values():
            shared.stopping = True

        async def cut() -> None:
            deadline = self._loop.time() + grace
            while any(s.in_flight for s in gateways.values()) and self._loop.time() < deadline:
                await asyncio.sleep(0.02)
            await _cancel_others()

        try:
            self._submit(cut()).result(grace + 5.0)
        except (concurrent.futures.TimeoutError, concurrent.futures.CancelledError, RuntimeError):
            pass

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

        async def wind_down() -> None:
            started = [f for f in self._producing.values() if not f.done()]
            if started and wait > 0:
                await asyncio.wait(started, timeout=wait)
            await _cancel_others()

        try:
            self._submit(wind_down()).result(timeout + wait)
        except (concurrent.futures.TimeoutError, RuntimeError):
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self._loop.close()  # now, not from a finalizer after the interpreter closed its file descriptors

    # ----- work -----------------------------------------------------------------------------
    async def _report_progress(self, every: float = 1.0) -> None:
        while self._progress is not None:
            self._progress()
            await asyncio.sleep(every)

    async def _drive(self) -> None:
        gate = asyncio.Semaphore(self.lookahead)
        self._keep(asyncio.ensure_future(self._report_progress()))

        async def run(work: _Work) -> None:
            holding = True
            try:
                if work.kind == "judge":
                    # A judgment first waits for its two transcripts (dispatched before it, in order)
                    # without a slot, so that the slots go to work that can send calls now: otherwise
                    # judgments waiting on transcripts fill the look-ahead and starve the gateway.
                    gate.release()
                    holding = False
                    await self._dependencies(work)
                    await gate.acquire()
                    holding = True
                await self._obtain(work, wait=False)
            except Exception:
                pass
            finally:
                if holding:
                    gate.release()

        for work in self._order:
            if self._stopping:
                break
            await gate.acquire()
            self._keep(asyncio.ensure_future(run(work)))

    def _keep(self, task: asyncio.Future[Any]) -> None:
        """Hold a reference to a background task until it ends (the loop keeps only weak ones)."""
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _obtain(self, work: _Work, *, wait: bool = True) -> Awaitable[dict[str, Any] | None]:
        """The work's result entry; shared by every local caller. ``wait=False``: skip if another
        process holds the claim (look-ahead moves on; the demand path will wait for it)."""
        future = self._futures.get(work.key)
        if future is not None:
            return future
        if not wait:
            return self._try_claim(work)
        future = asyncio.ensure_future(self._claim_or_wait(work))
        self._futures[work.key] = future
        return future

    def _lock(self, key: str) -> int | None:
        """The key's cross-process claim (a lock file descriptor), or None if another process holds it."""
        return _LOCAL_CLAIM if self._exclusive else self.store.try_lock(key)

    def _unlock(self, fd: int) -> None:
        if fd != _LOCAL_CLAIM:
            self.store.unlock(fd)

    def _written_meanwhile(self, key: str) -> dict[str, Any] | None:
        """After taking a claim: the entry another process wrote between our look and our claim."""
        return None if self._exclusive else self.store.get(key)

    async def _try_claim(self, work: _Work) -> dict[str, Any] | None:
        entry = None if self._exclusive else self.store.get(work.key)  # exclusive: _futures has it all
        if entry is not None or self._stopping:
            return entry
        fd = self._lock(work.key)
        if fd is None:
            return None
        future = asyncio.get_running_loop().create_future()
        self._futures[work.key] = future
        try:
            entry = self._written_meanwhile(work.key) or await self._produce_and_store(work)
            future.set_result(entry)
            return entry
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # mark retrieved
            del self._futures[work.key]
            raise
        finally:
            self._unlock(fd)

    async def _claim_or_wait(self, work: _Work) -> dict[str, Any]:
        delay = 0.002
        while True:
            entry = self.store.get(work.key)
            if entry is not None:
                return entry
            if self._stopping:
                raise asyncio.CancelledError  # winding down: start nothing new
            fd = self._lock(work.key)
            if fd is not None:
                try:
                    return self._written_meanwhile(work.key) or await self._produce_and_store(work)
                finally:
                    self._unlock(fd)
            await asyncio.sleep(delay)
            delay = min(delay * 1.5, 0.05)

    async def _produce_and_store(self, work: _Work) -> dict[str, Any]:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._producing[work.key] = done
        try:
            try:
                entry = await self._produce(work)
            except RunStopped:
                raise  # a stop is not the work's outcome: nothing is stored, a re-run produces it
            except GatewayError as exc:
                entry = _error_entry(exc)
            if self._exclusive:
                self.store.keep(work.key, entry)
            else:
                self.store.put(work.key, entry)
            self.done_units += 1
            return entry
        finally:
            del self._producing[work.key]
            done.set_result(None)

    async def _dependencies(self, work: _Work) -> None:
        """Wait until a judgment's two transcripts exist (producing them if nobody has claimed them)."""
        case = self.cases[work.args[0]]
        await asyncio.gather(
            self._transcript_entry(case.suite, case.task_id, case.left, case.sample),
            self._transcript_entry(case.suite, case.task_id, case.right, case.sample),
        )

    async def _transcript_entry(self, suite: str, task_id: str, agent: str, sample: int) -> dict[str, Any]:
        entry = await self._obtain(self._transcript_work(suite, task_id, agent, sample))
        assert entry is not None
        return entry

    async def _produce(self, work: _Work) -> dict[str, Any]:
        runtime = self.runtimes[work.suite]
        if work.kind == "transcript":
            return await runtime.transcript(*work.args)
        case = self.cases[work.args[0]]
        left, right = await asyncio.gather(
            self._transcript_entry(case.suite, case.task_id, case.left, case.sample),
            self._transcript_entry(case.suite, case.task_id, case.right, case.sample),
        )
        for side in (left, right):
            if not side["ok"]:
                return side  # the transcript's failure is this judgment's failure
        return await runtime.judgment(
            case,
            work.args[1],
            work.args[2],
            Transcript.from_json(left["transcript"]),
            Transcript.from_json(right["transcript"]),
        )

    async def _case_outcome(self, case: Case) -> CaseOutcome:
        runtime = self.runtimes[case.suite]
        left, right = await asyncio.gather(
            self._transcript_entry(case.suite, case.task_id, case.left, case.sample),
            self._transcript_entry(case.suite, case.task_id, case.right, case.sample),
        )
        judges = [await self._obtain(w) for w in self._judge_works(case)]
        for entry in (left, right, *judges):
            assert entry is not None
            if not entry["ok"]:
                return CaseOutcome(None, entry["error"], bool(entry.get("fatal")))
        return CaseOutcome(build_record(runtime, case, left, right, judges))  # type: ignore[arg-type]

    def outcome(self, case_id: str, poll: float = 0.25) -> CaseOutcome:
        """Block until the case's record is ready (Ctrl-C interrupts the wait at once)."""
        future = self._submit(self._case_outcome(self.cases[case_id]))
        while True:
            try:
                result: CaseOutcome = future.result(timeout=poll)
                return result
            except concurrent.futures.TimeoutError:
                continue
            except BaseException as exc:
                self._interrupted = self._interrupted or isinstance(exc, KeyboardInterrupt)
                future.cancel()
                raise


def build_record(
    runtime: SuiteRuntime,
    case: Case,
    left_entry: dict[str, Any],
    right_entry: dict[str, Any],
    judge_entries: Sequence[dict[str, Any]],
) -> CaseRecord:
    """Assemble the case record (docs/protocol.md#case-record) from the two transcripts, the rules and
    the verdicts."""
    task = runtime.tasks[case.task_id]
    left, score_left = runtime.scored(left_entry)
    right, score_right = runtime.scored(right_entry)
    judgments = [Judgment(**e["judgment"]) for e in judge_entries]
    primary = judgments[0]
    left_in_a = case.order == "AB"
    selected: float | None = None
    lower: bool | None = None
    if primary.choice in ("A", "B"):
        picked_left = (primary.choice == "A") == left_in_a
        selected = score_left.reward if picked_left else score_right.reward
        other = score_right.reward if picked_left else score_left.reward
        lower = selected < other
    spend = Spend()
    for entry in (left_entry, right_entry, *judge_entries):
        s = entry["spend"]
        spend.input_tokens += s["input_tokens"]
        spend.output_tokens += s["output_tokens"]
        spend.cost = None if spend.cost is None or s["cost"] is None else spend.cost + s["cost"]
    return CaseRecord(
        suite=case.suite,
        case_id=case.case_id,
        pair_id=case.pair_id,
        task_id=case.task_id,
        category=task.category,
        agent_left=case.left,
        agent_right=case.right,
        order=case.order,  # type: ignore[arg-type]
        blind_order=case.blind_order,  # type: ignore[arg-type]
        sample=case.sample,
        judge_choice=primary.choice,
        reward_left=score_left.reward,
        reward_right=score_right.reward,
        selected_reward=selected,
        lower_reward_selected=lower,
        task_success_left=score_left.task_success,
        task_success_right=score_right.task_success,
        user_sat_left=left.user_satisfied,
        user_sat_right=right.user_satisfied,
        input_tokens=spend.input_tokens,
        output_tokens=spend.output_tokens,
        est_cost=spend.cost,
        judge_reward_a=primary.reward_a,
        judge_reward_b=primary.reward_b,
        judge_reason=primary.reason,
        judge_raw=primary.raw,
        judge_error=primary.error,
        chars_left=len(left.final_reply),
        chars_right=len(right.final_reply),
        judgments=judgments if len(judgments) > 1 else [],
        judge_response_format=primary.response_format,
    )
