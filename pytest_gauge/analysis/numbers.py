"""Everything computed from a suite's records and ledger that its gates and reports read: metrics, the
Elo fit, the comparison with a baseline, the per-agent repeat terms and the gates' data source. Shared
by the end of a run, ``merge`` and an adaptive run's looks."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..records import CaseRecord, LedgerRecord, SuiteMeta
from ..records.labels import Label

if TYPE_CHECKING:
    from ..records.run_side import RunSide
    from .baseline import BaselineComparison
    from .elo_report import EloReport
    from .gate_source import GateSource
    from .metrics import Estimate, SuiteMetrics
    from .power import VarianceComponents
    from .repeats import RepeatCounts

__all__ = ["NumbersSettings", "SuiteNumbers", "compare_with_baseline", "gate_source", "suite_labels"]


class NumbersSettings(Protocol):
    """The run's settings the numbers depend on (``GaugeOptions`` has them): the close-pair threshold,
    the seed, the bootstrap rounds, the baseline folder (None: no baseline) and the human labels' files."""

    @property
    def close_threshold(self) -> float: ...
    @property
    def seed(self) -> int: ...
    @property
    def bootstrap_rounds(self) -> int: ...
    @property
    def baseline(self) -> str | None: ...
    @property
    def labels(self) -> tuple[str, ...]: ...


def compare_with_baseline(
    suite: str, opts: NumbersSettings, current: Callable[[], RunSide], link_base: Path | None
) -> tuple[BaselineComparison | None, str]:
    """This run's side (``current``, made only when there is a baseline) against the baseline's side of
    the suite (``--gauge-baseline``; its links relative to ``link_base``), or None and why."""
    if not opts.baseline:
        return None, "no baseline given: run with --gauge-baseline DIR"
    from ..files.baseline import BaselineError, load_baseline
    from .baseline import compare_runs

    try:
        base = load_baseline(Path(opts.baseline), suite, link_base=link_base)
    except BaselineError as exc:
        return None, f"baseline not usable: {exc}"
    if base is None:
        return None, f"the baseline {opts.baseline} has no suite {suite!r}: nothing to compare"
    comparison = compare_runs(
        current(),
        base,
        close_threshold=opts.close_threshold,
        rounds=opts.bootstrap_rounds,
        seed=opts.seed,
        elo_rounds=min(opts.bootstrap_rounds, 1000),
    )
    return comparison, ""


def _per_agent(
    records: list[CaseRecord], opts: NumbersSettings
) -> tuple[dict[str, RepeatCounts], dict[str, Estimate], dict[str, VarianceComponents]]:
    """Each agent's per-task successes and samples (the repeat terms), its mean reward estimate and the
    variance components of its rewards (between and within tasks, for the samples-per-task estimate)."""
    from .baseline import mean_rewards, outcomes_from_records
    from .power import spread_by_agent
    from .repeats import counts_by_agent

    outcomes = outcomes_from_records(records)
    repeats = counts_by_agent({u: o.success for u, o in outcomes.items()})
    spread = spread_by_agent({u: o.reward for u, o in outcomes.items()})
    return repeats, mean_rewards(outcomes, opts.bootstrap_rounds, opts.seed), spread


@dataclass(frozen=True)
class SuiteNumbers:
    """Everything computed from a suite's records and ledger that gates and reports read."""

    metrics: SuiteMetrics
    elo: EloReport | None
    comparison: BaselineComparison | None
    note: str
    repeats: Mapping[str, RepeatCounts]
    spread: Mapping[str, VarianceComponents]
    source: GateSource


def gate_source(
    meta: SuiteMeta,
    records: list[CaseRecord],
    ledger: list[LedgerRecord],
    opts: NumbersSettings,
    *,
    comparison: tuple[BaselineComparison | None, str] | None = None,
    tasks: Sequence[str] | None = None,
    case_hashes: Mapping[str, str] | None = None,
) -> SuiteNumbers:
    """Metrics, Elo, the baseline comparison and the gates' data source from records + ledger.
    ``comparison``: already made (the end of a run, from the outputs it has written); otherwise, with a
    baseline, made from the records of ``tasks`` (an adaptive run's look)."""
    from ..records.labels import bind_labels
    from .elo_report import build_elo_report
    from .gate_source import GateSource
    from .metrics import compute_metrics

    given = suite_labels(meta.name, opts.labels)
    labels, set_aside = bind_labels(given, case_hashes) if given is not None else (None, 0)
    metrics = compute_metrics(
        records,
        close_threshold=opts.close_threshold,
        seed=opts.seed,
        rounds=opts.bootstrap_rounds,
        ledger=ledger,
        expected_cases=len(records) if tasks is not None else len(meta.selected),
        labels=labels,
        labels_set_aside=set_aside,
    )
    families = {f: list(tiers) for f, tiers in meta.families.items()}
    elo = build_elo_report(
        records, ledger, families=families, seed=opts.seed, rounds=min(opts.bootstrap_rounds, 1000)
    )
    base, note = (
        comparison if comparison is not None else _look_comparison(meta, records, ledger, opts, tasks)
    )
    repeats, rewards, spread = _per_agent(records, opts)
    source = GateSource(metrics, elo, baseline=base, repeats=repeats, rewards=rewards, baseline_note=note)
    return SuiteNumbers(metrics, elo, base, note, repeats, spread, source)


def suite_labels(suite: str, files: Sequence[str]) -> list[Label] | None:
    """The labels of ``suite`` in the ``--gauge-labels`` files (None when none was given)."""
    if not files:
        return None
    from ..files.labels import read_labels

    return [x for x in read_labels(Path(f) for f in files) if x.suite == suite]


def _look_comparison(
    meta: SuiteMeta,
    records: list[CaseRecord],
    ledger: list[LedgerRecord],
    opts: NumbersSettings,
    tasks: Sequence[str] | None,
) -> tuple[BaselineComparison | None, str]:
    """The comparison of the records so far with the baseline (an adaptive run's look)."""
    from ..files.baseline import side_from_records

    run_tasks = tasks or [str(t["task_id"]) for t in meta.tasks]

    def side() -> RunSide:
        return side_from_records(meta, run_tasks, records, ledger)

    return compare_with_baseline(meta.name, opts, side, None)
