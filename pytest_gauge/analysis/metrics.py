"""Suite-level statistics over judged cases, each with its count and 95% interval (docs/protocol.md#metrics).

Interval methods (the choice is part of the result, see :attr:`Estimate.method`):

* ``bootstrap-tasks``: case-level rates (LRS, flips, position bias, judge errors, verbosity, judge
  agreement) get a percentile bootstrap that resamples *tasks* with replacement, because the cases of
  one task share transcripts and are not independent. All metrics use the same resamples (one seeded
  ``rounds x n_tasks`` count matrix), so differences of two metrics get honest intervals too.
  A resample whose denominator is 0 is skipped; if every resample is skipped the interval is None.
* ``wilson``: transcript-level rates (satisfied-but-failed, success rate) are over distinct transcripts
  (task, agent, sample), which we treat as independent units, so they get Wilson score intervals.
* ``exact``: costs are sums over the ledger, not samples; ``low == high == value``.
* ``none``: no data (denominator 0) or unknown cost.

``n`` is always the denominator count. The LRS close-vs-distant test reports the difference with an
interval from the shared resamples and a one-sided bootstrap p-value for H0 "LRS(close) <= LRS(distant)":
the fraction of resampled differences that are <= 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from ..records import CaseRecord, LedgerRecord

__all__ = [
    "COST_INCLUDES_RETRIES",
    "LENGTH_STYLE_WORDS",
    "AgreementDetails",
    "CostSummary",
    "Estimate",
    "FlippedGroup",
    "PairInfo",
    "RoleCost",
    "SuiteMetrics",
    "VerbosityDetails",
    "classify_pairs",
    "compute_metrics",
    "metric_names",
    "pair_gaps",
    "resample_counts",
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
_Z95 = 1.959963984540054
_CATS = {"A": 0, "B": 1, "tie": 2}
_AGREEMENT_KINDS = ("all", "repeats", "judges")
_CLASSES = ("close", "distant")

FloatArray = npt.NDArray[np.float64]


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


def wilson(successes: int, n: int, z: float = _Z95) -> tuple[float, float]:
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
# The bootstrap over tasks


def resample_counts(n_units: int, rounds: int, rng: np.random.Generator, chunk: int = 256) -> FloatArray:
    """``rounds x n_units`` matrix: how often each unit is drawn in each resample (with replacement).

    Drawn ``chunk`` rounds at a time into the result, so the peak is the result plus one chunk's
    temporaries; the draws are the same as one ``rng.integers(0, n_units, (rounds, n_units))``.
    """
    out = np.zeros((max(rounds, 0), n_units), dtype=np.float64)
    if n_units == 0 or rounds <= 0:
        return out
    for start in range(0, rounds, chunk):
        rows = min(chunk, rounds - start)
        idx = rng.integers(0, n_units, size=(rows, n_units))
        flat = (np.arange(rows)[:, None] * n_units + idx).ravel()
        out[start : start + rows] = np.bincount(flat, minlength=rows * n_units).reshape(rows, n_units)
    return out


def _percentiles(samples: FloatArray) -> tuple[float | None, float | None]:
    vals = samples[np.isfinite(samples)]
    if vals.size == 0:
        return None, None
    low, high = np.percentile(vals, [2.5, 97.5])
    return float(low), float(high)


def _ratio_rows(bnum: FloatArray, bden: FloatArray) -> FloatArray:
    safe = np.where(bden > 0, bden, 1.0)
    return np.where(bden > 0, bnum / safe, np.nan)


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

    kind: str  # "ratio" | "kappa"
    per_task: FloatArray  # (T, 2) for ratio, (T, 9) for kappa
    interval: str = "bootstrap"  # "bootstrap" | "wilson"

    def point(self) -> tuple[float | None, int]:
        tot = self.per_task.sum(axis=0)
        if self.kind == "ratio":
            den = round(float(tot[1]))
            return (float(tot[0]) / float(tot[1]) if tot[1] > 0 else None), den
        k = _kappa_of(tot[None, :])[0]
        return (None if math.isnan(k) else float(k)), round(float(tot.sum()))

    def samples(self, counts: FloatArray) -> FloatArray:
        agg = counts @ self.per_task
        if self.kind == "ratio":
            return _ratio_rows(agg[:, 0], agg[:, 1])
        return _kappa_of(agg)


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
    ("judge_accuracy", "judge_accuracy(judge) or judge_accuracy(judge, close|distant): 1 - LRS"),
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


@dataclass
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
    costs: CostSummary
    sat_but_failed_examples: list[tuple[str, str, int]]
    n_cases: int
    n_tasks: int
    expected_cases: int | None
    missing_cases: int | None
    close_threshold: float
    seed: int
    rounds: int
    _stats: dict[tuple[str, ...], _Stat] = field(repr=False, compare=False, default_factory=dict)
    _counts: FloatArray = field(repr=False, compare=False, default_factory=lambda: np.zeros((0, 0)))
    _fixed: dict[str, Estimate] = field(repr=False, compare=False, default_factory=dict)
    _samples: dict[tuple[str, ...], FloatArray] = field(repr=False, compare=False, default_factory=dict)
    _drivers: dict[tuple[str, ...], list[str]] = field(repr=False, compare=False, default_factory=dict)

    describe = _NAMES

    # -- resolution -------------------------------------------------------------------------------

    def _pair_ids(self, a: str, b: str) -> list[str]:
        found = [pid for pid, p in self.pairs.items() if {p.agent_left, p.agent_right} == {a, b} and (a != b)]
        if not found:
            declared = ", ".join(f"({p.agent_left}, {p.agent_right})" for p in self.pairs.values()) or "none"
            raise KeyError(f"no declared pair of {a!r} and {b!r}; declared pairs: {declared}")
        return found

    def _resolve(self, name: str, args: tuple[str, ...]) -> tuple[str, ...]:
        """Map a gate term to the internal key of a bootstrappable statistic (KeyError if unknown)."""
        args = tuple(a.strip() for a in args)
        pairable = ("lrs", "flip_rate", "position_bias", "judge_error_rate")
        if name in ("lrs_close", "lrs_distant") and not args:
            return ("lrs", name.split("_")[1])
        if name in pairable:
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
        if name in ("success_rate", "sat_but_failed_rate"):
            if not args:
                return (name,)
            if len(args) == 1:
                if (name, "agent", args[0]) not in self._stats:
                    known = ", ".join(sorted(self.per_agent)) or "none"
                    raise KeyError(f"{name}({args[0]}): unknown agent; agents: {known}")
                return (name, "agent", args[0])
            raise KeyError(f"{name} takes no argument or one agent")
        if name in ("verbosity_word_rate", "longer_wins_rate") and not args:
            return (name,)
        if name in ("judge_agreement", "judge_kappa"):
            kind = args[0] if args else "all"
            if len(args) > 1 or kind not in _AGREEMENT_KINDS:
                raise KeyError(f"{name} takes no argument, 'repeats' or 'judges'")
            return (name, kind)
        if name == "judge_accuracy":
            if len(args) not in (1, 2) or (len(args) == 2 and args[1] not in _CLASSES):
                raise KeyError("judge_accuracy takes (judge) or (judge, close|distant)")
            key = ("judge_accuracy", args[0], args[1] if len(args) == 2 else "all")
            if key not in self._stats:
                known = ", ".join(sorted(self.agreement.accuracy)) or "none"
                raise KeyError(f"judge_accuracy({args[0]}): unknown judge; judges: {known}")
            return key
        if name == "lrs_close_minus_distant" and not args:
            return ("lrs_close_minus_distant",)
        if name in self._fixed and not args:
            return ("fixed", name)
        if name in dict(_NAMES):
            raise KeyError(f"{name}: unsupported arguments {args!r}; {_names_help()}")
        raise KeyError(f"unknown metric {name!r}; {_names_help()}")

    def _stat(self, key: tuple[str, ...]) -> _Stat:
        if key in self._stats:
            return self._stats[key]
        if len(key) >= 3 and key[1] == "pairs":
            return _sum_stats([self._stats[(key[0], "pair", pid)] for pid in key[2:]])
        raise KeyError(f"no statistic {key!r}")

    def _boot(self, key: tuple[str, ...]) -> FloatArray:
        if key == ("lrs_close_minus_distant",):
            return self._diff_samples(("lrs", "close"), ("lrs", "distant"))
        if key not in self._samples:
            self._samples[key] = self._stat(key).samples(self._counts)
        return self._samples[key]

    def _estimate(self, key: tuple[str, ...]) -> Estimate:
        if key[0] == "fixed":
            return self._fixed[key[1]]
        if key[0] == "lrs_close_minus_distant":
            return self.lrs_close_minus_distant
        st = self._stat(key)
        value, n = st.point()
        if value is None:
            return _none(n)
        if st.interval == "wilson":
            tot = st.per_task.sum(axis=0)
            low, high = wilson(round(float(tot[0])), n)
            return Estimate(value, n, low, high, "wilson")
        low_b, high_b = _percentiles(self._boot(key))
        return Estimate(value, n, low_b, high_b, "bootstrap-tasks")

    # -- public API -------------------------------------------------------------------------------

    def lookup(self, name: str, args: tuple[str, ...] = ()) -> Estimate:
        """The estimate of a metric by gate name and arguments; KeyError (listing names) if unknown."""
        return self._estimate(self._resolve(name, tuple(args)))

    def bootstrap_difference(
        self, a_name: str, a_args: tuple[str, ...], b_name: str, b_args: tuple[str, ...]
    ) -> Estimate:
        """``a - b`` for two task-resampled metrics, interval from the SAME resamples; n = min(n_a, n_b).

        Resamples where either side is undefined are skipped. Costs have no sampling distribution: their
        difference is exact.
        """
        ka, kb = self._resolve(a_name, tuple(a_args)), self._resolve(b_name, tuple(b_args))
        ea, eb = self._estimate(ka), self._estimate(kb)
        if (ka[0] == "fixed") != (kb[0] == "fixed"):
            raise KeyError(
                f"cannot subtract {b_name} from {a_name}: one is a ledger cost, the other a sampled rate"
            )
        n = min(ea.n, eb.n)
        if ea.value is None or eb.value is None:
            return _none(n)
        if ka[0] == "fixed":
            return _exact(ea.value - eb.value, n)
        diff = self._diff_samples(ka, kb)
        low, high = _percentiles(diff)
        return Estimate(ea.value - eb.value, n, low, high, "bootstrap-tasks")

    def _diff_samples(self, ka: tuple[str, ...], kb: tuple[str, ...]) -> FloatArray:
        return self._boot(ka) - self._boot(kb)

    def drivers(self, name: str, args: tuple[str, ...] = ()) -> list[str]:
        """What drove a metric, for gate messages: lower-reward cases (lrs*), flipped groups (flip_rate),
        error cases (judge_error_rate), satisfied-but-failed transcripts, verbose reasons; else []."""
        try:
            key = self._resolve(name, tuple(args))
        except KeyError:
            return []
        if key[0] == "lrs_close_minus_distant":
            key = ("lrs", "close")
        if len(key) >= 3 and key[1] == "pairs":
            return sorted(d for pid in key[2:] for d in self._drivers.get((key[0], "pair", pid), []))
        return sorted(self._drivers.get(key, []))

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
# Computation


class _Acc:
    """Per-task accumulators: key -> (T, width) array."""

    def __init__(self, n_tasks: int) -> None:
        self.n_tasks = n_tasks
        self.data: dict[tuple[str, ...], FloatArray] = {}

    def add(self, key: tuple[str, ...], task: int, num: float, den: float = 1.0) -> None:
        arr = self.data.get(key)
        if arr is None:
            arr = self.data[key] = np.zeros((self.n_tasks, 2), dtype=np.float64)
        arr[task, 0] += num
        arr[task, 1] += den

    def ensure(self, key: tuple[str, ...], width: int = 2) -> None:
        if key not in self.data:
            self.data[key] = np.zeros((self.n_tasks, width), dtype=np.float64)


def _chosen_left(r: CaseRecord, choice: str) -> bool:
    """Whether slot verdict ``choice`` ("A"/"B") picked the declared left agent."""
    return bool((choice == "A") == (r.blind_order == "A=left"))


def _costs(ledger: Sequence[LedgerRecord], successes: int) -> CostSummary:
    per_role: dict[str, RoleCost] = {}
    for role in ROLES:
        recs = [x for x in ledger if x.role == role]
        calls = len({x.call_id for x in recs})
        unpriced = sum(1 for x in recs if x.cost is None and x.usage is not None)
        cost = None if (unpriced or not ledger) else math.fsum(x.cost for x in recs if x.cost is not None)
        per_role[role] = RoleCost(
            role=role,
            attempts=len(recs),
            calls=calls,
            retries=len(recs) - calls,
            input_tokens=sum(x.usage.prompt_tokens for x in recs if x.usage is not None),
            output_tokens=sum(x.usage.completion_tokens for x in recs if x.usage is not None),
            total_tokens=sum(x.usage.total_tokens for x in recs if x.usage is not None),
            cost=cost,
            unpriced_attempts=unpriced,
            usage_missing=sum(1 for x in recs if x.usage_missing),
            cached_attempts=sum(1 for x in recs if x.cache_hit),
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
    tasks = sorted({r.task_id for r in records})
    t_index = {t: i for i, t in enumerate(tasks)}
    n_tasks = len(tasks)
    classes = classify_pairs(records, close_threshold)
    gaps = pair_gaps(records)
    acc = _Acc(n_tasks)
    key: tuple[str, ...]
    drivers: dict[tuple[str, ...], list[str]] = {}

    pairs: dict[str, PairInfo] = {}
    for r in records:
        if r.pair_id not in pairs:
            lr = (r.agent_left, r.agent_right)
            pairs[r.pair_id] = PairInfo(r.pair_id, lr[0], lr[1], gaps[lr], classes[lr])
    pairs = dict(sorted(pairs.items()))
    pair_keys = ("lrs", "flip_rate", "position_bias", "judge_error_rate")
    for pid in pairs:
        for m in pair_keys:
            acc.ensure((m, "pair", pid))
    for key in [(m,) for m in pair_keys] + [("lrs", "close"), ("lrs", "distant")]:
        acc.ensure(key)
    for key in [("verbosity_word_rate",), ("longer_wins_rate",)]:
        acc.ensure(key)

    # case-level rates
    word_counts = dict.fromkeys(LENGTH_STYLE_WORDS, 0)
    verbose_cases: list[str] = []
    reasons_checked = 0
    for r in records:
        t = t_index[r.task_id]
        cls = pairs[r.pair_id].pair_class
        is_error = r.judge_choice == "error"
        acc.add(("judge_error_rate",), t, float(is_error))
        if is_error:
            for key in (("judge_error_rate",), ("judge_error_rate", "pair", r.pair_id)):
                drivers.setdefault(key, []).append(r.case_id)
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
            drivers.setdefault(("verbosity_word_rate",), []).append(r.case_id)
        acc.add(("verbosity_word_rate",), t, float(bool(hits)))
        if r.judge_choice == "tie":
            continue
        is_a = float(r.judge_choice == "A")
        acc.add(("position_bias",), t, is_a)
        acc.add(("position_bias", "pair", r.pair_id), t, is_a)
        if r.reward_left != r.reward_right:
            picked_low = float(r.lower_reward_selected is True)
            for key in (("lrs",), ("lrs", cls), ("lrs", "pair", r.pair_id)):
                acc.add(key, t, picked_low)
                if picked_low:
                    drivers.setdefault(key, []).append(r.case_id)
        elif r.chars_left != r.chars_right:
            left = _chosen_left(r, r.judge_choice)
            longer_left = r.chars_left > r.chars_right
            acc.add(("longer_wins_rate",), t, float(left == longer_left))

    # position flips
    groups: dict[tuple[str, str, int], dict[str, CaseRecord]] = {}
    for r in records:
        groups.setdefault((r.task_id, r.pair_id, r.sample), {}).setdefault(r.blind_order, r)
    flipped: list[FlippedGroup] = []
    for (task_id, pid, sample), by_order in sorted(groups.items()):
        ab, ba = by_order.get("A=left"), by_order.get("A=right")
        if ab is None or ba is None or "error" in (ab.judge_choice, ba.judge_choice):
            continue
        flip = ab.preferred_agent != ba.preferred_agent
        t = t_index[task_id]
        acc.add(("flip_rate",), t, float(flip))
        acc.add(("flip_rate", "pair", pid), t, float(flip))
        if flip:
            group = FlippedGroup(task_id, pid, sample, ab.preferred_agent, ba.preferred_agent)
            flipped.append(group)
            for key in (("flip_rate",), ("flip_rate", "pair", pid)):
                drivers.setdefault(key, []).append(group.label())

    # transcripts
    transcripts: dict[tuple[str, str, int], tuple[bool, bool | None]] = {}
    for r in records:
        transcripts.setdefault((r.task_id, r.agent_left, r.sample), (r.task_success_left, r.user_sat_left))
        transcripts.setdefault((r.task_id, r.agent_right, r.sample), (r.task_success_right, r.user_sat_right))
    agents = sorted({a for _, a, _ in transcripts})
    for name in ("success_rate", "sat_but_failed_rate"):
        acc.ensure((name,))
        for a in agents:
            acc.ensure((name, "agent", a))
    sat_failed: list[tuple[str, str, int]] = []
    successes = 0
    for (task_id, agent, sample), (success, sat) in sorted(transcripts.items()):
        t = t_index[task_id]
        successes += int(success)
        for key in (("success_rate",), ("success_rate", "agent", agent)):
            acc.add(key, t, float(success))
        if sat is None:
            continue
        bad = bool(sat) and not success
        if bad:
            sat_failed.append((task_id, agent, sample))
            for key in (("sat_but_failed_rate",), ("sat_but_failed_rate", "agent", agent)):
                drivers.setdefault(key, []).append(f"{task_id}/{agent}#{sample}")
        for key in (("sat_but_failed_rate",), ("sat_but_failed_rate", "agent", agent)):
            acc.add(key, t, float(bad))

    # judge agreement and accuracy
    confusion = {k: np.zeros((n_tasks, 9), dtype=np.float64) for k in _AGREEMENT_KINDS}
    judges = sorted({j.judge for r in records for j in r.judgments})
    for j in judges:
        for c in ("all", *_CLASSES):
            acc.ensure(("judge_accuracy", j, c))
    for r in records:
        if not r.judgments:
            continue
        t = t_index[r.task_id]
        by_judge: dict[str, list[tuple[int, str]]] = {}
        for jd in r.judgments:
            by_judge.setdefault(jd.judge, []).append((jd.repeat, jd.choice))
            if jd.choice in ("A", "B") and r.reward_left != r.reward_right:
                correct = _chosen_left(r, jd.choice) == (r.reward_left > r.reward_right)
                for c in ("all", pairs[r.pair_id].pair_class):
                    acc.add(("judge_accuracy", jd.judge, c), t, float(correct))
        for verdicts in by_judge.values():
            ok = [c for _, c in sorted(verdicts) if c in _CATS]
            for i in range(len(ok)):
                for k in range(i + 1, len(ok)):
                    cell = 3 * _CATS[ok[i]] + _CATS[ok[k]]
                    confusion["repeats"][t, cell] += 1
                    confusion["all"][t, cell] += 1
        firsts = {j: min(v)[1] for j, v in by_judge.items()}
        names = sorted(firsts)
        for i in range(len(names)):
            for k in range(i + 1, len(names)):
                c1, c2 = firsts[names[i]], firsts[names[k]]
                if c1 in _CATS and c2 in _CATS:
                    cell = 3 * _CATS[c1] + _CATS[c2]
                    confusion["judges"][t, cell] += 1
                    confusion["all"][t, cell] += 1

    stats: dict[tuple[str, ...], _Stat] = {}
    for key, arr in acc.data.items():
        interval = "wilson" if key[0] in ("success_rate", "sat_but_failed_rate") else "bootstrap"
        stats[key] = _Stat("ratio", arr, interval)
    diag = np.array([0, 4, 8])
    for kind, conf in confusion.items():
        stats[("judge_kappa", kind)] = _Stat("kappa", conf)
        agree = np.stack([conf[:, diag].sum(axis=1), conf.sum(axis=1)], axis=1)
        stats[("judge_agreement", kind)] = _Stat("ratio", agree)

    counts = resample_counts(n_tasks, rounds, np.random.default_rng(seed))
    # One matrix product for every ratio statistic.
    samples: dict[tuple[str, ...], FloatArray] = {}
    ratio_keys = [k for k, s in stats.items() if s.kind == "ratio"]
    if ratio_keys:
        stacked = np.concatenate([stats[k].per_task for k in ratio_keys], axis=1)  # (T, 2M)
        agg = counts @ stacked
        rates = _ratio_rows(agg[:, 0::2], agg[:, 1::2])
        for i, rk in enumerate(ratio_keys):
            samples[rk] = np.ascontiguousarray(rates[:, i])

    costs = _costs(ledger, successes)
    n_ledger = len(ledger)
    fixed = {
        "total_cost": _exact(costs.total_cost, n_ledger),
        "cost_per_success": _exact(costs.cost_per_success, costs.successes),
        "judge_cost_share": _exact(costs.judge_share, costs.per_role["judge"].attempts),
        **{f"{role}_cost": _exact(c.cost, c.attempts) for role, c in costs.per_role.items()},
    }

    result = SuiteMetrics(
        metrics={},
        per_pair={},
        per_agent={},
        pairs=pairs,
        flipped=flipped,
        lrs_close_minus_distant=_none(),
        p_value=None,
        verbosity=VerbosityDetails(
            word_counts=word_counts,
            case_ids=sorted(verbose_cases),
            reasons_checked=reasons_checked,
            longer_wins=round(float(acc.data[("longer_wins_rate",)][:, 0].sum())),
            longer_wins_n=round(float(acc.data[("longer_wins_rate",)][:, 1].sum())),
        ),
        agreement=AgreementDetails({}, {}, {}, {}),
        costs=costs,
        sat_but_failed_examples=sat_failed,
        n_cases=len(records),
        n_tasks=n_tasks,
        expected_cases=expected_cases,
        missing_cases=(expected_cases - len(records)) if expected_cases is not None else None,
        close_threshold=close_threshold,
        seed=seed,
        rounds=rounds,
        _stats=stats,
        _counts=counts,
        _fixed=fixed,
        _samples=samples,
        _drivers=drivers,
    )

    # LRS close vs distant
    close_key, distant_key = ("lrs", "close"), ("lrs", "distant")
    e_close, e_distant = result._estimate(close_key), result._estimate(distant_key)
    n_diff = min(e_close.n, e_distant.n)
    if e_close.value is not None and e_distant.value is not None:
        diff = result._diff_samples(close_key, distant_key)
        finite = diff[np.isfinite(diff)]
        low, high = _percentiles(diff)
        result.lrs_close_minus_distant = Estimate(
            e_close.value - e_distant.value, n_diff, low, high, "bootstrap-tasks"
        )
        result.p_value = float(np.mean(finite <= 0.0)) if finite.size else None
    else:
        result.lrs_close_minus_distant = _none(n_diff)

    headline: list[tuple[str, tuple[str, ...]]] = [
        ("lrs", ()),
        ("lrs_close", ()),
        ("lrs_distant", ()),
        ("lrs_close_minus_distant", ()),
        ("flip_rate", ()),
        ("position_bias", ()),
        ("judge_error_rate", ()),
        ("sat_but_failed_rate", ()),
        ("success_rate", ()),
        ("verbosity_word_rate", ()),
        ("longer_wins_rate", ()),
        ("judge_agreement", ()),
        ("judge_kappa", ()),
        ("total_cost", ()),
        ("agent_cost", ()),
        ("user_sim_cost", ()),
        ("judge_cost", ()),
        ("cost_per_success", ()),
        ("judge_cost_share", ()),
    ]
    result.metrics = {name: result.lookup(name, args) for name, args in headline}
    result.per_pair = {pid: {m: result._estimate((m, "pair", pid)) for m in pair_keys} for pid in pairs}
    result.per_agent = {
        a: {m: result._estimate((m, "agent", a)) for m in ("success_rate", "sat_but_failed_rate")}
        for a in agents
    }
    result.agreement = AgreementDetails(
        agreement={k: result._estimate(("judge_agreement", k)) for k in _AGREEMENT_KINDS},
        kappa={k: result._estimate(("judge_kappa", k)) for k in _AGREEMENT_KINDS},
        confusion={
            k: [[int(v) for v in row] for row in c.sum(axis=0).reshape(3, 3)] for k, c in confusion.items()
        },
        accuracy={
            j: {c: result._estimate(("judge_accuracy", j, c)) for c in ("all", *_CLASSES)} for j in judges
        },
    )
    return result
