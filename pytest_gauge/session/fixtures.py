"""Fixtures for your own tests, with or without a :class:`~pytest_gauge.Suite` in the run.

* ``gauge_client`` (:class:`GaugeClient`): ``chat(messages, model=..., role="agent", **params)`` returns a
  :class:`Reply`; ``await achat(...)`` in async tests. Every call goes through the run's gateway
  (:class:`~pytest_gauge.gateway.gateway.Gateway`): the same retries, limits, response cache, budgets, key
  hygiene and diagnoses as a suite's calls, on the run's backend (sim, live or replay).
* ``gauge_ledger`` (:class:`GaugeLedger`): ``spent(request.node)`` sums one test's calls, ``spent()`` the
  whole run's so far, as a :class:`Spent`.
* ``gauge_judge`` (:class:`GaugeJudge`): ``compare(task, first, second, rules=None)`` runs the suite
  protocol's blind pairwise judge (:mod:`pytest_gauge.run.judge`) in both orders and returns a
  :class:`Comparison`.
* ``@pytest.mark.gauge_budget(usd=..., tokens=...)``: a test's calls are not sent past its budget
  (:class:`GaugeBudgetExceeded`), and the test fails with the budget, the spend and the call refused.

A test's calls are recorded in the ledger under the pseudo-suite ``_tests`` with the test's node id as
``work`` (and ``task_id``); the controller merges every worker's records into
``<gauge-out>/_tests/agent_runs.jsonl``, adds each test's figures to ``--junitxml`` as properties and
prints a "cost by test" table. Calls of a test share one numbering (``<node id>#<n>``), which is also
what caches a call's response (with any extra parameters), so replays find them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import json
import os
import threading
from collections.abc import Coroutine, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import pytest

from ..gateway.errors import BudgetExhausted
from ..gateway.gateway import CallContext
from ..gateway.ledger import ledger_totals
from ..records import LedgerRecord, Transcript, Turn, Usage, dumps
from ..run.dialogue import BodyCaller
from ..run.judge import Redactor, Verdict, build_judge_messages, parse_verdict
from ..run.judge_format import JudgeFormats, ask_judge
from ..suite.declare import Judge
from ..suite.rules import RuleSpecError, parse_rules, score
from ..suite.tasks import Task
from .roles import Role, role_key
from .state import GaugeState

if TYPE_CHECKING:
    import openai

    from ..gateway.gateway import Gateway
    from ..run.dialogue import ChatResult
    from ..sim.backend import SimBackend

__all__ = [
    "TESTS_SUITE",
    "Comparison",
    "GaugeBudgetExceeded",
    "GaugeClient",
    "GaugeJudge",
    "GaugeLedger",
    "JudgedOrder",
    "Reply",
    "Spent",
    "TestCalls",
    "finish_tests",
    "gauge_budget_of",
    "render_cost_by_test",
    "spent_of",
    "tests_report",
    "tests_summary",
]

TESTS_SUITE = "_tests"
"""The ``suite`` of every call made by a test (never a suite's name: collection refuses it)."""

JUDGE_MODEL_VARIABLE = "TAOTOKEN_JUDGE_MODEL"
SIM_JUDGE_MODEL = "sim-judge"
ROLES = ("agent", "user_sim", "judge")
PROPERTIES = ("gauge_calls", "gauge_input_tokens", "gauge_output_tokens", "gauge_cost_usd")

T = TypeVar("T")


# ----- typed values ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Reply:
    """One chat completion: the text, token usage, nominal cost (None: the model has no price), the
    finish reason (``"length"``: cut by ``max_tokens``), the model asked and any tool calls."""

    text: str
    usage: Usage | None
    cost: float | None
    finish_reason: str | None
    model: str
    tool_calls: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class Spent:
    """What calls spent: ``calls`` logical calls (answered live or from the cache), ``attempts`` sent to
    the gateway (retries included), ``cached`` answered from the cache; tokens and nominal cost count
    what was sent (a cache hit costs nothing). ``cost`` is None when a sent call's model has no price."""

    calls: int = 0
    attempts: int = 0
    cached: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = 0.0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def describe(self) -> str:
        cost = "unknown cost" if self.cost is None else f"${self.cost:.6f}"
        return f"{cost} and {self.tokens} tokens in {self.calls} calls"


def spent_of(records: Iterable[LedgerRecord]) -> Spent:
    """What ``records`` spent, by the ledger's one totals rule
    (:func:`~pytest_gauge.gateway.ledger.ledger_totals`): tokens and cost of the attempts sent, cache hits
    counted apart."""
    totals = ledger_totals(records)
    live = totals.live
    cached = totals.cached.records
    return Spent(totals.calls, live.records, cached, live.input_tokens, live.output_tokens, live.cost)


Preference = Literal["first", "second", "tie", "error"]
Winner = Literal["first", "second", "tie", "inconsistent", "error"]


@dataclass(frozen=True)
class JudgedOrder:
    """The judge's verdict in one order, translated from slots to ``first`` / ``second``.
    ``first_in_slot_a``: the first reply was shown as response A. ``raw`` is the judge's text."""

    first_in_slot_a: bool
    preferred: Preference
    reward_first: float | None
    reward_second: float | None
    reason: str
    raw: str
    error: str | None


@dataclass(frozen=True)
class Comparison:
    """A blind pairwise comparison in both orders. ``winner``: the side preferred in both orders,
    ``"tie"`` if both were ties, ``"inconsistent"`` if the orders disagree, ``"error"`` if a verdict was
    unusable. ``rewards``: the judge's rewards for (first, second), averaged over both orders;
    ``rule_rewards``: the rules' rewards (docs/protocol.md#reward), None without rules."""

    winner: Winner
    orders: tuple[JudgedOrder, JudgedOrder]
    rewards: tuple[float | None, float | None]
    rule_rewards: tuple[float, float] | None

    @property
    def reasons(self) -> tuple[str, str]:
        return (self.orders[0].reason, self.orders[1].reason)

    @property
    def raw(self) -> tuple[str, str]:
        return (self.orders[0].raw, self.orders[1].raw)


class GaugeBudgetExceeded(BudgetExhausted):
    """A test's call that would pass its ``gauge_budget``; it was not sent."""


@dataclass
class _Budget:
    """One test's ``gauge_budget`` and the worst cases of its calls in flight."""

    usd: float | None
    tokens: int | None
    reserved_usd: float = 0.0
    reserved_tokens: int = 0

    def describe(self) -> str:
        parts = ([f"${self.usd:.6f}"] if self.usd is not None else []) + (
            [f"{self.tokens} tokens"] if self.tokens is not None else []
        )
        return " and ".join(parts)


def gauge_budget_of(item: pytest.Item) -> _Budget | None:
    """The test's ``@pytest.mark.gauge_budget(usd=..., tokens=...)``, validated, or None."""
    marker = item.get_closest_marker("gauge_budget")
    if marker is None:
        return None
    unknown = sorted(set(marker.kwargs) - {"usd", "tokens"})
    usd, tokens = marker.kwargs.get("usd"), marker.kwargs.get("tokens")
    if marker.args or unknown or (usd is None and tokens is None):
        raise pytest.UsageError(
            f"{item.nodeid}: use @pytest.mark.gauge_budget(usd=0.01, tokens=5000)"
            " (either or both, as keywords)"
        )
    for name, value in (("usd", usd), ("tokens", tokens)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or value < 0):
            raise pytest.UsageError(
                f"{item.nodeid}: gauge_budget {name}= must be a number >= 0, got {value!r}"
            )
    return _Budget(None if usd is None else float(usd), None if tokens is None else int(tokens))


@dataclass(frozen=True)
class _TestCallContext(CallContext):
    """A test's call: its responses are cached per (node id, call number, extra parameters)."""

    seq: int = 0
    params: str = ""

    def cache_scope(self) -> int | str:
        return f"{self.work}#{self.seq}{self.params}"


# ----- the calls of this process's tests ----------------------------------------------------------


@dataclass
class _NodeCalls:
    records: list[LedgerRecord] = field(default_factory=list)
    seq: int = 0
    models: set[str] = field(default_factory=set)
    budget: _Budget | None = None
    refused: GaugeBudgetExceeded | None = None


class TestCalls:
    """This process's gateway for tests (pseudo-suite ``_tests``) over the run's shared limits, cache,
    budget and ledger, and what each test has spent (from the ledger's records as they are written)."""

    __test__ = False  # not a test class, whatever its name

    def __init__(self, role: Role, session: pytest.Session) -> None:
        from ..gateway.gateway import Gateway

        state = role.state
        self.engine = role.engine_for(session)
        shared = state.shared
        factory, identity, self.sim = _client_for(state)
        self.gateway: Gateway = Gateway(
            suite=TESTS_SUITE, client_factory=factory, backend_id=identity, shared=shared
        )
        self.prices = shared.prices
        self.run_dir = state.run_dir
        self.backend = state.options.backend
        self.formats = JudgeFormats()  # how each judge model takes JSON mode, as for suites' judges
        self._nodes: dict[str, _NodeCalls] = {}
        self._lock = threading.Lock()
        shared.ledger.watch(self._seen)

    def _seen(self, record: LedgerRecord) -> None:
        if record.suite == TESTS_SUITE:
            with self._lock:
                self.node(record.work).records.append(record)

    def node(self, nodeid: str) -> _NodeCalls:
        """The calls of one test (created on first use)."""
        return self._nodes.setdefault(nodeid, _NodeCalls())

    def enter(self, item: pytest.Item) -> str:
        """A test asked for a fixture: its budget applies from now on."""
        with self._lock:
            calls = self.node(item.nodeid)
            if calls.budget is None:
                calls.budget = gauge_budget_of(item)
        return item.nodeid

    def used(self, nodeid: str) -> bool:
        return nodeid in self._nodes

    def spent(self, nodeid: str) -> Spent:
        return spent_of(self.records(nodeid))

    def records(self, nodeid: str) -> list[LedgerRecord]:
        """A test's records in this process (none for a test that made no call here)."""
        with self._lock:
            calls = self._nodes.get(nodeid)
            return list(calls.records) if calls is not None else []

    def next_seq(self, nodeid: str, model: str | None = None) -> int:
        """Number a test's next call at the moment it is made (so numbers follow the test's code)."""
        with self._lock:
            calls = self.node(nodeid)
            calls.seq += 1
            if model is not None:
                calls.models.add(model)
            return calls.seq

    def models(self, nodeid: str) -> set[str]:
        with self._lock:
            return set(self.node(nodeid).models)

    def wait(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on the engine's loop and block until it is done."""
        result: T = self.engine.submit(coro).result()
        return result

    async def await_(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on the engine's loop from an async test (asyncio, or trio through anyio)."""
        future: concurrent.futures.Future[T] = self.engine.submit(coro)
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # not asyncio: wait in a worker thread of the test's own framework
            import anyio.to_thread

            return await anyio.to_thread.run_sync(future.result)
        return await asyncio.wrap_future(future)

    async def send(
        self, nodeid: str, seq: int, role: str, model: str, body: dict[str, Any], params: str = ""
    ) -> ChatResult:
        """One call of a test through the gateway, within the test's budget."""
        hold = self._reserve(nodeid, seq, role, model, body)
        ctx = _TestCallContext(TESTS_SUITE, nodeid, nodeid, seq=seq, params=params)
        try:
            return await self.gateway.chat(ctx, seq, role, model, body)
        finally:
            if hold is not None:
                self._release(nodeid, hold)

    def _reserve(
        self, nodeid: str, seq: int, role: str, model: str, body: Mapping[str, Any]
    ) -> tuple[float, int] | None:
        """Reserve the call's worst case (prompt estimate + ``max_tokens``) in the test's budget, or
        refuse it (:class:`GaugeBudgetExceeded`) when spend + calls in flight + it would pass."""
        with self._lock:
            calls = self.node(nodeid)
            budget = calls.budget
            if budget is None:
                return None
            spent = spent_of(calls.records)
            prompt = len(json.dumps(body.get("messages"), ensure_ascii=False)) // 4 + 1
            completion = int(body.get("max_tokens") or 0)
            usd = self.prices.cost(model, prompt, completion)
            over = budget.tokens is not None and (
                spent.tokens + budget.reserved_tokens + prompt + completion > budget.tokens
            )
            unpriced = budget.usd is not None and (usd is None or spent.cost is None)
            over = over or (
                budget.usd is not None
                and not unpriced
                and (spent.cost or 0.0) + budget.reserved_usd + (usd or 0.0) > budget.usd
            )
            if not (over or unpriced):
                budget.reserved_usd += usd or 0.0
                budget.reserved_tokens += prompt + completion
                return (usd or 0.0, prompt + completion)
            worst = f"{prompt + completion} tokens" + ("" if usd is None else f", ${usd:.6f}")
            call = f"{role} call #{seq} to model {model} (at worst {worst})"
            fix = "raise the test's @pytest.mark.gauge_budget(...) or lower max_tokens"
            if unpriced:
                fix = f"give model {model} a price (gauge_prices) or budget tokens= only"
            error = GaugeBudgetExceeded(
                f"gauge_budget of {nodeid} is {budget.describe()}; spent {spent.describe()};"
                f" not sent: {call}",
                fix,
            )
            calls.refused = error
            raise error

    def _release(self, nodeid: str, hold: tuple[float, int]) -> None:
        with self._lock:
            budget = self.node(nodeid).budget
            assert budget is not None
            budget.reserved_usd -= hold[0]
            budget.reserved_tokens -= hold[1]


def _client_for(state: GaugeState) -> tuple[Any, str, SimBackend | None]:
    """The tests' client factory and gateway identity; on sim, also the simulator (to learn tasks)."""
    from ..gateway.backends import network_client, sim_client, tests_world
    from ..gateway.endpoint import live_settings_problems

    opts = state.options
    if opts.backend == "sim":
        from ..sim.backend import SimBackend

        world = tests_world(((e.suite, e.tasks) for e in state.suites.values()), opts.seed)
        sim = SimBackend(world)
        return sim_client(sim), f"sim:{world.fingerprint()}", sim
    if opts.backend == "live":
        problems = live_settings_problems(os.environ)
        if problems:
            raise pytest.UsageError("pytest-gauge: " + "; ".join(problems))
    factory, identity = network_client(opts.backend, opts.timeout, opts.max_concurrency)
    return factory, identity, None


tests_key = pytest.StashKey[TestCalls]()
summary_key = pytest.StashKey[dict[str, Spent]]()


def calls_for(request: pytest.FixtureRequest) -> TestCalls:
    """This process's :class:`TestCalls`, started with the first fixture that needs it."""
    config = request.config
    calls = config.stash.get(tests_key, None)
    if calls is None:
        calls = config.stash[tests_key] = TestCalls(config.stash[role_key], request.session)
    return calls


# ----- the fixtures' objects ------------------------------------------------------------------------


class GaugeClient:
    """``gauge_client``: chat completions for one test, through the run's gateway and ledger."""

    def __init__(self, calls: TestCalls, nodeid: str) -> None:
        self._calls = calls
        self.nodeid = nodeid

    @property
    def openai(self) -> openai.AsyncOpenAI:
        """The underlying ``openai.AsyncOpenAI`` (calls made with it bypass the ledger and the limits)."""
        return self._calls.gateway.client

    def _start(
        self,
        messages: Sequence[Mapping[str, Any]],
        model: str,
        role: str,
        temperature: float,
        max_tokens: int,
        params: Mapping[str, Any],
    ) -> Coroutine[Any, Any, Reply]:
        if role not in ROLES:
            raise ValueError(f"role must be one of {', '.join(ROLES)}, got {role!r}")
        if not messages:
            raise ValueError("messages must be a non-empty list of chat messages")
        seq = self._calls.next_seq(self.nodeid, model)
        body = {"messages": [dict(m) for m in messages], "temperature": temperature, "max_tokens": max_tokens}
        body.update(params)
        extra = ":" + hashlib.sha256(dumps(dict(params)).encode()).hexdigest()[:16] if params else ""

        async def call() -> Reply:
            result = await self._calls.send(self.nodeid, seq, role, model, body, extra)
            return Reply(
                result.content, result.usage, result.cost, result.finish_reason, model, result.tool_calls
            )

        return call()

    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        model: str,
        role: str = "agent",
        temperature: float = 0.0,
        max_tokens: int = 1024,
        **params: Any,
    ) -> Reply:
        """Send one chat completion (``params``: any other request field, e.g. ``seed``, ``tools``,
        ``response_format``). Raises :class:`~pytest_gauge.gateway.errors.GatewayError` with cause and fix."""
        return self._calls.wait(self._start(messages, model, role, temperature, max_tokens, params))

    async def achat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        model: str,
        role: str = "agent",
        temperature: float = 0.0,
        max_tokens: int = 1024,
        **params: Any,
    ) -> Reply:
        """:meth:`chat` for async tests."""
        return await self._calls.await_(self._start(messages, model, role, temperature, max_tokens, params))


class GaugeLedger:
    """``gauge_ledger``: what tests and the whole run have spent."""

    def __init__(self, calls: TestCalls) -> None:
        self._calls = calls

    def spent(self, node: pytest.Item | str | None = None) -> Spent:
        """A test's spend (its calls through ``gauge_client`` / ``gauge_judge``), or with no node the
        whole run's so far: every process's ledger, suites' calls included."""
        if node is None:
            return spent_of(self._run_records())
        return self._calls.spent(node if isinstance(node, str) else node.nodeid)

    def records(self, node: pytest.Item | str) -> list[LedgerRecord]:
        """A test's ledger records (one per attempt), in the order they were written."""
        return self._calls.records(node if isinstance(node, str) else node.nodeid)

    def _run_records(self) -> Iterator[LedgerRecord]:
        from ..gateway.ledger import read_ledger_file

        for path in sorted(self._calls.run_dir.glob("ledger-*.jsonl")):
            yield from read_ledger_file(path)


Side = str | Reply | Transcript


class GaugeJudge:
    """``gauge_judge``: the suite protocol's blind pairwise judge for comparisons inside a test.

    The judge is ``TAOTOKEN_JUDGE_MODEL`` (``sim-judge`` on the sim backend) with the defaults of
    :class:`~pytest_gauge.Judge`, unless ``judge=`` is given to :meth:`compare`.
    """

    def __init__(self, calls: TestCalls, nodeid: str) -> None:
        self._calls = calls
        self.nodeid = nodeid

    def _judge(self, judge: Judge | None) -> Judge:
        if judge is not None:
            return judge
        model = os.environ.get(JUDGE_MODEL_VARIABLE, "").strip()
        if not model and self._calls.backend != "sim":
            raise pytest.UsageError(
                f"gauge_judge: set {JUDGE_MODEL_VARIABLE} to the judge model, or pass judge=Judge('model')"
            )
        return Judge(model or SIM_JUDGE_MODEL)

    def compare(
        self,
        task: str | Task,
        first: Side,
        second: Side,
        rules: Sequence[Mapping[str, Any]] | None = None,
        *,
        names: Iterable[str] = (),
        judge: Judge | None = None,
    ) -> Comparison:
        """Judge ``first`` against ``second`` for ``task`` (a prompt, or a :class:`Task` with its rules),
        in both orders, blind: every name in ``names``, the models of :class:`Reply` sides and the
        models this test called are redacted. ``rules``: success criteria as in ``tasks.jsonl``."""
        return self._calls.wait(self._compare(task, first, second, rules, names, judge))

    async def acompare(
        self,
        task: str | Task,
        first: Side,
        second: Side,
        rules: Sequence[Mapping[str, Any]] | None = None,
        *,
        names: Iterable[str] = (),
        judge: Judge | None = None,
    ) -> Comparison:
        """:meth:`compare` for async tests."""
        return await self._calls.await_(self._compare(task, first, second, rules, names, judge))

    def _compare(
        self,
        task: str | Task,
        first: Side,
        second: Side,
        rules: Sequence[Mapping[str, Any]] | None,
        names: Iterable[str],
        judge: Judge | None,
    ) -> Coroutine[Any, Any, Comparison]:
        spec = _task_of(task, rules)
        chosen = self._judge(judge)
        sides = (_transcript(spec, first, "first"), _transcript(spec, second, "second"))
        hidden = {*names, *self._calls.models(self.nodeid)}
        hidden |= {s.model for s in (first, second) if isinstance(s, Reply)}
        redact = Redactor(hidden)
        caller = _NodeCaller(self._calls, self.nodeid)

        async def one(first_in_a: bool) -> JudgedOrder:
            slot_a, slot_b = sides if first_in_a else sides[::-1]
            messages = build_judge_messages(spec, slot_a, slot_b, redact)
            result, _ = await ask_judge(self._calls.formats, chosen, caller, chosen.model, messages)
            return _judged(parse_verdict(result.content, result.finish_reason), result.content, first_in_a)

        async def both() -> Comparison:
            if self._calls.sim is not None:
                self._calls.sim.learn(spec)  # so the simulated judge can read the task's rules
            orders = await asyncio.gather(one(True), one(False))  # numbered in this order
            return combine(orders[0], orders[1], _rule_rewards(spec, sides))

        return both()


class _NodeCaller(BodyCaller):
    """The :class:`~pytest_gauge.run.dialogue.ChatCaller` of one test: its calls numbered when made."""

    def __init__(self, calls: TestCalls, nodeid: str) -> None:
        self._calls = calls
        self._nodeid = nodeid

    async def send(self, role: str, model: str, body: dict[str, Any]) -> ChatResult:
        seq = self._calls.next_seq(self._nodeid)
        return await self._calls.send(self._nodeid, seq, role, model, body)


def _task_of(task: str | Task, rules: Sequence[Mapping[str, Any]] | None) -> Task:
    """The task to judge: a :class:`Task` as given, or a prompt with ``rules`` as success criteria."""
    if isinstance(task, Task):
        if rules is not None:
            raise TypeError("gauge_judge.compare: give rules= with a task prompt, not with a Task")
        return task
    if not isinstance(task, str) or not task.strip():
        raise TypeError("gauge_judge.compare: task must be a non-empty prompt or a Task")
    try:
        criteria = parse_rules(list(rules or ()), field="rules")
    except RuleSpecError as exc:
        raise ValueError(f"gauge_judge.compare: {exc.field}: {exc.message}") from None
    ident = hashlib.sha256(dumps([task, list(rules or ())]).encode()).hexdigest()[:12]
    return Task(f"test-{ident}", "information_retrieval", task, criteria)


def _transcript(task: Task, side: Side, label: str) -> Transcript:
    if isinstance(side, Transcript):
        return side
    text = side.text if isinstance(side, Reply) else side
    if not isinstance(text, str):
        raise TypeError(f"gauge_judge.compare: {label} must be a str, a Reply or a Transcript")
    turns = [Turn("user", task.task_prompt), Turn("assistant", text)]
    return Transcript(task.task_id, label, 0, turns, text, None, "user_done")


def _judged(verdict: Verdict, raw: str, first_in_a: bool) -> JudgedOrder:
    """A slot verdict in first/second terms."""
    first, second = (
        (verdict.reward_a, verdict.reward_b) if first_in_a else (verdict.reward_b, verdict.reward_a)
    )
    preferred: Preference
    if verdict.choice in ("error", "tie"):
        preferred = "error" if verdict.choice == "error" else "tie"
    else:
        preferred = "first" if (verdict.choice == "A") == first_in_a else "second"
    return JudgedOrder(first_in_a, preferred, first, second, verdict.reason, raw, verdict.error)


def combine(ab: JudgedOrder, ba: JudgedOrder, rule_rewards: tuple[float, float] | None = None) -> Comparison:
    """Both orders' verdicts as one comparison (pure): agreement wins, disagreement is inconsistent."""
    if "error" in (ab.preferred, ba.preferred):
        return Comparison("error", (ab, ba), (None, None), rule_rewards)
    winner: Winner = ab.preferred if ab.preferred == ba.preferred else "inconsistent"
    rewards = (_mean(ab.reward_first, ba.reward_first), _mean(ab.reward_second, ba.reward_second))
    return Comparison(winner, (ab, ba), rewards, rule_rewards)


def _mean(x: float | None, y: float | None) -> float | None:
    return None if x is None or y is None else (x + y) / 2


def _rule_rewards(task: Task, sides: tuple[Transcript, Transcript]) -> tuple[float, float] | None:
    if not task.success_criteria and not task.hard_constraints:
        return None
    first, second = (score(task.success_criteria, task.hard_constraints, t).reward for t in sides)
    return (first, second)


# ----- the hooks' part: reports, outputs, summary ---------------------------------------------------


def tests_report(item: pytest.Item, report: pytest.TestReport) -> None:
    """A test that used the fixtures: its spend as properties of its teardown report (``--junitxml``
    writes them), and a test whose calls a budget refused fails even if it caught the error."""
    calls = item.config.stash.get(tests_key, None)
    if calls is None or not calls.used(item.nodeid):
        return
    node = calls.node(item.nodeid)
    if report.when == "call" and report.passed and node.refused is not None:
        report.outcome = "failed"
        report.longrepr = f"{node.refused}\n(the test caught the refusal; it still fails)"
    if report.when == "teardown":
        spent = calls.spent(item.nodeid)
        cost = "unknown" if spent.cost is None else f"{spent.cost:.8f}"
        values = (spent.calls, spent.input_tokens, spent.output_tokens, cost)
        report.user_properties.extend(zip(PROPERTIES, values, strict=True))


def finish_tests(config: pytest.Config, out_dir: Path, ledger: Sequence[LedgerRecord]) -> None:
    """On the controller, with every worker's records merged: the tests' ledger
    (``<out>/_tests/agent_runs.jsonl``) and each test's spend for the terminal summary."""
    records = [r for r in ledger if r.suite == TESTS_SUITE]
    if not records:
        return
    path = out_dir / TESTS_SUITE / "agent_runs.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("".join(dumps(r.to_json()) + "\n" for r in records), encoding="utf-8")
    os.replace(tmp, path)
    by_test: dict[str, list[LedgerRecord]] = {}
    for r in records:
        by_test.setdefault(r.work, []).append(r)
    config.stash[summary_key] = {node: spent_of(rs) for node, rs in sorted(by_test.items())}


def render_cost_by_test(spends: Mapping[str, Spent], limit: int = 10) -> list[str]:
    """The "cost by test" table: the ``limit`` costliest tests by tokens (then node id) and a total."""
    rows = sorted(spends.items(), key=lambda kv: (-kv[1].tokens, kv[0]))
    total = spent_of([])
    width = max(len("total"), *(len(n) for n, _ in rows[:limit]))

    def line(name: str, s: Spent) -> str:
        cost = "unknown" if s.cost is None else f"${s.cost:.6f}"
        return f"{name:<{width}}  {s.calls:>6}  {s.tokens:>9}  {cost:>11}"

    lines = [f"{'test':<{width}}  {'calls':>6}  {'tokens':>9}  {'cost':>11}"]
    lines += [line(name, s) for name, s in rows[:limit]]
    if len(rows) > limit:
        lines.append(f"... {len(rows) - limit} more tests")
    for s in spends.values():
        cost = None if total.cost is None or s.cost is None else total.cost + s.cost
        total = Spent(
            total.calls + s.calls,
            total.attempts + s.attempts,
            total.cached + s.cached,
            total.input_tokens + s.input_tokens,
            total.output_tokens + s.output_tokens,
            cost,
        )
    lines.append(line("total", total))
    return lines


def tests_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """Print the "cost by test" table when tests made calls (on the controller)."""
    spends = config.stash.get(summary_key, None)
    if not spends:
        return
    terminalreporter.write_sep("=", "pytest-gauge: cost by test")
    for text in render_cost_by_test(spends):
        terminalreporter.write_line(text)


# ----- the fixtures (registered by the plugin module) ----------------------------------------------


@pytest.fixture
def gauge_client(request: pytest.FixtureRequest) -> GaugeClient:
    """Chat completions for this test through the run's gateway (see :class:`GaugeClient`)."""
    calls = calls_for(request)
    return GaugeClient(calls, calls.enter(request.node))


@pytest.fixture
def gauge_judge(request: pytest.FixtureRequest) -> GaugeJudge:
    """The blind pairwise judge for this test (see :class:`GaugeJudge`)."""
    calls = calls_for(request)
    return GaugeJudge(calls, calls.enter(request.node))


@pytest.fixture
def gauge_ledger(request: pytest.FixtureRequest) -> GaugeLedger:
    """What tests and the run have spent (see :class:`GaugeLedger`)."""
    calls = calls_for(request)
    calls.enter(request.node)
    return GaugeLedger(calls)
