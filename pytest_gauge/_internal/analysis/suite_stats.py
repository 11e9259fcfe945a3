"""The suite's statistics behind gate names: :class:`SuiteStats` resolves a gate term (``lrs(close)``,
``success_rate(agent_x)``, ``judge_accuracy(panel)``...) to one statistic and estimates it with its count and
95% interval (cluster-adjusted Wilson, cluster-robust t, task bootstrap, Wilson, skewed ratio or exact), and
the difference of two from the same resamples; the interval methods are listed in :mod:`.metrics`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..run.user_audit import USER_AUDIT_KINDS
from .costs import COST_RATIOS
from .estimates import PAIR_CLASSES, Estimate, Key, Stat, clustered, none_estimate, sum_stats, wilson
from .intervals import Z95, cluster_difference_se, cluster_wilson, cluster_wilson_df
from .judge_metrics import AGREEMENT_KINDS
from .judge_rules import PANEL, PRIMARY
from .metric_table import SUITE_METRICS
from .metric_tallies import AGENT_METRICS, PAIR_METRICS, PairInfo
from .resampling import percentile_interval, task_counts
from .sequential import critical_quantile, t_upper_tail
from .skewed import cost_interval_note, skewed_ratio_interval

if TYPE_CHECKING:
    from ..records import FloatArray
    from .resampling import Counts

__all__ = ["GATE_NAMES", "SuiteStats", "agent_over_tasks", "metric_names", "names_help"]

GATE_NAMES: tuple[tuple[str, str], ...] = tuple((m.name, m.description) for m in SUITE_METRICS)


def metric_names() -> list[str]:
    """The metric names gates may use (arguments are described in :data:`SuiteMetrics.describe`)."""
    return [n for n, _ in GATE_NAMES]


def names_help() -> str:
    """The known metric names with their descriptions, for the message of an unknown name."""
    return "known metrics: " + "; ".join(f"{n} ({d})" for n, d in GATE_NAMES)


@dataclass
class SuiteStats:
    """The bootstrappable statistics of one suite and their shared resamples, behind gate names.

    Built once by :func:`compute_metrics`; only ``samples`` grows afterwards (a cache of resampled
    values, filled on first use for statistics summed over several pairs). The resample matrix is not
    kept (``rounds x tasks`` bytes, 10 MB at 5,000 tasks): :attr:`counts` draws it again when no one
    holds it, the same draws.
    """

    stats: dict[Key, Stat]
    n_tasks: int
    rounds: int
    fixed: dict[str, Estimate]
    drivers: dict[Key, list[str]]
    pairs: dict[str, PairInfo]
    agents: list[str]
    judges: list[str]
    samples: dict[Key, FloatArray]
    main_judge: str = PRIMARY
    seed: int = 0

    @property
    def counts(self) -> Counts:
        """The seeded ``rounds x tasks`` resample matrix every statistic of the suite shares."""
        return task_counts(self.n_tasks, self.rounds, self.seed)

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
        if name in AGENT_METRICS:
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
        if not args and (name,) in self.stats and name in dict(GATE_NAMES):  # a new suite-wide tally
            return (name,)
        if name in dict(GATE_NAMES):
            raise KeyError(f"{name}: unsupported arguments {args!r}; {names_help()}")
        raise KeyError(f"unknown metric {name!r}; {names_help()}")

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
        if agent_over_tasks(key, st):  # several samples per task: the transcripts are clustered
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


def _cost_ratio_estimate(st: Stat, value: float, n: int, counts: Counts, seed: int) -> Estimate:
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


def agent_over_tasks(key: Key, st: Stat) -> bool:
    """``success_rate(agent)`` with several samples on some task: its estimand is the agent's success rate
    over the suite's tasks (successes / transcripts, the mean of the task rates with equal samples), and
    its interval is clustered over tasks; Wilson over transcripts covered it 77-91%."""
    if key[0] != "success_rate" or len(key) != 3 or st.interval != "wilson":
        return False
    counts = st.per_task[:, 1]
    return bool(np.max(counts, initial=0) > 1 and np.sum(counts > 0) > 1)
