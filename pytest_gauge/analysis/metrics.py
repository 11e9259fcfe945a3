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

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ..records import CaseRecord, LedgerRecord
from ..records.labels import Label
from ..run.user_audit import USER_AUDIT_KINDS
from .costs import (
    COST_INCLUDES_RETRIES,
    COST_RATIOS,
    CostSummary,
    RoleCost,
    cost_ratios,
    cost_summary,
    fixed_costs,
)
from .estimates import (
    PAIR_CLASSES,
    Accumulator,
    Estimate,
    Key,
    Stat,
    chosen_left,
    clustered,
    exact_estimate,
    none_estimate,
    sum_stats,
    wilson,
)
from .human import HUMAN_METRICS, HumanFindings, human_findings
from .intervals import Z95, cluster_difference_se, cluster_wilson, cluster_wilson_df
from .judge_metrics import (
    AGREEMENT_KINDS,
    AgreementDetails,
    JudgeFindings,
    JudgeRules,
    agreement_details,
    judge_agreement,
    judge_rules_of,
)
from .judge_rules import PANEL, PRIMARY, rank_moments
from .metric_table import METRICS, SUITE_METRICS, Metric
from .resampling import percentile_interval, ratio_rows, task_counts
from .sequential import critical_quantile, t_upper_tail
from .skewed import cost_interval_note, skewed_ratio_interval

if TYPE_CHECKING:
    from ..records import FloatArray

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


LENGTH_STYLE_WORDS: tuple[str, ...] = (
    "more detailed",
    "more detail",
    "longer",
    "more thorough",
    "more comprehensive",
    "better tone",
    "nicer tone",
    "more polite",
    "更详细",
    "更长",
    "语气更好",
    "更全面",
)
"""Length/style words in a judge reason that signal verbosity bias (matched case-insensitively)."""


# --------------------------------------------------------------------------------------------------
# Small value types


@dataclass(frozen=True)
class PairInfo:
    """A declared pair: its agents, the gap between their mean rule rewards, and its class."""

    pair_id: str
    agent_left: str
    agent_right: str
    gap: float
    pair_class: str  # "close" | "distant"

    def to_json(self) -> dict[str, Any]:
        """Plain JSON form."""
        return {
            "pair_id": self.pair_id,
            "agent_left": self.agent_left,
            "agent_right": self.agent_right,
            "gap": self.gap,
            "class": self.pair_class,
        }


@dataclass(frozen=True)
class FlippedGroup:
    """A (task, pair, sample) group whose preferred agent differs between the two orders (None = tie)."""

    task_id: str
    pair_id: str
    sample: int
    preferred_ab: str | None  # preferred agent when A=left
    preferred_ba: str | None  # preferred agent when A=right

    def label(self) -> str:
        """Short text for reports and gate drivers, e.g. ``t3/p1#0: agent_x vs tie``."""
        ab = self.preferred_ab or "tie"
        ba = self.preferred_ba or "tie"
        return f"{self.task_id}/{self.pair_id}#{self.sample}: {ab} vs {ba}"

    def to_json(self) -> dict[str, Any]:
        """Plain JSON form."""
        return {
            "task_id": self.task_id,
            "pair_id": self.pair_id,
            "sample": self.sample,
            "preferred_ab": self.preferred_ab,
            "preferred_ba": self.preferred_ba,
        }


@dataclass(frozen=True)
class VerbosityDetails:
    """How often each length/style word occurs in non-error judge reasons, and the cases using any."""

    word_counts: dict[str, int]
    case_ids: list[str]
    reasons_checked: int
    longer_wins: int
    longer_wins_n: int

    def to_json(self) -> dict[str, Any]:
        """Plain JSON form."""
        return {
            "word_counts": dict(self.word_counts),
            "case_ids": list(self.case_ids),
            "reasons_checked": self.reasons_checked,
            "longer_wins": self.longer_wins,
            "longer_wins_n": self.longer_wins_n,
        }


