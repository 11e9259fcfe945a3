"""Everything computed from a suite's records and ledger that its gates and reports read: metrics, the
Elo fit, the comparison with a baseline, the per-agent repeat terms and the gates' data source. Shared
by the end of a run, ``merge`` and an adaptive run's looks. It reads no file: the baseline's side and the
human labels come in as values (``files/`` reads them, the process or the end of the run calls it)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
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

__all__ = ["NumbersSettings", "SuiteNumbers", "compare_with_baseline", "gate_source"]


class NumbersSettings(Protocol):
    """The run's settings the numbers depend on (``GaugeOptions`` has them): the close-pair threshold,
    the seed and the bootstrap rounds."""

    @property
    def close_threshold(self) -> float: ...
    @property
    def seed(self) -> int: ...
    @property
    def bootstrap_rounds(self) -> int: ...


def compare_with_baseline(
    baseline: tuple[RunSide | None, str], opts: NumbersSettings, current: Callable[[], RunSide]
) -> tuple[BaselineComparison | None, str]:
    """This run's side (``current``, made only when there is a baseline) against the baseline's side
    (``files.baseline.baseline_side``: the side, or None and why), or None and why."""
    base, note = baseline
    if base is None:
        return None, note
    from .baseline import compare_runs  # deferred: keeps numpy off the import of analysis.numbers

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
    from .baseline import (  # deferred: keeps numpy off the import of analysis.numbers
        mean_rewards,
        outcomes_from_records,
    )
    from .power import spread_by_agent  # deferred: keeps numpy off the import of analysis.numbers
    from .repeats import counts_by_agent  # deferred: keeps numpy off the import of analysis.numbers

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
    ledger: Sequence[LedgerRecord],
    opts: NumbersSettings,
    *,
    comparison: tuple[BaselineComparison | None, str],
    labels: Sequence[Label] | None,
    tasks: Sequence[str] | None = None,
    case_hashes: Mapping[str, str] | None = None,
) -> SuiteNumbers:
    """Metrics, Elo, the baseline comparison and the gates' data source from records + ledger.
    ``comparison``: this run against its baseline (or None and why); ``labels``: the suite's human
    labels (None: no labels file); ``tasks``: the tasks run so far (an adaptive run's look)."""
    from ..records.labels import bind_labels  # deferred: keeps numpy off the import of analysis.numbers
    from .elo_report import build_elo_report  # deferred: keeps numpy off the import of analysis.numbers
    from .gate_source import GateSource  # deferred: keeps numpy off the import of analysis.numbers
    from .metrics import compute_metrics  # deferred: keeps numpy off the import of analysis.numbers

    bound, set_aside = bind_labels(labels, case_hashes) if labels is not None else (None, 0)
    metrics = compute_metrics(
        records,
        close_threshold=opts.close_threshold,
        seed=opts.seed,
        rounds=opts.bootstrap_rounds,
        ledger=ledger,
        expected_cases=len(records) if tasks is not None else len(meta.selected),
        labels=bound,
        labels_set_aside=set_aside,
    )
    families = {f: list(tiers) for f, tiers in meta.families.items()}
    elo = build_elo_report(
        records, ledger, families=families, seed=opts.seed, rounds=min(opts.bootstrap_rounds, 1000)
    )
    base, note = comparison
    repeats, rewards, spread = _per_agent(records, opts)
    source = GateSource(metrics, elo, baseline=base, repeats=repeats, rewards=rewards, baseline_note=note)
    return SuiteNumbers(metrics, elo, base, note, repeats, spread, source)
