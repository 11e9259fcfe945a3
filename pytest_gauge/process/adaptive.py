"""An adaptive run in the pytest processes (``--gauge-adaptive``, issue 18): the look plan on every
process, the case items ordered look by look, the controller's evaluation after each look, and its
word to the workers (the run folder's ``looks.json``).

* Every process that collects plans the same looks (:func:`pytest_gauge.run.looks.plan_looks`) and
  orders its case items look by look, so xdist hands them out in that order and no worker waits on a
  look while holding an item of an earlier one.
* Where the run ends (no xdist, or the controller), :class:`AdaptiveRun` counts finished cases; once
  every case of look ``k`` has finished it evaluates every suite's gates on looks ``1..k`` with
  anytime-valid intervals (:mod:`pytest_gauge.analysis.adaptive`) and either opens look ``k + 1`` or
  stops the run: the remaining cases are skipped, as not needed, and no unit of theirs is started.
* Workers hear the controller through ``looks.json`` (:class:`LookWatcher`, every 50 ms); a run without
  xdist updates its own :class:`~pytest_gauge.run.looks.LookGate` directly.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..analysis.adaptive import AdaptiveSummary, GateDecision, decide_gates, gate_key, waits_for_last_look
from ..analysis.gates import Gate, parse_gates
from ..analysis.sequential import look_boundaries
from ..files.readwrite import read_json_object, write_atomic
from ..gateway.ledger import ledger_totals
from ..options import GaugeOptions
from ..records import LedgerRecord, SuiteMeta
from ..run.looks import LookGate, LookPlan, LookState, plan_looks
from .stopping import RunFolderWatcher

if TYPE_CHECKING:
    from .state import GaugeState

__all__ = [
    "LOOKS_FILE",
    "AdaptiveRun",
    "LookWatcher",
    "adaptive_problem",
    "plan_from_metas",
    "publish_looks",
    "read_looks",
    "savings",
]

LOOKS_FILE = "looks.json"


def adaptive_problem(options: GaugeOptions) -> str | None:
    """Why ``--gauge-adaptive`` cannot run with these options, or None."""
    if options.adaptive and options.shard:
        return (
            "--gauge-adaptive with --gauge-shard: each shard stopping on its own tasks would not give a "
            "valid verdict for the merged run; run the shards without --gauge-adaptive, or one adaptive "
            "run without shards"
        )
    return None


def publish_looks(run_dir: Path, state: LookState) -> None:
    """The controller's word to the workers, replaced atomically."""
    write_atomic(run_dir / LOOKS_FILE, json.dumps(state.to_json()))


def read_looks(run_dir: Path) -> LookState | None:
    try:
        return LookState.from_json(read_json_object(run_dir / LOOKS_FILE))
    except ValueError:  # FileFormatError too: not there yet, or not what it should be
        return None


class LookWatcher(RunFolderWatcher):
    """Passes each new ``looks.json`` to the worker's look gate."""

    name = "gauge-look-watcher"

    def __init__(self, run_dir: Path, gate: LookGate, every: float = 0.05) -> None:
        super().__init__(run_dir, every)
        self.gate = gate

    def check(self) -> bool:
        state = read_looks(self.run_dir)
        if state is not None and state != self.gate.state:
            self.gate.update(state)
        return False


def plan_from_metas(metas: Sequence[SuiteMeta], options: GaugeOptions) -> LookPlan:
    """The run's looks from the suites' metadata (the controller, which does not collect)."""
    tasks: dict[str, list[str]] = {}
    for meta in metas:
        chosen = set(meta.selected)
        tasks[meta.name] = [c.task_id for c in meta.cases if f"{meta.name}::{c.case_id}" in chosen]
    return plan_looks(tasks, seed=options.seed, look_size=options.adaptive_look)


def savings(
    ledger: Sequence[LedgerRecord], tasks_run: int, total_tasks: int
) -> tuple[int, int, float | None]:
    """(calls, tokens, nominal cost) the tasks not run would have taken, at the tasks run's mean (the
    ledger's one totals rule, :func:`~pytest_gauge.gateway.ledger.ledger_totals`)."""
    if tasks_run <= 0 or total_tasks <= tasks_run:
        return 0, 0, 0.0
    scale = (total_tasks - tasks_run) / tasks_run
    totals = ledger_totals(ledger)
    cost = None if totals.nominal.cost is None else totals.nominal.cost * scale
    return round(totals.calls * scale), round(totals.nominal.total_tokens * scale), cost


@dataclass
class _SuiteLooks:
    """One suite's side of the adaptive run: its gates, boundaries and the decisions so far."""

    meta: SuiteMeta
    gates: list[Gate]
    critical: tuple[float, ...]
    decided: dict[str, GateDecision] = field(default_factory=dict)
    last: str | None = None  # the gate decided last
    waiting: dict[str, str] = field(default_factory=dict)  # gates only the last look decides, and why

    @property
    def planned(self) -> int:
        return len(self.critical)

    def done(self, look: int) -> bool:
        return look >= self.planned or all(gate_key(g) in self.decided for g in self.gates)


