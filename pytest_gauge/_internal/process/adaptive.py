"""An adaptive run in the pytest processes (``--gauge-adaptive``): the look plan on every
process, the case items ordered look by look, the controller's evaluation after each look, and its
word to the workers (the run folder's ``looks.json``).

* Every process that collects plans the same looks (:func:`pytest_gauge._internal.run.looks.plan_looks`) and
  orders its case items look by look, so xdist hands them out in that order and no worker waits on a
  look while holding an item of an earlier one.
* Where the run ends (no xdist, or the controller), :class:`AdaptiveRun` counts finished cases; once
  every case of look ``k`` has finished it has every suite's gates decided on looks ``1..k`` with
  anytime-valid intervals (:mod:`pytest_gauge._internal.analysis.looks`, pure) and either opens look ``k + 1``
  or stops the run: the remaining cases are skipped, as not needed, and no unit of theirs is started.
* Workers hear the controller through ``looks.json`` (:class:`LookWatcher`, every 50 ms); a run without
  xdist updates its own :class:`~pytest_gauge._internal.run.looks.LookGate` directly.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..analysis.looks import LookDecisions
from ..analysis.numbers import compare_with_baseline
from ..files.baseline import baseline_side, side_from_records
from ..files.folders import RunFolder
from ..files.labels import suite_labels
from ..files.readwrite import read_json_object, write_atomic
from ..gateway.ledger import merge_ledgers
from ..options import GaugeOptions
from ..records import CaseRecord, LedgerRecord, SuiteMeta
from ..records.run_side import RunSide
from ..run.looks import LookGate, LookPlan, LookState, plan_looks
from .stopping import RunFolderWatcher

if TYPE_CHECKING:
    from ..analysis.adaptive import AdaptiveSummary, GateDecision
    from ..analysis.baseline import BaselineComparison
    from .state import GaugeState

__all__ = [
    "AdaptiveRun",
    "LookWatcher",
    "adaptive_problem",
    "plan_from_metas",
    "publish_looks",
    "read_looks",
]


def adaptive_problem(options: GaugeOptions) -> str | None:
    """Why ``--gauge-adaptive`` cannot run with these options, or None."""
    if options.adaptive and options.shard:
        return (
            "--gauge-adaptive with --gauge-shard: each shard stopping on its own tasks would not give a "
            "valid verdict for the merged run; run the shards without --gauge-adaptive, or one adaptive "
            "run without shards"
        )
    if options.adaptive and options.familywise == "holm":
        return (
            "--gauge-adaptive with --gauge-familywise holm: the looks spend each gate's own alpha, not a "
            "Holm-adjusted one; run adaptive with per-gate levels, or Holm without --gauge-adaptive"
        )
    return None


def publish_looks(run_dir: Path, state: LookState) -> None:
    """The controller's word to the workers, replaced atomically."""
    write_atomic(RunFolder(run_dir).looks, json.dumps(state.to_json()))


def read_looks(run_dir: Path) -> LookState | None:
    try:
        return LookState.from_json(read_json_object(RunFolder(run_dir).looks))
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


class AdaptiveRun:
    """Where the run ends: counts finished cases per look and, once a look is complete, has its gates
    decided (:class:`~pytest_gauge._internal.analysis.looks.LookDecisions`, on the records and the ledger
    files so far), then opens the next look or stops the run (``publish``: how the word reaches the processes
    doing the work)."""

    def __init__(self, state: GaugeState, publish: Callable[[LookState], None]) -> None:
        self.state = state
        self.publish = publish
        metas = state.suite_metas()
        self.plan = plan_from_metas(metas, state.options)
        self.decided = LookDecisions(self.plan, metas, state.options.gates)
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

        self.evaluated = look
        if not self.budget_out:  # a look cut short by the budget decides nothing: its cases are missing
            ledger = merge_ledgers(self.state.run_folder.ledgers())
            for name, suite in self.decided.suites.items():
                if look > suite.planned:
                    continue
                records = self.state.ordered_records(suite.meta)
                mine = [r for r in ledger if r.suite == name]
                self._decide(name, look, records, mine)
        word = self.decided.after(look, budget_out=self.budget_out)
        if word is not None:
            self.looks = word
            self.publish(word)

    def _decide(self, name: str, look: int, records: list[CaseRecord], ledger: list[LedgerRecord]) -> None:
        """One suite's gates decided on this look, with the baseline and the labels read here (the
        analysis reads no file)."""
        opts = self.state.options
        meta = self.decided.suites[name].meta

        def compare(tasks: Sequence[str]) -> tuple[BaselineComparison | None, str]:
            def current() -> RunSide:
                return side_from_records(meta, tasks, records, ledger)

            return compare_with_baseline(baseline_side(opts.baseline, name, None), opts, current)

        labels = suite_labels(name, opts.labels)
        self.decided.decide(name, look, records, ledger, opts, labels=labels, compare=compare)

    def decisions(self, name: str) -> Mapping[str, GateDecision]:
        return self.decided.decisions(name)

    def summary(self, name: str, ledger: Sequence[LedgerRecord]) -> AdaptiveSummary | None:
        """Where the suite's part of the run ended, for its reports."""
        stop = self.looks.stopped_after
        budget_out = self.budget_out
        return self.decided.summary(
            name, ledger, stopped_after=stop, evaluated=self.evaluated, budget_out=budget_out
        )

    def ended(self) -> str | None:
        """Why the run ended before its gates were decided (None: it was not cut short)."""
        if self.budget_out:
            return f"the budget ran out during look {self.evaluated}"
        return None
