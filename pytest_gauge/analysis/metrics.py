"""Suite-level statistics over judged cases, each with its count and 95% interval (docs/protocol.md#metrics).

Interval methods (the choice is part of the result, see :attr:`Estimate.method`):

* ``cluster-wilson`` / ``cluster-t`` (issue 20): case-level rates of 0/1 outcomes (LRS, flips, position
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

from ..gateway.ledger import ledger_totals
from ..records import CaseRecord, Judgment, LedgerRecord
from .intervals import Z95, cluster_difference, cluster_wilson, satterthwaite_df
from .judge_rules import (
    NON_INFERIORITY,
    PANEL,
    PRIMARY,
    CalibrationBin,
    CheaperJudge,
    RewardPoint,
    calibration,
    correlation_rows,
    panel_choice,
    rank_moments,
    reward_points,
)
from .resampling import percentile_interval, ratio_rows, resample_counts

if TYPE_CHECKING:
    from ..records import FloatArray

__all__ = [
    "COST_INCLUDES_RETRIES",
    "LENGTH_STYLE_WORDS",
    "AgreementDetails",
    "CostSummary",
    "Estimate",
    "FlippedGroup",
    "JudgeRules",
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

COST_INCLUDES_RETRIES = True
"""Costs sum every ledger attempt: retries, failed requests that reported usage, and cache hits (nominal)."""

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

ROLES: tuple[str, ...] = ("agent", "user_sim", "judge")
_CATS = {"A": 0, "B": 1, "tie": 2}
_AGREEMENT_KINDS = ("all", "repeats", "judges")
_CLASSES = ("close", "distant")


# --------------------------------------------------------------------------------------------------
# Small value types


@dataclass(frozen=True)
class Estimate:
    """A rate or quantity with its count ``n`` (the denominator) and 95% interval ``low``..``high``."""

    value: float | None
    n: int
    low: float | None
    high: float | None
    method: str
    df: float | None = field(default=None, compare=False)  # a t interval's degrees of freedom (not in JSON)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON form: value, n, low, high and the interval method."""
        return {"value": self.value, "n": self.n, "low": self.low, "high": self.high, "method": self.method}


def _none(n: int = 0) -> Estimate:
    return Estimate(None, n, None, None, "none")


def _exact(value: float | None, n: int) -> Estimate:
    return Estimate(value, n, value, value, "exact") if value is not None else _none(n)


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


@dataclass(frozen=True)
class AgreementDetails:
    """Judge agreement from ``CaseRecord.judgments``: observed agreement and Cohen's kappa on A/B/tie.

    ``repeats`` pairs every two non-error repeats of one judge on a case (earlier repeat as rater 1);
    ``judges`` pairs the lowest-numbered repeat of two different judges (alphabetically first judge as
    rater 1), both non-error; ``all`` pools both. ``confusion[kind]`` is the 3x3 table (rows rater 1,
    columns rater 2, order A, B, tie). ``accuracy[judge][cls]`` is the share of that judge's non-error,
    non-tie verdicts on unequal-reward cases that chose the higher rule reward (1 - LRS), cls in
    all/close/distant.
    """

    agreement: dict[str, Estimate]
    kappa: dict[str, Estimate]
    confusion: dict[str, list[list[int]]]
    accuracy: dict[str, dict[str, Estimate]]

    def to_json(self) -> dict[str, Any]:
        """Plain JSON form."""
        return {
            "agreement": {k: v.to_json() for k, v in self.agreement.items()},
            "kappa": {k: v.to_json() for k, v in self.kappa.items()},
            "confusion": {k: [list(r) for r in v] for k, v in self.confusion.items()},
            "accuracy": {j: {c: e.to_json() for c, e in d.items()} for j, d in self.accuracy.items()},
        }