class AdaptiveRun:
    """Where the run ends: counts finished cases per look, evaluates the gates after each look, opens
    the next look or stops the run (``publish``: how the word reaches the processes doing the work)."""

    def __init__(self, state: GaugeState, publish: Callable[[LookState], None]) -> None:
        self.state = state
        self.publish = publish
        metas = state.suite_metas()
        self.plan = plan_from_metas(metas, state.options)
        self.suites = {
            m.name: _SuiteLooks(m, parse_gates([*m.gates, *state.options.gates]), self._critical(m.name))
            for m in metas
            if self.plan.looks.get(m.name)
        }
        self.look_of_node: dict[str, int] = {}
        self.expected: Counter[int] = Counter()
        for meta in metas:
            chosen = set(meta.selected)
            for c in meta.cases:
                if f"{meta.name}::{c.case_id}" in chosen:
                    look = self.plan.look_of(meta.name, c.task_id)
                    self.look_of_node[f"{meta.nodeid_prefix}::{c.case_id}"] = look
                    self.expected[look] += 1
        self.finished: Counter[int] = Counter()
        self.evaluated = 0
        self.looks = LookState()
        self.budget_out = False  # a case failed on the run's budget: no further look can be paid for

    def _critical(self, name: str) -> tuple[float, ...]:
        """The suite's critical value per look (no alpha spent on looks too small to test)."""
        through = [self.plan.tasks_through(name, k) for k in range(1, len(self.plan.looks[name]) + 1)]
        return look_boundaries(through, self.plan.total_tasks(name))

    def case_done(self, nodeid: str, *, budget: bool = False) -> None:
        """A case item finished (passed, failed or skipped): evaluate every look now complete.
        ``budget``: it failed because the run's budget ran out, so the run ends after this look."""
        look = self.look_of_node.get(nodeid)
        if look is None:
            return
        self.finished[look] += 1
        self.budget_out = self.budget_out or budget
        while (
            self.looks.stopped_after is None
            and self.evaluated < self.plan.planned
            and self.finished[self.evaluated + 1] >= self.expected[self.evaluated + 1]
        ):
            self._evaluate(self.evaluated + 1)

    def _evaluate(self, look: int) -> None:
        from ..gateway.ledger import merge_ledgers

        self.evaluated = look
        if not self.budget_out:  # a look cut short by the budget decides nothing: its cases are missing
            ledger = merge_ledgers(sorted(self.state.run_dir.glob("ledger-*.jsonl")))
            for name, suite in self.suites.items():
                if look <= suite.planned:
                    self._decide(name, suite, look, [r for r in ledger if r.suite == name])
        if look >= self.plan.planned:
            return
        if all(s.done(look) for s in self.suites.values()):
            self.looks = LookState(look, look, self._reason(look))
        elif self.budget_out:
            self.looks = LookState(look, look, f"not run: the budget ran out during look {look}")
        else:
            self.looks = LookState(look + 1)
        self.publish(self.looks)

    def _decide(self, name: str, suite: _SuiteLooks, look: int, ledger: list[LedgerRecord]) -> None:
        from ..analysis.numbers import gate_source
        from ..analysis.sequential import Look

        records = self.state.ordered_records(suite.meta)
        total = self.plan.total_tasks(name)
        at = Look(look, suite.planned, self.plan.tasks_through(name, look), total, suite.critical[look - 1])
        tasks = self._tasks_run(name, look)
        numbers = gate_source(suite.meta, records, ledger, self.state.options, tasks=tasks)
        if look == 1:
            for gate in suite.gates:
                why = waits_for_last_look(gate, numbers.source)
                if why:
                    suite.waiting[gate.expression()] = why
        new = decide_gates(suite.gates, numbers.source, at, suite.decided)
        suite.decided.update(new)
        if new:
            suite.last = next(reversed(new))

    def _tasks_run(self, name: str, look: int) -> tuple[str, ...]:
        return tuple(t for tasks in self.plan.looks[name][:look] for t in tasks)

    def _reason(self, look: int) -> str:
        run = sum(self.plan.tasks_through(n, look) for n in self.suites)
        total = sum(self.plan.total_tasks(n) for n in self.suites)
        planned = self.plan.planned
        return f"not needed: every gate decided after {run} of {total} tasks (look {look} of {planned})"

    def decisions(self, name: str) -> Mapping[str, GateDecision]:
        suite = self.suites.get(name)
        return suite.decided if suite else {}

    def summary(self, name: str, ledger: Sequence[LedgerRecord]) -> AdaptiveSummary | None:
        """Where the suite's part of the run ended, for its reports."""
        suite = self.suites.get(name)
        if suite is None:
            return None
        stop = self.looks.stopped_after
        last_look = min(stop if stop is not None else self.evaluated, suite.planned)
        run = self.plan.tasks_through(name, last_look)
        total = self.plan.total_tasks(name)
        calls, tokens, cost = savings(ledger, run, total)
        undecided = tuple(g.expression() for g in suite.gates if gate_key(g) not in suite.decided)
        budget = self.budget_out and stop is not None
        waiting = tuple(f"{g}: {why}" for g, why in suite.waiting.items())
        return AdaptiveSummary(
            stop, suite.planned, run, total, suite.last, calls, tokens, cost, undecided, budget, waiting
        )

    def ended(self) -> str | None:
        """Why the run ended before its gates were decided (None: it was not cut short)."""
        if self.budget_out:
            return f"the budget ran out during look {self.evaluated}"
        return None
