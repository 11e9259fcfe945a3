"""An adaptive run's looks decided (``--gauge-adaptive``), pure: each suite's gates after each look on
anytime-valid intervals (:mod:`.adaptive`), whether the run opens the next look or stops, and what
the tasks not run would have cost. The processes feed it (``process/adaptive.py``): which cases have
finished, the records and the ledger so far."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..records import CaseRecord, LedgerRecord, SuiteMeta
from ..records.labels import Label
from ..records.totals import ledger_totals
from ..run.looks import LookPlan, LookState
from .adaptive import AdaptiveSummary, GateDecision, decide_gates, gate_key, waits_for_last_look
from .gates import Gate, parse_gates
from .numbers import NumbersSettings, gate_source
from .sequential import Look, look_boundaries

if TYPE_CHECKING:
    from .baseline import BaselineComparison

__all__ = ["LookDecisions", "SuiteLooks", "savings"]

_DRIFT_WORDS = "not decided early"


def _run_order(records: Sequence[CaseRecord], tasks: Sequence[str]) -> list[int] | None:
    """Indices of the metrics' per-task counts (tasks sorted by id, as the metrics hold them) in the
    run's order, or None when the records' tasks are not exactly the tasks run."""
    ids = sorted({r.task_id for r in records})
    if sorted(tasks) != ids:
        return None
    where = {t: i for i, t in enumerate(ids)}
    return [where[t] for t in tasks]


def savings(
    ledger: Sequence[LedgerRecord], tasks_run: int, total_tasks: int
) -> tuple[int, int, float | None]:
    """(calls, tokens, nominal cost) the tasks not run would have taken, at the tasks run's mean (the
    ledger's one totals rule, :func:`~pytest_gauge._internal.records.totals.ledger_totals`)."""
    if tasks_run <= 0 or total_tasks <= tasks_run:
        return 0, 0, 0.0
    scale = (total_tasks - tasks_run) / tasks_run
    totals = ledger_totals(ledger)
    cost = None if totals.nominal.cost is None else totals.nominal.cost * scale
    return round(totals.calls * scale), round(totals.nominal.total_tokens * scale), cost


@dataclass
class SuiteLooks:
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


class LookDecisions:
    """Every suite's gates decided look by look on the run's plan, and the run's word after each look."""

    def __init__(self, plan: LookPlan, metas: Sequence[SuiteMeta], extra_gates: Sequence[str]) -> None:
        self.plan = plan
        self.suites = {
            m.name: SuiteLooks(m, parse_gates([*m.gates, *extra_gates]), self._critical(m.name))
            for m in metas
            if plan.looks.get(m.name)
        }

    def _critical(self, name: str) -> tuple[float, ...]:
        """The suite's critical value per look (no alpha spent on looks too small to test)."""
        through = [self.plan.tasks_through(name, k) for k in range(1, len(self.plan.looks[name]) + 1)]
        return look_boundaries(through, self.plan.total_tasks(name))

    def decide(
        self,
        name: str,
        look: int,
        records: list[CaseRecord],
        ledger: list[LedgerRecord],
        settings: NumbersSettings,
        *,
        labels: Sequence[Label] | None,
        compare: Callable[[Sequence[str]], tuple[BaselineComparison | None, str]],
    ) -> None:
        """The suite's gates still open decided on looks ``1..look`` (its records and ledger so far).
        ``labels``: the suite's human labels; ``compare``: the records of these tasks against the
        baseline (or None and why)."""
        suite = self.suites[name]
        if look > suite.planned:
            return
        plan = self.plan
        total = plan.total_tasks(name)
        at = Look(look, suite.planned, plan.tasks_through(name, look), total, suite.critical[look - 1])
        tasks = self._tasks_run(name, look)
        numbers = gate_source(
            suite.meta, records, ledger, settings, comparison=compare(tasks), labels=labels, tasks=tasks
        )
        if look == 1:
            for gate in suite.gates:
                why = waits_for_last_look(gate, numbers.source)
                if why:
                    suite.waiting[gate.expression()] = why
        held: dict[str, str] = {}
        order = _run_order(records, tasks)
        new = decide_gates(suite.gates, numbers.source, at, suite.decided, order=order, held=held)
        for gate in suite.gates:  # a drift hold is reported until a later look decides the gate
            expression = gate.expression()
            if expression in held:
                suite.waiting[expression] = held[expression]
            elif gate_key(gate) in new and suite.waiting.get(expression, "").startswith(_DRIFT_WORDS):
                del suite.waiting[expression]
        suite.decided.update(new)
        if new:
            suite.last = next(reversed(new))

    def after(self, look: int, *, budget_out: bool) -> LookState | None:
        """The run's word once look ``look`` is decided: stop (every gate decided, or the budget ran out)
        or open the next look; None after the last look (the run ends by itself)."""
        if look >= self.plan.planned:
            return None
        if all(s.done(look) for s in self.suites.values()):
            return LookState(look, look, self._reason(look))
        if budget_out:
            return LookState(look, look, f"not run: the budget ran out during look {look}")
        return LookState(look + 1)

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

    def summary(
        self,
        name: str,
        ledger: Sequence[LedgerRecord],
        *,
        stopped_after: int | None,
        evaluated: int,
        budget_out: bool,
    ) -> AdaptiveSummary | None:
        """Where the suite's part of the run ended, for its reports."""
        suite = self.suites.get(name)
        if suite is None:
            return None
        stop = stopped_after
        last_look = min(stop if stop is not None else evaluated, suite.planned)
        run = self.plan.tasks_through(name, last_look)
        total = self.plan.total_tasks(name)
        calls, tokens, cost = savings(ledger, run, total)
        undecided = tuple(g.expression() for g in suite.gates if gate_key(g) not in suite.decided)
        budget = budget_out and stop is not None
        waiting = tuple(f"{g}: {why}" for g, why in suite.waiting.items())
        return AdaptiveSummary(
            stop, suite.planned, run, total, suite.last, calls, tokens, cost, undecided, budget, waiting
        )