class _TermLike(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def args(self) -> tuple[str, ...]: ...


# --------------------------------------------------------------------------------------------------
# Wilson and pair classification


def pair_gaps(records: Sequence[CaseRecord]) -> dict[tuple[str, str], float]:
    """|mean rule reward of left - right agent| per declared pair, over its distinct (task, sample)."""
    seen: dict[tuple[str, str], dict[tuple[str, int], tuple[float, float]]] = {}
    for r in records:
        per = seen.setdefault((r.agent_left, r.agent_right), {})
        per.setdefault((r.task_id, r.sample), (r.reward_left, r.reward_right))
    gaps: dict[tuple[str, str], float] = {}
    for pair, per in seen.items():
        left = math.fsum(v[0] for v in per.values()) / len(per)
        right = math.fsum(v[1] for v in per.values()) / len(per)
        gaps[pair] = abs(left - right)
    return gaps


def classify_pairs(records: Sequence[CaseRecord], close_threshold: float) -> dict[tuple[str, str], str]:
    """``"close"`` if a declared pair's reward gap is <= ``close_threshold``, else ``"distant"``."""
    return {p: ("close" if g <= close_threshold else "distant") for p, g in pair_gaps(records).items()}


# --------------------------------------------------------------------------------------------------
# Kappa over resampled agreement tables


# --------------------------------------------------------------------------------------------------
# Metric names for gates


_NAMES: tuple[tuple[str, str], ...] = tuple((m.name, m.description) for m in SUITE_METRICS)


def metric_names() -> list[str]:
    """The metric names gates may use (arguments are described in :data:`SuiteMetrics.describe`)."""
    return [n for n, _ in _NAMES]


def _names_help() -> str:
    return "known metrics: " + "; ".join(f"{n} ({d})" for n, d in _NAMES)


# --------------------------------------------------------------------------------------------------
# The result


PAIR_METRICS = tuple(m.name for m in SUITE_METRICS if m.per == "pair")
"""The metrics also estimated per pair (``lrs(agent_x, agent_y)``...), in the table's order."""
_AGENT_METRICS = tuple(m.name for m in SUITE_METRICS if m.per == "agent")
_HEADLINE = tuple(m.name for m in SUITE_METRICS if m.headline)
SUMMARY_METRICS = tuple(m.name for m in SUITE_METRICS if m.summary)
"""The metrics of the terminal summary's table, in the table's order."""


@dataclass
class _Statistics:
    """The bootstrappable statistics of one suite and their shared resamples, behind gate names.

    Built once by :func:`compute_metrics`; only ``samples`` grows afterwards (a cache of resampled
    values, filled on first use for statistics summed over several pairs).
    """

    stats: dict[Key, Stat]
    counts: FloatArray
    fixed: dict[str, Estimate]
    drivers: dict[Key, list[str]]
    pairs: dict[str, PairInfo]
    agents: list[str]
    judges: list[str]
    samples: dict[Key, FloatArray]
    main_judge: str = PRIMARY
    seed: int = 0

    def _pair_ids(self, a: str, b: str) -> list[str]:
        found = [pid for pid, p in self.pairs.items() if {p.agent_left, p.agent_right} == {a, b} and (a != b)]
        if not found:
            declared = ", ".join(f"({p.agent_left}, {p.agent_right})" for p in self.pairs.values()) or "none"
            raise KeyError(f"no declared pair of {a!r} and {b!r}; declared pairs: {declared}")
        return found

    def _resolve_pairable(self, name: str, args: tuple[str, ...]) -> Key:
        if not args:
            return (name,)
        if name == "lrs" and len(args) == 1:
            if args[0] not in PAIR_CLASSES:
                raise KeyError(f"lrs({args[0]}): one argument must be 'close' or 'distant'")
            return ("lrs", args[0])
        if len(args) == 2:
            pids = self._pair_ids(*args)
            return (name, "pairs", *sorted(pids))
        raise KeyError(f"{name} takes no argument or two agents, got {len(args)}")

    def _resolve_agent(self, name: str, args: tuple[str, ...]) -> Key:
        if not args:
            return (name,)
        if len(args) == 1:
            if (name, "agent", args[0]) not in self.stats:
                known = ", ".join(sorted(self.agents)) or "none"
                raise KeyError(f"{name}({args[0]}): unknown agent; agents: {known}")
            return (name, "agent", args[0])
        raise KeyError(f"{name} takes no argument or one agent")

    def _resolve_judge(self, name: str, args: tuple[str, ...]) -> Key:
        if name in ("judge_agreement", "judge_kappa"):
            kind = args[0] if args else "all"
            if len(args) > 1 or kind not in AGREEMENT_KINDS:
                raise KeyError(f"{name} takes no argument, 'repeats' or 'judges'")
            return (name, kind)
        key: Key
        if name == "judge_rank_corr":
            if len(args) > 1:
                raise KeyError("judge_rank_corr takes no argument or a judge model")
            key = ("judge_rank_corr", args[0] if args else self.main_judge)
        elif not args or (len(args) == 1 and args[0] in PAIR_CLASSES):
            key = ("judge_accuracy", PRIMARY, args[0] if args else "all")
        elif len(args) in (1, 2) and (len(args) == 1 or args[1] in PAIR_CLASSES):
            key = ("judge_accuracy", args[0], args[1] if len(args) == 2 else "all")
        else:
            raise KeyError(f"{name} takes (), (close|distant), (judge|panel) or (judge|panel, close|distant)")
        if key not in self.stats:
            known = ", ".join([*sorted(self.judges), PANEL]) if self.judges else "none"
            raise KeyError(f"{name}({', '.join(args)}): unknown judge or no data; judges: {known}")
        return key

    def resolve(self, name: str, args: tuple[str, ...]) -> Key:
        """Map a gate term to the internal key of a statistic (KeyError naming the known metrics)."""
        args = tuple(a.strip() for a in args)
        if name in ("lrs_close", "lrs_distant") and not args:
            return ("lrs", name.split("_")[1])
        if name in PAIR_METRICS:
            return self._resolve_pairable(name, args)
        if name in _AGENT_METRICS:
            return self._resolve_agent(name, args)
        if name in ("verbosity_word_rate", "longer_wins_rate") and not args:
            return (name,)
        if name == "user_sim_error_rate":
            if not args:
                return (name,)
            if len(args) == 1 and args[0] in USER_AUDIT_KINDS:
                return (name, "kind", args[0])
            raise KeyError(f"user_sim_error_rate takes no argument or one of {', '.join(USER_AUDIT_KINDS)}")
        if name in ("judge_agreement", "judge_kappa", "judge_accuracy", "judge_rank_corr"):
            return self._resolve_judge(name, args)
        if name == "lrs_close_minus_distant" and not args:
            return ("lrs_close_minus_distant",)
        if name in COST_RATIOS and not args and (name,) in self.stats:
            return (name,)
        if name in self.fixed and not args:
            return ("fixed", name)
        if name in dict(_NAMES):
            raise KeyError(f"{name}: unsupported arguments {args!r}; {_names_help()}")
        raise KeyError(f"unknown metric {name!r}; {_names_help()}")

    def stat(self, key: Key) -> Stat:
        """The statistic of ``key``; a ``pairs`` key sums the per-pair statistics."""
        if key in self.stats:
            return self.stats[key]
        if len(key) >= 3 and key[1] == "pairs":
            return sum_stats([self.stats[(key[0], "pair", pid)] for pid in key[2:]])
        raise KeyError(f"no statistic {key!r}")

    def boot(self, key: Key) -> FloatArray:
        """The statistic's value in every resample (NaN where undefined)."""
        if key == ("lrs_close_minus_distant",):
            return self.diff_samples(("lrs", "close"), ("lrs", "distant"))
        if key not in self.samples:
            self.samples[key] = self.stat(key).samples(self.counts)
        return self.samples[key]

    def diff_samples(self, ka: Key, kb: Key) -> FloatArray:
        """``a - b`` in every resample."""
        return self.boot(ka) - self.boot(kb)

    def difference(self, ka: Key, kb: Key) -> Estimate:
        """``a - b``; n = min(n_a, n_b). Two case rates: the cluster-robust t interval over their shared
        tasks (docs/protocol.md#coverage); otherwise the interval from the shared resamples."""
        ea, eb = self.estimate(ka), self.estimate(kb)
        n = min(ea.n, eb.n)
        if ea.value is None or eb.value is None:
            return none_estimate(n)
        sa, sb = self.stat(ka), self.stat(kb)
        if ka == kb:  # a rate minus itself: exactly 0 whatever the tasks
            return Estimate(0.0, n, 0.0, 0.0, "cluster-t" if clustered(sa) else "bootstrap-tasks")
        if clustered(sa) and clustered(sb):
            d, se, df = _cluster_t(sa, sb)
            half = critical_quantile(Z95, df) * se
            low_c, high_c = max(d - half, -1.0), min(d + half, 1.0)
            counts = (sa.per_task[:, 0], sa.per_task[:, 1], sb.per_task[:, 0], sb.per_task[:, 1])
            return Estimate(ea.value - eb.value, n, low_c, high_c, "cluster-t", df, counts)
        low, high = _around(ea.value - eb.value, *percentile_interval(self.diff_samples(ka, kb)))
        return Estimate(ea.value - eb.value, n, low, high, "bootstrap-tasks")

    def estimate(self, key: Key) -> Estimate:
        """Point value, count and interval (Wilson, task bootstrap or exact) of one statistic."""
        if key[0] == "fixed":
            return self.fixed[key[1]]
        if key[0] == "lrs_close_minus_distant":
            return self.difference(("lrs", "close"), ("lrs", "distant"))
        st = self.stat(key)
        value, n = st.point()
        if value is None:
            return none_estimate(n)
        if _agent_over_tasks(key, st):  # several samples per task: the transcripts are clustered
            k, m = st.per_task[:, 0], st.per_task[:, 1]
            _, low_c, high_c = cluster_wilson(k, m)
            df = float(cluster_wilson_df(k, m))
            return Estimate(value, n, float(low_c), float(high_c), "cluster-wilson", df, (k, m))
        if st.interval == "wilson":
            tot = st.per_task.sum(axis=0)
            low, high = wilson(round(float(tot[0])), n)
            return Estimate(value, n, low, high, "wilson")
        if clustered(st) and np.sum(st.per_task[:, 1] > 0) > 1:
            k, m = st.per_task[:, 0], st.per_task[:, 1]
            _, low_c, high_c = cluster_wilson(k, m)
            df = float(cluster_wilson_df(k, m))
            return Estimate(value, n, float(low_c), float(high_c), "cluster-wilson", df, (k, m))
        if key == ("cost_per_success",):
            return _cost_ratio_estimate(st, value, n, self.counts, self.seed)
        low_b, high_b = _around(value, *percentile_interval(self.boot(key)))
        return Estimate(value, n, low_b, high_b, "bootstrap-tasks")

    def close_minus_distant_p(self) -> float | None:
        """One-sided p-value of H0 "LRS(close) <= LRS(distant)" from the cluster-t statistic of the
        difference's own interval, ``P(T_df > d / se)``: the interval's lower bound is above 0 exactly
        when p < 0.025 (None without both classes)."""
        close, distant = ("lrs", "close"), ("lrs", "distant")
        if None in (self.estimate(close).value, self.estimate(distant).value):
            return None
        d, se, df = _cluster_t(self.stat(close), self.stat(distant))
        if se <= 0:
            return 0.0 if d > 0 else 1.0
        return t_upper_tail(d / se, df)


def _around(value: float, low: float | None, high: float | None) -> tuple[float | None, float | None]:
    """A percentile interval widened to hold its own point value: the resampled values of a skewed or
    discrete statistic can all lie on one side of it, and a report must never print a value outside its
    interval."""
    if low is None or high is None:
        return low, high
    return min(low, value), max(high, value)


def _cost_ratio_estimate(st: Stat, value: float, n: int, counts: FloatArray, seed: int) -> Estimate:
    """Cost per success with the skewed-bill interval over tasks (:mod:`.skewed`); no interval, with the
    reason, where the suite cannot support one."""
    cost, wins = st.per_task[:, 0], st.per_task[:, 1]
    note = cost_interval_note(cost.shape[0], int(np.sum(cost > 0)))
    if note is not None:
        return Estimate(value, n, None, None, "skewed-ratio", note=note)
    low, high = skewed_ratio_interval(cost, wins, counts, seed)
    if not (np.isfinite(low[0]) and np.isfinite(high[0])):
        note = "no resample with both a cost and a success"
        return Estimate(value, n, None, None, "skewed-ratio", note=note)
    return Estimate(value, n, float(low[0]), float(high[0]), "skewed-ratio")


def _cluster_t(sa: Stat, sb: Stat) -> tuple[float, float, float]:
    """(difference, cluster-robust standard error, df) of two case rates over their shared tasks."""
    d, se, df = cluster_difference_se(
        sa.per_task[:, 0], sa.per_task[:, 1], sb.per_task[:, 0], sb.per_task[:, 1]
    )
    return float(d), float(se), float(df)


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
    _table: _Statistics = field(repr=False, compare=False)
    human: HumanFindings | None = None  # --gauge-labels: the judge against people (None: no labels given)

    describe = _NAMES

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
# Computation: one phase per family of statistics, each adding per-task sums to one accumulator


def _pair_infos(records: Sequence[CaseRecord], close_threshold: float) -> dict[str, PairInfo]:
    """Every declared pair seen in the records with its gap and class, sorted by pair id."""
    classes = classify_pairs(records, close_threshold)
    gaps = pair_gaps(records)
    pairs: dict[str, PairInfo] = {}
    for r in records:
        if r.pair_id not in pairs:
            lr = (r.agent_left, r.agent_right)
            pairs[r.pair_id] = PairInfo(r.pair_id, lr[0], lr[1], gaps[lr], classes[lr])
    return dict(sorted(pairs.items()))


def _verdict_rates(acc: Accumulator, r: CaseRecord, pair_class: str) -> None:
    """Position bias, LRS and longer-wins of one non-error, non-tie verdict."""
    t = acc.t_index[r.task_id]
    is_a = float(r.judge_choice == "A")
    acc.add(("position_bias",), t, is_a)
    acc.add(("position_bias", "pair", r.pair_id), t, is_a)
    if is_a:  # the numerator: verdicts for slot A
        acc.drive([("position_bias",), ("position_bias", "pair", r.pair_id)], r.case_id)
    if r.reward_left != r.reward_right:
        picked_low = float(r.lower_reward_selected is True)
        for key in (("lrs",), ("lrs", pair_class), ("lrs", "pair", r.pair_id)):
            acc.add(key, t, picked_low)
            if picked_low:
                acc.drive([key], r.case_id)
        for cls in ("all", pair_class, f"category:{r.category}"):
            acc.add(("judge_accuracy", PRIMARY, cls), t, 1.0 - picked_low)
            if picked_low:
                acc.drive([("judge_accuracy", PRIMARY, cls)], r.case_id)
    elif r.chars_left != r.chars_right:
        left = chosen_left(r, r.judge_choice)
        longer_left = r.chars_left > r.chars_right
        acc.add(("longer_wins_rate",), t, float(left == longer_left))
        if left == longer_left:
            acc.drive([("longer_wins_rate",)], r.case_id)


def _case_rates(
    acc: Accumulator, records: Sequence[CaseRecord], pairs: dict[str, PairInfo]
) -> VerbosityDetails:
    """Case-level rates: judge errors, verbosity words, then position bias, LRS and longer-wins."""
    for pid in pairs:
        for m in PAIR_METRICS:
            acc.ensure((m, "pair", pid))
    for key in [*((m,) for m in PAIR_METRICS), ("lrs", "close"), ("lrs", "distant")]:
        acc.ensure(key)
    for cls in ("all", *PAIR_CLASSES, *sorted({f"category:{r.category}" for r in records})):
        acc.ensure(("judge_accuracy", PRIMARY, cls))
    acc.ensure(("verbosity_word_rate",))
    acc.ensure(("longer_wins_rate",))
    word_counts = dict.fromkeys(LENGTH_STYLE_WORDS, 0)
    verbose_cases: list[str] = []
    reasons_checked = 0
    for r in records:
        t = acc.t_index[r.task_id]
        is_error = r.judge_choice == "error"
        acc.add(("judge_error_rate",), t, float(is_error))
        if is_error:
            acc.drive([("judge_error_rate",), ("judge_error_rate", "pair", r.pair_id)], r.case_id)
        acc.add(("judge_error_rate", "pair", r.pair_id), t, float(is_error))
        if is_error:
            continue
        reasons_checked += 1
        reason = r.judge_reason.casefold()
        hits = [w for w in LENGTH_STYLE_WORDS if w.casefold() in reason]
        for w in hits:
            word_counts[w] += 1
        if hits:
            verbose_cases.append(r.case_id)
            acc.drive([("verbosity_word_rate",)], r.case_id)
        acc.add(("verbosity_word_rate",), t, float(bool(hits)))
        if r.judge_choice != "tie":
            _verdict_rates(acc, r, pairs[r.pair_id].pair_class)
    return VerbosityDetails(
        word_counts=word_counts,
        case_ids=sorted(verbose_cases),
        reasons_checked=reasons_checked,
        longer_wins=acc.total(("longer_wins_rate",), 0),
        longer_wins_n=acc.total(("longer_wins_rate",), 1),
    )


def _flips(acc: Accumulator, records: Sequence[CaseRecord]) -> list[FlippedGroup]:
    """Position flips: (task, pair, sample) groups judged in both orders, neither an error."""
    groups: dict[tuple[str, str, int], dict[str, CaseRecord]] = {}
    for r in records:
        groups.setdefault((r.task_id, r.pair_id, r.sample), {}).setdefault(r.blind_order, r)
    flipped: list[FlippedGroup] = []
    for (task_id, pid, sample), by_order in sorted(groups.items()):
        ab, ba = by_order.get("A=left"), by_order.get("A=right")
        if ab is None or ba is None or "error" in (ab.judge_choice, ba.judge_choice):
            continue
        flip = ab.preferred_agent != ba.preferred_agent
        t = acc.t_index[task_id]
        acc.add(("flip_rate",), t, float(flip))
        acc.add(("flip_rate", "pair", pid), t, float(flip))
        if flip:
            group = FlippedGroup(task_id, pid, sample, ab.preferred_agent, ba.preferred_agent)
            flipped.append(group)
            acc.drive([("flip_rate",), ("flip_rate", "pair", pid)], group.label())
    return flipped


@dataclass(frozen=True)
class _TranscriptRates:
    """What the transcript phase found: the agents, satisfied-but-failed transcripts, successes."""

    agents: list[str]
    sat_failed: list[tuple[str, str, int]]
    successes: int


def _empty_turns(acc: Accumulator, records: Sequence[CaseRecord]) -> None:
    """``empty_turn_rate``: distinct transcripts with at least one empty turn (a small model's ``""``)."""
    empty: dict[tuple[str, str, int], int] = {}
    for r in records:
        empty.setdefault((r.task_id, r.agent_left, r.sample), r.empty_turns_left)
        empty.setdefault((r.task_id, r.agent_right, r.sample), r.empty_turns_right)
    for (task_id, agent, sample), count in sorted(empty.items()):
        keys: list[Key] = [("empty_turn_rate",), ("empty_turn_rate", "agent", agent)]
        if count:
            acc.drive(keys, f"{task_id}/{agent}#{sample}")
        for key in keys:
            acc.add(key, acc.t_index[task_id], float(count > 0))


def _user_audit(acc: Accumulator, records: Sequence[CaseRecord]) -> None:
    """``user_sim_error_rate`` and per kind: distinct transcripts whose simulated user erred
    (docs/protocol.md#user-audit)."""
    flags: dict[tuple[str, str, int], list[str]] = {}
    for r in records:
        flags.setdefault((r.task_id, r.agent_left, r.sample), r.user_flags_left)
        flags.setdefault((r.task_id, r.agent_right, r.sample), r.user_flags_right)
    acc.ensure(("user_sim_error_rate",))
    for kind in USER_AUDIT_KINDS:
        acc.ensure(("user_sim_error_rate", "kind", kind))
    for (task_id, agent, sample), kinds in sorted(flags.items()):
        t = acc.t_index[task_id]
        acc.add(("user_sim_error_rate",), t, float(bool(kinds)))
        if kinds:
            acc.drive([("user_sim_error_rate",)], f"{task_id}/{agent}#{sample}: {', '.join(kinds)}")
        for kind in USER_AUDIT_KINDS:
            acc.add(("user_sim_error_rate", "kind", kind), t, float(kind in kinds))
            if kind in kinds:
                acc.drive([("user_sim_error_rate", "kind", kind)], f"{task_id}/{agent}#{sample}")


def _agent_over_tasks(key: Key, st: Stat) -> bool:
    """``success_rate(agent)`` with several samples on some task: its estimand is the agent's success rate
    over the suite's tasks (successes / transcripts, the mean of the task rates with equal samples), and
    its interval is clustered over tasks; Wilson over transcripts covered it 77-91%."""
    if key[0] != "success_rate" or len(key) != 3 or st.interval != "wilson":
        return False
    counts = st.per_task[:, 1]
    return bool(np.max(counts, initial=0) > 1 and np.sum(counts > 0) > 1)


def _transcript_rates(acc: Accumulator, records: Sequence[CaseRecord]) -> _TranscriptRates:
    """Success and satisfied-but-failed rates over distinct (task, agent, sample) transcripts."""
    transcripts: dict[tuple[str, str, int], tuple[bool, bool | None]] = {}
    for r in records:
        transcripts.setdefault((r.task_id, r.agent_left, r.sample), (r.task_success_left, r.user_sat_left))
        transcripts.setdefault((r.task_id, r.agent_right, r.sample), (r.task_success_right, r.user_sat_right))
    agents = sorted({a for _, a, _ in transcripts})
    for name in _AGENT_METRICS:
        acc.ensure((name,))
        for a in agents:
            acc.ensure((name, "agent", a))
    _empty_turns(acc, records)
    _user_audit(acc, records)
    sat_failed: list[tuple[str, str, int]] = []
    successes = 0
    for (task_id, agent, sample), (success, sat) in sorted(transcripts.items()):
        t = acc.t_index[task_id]
        successes += int(success)
        for key in (("success_rate",), ("success_rate", "agent", agent)):
            acc.add(key, t, float(success))
        if not success:  # what pulls a success rate down: the failed transcripts
            acc.drive(
                [("success_rate",), ("success_rate", "agent", agent)], f"{task_id}/{agent}#{sample} failed"
            )
        if sat is None:
            continue
        bad = bool(sat) and not success
        keys: list[Key] = [("sat_but_failed_rate",), ("sat_but_failed_rate", "agent", agent)]
        if bad:
            sat_failed.append((task_id, agent, sample))
            acc.drive(keys, f"{task_id}/{agent}#{sample}")
        for bad_key in keys:
            acc.add(bad_key, t, float(bad))
    return _TranscriptRates(agents, sat_failed, successes)


def _statistics(acc: Accumulator, found: JudgeFindings) -> dict[Key, Stat]:
    """Every accumulated sum as a statistic, agreement ratios and kappas from the tables, and each judge's
    rank correlation with the rule rewards."""
    confusion = found.confusion
    stats: dict[Key, Stat] = {}
    for judge in found.judges:
        moments = rank_moments(found.points.get(judge, []), acc.n_tasks)
        stats[("judge_rank_corr", judge)] = Stat("corr", moments)
    for key, arr in acc.data.items():
        interval = "wilson" if key[0] in (*_AGENT_METRICS, "user_sim_error_rate") else "bootstrap"
        stats[key] = Stat("ratio", arr, interval)
    diag = np.array([0, 4, 8])
    for kind, conf in confusion.items():
        stats[("judge_kappa", kind)] = Stat("kappa", conf)
        agree = np.stack([conf[:, diag].sum(axis=1), conf.sum(axis=1)], axis=1)
        stats[("judge_agreement", kind)] = Stat("ratio", agree)
    return stats


def _ratio_samples(stats: dict[Key, Stat], counts: FloatArray) -> dict[Key, FloatArray]:
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
    pairs = _pair_infos(records, close_threshold)
    verbosity = _case_rates(acc, records, pairs)
    flipped = _flips(acc, records)
    found = _transcript_rates(acc, records)
    found_judges = judge_agreement(acc, records, {pid: p.pair_class for pid, p in pairs.items()})
    judges = [j for j in found_judges.judges if j != PRIMARY]  # the judge models named in judgments
    confusion = found_judges.confusion
    stats = _statistics(acc, found_judges)
    counts = task_counts(acc.n_tasks, rounds, seed)  # shared with the mean rewards' (same draws)
    costs = cost_summary(ledger, found.successes)
    stats.update(cost_ratios(acc, ledger, acc.data[("success_rate",)][:, 0], costs))
    fixed = fixed_costs(costs, len(ledger))
    fixed["cost_per_success"] = none_estimate(costs.successes)
    fixed["judge_cost_share"] = none_estimate(costs.per_role["judge"].attempts)
    table = _Statistics(
        stats=stats,
        counts=counts,
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
        per_agent={a: {m: table.estimate((m, "agent", a)) for m in _AGENT_METRICS} for a in found.agents},
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