@dataclass(frozen=True)
class JudgeRules:
    """The judge against the rule rewards (docs/protocol.md#judge-accuracy).

    ``accuracy[who][cls]``: ``who`` is ``main`` (the case's main verdict), a judge model, or ``panel``
    (majority of the models' first verdicts); ``cls`` is all, close, distant or ``category:<name>``.
    ``rank_corr[model]``: Spearman's rho between the model's rewards and the rule rewards of the same
    sides. ``calibration[model]``: judge reward bins against their mean rule reward. ``cost_per_call``
    per judge model (None: unpriced). ``cheaper``: a cheaper panel model as accurate as the main one.
    """

    main: str
    accuracy: dict[str, dict[str, Estimate]]
    rank_corr: dict[str, Estimate]
    calibration: dict[str, list[CalibrationBin]]
    cost_per_call: dict[str, float | None]
    cheaper: CheaperJudge | None

    def to_json(self) -> dict[str, Any]:
        """Plain JSON form."""
        return {
            "main": self.main,
            "accuracy": {j: {c: e.to_json() for c, e in d.items()} for j, d in self.accuracy.items()},
            "rank_corr": {j: e.to_json() for j, e in self.rank_corr.items()},
            "calibration": {j: [b.to_json() for b in bins] for j, bins in self.calibration.items()},
            "cost_per_call": dict(self.cost_per_call),
            "cheaper": None if self.cheaper is None else self.cheaper.to_json(),
            "non_inferiority": NON_INFERIORITY,
        }


@dataclass(frozen=True)
class RoleCost:
    """Ledger totals of one role. ``cost`` is None (unknown) if any attempt reported usage but no cost."""

    role: str
    attempts: int
    calls: int
    retries: int
    input_tokens: int
    output_tokens: int
    total_tokens: int
    cost: float | None
    unpriced_attempts: int
    usage_missing: int
    cached_attempts: int

    def to_json(self) -> dict[str, Any]:
        """Plain JSON form."""
        return {
            "role": self.role,
            "attempts": self.attempts,
            "calls": self.calls,
            "retries": self.retries,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "total_tokens": self.total_tokens,
            "cost": self.cost,
            "unpriced_attempts": self.unpriced_attempts,
            "usage_missing": self.usage_missing,
            "cached_attempts": self.cached_attempts,
        }


@dataclass(frozen=True)
class CostSummary:
    """Cost per role and in total (None = unknown or no ledger), cost per success and the judge's share.

    Every attempt counts (``includes_retries``); cache hits count at their nominal cost.
    """

    per_role: dict[str, RoleCost]
    total_cost: float | None
    successes: int
    cost_per_success: float | None
    judge_share: float | None
    includes_retries: bool = COST_INCLUDES_RETRIES

    def to_json(self) -> dict[str, Any]:
        """Plain JSON form."""
        return {
            "per_role": {r: c.to_json() for r, c in self.per_role.items()},
            "total_cost": self.total_cost,
            "successes": self.successes,
            "cost_per_success": self.cost_per_success,
            "judge_share": self.judge_share,
            "includes_retries": self.includes_retries,
        }


