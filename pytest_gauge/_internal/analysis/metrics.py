"""Suite-level statistics over judged cases, each with its count and 95% interval (docs/protocol.md#metrics).

Interval methods (the choice is part of the result, see :attr:`Estimate.method`):

* ``cluster-wilson`` / ``cluster-t``: case-level rates of 0/1 outcomes (LRS, flips, position
  bias, judge errors and accuracy, verbosity, agreement) get a Wilson interval on the design-effect
  adjusted count, and differences of two such rates a cluster-robust t interval, both over tasks
  (:mod:`.intervals`); chosen by the coverage simulation of docs/protocol.md#coverage, where the
  percentile bootstrap below under-covers heterogeneous tasks. Below 20 tasks they are approximate.

* ``bootstrap-tasks``: case-level rates (LRS, flips, position bias, judge errors, verbosity, judge
  agreement) get a percentile bootstrap that resamples *tasks* with replacement, because the cases of
  one task share transcripts and are not independent. All metrics use the same resamples (one seeded
  ``rounds x n_tasks`` count matrix), so differences of two metrics get honest intervals too.
  A resample whose denominator is 0 is skipped; if every resample is skipped the interval is None.
* ``wilson``: transcript-level rates (satisfied-but-failed, success rate) are over distinct transcripts
  (task, agent, sample), which we treat as independent units, so they get Wilson score intervals.
* ``exact``: ledger sums (``total_cost``, role costs) are accounting figures of this run, not estimates
  of anything: ``low == high == value``. ``cost_per_success`` and ``judge_cost_share`` are properties of
  an agent configuration that vary with the task set like any rate, so they are ratio estimators
  (per-task cost over per-task successes, per-task judge cost over per-task cost) with the same task
  bootstrap (``bootstrap-tasks``); ledger cost on a task without case records is spread evenly.
* ``none``: no data (denominator 0) or unknown cost.

``n`` is always the denominator count. The LRS close-vs-distant test reports the difference with an
interval from the shared resamples and a one-sided bootstrap p-value for H0 "LRS(close) <= LRS(distant)":
the fraction of resampled differences that are <= 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ..records import CaseRecord, LedgerRecord
from ..records.labels import Label
from .costs import (
    COST_INCLUDES_RETRIES,
    CostSummary,
    RoleCost,
    cost_ratios,
    cost_summary,
    fixed_costs,
)
from .estimates import (
    Accumulator,
    Estimate,
    Key,
    Stat,
    exact_estimate,
    none_estimate,
    wilson,
)
from .human import HUMAN_METRICS, HumanFindings, human_findings
from .judge_metrics import (
    AgreementDetails,
    JudgeFindings,
    JudgeRules,
    agreement_details,
    judge_agreement,
    judge_rules_of,
)
from .judge_rules import PRIMARY, rank_moments
from .metric_table import METRICS, SUITE_METRICS, Metric
from .metric_tallies import (
    AGENT_METRICS,
    LENGTH_STYLE_WORDS,
    PAIR_METRICS,
    FlippedGroup,
    PairInfo,
    VerbosityDetails,
    case_rates,
    classify_pairs,
    flips,
    pair_gaps,
    pair_infos,
    transcript_rates,
)
from .resampling import ratio_rows, task_counts
from .suite_stats import GATE_NAMES, SuiteStats, metric_names

if TYPE_CHECKING:
    from ..records import FloatArray
    from .resampling import Counts

__all__ = [
    "COST_INCLUDES_RETRIES",
    "LENGTH_STYLE_WORDS",
    "METRICS",
    "PAIR_METRICS",
    "SUMMARY_METRICS",
    "AgreementDetails",
    "CostSummary",
    "Estimate",
    "FlippedGroup",
    "JudgeRules",
    "Metric",
    "PairInfo",
    "RoleCost",
    "SuiteMetrics",
    "VerbosityDetails",
    "classify_pairs",
    "compute_metrics",
    "metric_names",
    "pair_gaps",
    "wilson",
]


class _TermLike(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def args(self) -> tuple[str, ...]: ...


_HEADLINE = tuple(m.name for m in SUITE_METRICS if m.headline)
SUMMARY_METRICS = tuple(m.name for m in SUITE_METRICS if m.summary)
"""The metrics of the terminal summary's table, in the table's order."""


@dataclass(frozen=True)
class SuiteMetrics:
    """Every suite-level metric with details; ``lookup`` and ``difference`` serve gates (``MetricSource``)."""

    metrics: dict[str, Estimate]
    per_pair: dict[str, dict[str, Estimate]]
    per_agent: dict[str, dict[str, Estimate]]
    pairs: dict[str, PairInfo]
    flipped: list[FlippedGroup]
    lrs_close_minus_distant: Estimate
    p_value: float | None
    verbosity: VerbosityDetails
    agreement: AgreementDetails
    judge_rules: JudgeRules
    costs: CostSummary
    sat_but_failed_examples: list[tuple[str, str, int]]
    n_cases: int
    n_tasks: int
    expected_cases: int | None
    missing_cases: int | None
    close_threshold: float
    seed: int
    rounds: int
    _table: SuiteStats = field(repr=False, compare=False)
    human: HumanFindings | None = None  # --gauge-labels: the judge against people (None: no labels given)

    describe = GATE_NAMES

    def lookup(self, name: str, args: tuple[str, ...] = ()) -> Estimate:
        """The estimate of a metric by gate name and arguments; KeyError (listing names) if unknown."""
        if name in HUMAN_METRICS:
            if self.human is None:  # no labels given: no number (a gate says why: GateSource)
                return none_estimate(0)
            return self.human.lookup(name, tuple(args))
        return self._table.estimate(self._table.resolve(name, tuple(args)))

    def without_usage(self, roles: tuple[str, ...] = ()) -> int:
        """Calls of ``roles`` (empty: every role) whose response had no usage: their cost is unknown."""
        return sum(c.usage_missing for r, c in self.costs.per_role.items() if not roles or r in roles)

    def bootstrap_difference(
        self, a_name: str, a_args: tuple[str, ...], b_name: str, b_args: tuple[str, ...]
    ) -> Estimate:
        """``a - b`` for two task-resampled metrics, interval from the SAME resamples; n = min(n_a, n_b).

        Resamples where either side is undefined are skipped. Costs have no sampling distribution: their
        difference is exact.
        """
        ka, kb = self._table.resolve(a_name, tuple(a_args)), self._table.resolve(b_name, tuple(b_args))
        if (ka[0] == "fixed") != (kb[0] == "fixed"):
            raise KeyError(
                f"cannot subtract {b_name} from {a_name}: one is a ledger cost, the other a sampled rate"
            )
        if ka[0] == "fixed":
            ea, eb = self._table.estimate(ka), self._table.estimate(kb)
            n = min(ea.n, eb.n)
            return (
                none_estimate(n)
                if ea.value is None or eb.value is None
                else exact_estimate(ea.value - eb.value, n)
            )
        return self._table.difference(ka, kb)

    def drivers(self, name: str, args: tuple[str, ...] = ()) -> list[str]:
        """What drove a metric, for gate messages: lower-reward cases (lrs*), flipped groups (flip_rate),
        error cases (judge_error_rate), slot-A verdicts (position_bias), failed transcripts
        (success_rate), satisfied-but-failed transcripts, verbose reasons, longer-wins cases, labelled
        cases where the compared sources disagree (human labels); else []."""
        if name in HUMAN_METRICS:
            return [] if self.human is None else self.human.driver_cases(name, tuple(args))
        try:
            key = self._table.resolve(name, tuple(args))
        except KeyError:
            return []
        if key[0] == "lrs_close_minus_distant":
            key = ("lrs", "close")
        found = self._table.drivers
        if len(key) >= 3 and key[1] == "pairs":
            return sorted(d for pid in key[2:] for d in found.get((key[0], "pair", pid), []))
        return sorted(found.get(key, []))

    def difference(self, left: _TermLike, right: _TermLike) -> Estimate:
        """Gate ``MetricSource`` hook: ``left - right`` for two terms with ``name`` and ``args``."""
        return self.bootstrap_difference(left.name, tuple(left.args), right.name, tuple(right.args))

    def to_json(self) -> dict[str, Any]:
        """Everything reports need, as plain JSON."""
        return {
            "metrics": {k: v.to_json() for k, v in self.metrics.items()},
            "per_pair": {p: {k: v.to_json() for k, v in d.items()} for p, d in self.per_pair.items()},
            "per_agent": {a: {k: v.to_json() for k, v in d.items()} for a, d in self.per_agent.items()},
            "pairs": {p: i.to_json() for p, i in self.pairs.items()},
            "flipped": [f.to_json() for f in self.flipped],
            "lrs_close_minus_distant": self.lrs_close_minus_distant.to_json(),
            "p_value": self.p_value,
            "verbosity": self.verbosity.to_json(),
            "agreement": self.agreement.to_json(),
            "judge_rules": self.judge_rules.to_json(),
            "costs": self.costs.to_json(),
            "sat_but_failed_examples": [list(t) for t in self.sat_but_failed_examples],
            "n_cases": self.n_cases,
            "n_tasks": self.n_tasks,
            "expected_cases": self.expected_cases,
            "missing_cases": self.missing_cases,
            "close_threshold": self.close_threshold,
            "seed": self.seed,
            "rounds": self.rounds,
        }


# --------------------------------------------------------------------------------------------------
# Computation: the phases of metric_tallies.py, then the statistics and their shared resamples


def _statistics(acc: Accumulator, found: JudgeFindings) -> dict[Key, Stat]:
    """Every accumulated sum as a statistic, agreement ratios and kappas from the tables, and each judge's
    rank correlation with the rule rewards."""
    confusion = found.confusion
    stats: dict[Key, Stat] = {}
    for judge in found.judges:
        moments = rank_moments(found.points.get(judge, []), acc.n_tasks)
        stats[("judge_rank_corr", judge)] = Stat("corr", moments)
    for key, arr in acc.data.items():
        interval = "wilson" if key[0] in (*AGENT_METRICS, "user_sim_error_rate") else "bootstrap"
        stats[key] = Stat("ratio", arr, interval)
    diag = np.array([0, 4, 8])
    for kind, conf in confusion.items():
        stats[("judge_kappa", kind)] = Stat("kappa", conf)
        agree = np.stack([conf[:, diag].sum(axis=1), conf.sum(axis=1)], axis=1)
        stats[("judge_agreement", kind)] = Stat("ratio", agree)
    return stats


def _ratio_samples(stats: dict[Key, Stat], counts: Counts) -> dict[Key, FloatArray]:
    """Every ratio statistic in every resample, from one matrix product."""
    samples: dict[Key, FloatArray] = {}
    ratio_keys = [k for k, s in stats.items() if s.kind == "ratio"]
    if ratio_keys:
        stacked = np.concatenate([stats[k].per_task for k in ratio_keys], axis=1)  # (T, 2M)
        agg = counts @ stacked
        rates = ratio_rows(agg[:, 0::2], agg[:, 1::2])
        for i, rk in enumerate(ratio_keys):
            samples[rk] = np.ascontiguousarray(rates[:, i])
    return samples


def compute_metrics(
    records: Sequence[CaseRecord],
    *,
    close_threshold: float = 0.1,
    seed: int = 0,
    rounds: int = 2000,
    ledger: Sequence[LedgerRecord] = (),
    expected_cases: int | None = None,
    labels: Sequence[Label] | None = None,
    labels_set_aside: int = 0,
) -> SuiteMetrics:
    """All suite metrics (docs/protocol.md#metrics) from case records (and the ledger for costs);
    deterministic in seed. ``labels``: the suite's human labels (``--gauge-labels``; None: not given)."""
    acc = Accumulator(sorted({r.task_id for r in records}))
    pairs = pair_infos(records, close_threshold)
    verbosity = case_rates(acc, records, pairs)
    flipped = flips(acc, records)
    found = transcript_rates(acc, records)
    found_judges = judge_agreement(acc, records, {pid: p.pair_class for pid, p in pairs.items()})
    judges = [j for j in found_judges.judges if j != PRIMARY]  # the judge models named in judgments
    confusion = found_judges.confusion
    stats = _statistics(acc, found_judges)
    counts = task_counts(acc.n_tasks, rounds, seed)  # held (shared) while the metrics are computed
    costs = cost_summary(ledger, found.successes)
    stats.update(cost_ratios(acc, ledger, acc.data[("success_rate",)][:, 0], costs))
    fixed = fixed_costs(costs, len(ledger))
    fixed["cost_per_success"] = none_estimate(costs.successes)
    fixed["judge_cost_share"] = none_estimate(costs.per_role["judge"].attempts)
    table = SuiteStats(
        stats=stats,
        n_tasks=acc.n_tasks,
        rounds=rounds,
        fixed=fixed,
        drivers=acc.drivers,
        pairs=pairs,
        agents=found.agents,
        judges=judges,
        main_judge=found_judges.main,
        samples=_ratio_samples(stats, counts),
        seed=seed,
    )
    return SuiteMetrics(
        metrics={name: table.estimate(table.resolve(name, ())) for name in _HEADLINE},
        per_pair={pid: {m: table.estimate((m, "pair", pid)) for m in PAIR_METRICS} for pid in pairs},
        per_agent={a: {m: table.estimate((m, "agent", a)) for m in AGENT_METRICS} for a in found.agents},
        pairs=pairs,
        flipped=flipped,
        lrs_close_minus_distant=table.estimate(("lrs_close_minus_distant",)),
        p_value=table.close_minus_distant_p(),
        verbosity=verbosity,
        agreement=agreement_details(table, confusion, judges),
        judge_rules=judge_rules_of(table, found_judges, ledger),
        costs=costs,
        sat_but_failed_examples=found.sat_failed,
        n_cases=len(records),
        n_tasks=acc.n_tasks,
        expected_cases=expected_cases,
        missing_cases=(expected_cases - len(records)) if expected_cases is not None else None,
        close_threshold=close_threshold,
        seed=seed,
        rounds=rounds,
        _table=table,
        human=human_findings(records, labels, set_aside=labels_set_aside) if labels is not None else None,
    )
