"""A suite's analysis from its records and ledger: the numbers (:func:`~.numbers.gate_source`) and its
gates evaluated, with their needed n. Pure orchestration, shared by the end of a run and ``merge``; the
reports are rendered from it above (``finish/outputs.py``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..records import CaseRecord, LedgerRecord, SuiteMeta
from ..records.labels import Label
from .gates import GateResult, evaluate_gates, is_count, parse_gates
from .numbers import NumbersSettings, SuiteNumbers, gate_source

if TYPE_CHECKING:
    from .adaptive import AdaptiveSummary, GateDecision
    from .baseline import BaselineComparison
    from .gates import Gate, GateResult
    from .power import VarianceComponents

__all__ = [
    "DEFERRED_MESSAGE",
    "AdaptiveGates",
    "GateSettings",
    "SuiteAnalysis",
    "analyse_suite",
    "gate_results",
]

DEFERRED_MESSAGE = (
    "deferred: this run is one shard of the suite; 'python -m pytest_gauge merge' evaluates the gates"
)


class GateSettings(NumbersSettings, Protocol):
    """The run's settings the gates depend on beyond the numbers' (``GaugeOptions`` has them): the
    ``--gauge-gate`` expressions added to the suite's, ``--gauge-gates-on-partial`` and
    ``--gauge-familywise``."""

    @property
    def gates(self) -> tuple[str, ...]: ...
    @property
    def gates_on_partial(self) -> bool: ...
    @property
    def familywise(self) -> str: ...


@dataclass(frozen=True)
class AdaptiveGates:
    """An adaptive run's side of a suite's gates: the decisions made look by look, why the run ended
    where it did, and the summary the reports show."""

    decided: Mapping[str, GateDecision]
    ended: str
    summary: AdaptiveSummary | None


@dataclass(frozen=True)
class SuiteAnalysis:
    """A suite's numbers (metrics, Elo, baseline comparison, the gates' source) and its gate results."""

    numbers: SuiteNumbers
    results: list[GateResult]


def gate_results(
    meta: SuiteMeta,
    opts: GateSettings,
    source: Any,
    partial: bool,
    missing: int,
    *,
    deferred: bool,
    interrupted: str | None,
    spread: Mapping[str, VarianceComponents] | None = None,
    adaptive: AdaptiveGates | None = None,
) -> list[GateResult]:
    """The suite's gates evaluated (with their needed n); all skipped for a shard (the merge evaluates
    them); none on an interrupted run unless ``--gauge-gates-on-partial`` (the conclusion says so), but
    an adaptive run's decisions stand wherever it ended (they are anytime-valid).
    ``spread``: each agent's reward variance components, for the samples-per-task alternative of
    ``mean_reward(agent)`` gates (the one gate term built from per-task means of samples)."""
    from .adaptive import adaptive_results  # deferred: keeps numpy off the import of analysis.suite
    from .power import with_needed_n  # deferred: keeps numpy off the import of analysis.suite

    gates = parse_gates([*meta.gates, *opts.gates])
    if deferred:
        return [GateResult(g, "skipped", None, None, None, 0, DEFERRED_MESSAGE) for g in gates]
    if interrupted is not None and not opts.gates_on_partial and adaptive is None:
        return []
    results = evaluate_gates(
        gates,
        source,
        partial_run=partial and adaptive is None,
        missing_cases=missing,
        drivers=lambda g, src=source: src.drivers(g.left.name, g.left.args),  # type: ignore[misc]
    )
    tasks = getattr(getattr(source, "metrics", None), "n_tasks", None)  # sizes in tasks, not cases
    if adaptive is not None:
        results = adaptive_results(results, adaptive.decided, adaptive.ended)
    elif opts.familywise == "holm":  # Holm's step-down over the fail-when-confident gates
        from .familywise import apply_holm  # deferred: keeps numpy off the import of analysis.suite

        results = apply_holm(results, source, tasks if isinstance(tasks, int) else 0)
    by_agent = spread or {}

    def components(g: Gate) -> VarianceComponents | None:
        if g.right is not None or g.left.name != "mean_reward" or len(g.left.args) != 1:
            return None
        return by_agent.get(g.left.args[0])

    sized = [with_needed_n(r, components(r.gate), tasks if isinstance(tasks, int) else None) for r in results]
    size = tasks if isinstance(tasks, int) else None
    return [_with_reproducibility(r, source, components(r.gate), size) for r in sized]


def _with_reproducibility(
    result: GateResult, source: Any, spread: VarianceComponents | None, tasks: int | None = None
) -> GateResult:
    """The result with how often its verdict would repeat, from its quantity's interval df and the
    within-task share of its variance (docs/protocol.md#reproducibility); where the run cannot support
    a figure (too few tasks, or a rate's rarer outcome in too few), why there is none."""
    from .reproducibility import (  # deferred: keeps numpy off the import of analysis.suite
        case_rate_reproducibility,
        components_within_share,
        data_shortfall,
        gate_reproducibility,
        with_reproducibility,
        without_figure,
    )

    if result.status not in ("pass", "fail"):
        return result
    gate = result.gate
    try:
        q = (
            source.lookup(gate.left.name, gate.left.args)
            if gate.right is None
            else source.difference(gate.left, gate.right)
        )
    except KeyError:
        q = None
    counts = getattr(q, "counts", None)
    why = data_shortfall(tasks, counts)
    if why is not None:
        return without_figure(result, why)
    if q is None:
        return result
    if counts is not None:
        rep = case_rate_reproducibility(result, counts)
    else:
        within = components_within_share(spread)
        rep = gate_reproducibility(result, df=getattr(q, "df", None), within=within, count=is_count(gate))
    return with_reproducibility(result, rep)


def analyse_suite(
    meta: SuiteMeta,
    records: list[CaseRecord],
    ledger: Sequence[LedgerRecord],
    opts: GateSettings,
    *,
    comparison: tuple[BaselineComparison | None, str],
    labels: Sequence[Label] | None,
    partial: bool,
    deferred: bool = False,
    interrupted: str | None = None,
    adaptive: AdaptiveGates | None = None,
    case_hashes: Mapping[str, str] | None = None,
    flake_rates: Mapping[str, float] | None = None,
) -> SuiteAnalysis:
    """Records + ledger -> metrics, Elo, the gates' source and the gates evaluated. ``comparison``: this
    run against its baseline (or None and why); ``labels``: the suite's human labels (None: no labels
    file). ``deferred`` (a shard): the gates are not evaluated here
    but by the merge. ``interrupted`` ("interrupted: N of M cases"): the run was stopped; its gates are
    evaluated only with ``--gauge-gates-on-partial``. ``adaptive``: the gates as an adaptive run decided
    them, look by look. ``flake_rates``: each task's flake rate in the verdict history before this run
    (None without one), for ``exclude_flaky`` gates (analysis/flaky.py)."""
    numbers = gate_source(
        meta, records, ledger, opts, comparison=comparison, labels=labels, case_hashes=case_hashes
    )
    results = gate_results(
        meta,
        opts,
        numbers.source,
        partial,
        len(meta.selected) - len(records),
        deferred=deferred,
        interrupted=interrupted,
        spread=numbers.spread,
        adaptive=adaptive,
    )
    if any(r.gate.exclude_flaky is not None for r in results):
        from .flaky import apply_exclusions, subset_evaluator  # deferred: only for exclude_flaky gates

        tasks = list(dict.fromkeys(r.task_id for r in records))
        evaluate = subset_evaluator(meta, records, ledger, opts)
        results = apply_exclusions(results, tasks, flake_rates, evaluate)[0]
    return SuiteAnalysis(numbers, results)