class _TermLike(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def args(self) -> tuple[str, ...]: ...


# --------------------------------------------------------------------------------------------------
# Wilson and pair classification


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for ``successes / n`` (independent units); raises ValueError for n <= 0."""
    if n <= 0:
        raise ValueError("wilson interval needs n > 0")
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be in 0..n, got {successes}/{n}")
    p = successes / n
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


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


def _kappa_of(conf: FloatArray) -> FloatArray:
    """Cohen's kappa per row of ``conf`` (rows of 9 = flattened 3x3 tables); NaN where undefined."""
    tables = conf.reshape(-1, 3, 3)
    n = tables.sum(axis=(1, 2))
    safe_n = np.where(n > 0, n, 1.0)
    po = np.trace(tables, axis1=1, axis2=2) / safe_n
    pe = (tables.sum(axis=2) * tables.sum(axis=1)).sum(axis=1) / (safe_n * safe_n)
    ok = (n > 0) & (pe < 1.0 - 1e-12)
    out = np.where(ok, (po - pe) / np.where(ok, 1.0 - pe, 1.0), np.nan)
    return np.asarray(out, dtype=np.float64)


@dataclass(frozen=True)
class _Stat:
    """One bootstrappable statistic: per-task numerator/denominator sums, or per-task 3x3 tables (kappa)."""

    kind: str  # "ratio" | "kappa" | "corr"
    per_task: FloatArray  # (T, 2) for ratio, (T, 9) for kappa, (T, 6) rank moments for corr
    interval: str = "bootstrap"  # "bootstrap" | "wilson"
    n: int | None = None  # the count reported when the denominator is not one (costs)
    value: float | None = None  # the point value when computed elsewhere (the ledger's exact sums)

    def point(self) -> tuple[float | None, int]:
        tot = self.per_task.sum(axis=0)
        if self.kind == "ratio" and self.n is not None:
            return self.value, self.n
        if self.kind == "ratio":
            den = round(float(tot[1])) if self.n is None else self.n
            return (float(tot[0]) / float(tot[1]) if tot[1] > 0 else None), den
        if self.kind == "corr":
            rho = correlation_rows(tot[None, :])[0]
            return (None if math.isnan(rho) else float(rho)), round(float(tot[0]))
        k = _kappa_of(tot[None, :])[0]
        return (None if math.isnan(k) else float(k)), round(float(tot.sum()))

    def samples(self, counts: FloatArray) -> FloatArray:
        agg = counts @ self.per_task
        if self.kind == "ratio":
            return ratio_rows(agg[:, 0], agg[:, 1])
        if self.kind == "corr":
            return correlation_rows(agg)
        return _kappa_of(agg)


def _clustered(st: _Stat) -> bool:
    """A rate of 0/1 case outcomes over tasks: it gets the cluster-adjusted intervals."""
    return st.kind == "ratio" and st.interval == "bootstrap" and st.n is None


def _sum_stats(stats: Sequence[_Stat]) -> _Stat:
    return _Stat(stats[0].kind, np.sum([s.per_task for s in stats], axis=0), stats[0].interval)


# --------------------------------------------------------------------------------------------------
# Metric names for gates

_NAMES: tuple[tuple[str, str], ...] = (
    ("lrs", "lower-reward-selected rate; lrs(close), lrs(distant), lrs(agent_x, agent_y)"),
    ("lrs_close", "LRS over close pairs"),
    ("lrs_distant", "LRS over distant pairs"),
    ("lrs_close_minus_distant", "LRS(close) - LRS(distant)"),
    ("flip_rate", "position-flip rate; flip_rate(agent_x, agent_y)"),
    ("position_bias", "share of non-tie verdicts for slot A; position_bias(agent_x, agent_y)"),
    ("judge_error_rate", "error verdicts / all cases; judge_error_rate(agent_x, agent_y)"),
    ("sat_but_failed_rate", "user satisfied but task failed, per transcript; sat_but_failed_rate(agent)"),
    ("success_rate", "successful transcripts; success_rate(agent)"),
    ("verbosity_word_rate", "share of judge reasons with length/style words"),
    ("longer_wins_rate", "longer response chosen among equal-reward, unequal-length cases"),
    ("judge_agreement", "observed agreement; judge_agreement(repeats|judges)"),
    ("judge_kappa", "Cohen's kappa; judge_kappa(repeats|judges)"),
    (
        "judge_accuracy",
        "non-tie verdicts on unequal-reward cases choosing the higher rule reward: the main verdict; "
        "judge_accuracy(close|distant), judge_accuracy(judge|panel), "
        "judge_accuracy(judge|panel, close|distant)",
    ),
    ("judge_rank_corr", "Spearman's rho of judge rewards vs rule rewards; judge_rank_corr(judge)"),
    ("cost_per_success", "total cost / successful transcripts"),
    ("total_cost", "agent + user_sim + judge cost"),
    ("agent_cost", "cost of agent calls"),
    ("user_sim_cost", "cost of user-simulator calls"),
    ("judge_cost", "cost of judge calls"),
    ("judge_cost_share", "judge cost / total cost"),
)


def metric_names() -> list[str]:
    """The metric names gates may use (arguments are described in :data:`SuiteMetrics.describe`)."""
    return [n for n, _ in _NAMES]


def _names_help() -> str:
    return "known metrics: " + "; ".join(f"{n} ({d})" for n, d in _NAMES)


# --------------------------------------------------------------------------------------------------
# The result


Key = tuple[str, ...]
"""Internal key of a statistic, e.g. ``("lrs", "close")`` or ``("flip_rate", "pair", "p1")``."""

_PAIR_METRICS = ("lrs", "flip_rate", "position_bias", "judge_error_rate")
_AGENT_METRICS = ("success_rate", "sat_but_failed_rate")
_HEADLINE = (
    "lrs",
    "lrs_close",
    "lrs_distant",
    "lrs_close_minus_distant",
    "flip_rate",
    "position_bias",
    "judge_error_rate",
    "sat_but_failed_rate",
    "success_rate",
    "verbosity_word_rate",
    "longer_wins_rate",
    "judge_agreement",
    "judge_kappa",
    "judge_accuracy",
    "total_cost",
    "agent_cost",
    "user_sim_cost",
    "judge_cost",
    "cost_per_success",
    "judge_cost_share",
)


@dataclass
class _Statistics:
    """The bootstrappable statistics of one suite and their shared resamples, behind gate names.

    Built once by :func:`compute_metrics`; only ``samples`` grows afterwards (a cache of resampled
    values, filled on first use for statistics summed over several pairs).
    """

    stats: dict[Key, _Stat]
    counts: FloatArray
    fixed: dict[str, Estimate]
    drivers: dict[Key, list[str]]
    pairs: dict[str, PairInfo]
    agents: list[str]
    judges: list[str]
    samples: dict[Key, FloatArray]
    main_judge: str = PRIMARY

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
            if args[0] not in _CLASSES:
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
            if len(args) > 1 or kind not in _AGREEMENT_KINDS:
                raise KeyError(f"{name} takes no argument, 'repeats' or 'judges'")
            return (name, kind)
        key: Key
        if name == "judge_rank_corr":
            if len(args) > 1:
                raise KeyError("judge_rank_corr takes no argument or a judge model")
            key = ("judge_rank_corr", args[0] if args else self.main_judge)
        elif not args or (len(args) == 1 and args[0] in _CLASSES):
            key = ("judge_accuracy", PRIMARY, args[0] if args else "all")
        elif len(args) in (1, 2) and (len(args) == 1 or args[1] in _CLASSES):
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
        if name in _PAIR_METRICS:
            return self._resolve_pairable(name, args)
        if name in _AGENT_METRICS:
            return self._resolve_agent(name, args)
        if name in ("verbosity_word_rate", "longer_wins_rate") and not args:
            return (name,)
        if name in ("judge_agreement", "judge_kappa", "judge_accuracy", "judge_rank_corr"):
            return self._resolve_judge(name, args)
        if name == "lrs_close_minus_distant" and not args:
            return ("lrs_close_minus_distant",)
        if name in _COST_RATIOS and not args and (name,) in self.stats:
            return (name,)
        if name in self.fixed and not args:
            return ("fixed", name)
        if name in dict(_NAMES):
            raise KeyError(f"{name}: unsupported arguments {args!r}; {_names_help()}")
        raise KeyError(f"unknown metric {name!r}; {_names_help()}")

    def stat(self, key: Key) -> _Stat:
        """The statistic of ``key``; a ``pairs`` key sums the per-pair statistics."""
        if key in self.stats:
            return self.stats[key]
        if len(key) >= 3 and key[1] == "pairs":
            return _sum_stats([self.stats[(key[0], "pair", pid)] for pid in key[2:]])
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
            return _none(n)
        sa, sb = self.stat(ka), self.stat(kb)
        if ka == kb:  # a rate minus itself: exactly 0 whatever the tasks
            return Estimate(0.0, n, 0.0, 0.0, "cluster-t" if _clustered(sa) else "bootstrap-tasks")
        if _clustered(sa) and _clustered(sb):
            _, low_c, high_c = cluster_difference(
                sa.per_task[:, 0], sa.per_task[:, 1], sb.per_task[:, 0], sb.per_task[:, 1]
            )
            return Estimate(ea.value - eb.value, n, float(low_c), float(high_c), "cluster-t")
        low, high = percentile_interval(self.diff_samples(ka, kb))
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
            return _none(n)
        if st.interval == "wilson":
            tot = st.per_task.sum(axis=0)
            low, high = wilson(round(float(tot[0])), n)
            return Estimate(value, n, low, high, "wilson")
        if _clustered(st) and np.sum(st.per_task[:, 1] > 0) > 1:
            k, m = st.per_task[:, 0], st.per_task[:, 1]
            _, low_c, high_c = cluster_wilson(k, m)
            df = float(satterthwaite_df(k, m, np.asarray(value)))
            return Estimate(value, n, float(low_c), float(high_c), "cluster-wilson", df)
        low_b, high_b = percentile_interval(self.boot(key))
        return Estimate(value, n, low_b, high_b, "bootstrap-tasks")

    def close_minus_distant_p(self) -> float | None:
        """One-sided bootstrap p-value of H0 "LRS(close) <= LRS(distant)" (None without both classes)."""
        if None in (self.estimate(("lrs", "close")).value, self.estimate(("lrs", "distant")).value):
            return None
        diff = self.diff_samples(("lrs", "close"), ("lrs", "distant"))
        finite = diff[np.isfinite(diff)]
        return float(np.mean(finite <= 0.0)) if finite.size else None


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

    describe = _NAMES

    def lookup(self, name: str, args: tuple[str, ...] = ()) -> Estimate:
        """The estimate of a metric by gate name and arguments; KeyError (listing names) if unknown."""
        return self._table.estimate(self._table.resolve(name, tuple(args)))

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
            return _none(n) if ea.value is None or eb.value is None else _exact(ea.value - eb.value, n)
        return self._table.difference(ka, kb)

    def drivers(self, name: str, args: tuple[str, ...] = ()) -> list[str]:
        """What drove a metric, for gate messages: lower-reward cases (lrs*), flipped groups (flip_rate),
        error cases (judge_error_rate), slot-A verdicts (position_bias), failed transcripts
        (success_rate), satisfied-but-failed transcripts, verbose reasons, longer-wins cases; else []."""
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


class _Acc:
    """Per-task accumulators (key -> (T, width) array) and what drove each statistic (key -> labels)."""

    def __init__(self, tasks: Sequence[str]) -> None:
        self.t_index = {t: i for i, t in enumerate(tasks)}
        self.n_tasks = len(tasks)
        self.data: dict[Key, FloatArray] = {}
        self.drivers: dict[Key, list[str]] = {}

    def add(self, key: Key, task: int, num: float, den: float = 1.0) -> None:
        arr = self.data.get(key)
        if arr is None:
            arr = self.data[key] = np.zeros((self.n_tasks, 2), dtype=np.float64)
        arr[task, 0] += num
        arr[task, 1] += den

    def ensure(self, key: Key, width: int = 2) -> None:
        if key not in self.data:
            self.data[key] = np.zeros((self.n_tasks, width), dtype=np.float64)

    def drive(self, keys: Sequence[Key], label: str) -> None:
        """Record ``label`` (a case id, group or transcript) as a driver of every key."""
        for key in keys:
            self.drivers.setdefault(key, []).append(label)

    def total(self, key: Key, column: int) -> int:
        """A column's sum over tasks, as a count."""
        return round(float(self.data[key][:, column].sum()))


def _chosen_left(r: CaseRecord, choice: str) -> bool:
    """Whether slot verdict ``choice`` ("A"/"B") picked the declared left agent."""
    return bool((choice == "A") == (r.blind_order == "A=left"))


def _costs(ledger: Sequence[LedgerRecord], successes: int) -> CostSummary:
    per_role: dict[str, RoleCost] = {}
    for role in ROLES:
        totals = ledger_totals(x for x in ledger if x.role == role)
        nominal = totals.nominal
        per_role[role] = RoleCost(
            role=role,
            attempts=nominal.records,
            calls=totals.calls,
            retries=nominal.records - totals.calls,
            input_tokens=nominal.input_tokens,
            output_tokens=nominal.output_tokens,
            total_tokens=nominal.total_tokens,
            cost=nominal.cost if ledger else None,
            unpriced_attempts=nominal.unpriced,
            usage_missing=totals.usage_missing,
            cached_attempts=totals.cached.records,
        )
    role_costs = [c.cost for c in per_role.values()]
    total: float | None = None
    if ledger and all(c is not None for c in role_costs):
        total = math.fsum(c for c in role_costs if c is not None)
    judge = per_role["judge"].cost
    return CostSummary(
        per_role=per_role,
        total_cost=total,
        successes=successes,
        cost_per_success=(total / successes) if total is not None and successes > 0 else None,
        judge_share=(judge / total) if total is not None and judge is not None and total > 0 else None,
    )


def _fixed_costs(costs: CostSummary, n_ledger: int) -> dict[str, Estimate]:
    """The ledger sums gates may use: exact accounting figures of this run."""
    return {
        "total_cost": _exact(costs.total_cost, n_ledger),
        **{f"{role}_cost": _exact(c.cost, c.attempts) for role, c in costs.per_role.items()},
    }


_COST_RATIOS = ("cost_per_success", "judge_cost_share")


def _cost_ratios(
    acc: _Acc, ledger: Sequence[LedgerRecord], success: FloatArray, costs: CostSummary
) -> dict[Key, _Stat]:
    """Per-task (cost, successes) and (judge cost, cost) for the two cost ratio estimators.

    None when the cost is unknown (a model without a price) or there are no tasks; the point value is
    the ledger's (total / successes), the interval comes from resampling tasks.
    """
    if costs.total_cost is None or acc.n_tasks == 0:
        return {}
    spent = np.zeros((acc.n_tasks, 2), dtype=np.float64)  # columns: all roles, judge
    for x in ledger:
        if x.cost is None:
            continue
        cols = (0, 1) if x.role == "judge" else (0,)
        t = acc.t_index.get(x.task_id)
        for c in cols:
            if t is None:
                spent[:, c] += x.cost / acc.n_tasks
            else:
                spent[t, c] += x.cost
    per_success = np.stack([spent[:, 0], success], axis=1)
    share = np.stack([spent[:, 1], spent[:, 0]], axis=1)
    return {
        ("cost_per_success",): _Stat("ratio", per_success, n=costs.successes, value=costs.cost_per_success),
        ("judge_cost_share",): _Stat(
            "ratio", share, n=costs.per_role["judge"].attempts, value=costs.judge_share
        ),
    }


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


def _verdict_rates(acc: _Acc, r: CaseRecord, pair_class: str) -> None:
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
        left = _chosen_left(r, r.judge_choice)
        longer_left = r.chars_left > r.chars_right
        acc.add(("longer_wins_rate",), t, float(left == longer_left))
        if left == longer_left:
            acc.drive([("longer_wins_rate",)], r.case_id)


def _case_rates(acc: _Acc, records: Sequence[CaseRecord], pairs: dict[str, PairInfo]) -> VerbosityDetails:
    """Case-level rates: judge errors, verbosity words, then position bias, LRS and longer-wins."""
    for pid in pairs:
        for m in _PAIR_METRICS:
            acc.ensure((m, "pair", pid))
    for key in [*((m,) for m in _PAIR_METRICS), ("lrs", "close"), ("lrs", "distant")]:
        acc.ensure(key)
    for cls in ("all", *_CLASSES, *sorted({f"category:{r.category}" for r in records})):
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


def _flips(acc: _Acc, records: Sequence[CaseRecord]) -> list[FlippedGroup]:
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


def _transcript_rates(acc: _Acc, records: Sequence[CaseRecord]) -> _TranscriptRates:
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


def _agree(confusion: dict[str, FloatArray], kind: str, t: int, c1: str, c2: str) -> None:
    """Count one pair of A/B/tie verdicts in the ``kind`` table and in ``all``."""
    cell = 3 * _CATS[c1] + _CATS[c2]
    confusion[kind][t, cell] += 1
    confusion["all"][t, cell] += 1


def _accuracy(acc: _Acc, r: CaseRecord, judge: str, choice: str, pair_class: str) -> None:
    """One verdict of ``judge`` (a model or the panel) against the rule rewards, if it counts."""
    if choice in ("A", "B") and r.reward_left != r.reward_right:
        correct = _chosen_left(r, choice) == (r.reward_left > r.reward_right)
        for c in ("all", pair_class, f"category:{r.category}"):
            acc.add(("judge_accuracy", judge, c), acc.t_index[r.task_id], float(correct))


def _case_agreement(
    acc: _Acc,
    confusion: dict[str, FloatArray],
    r: CaseRecord,
    pair_class: str,
    points: dict[str, list[RewardPoint]],
) -> None:
    """One case's judgments: accuracy per judge and of the panel's majority, reward points per judge,
    repeat pairs and judge pairs into the confusion tables."""
    t = acc.t_index[r.task_id]
    by_judge: dict[str, list[tuple[int, str]]] = {}
    for jd in r.judgments:
        by_judge.setdefault(jd.judge, []).append((jd.repeat, jd.choice))
        _accuracy(acc, r, jd.judge, jd.choice, pair_class)
        points.setdefault(jd.judge, []).extend(reward_points(r, jd, t))
    majority = panel_choice(r.judgments)
    if majority is not None:
        _accuracy(acc, r, PANEL, majority, pair_class)
    for verdicts in by_judge.values():
        ok = [c for _, c in sorted(verdicts) if c in _CATS]
        for i in range(len(ok)):
            for k in range(i + 1, len(ok)):
                _agree(confusion, "repeats", t, ok[i], ok[k])
    firsts = {j: min(v)[1] for j, v in by_judge.items()}
    names = sorted(firsts)
    for i in range(len(names)):
        for k in range(i + 1, len(names)):
            c1, c2 = firsts[names[i]], firsts[names[k]]
            if c1 in _CATS and c2 in _CATS:
                _agree(confusion, "judges", t, c1, c2)


@dataclass(frozen=True)
class _Judges:
    """What the judgment phase found: judge models, agreement tables, reward points per judge."""

    judges: list[str]
    main: str
    confusion: dict[str, FloatArray]
    points: dict[str, list[RewardPoint]]


def _judge_agreement(acc: _Acc, records: Sequence[CaseRecord], pairs: dict[str, PairInfo]) -> _Judges:
    """The judges seen in ``judgments``, the per-task 3x3 agreement tables per kind (rows of 9), and the
    judges' rewards beside the rule rewards."""
    confusion = {k: np.zeros((acc.n_tasks, 9), dtype=np.float64) for k in _AGREEMENT_KINDS}
    judges = sorted({j.judge for r in records for j in r.judgments})
    panel = [PANEL] if len(judges) > 1 else []
    for j in [*judges, *panel]:
        for c in ("all", *_CLASSES):
            acc.ensure(("judge_accuracy", j, c))
    points: dict[str, list[RewardPoint]] = {}
    for r in records:
        if r.judgments:
            _case_agreement(acc, confusion, r, pairs[r.pair_id].pair_class, points)
        else:  # a single verdict: the case's own fields are the main judge's
            main_verdict = Judgment(PRIMARY, 0, r.judge_choice, r.judge_reward_a, r.judge_reward_b, "")
            points.setdefault(PRIMARY, []).extend(reward_points(r, main_verdict, acc.t_index[r.task_id]))
    main = next((r.judgments[0].judge for r in records if r.judgments), PRIMARY)
    return _Judges(judges or [PRIMARY], main, confusion, points)


def _statistics(acc: _Acc, found: _Judges) -> dict[Key, _Stat]:
    """Every accumulated sum as a statistic, agreement ratios and kappas from the tables, and each judge's
    rank correlation with the rule rewards."""
    confusion = found.confusion
    stats: dict[Key, _Stat] = {}
    for judge in found.judges:
        moments = rank_moments(found.points.get(judge, []), acc.n_tasks)
        stats[("judge_rank_corr", judge)] = _Stat("corr", moments)
    for key, arr in acc.data.items():
        interval = "wilson" if key[0] in _AGENT_METRICS else "bootstrap"
        stats[key] = _Stat("ratio", arr, interval)
    diag = np.array([0, 4, 8])
    for kind, conf in confusion.items():
        stats[("judge_kappa", kind)] = _Stat("kappa", conf)
        agree = np.stack([conf[:, diag].sum(axis=1), conf.sum(axis=1)], axis=1)
        stats[("judge_agreement", kind)] = _Stat("ratio", agree)
    return stats


def _ratio_samples(stats: dict[Key, _Stat], counts: FloatArray) -> dict[Key, FloatArray]:
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


def _agreement_details(
    table: _Statistics, confusion: dict[str, FloatArray], judges: Sequence[str]
) -> AgreementDetails:
    """Agreement, kappa, pooled confusion tables and per-judge accuracy."""
    return AgreementDetails(
        agreement={k: table.estimate(("judge_agreement", k)) for k in _AGREEMENT_KINDS},
        kappa={k: table.estimate(("judge_kappa", k)) for k in _AGREEMENT_KINDS},
        confusion={
            k: [[int(v) for v in row] for row in c.sum(axis=0).reshape(3, 3)] for k, c in confusion.items()
        },
        accuracy={
            j: {c: table.estimate(("judge_accuracy", j, c)) for c in ("all", *_CLASSES)} for j in judges
        },
    )


def _judge_cost_per_call(ledger: Sequence[LedgerRecord], model: str) -> float | None:
    """Nominal cost per judge call of one model (None when unpriced or never called)."""
    recs = [x for x in ledger if x.role == "judge" and x.model == model]
    calls = len({x.call_id for x in recs})
    if not calls or any(x.cost is None and x.usage is not None for x in recs):
        return None
    return math.fsum(x.cost for x in recs if x.cost is not None) / calls


def _cheaper_judge(table: _Statistics, found: _Judges, costs: dict[str, float | None]) -> CheaperJudge | None:
    """The cheapest panel model whose accuracy is within NON_INFERIORITY of the main model's."""
    main_cost = costs.get(found.main)
    best: CheaperJudge | None = None
    for model in found.judges:
        cost = costs.get(model)
        if model == found.main or cost is None or main_cost is None or not cost < main_cost:
            continue
        diff = table.difference(("judge_accuracy", model, "all"), ("judge_accuracy", found.main, "all"))
        if diff.value is None or diff.low is None or diff.low < -NON_INFERIORITY:
            continue
        ratio = cost / main_cost
        if best is None or ratio < best.cost_ratio:
            best = CheaperJudge(model, found.main, ratio, diff.value, diff.low)
    return best


def _judge_rules(table: _Statistics, found: _Judges, ledger: Sequence[LedgerRecord]) -> JudgeRules:
    """Accuracy per verdict source and class/category, rank correlation, calibration, cheaper model."""
    accuracy: dict[str, dict[str, Estimate]] = {}
    for key in sorted(k for k in table.stats if k[0] == "judge_accuracy"):
        accuracy.setdefault(key[1], {})[key[2]] = table.estimate(key)
    costs = {j: _judge_cost_per_call(ledger, j) for j in found.judges}
    return JudgeRules(
        main=found.main,
        accuracy=accuracy,
        rank_corr={j: table.estimate(("judge_rank_corr", j)) for j in found.judges},
        calibration={j: calibration(found.points.get(j, [])) for j in found.judges},
        cost_per_call=costs,
        cheaper=_cheaper_judge(table, found, costs),
    )


def compute_metrics(
    records: Sequence[CaseRecord],
    *,
    close_threshold: float = 0.1,
    seed: int = 0,
    rounds: int = 2000,
    ledger: Sequence[LedgerRecord] = (),
    expected_cases: int | None = None,
) -> SuiteMetrics:
    """All suite metrics (docs/protocol.md#metrics) from case records (and the ledger for costs);
    deterministic in seed."""
    acc = _Acc(sorted({r.task_id for r in records}))
    pairs = _pair_infos(records, close_threshold)
    verbosity = _case_rates(acc, records, pairs)
    flipped = _flips(acc, records)
    found = _transcript_rates(acc, records)
    found_judges = _judge_agreement(acc, records, pairs)
    judges = [j for j in found_judges.judges if j != PRIMARY]  # the judge models named in judgments
    confusion = found_judges.confusion
    stats = _statistics(acc, found_judges)
    counts = resample_counts(acc.n_tasks, rounds, np.random.default_rng(seed))
    costs = _costs(ledger, found.successes)
    stats.update(_cost_ratios(acc, ledger, acc.data[("success_rate",)][:, 0], costs))
    fixed = _fixed_costs(costs, len(ledger))
    fixed["cost_per_success"] = _none(costs.successes)
    fixed["judge_cost_share"] = _none(costs.per_role["judge"].attempts)
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
    )
    return SuiteMetrics(
        metrics={name: table.estimate(table.resolve(name, ())) for name in _HEADLINE},
        per_pair={pid: {m: table.estimate((m, "pair", pid)) for m in _PAIR_METRICS} for pid in pairs},
        per_agent={a: {m: table.estimate((m, "agent", a)) for m in _AGENT_METRICS} for a in found.agents},
        pairs=pairs,
        flipped=flipped,
        lrs_close_minus_distant=table.estimate(("lrs_close_minus_distant",)),
        p_value=table.close_minus_distant_p(),
        verbosity=verbosity,
        agreement=_agreement_details(table, confusion, judges),
        judge_rules=_judge_rules(table, found_judges, ledger),
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
    )
