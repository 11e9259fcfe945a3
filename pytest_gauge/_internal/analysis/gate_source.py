"""The gates' data source: suite metrics; for ``elo``/``delta_elo``/``elo_per_1k_tokens`` the Elo fit; for
``delta(...)``/``regressions``/``fixes`` the baseline comparison; for ``pass_at_k``/``pass_hat_k``/
``flaky_tasks`` the repeated samples."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import numpy as np

from .baseline import BaselineComparison
from .elo import elo_difference, linear_interval
from .elo_report import ELO_METRICS, NO_ELO, EloReport, finite, tier_rows
from .gates import BASELINE_METRICS, DELTA, GateSyntaxError, NoData, Term, parse_term
from .human import HUMAN_METRICS
from .metrics import Estimate, SuiteMetrics
from .repeats import REPEAT_METRICS, RepeatCounts, flaky_tasks, pass_at_k, pass_hat_k

__all__ = ["GateSource"]


def _elo_help() -> str:
    return (
        "Elo metrics: elo(agent), delta_elo(agent), elo_per_1k_tokens(agent); baseline: delta(METRIC), "
        "regressions(agent), fixes(agent); repeats: pass_at_k(agent, k), pass_hat_k(agent, k), "
        "flaky_tasks(agent)"
    )


class GateSource:
    """A gate ``MetricSource`` over the suite metrics and the Elo report: ``elo``, ``delta_elo`` and
    ``elo_per_1k_tokens`` (one agent each) come from the Elo fit, every other name from the metrics."""

    def __init__(
        self,
        metrics: SuiteMetrics,
        elo: EloReport | None,
        *,
        baseline: BaselineComparison | None = None,
        repeats: Mapping[str, RepeatCounts] | None = None,
        rewards: Mapping[str, Estimate] | None = None,
        baseline_note: str = "no baseline given: run with --gauge-baseline DIR",
    ) -> None:
        self.metrics = metrics
        self.elo = elo
        self.baseline = baseline
        self.baseline_note = baseline_note
        self.repeats = dict(repeats or {})
        self.rewards = dict(rewards or {})
        self._tiers = tier_rows(elo) if elo is not None else {}

    # -- baseline and repeat terms ----------------------------------------------------------------

    def _comparison(self, term: str) -> BaselineComparison:
        if self.baseline is None:
            raise KeyError(f"{term}: {self.baseline_note}")
        return self.baseline

    def _inner(self, args: tuple[str, ...]) -> Term:
        if len(args) != 1:
            raise KeyError("delta takes one metric, e.g. delta(success_rate(agent_x))")
        try:
            return parse_term(args[0])
        except GateSyntaxError as err:
            raise KeyError(f"delta({args[0]}): {err.reason}") from None

    def _baseline_term(self, name: str, args: tuple[str, ...]) -> Estimate:
        if name == DELTA:
            inner = self._inner(args)
            return self._comparison(f"delta({inner})").delta(inner.name, inner.args)
        return self._comparison(f"{name}({', '.join(args)})").lookup(name, args)

    def _repeat_term(self, name: str, args: tuple[str, ...]) -> Estimate:
        want = 1 if name == "flaky_tasks" else 2
        if len(args) != want:
            example = f"{name}(agent_x)" if want == 1 else f"{name}(agent_x, 3)"
            raise KeyError(f"{name} takes {'one agent' if want == 1 else 'an agent and k'}, e.g. {example}")
        counts = self.repeats.get(args[0])
        if counts is None:
            known = ", ".join(sorted(self.repeats)) or "none"
            raise KeyError(f"{name}({', '.join(args)}): unknown agent {args[0]!r}; agents: {known}")
        if name == "flaky_tasks":
            return flaky_tasks(counts)[0]
        if not args[1].isdigit() or int(args[1]) < 1:
            raise KeyError(f"{name}({', '.join(args)}): k must be a whole number >= 1")
        k = int(args[1])
        most = int(counts.samples.max()) if counts.samples.size else 0
        if k > most:
            raise KeyError(f"{name}({', '.join(args)}): needs samples >= {k} per task; this suite has {most}")
        estimate = pass_at_k if name == "pass_at_k" else pass_hat_k
        return estimate(counts, k, rounds=self.metrics.rounds, seed=self.metrics.seed)

    # -- Elo terms --------------------------------------------------------------------------------

    def _report(self) -> EloReport:
        if self.elo is None:
            raise KeyError(NO_ELO)
        return self.elo

    def _agent(self, name: str, args: tuple[str, ...]) -> str:
        report = self._report()
        if len(args) != 1:
            raise KeyError(f"{name} takes one agent, e.g. {name}(agent_x); got {len(args)} arguments")
        agent = args[0].strip()
        if agent not in report.result.elo:  # collection checked the name: a declared agent, never judged
            known = ", ".join(sorted(report.result.agents))
            raise NoData(
                f"{name}({agent}): {agent!r} had no judged case in this run (its cases failed or were not "
                f"run), so it has no Elo; agents in the fit: {known}"
            )
        check = report.result.fit_check
        reason = check.reason(agent) if check is not None else None
        if reason:
            raise NoData(f"{name}({agent}): {reason}")
        if name != "elo" and agent not in self._tiers:
            tiers = ", ".join(sorted(self._tiers)) or "none"
            raise KeyError(
                f"{name}({agent}): unknown tier, {agent!r} is in no compute family; tiers: {tiers}"
            )
        return agent

    def _tasks(self, *agents: str) -> int:
        report = self._report()
        return min(report.judged_tasks.get(a, 0) for a in agents)

    def _elo_term(self, name: str, args: tuple[str, ...]) -> tuple[Estimate, np.ndarray]:
        """The estimate of an Elo term and its coefficients on the agents' Elo (in the fit's agent order;
        empty when the term has no value), so that differences of terms get their interval from the same
        fit (:func:`~pytest_gauge._internal.analysis.elo.linear_interval`)."""
        report = self._report()
        res = report.result
        agent = self._agent(name, tuple(args))
        i = res.agents.index(agent)
        coef = np.zeros(len(res.agents))
        coef[i] = 1.0
        if name == "elo":
            low, high = res.low[agent], res.high[agent]
            ok = finite(low) and finite(high)
            est = Estimate(
                res.elo[agent],
                self._tasks(agent),
                low if ok else None,
                high if ok else None,
                res.method if ok else "none",
            )
            return est, coef
        row, prev = self._tiers[agent]
        if prev is None:
            return Estimate(None, self._tasks(agent), None, None, "none"), np.zeros(0)
        n = self._tasks(agent, prev["agent"])
        coef[res.agents.index(prev["agent"])] = -1.0
        ok = row["delta_low"] is not None and row["delta_high"] is not None
        method = res.method if ok else "none"
        if name == "delta_elo":
            return Estimate(row["delta_elo"], n, row["delta_low"], row["delta_high"], method), coef
        rate = row["delta_elo_per_1k_tokens"]
        if rate is None:
            return Estimate(None, n, None, None, "none"), np.zeros(0)
        per_1k = (row["tokens_per_task"] - prev["tokens_per_task"]) / 1000.0
        low, high = row["delta_low"], row["delta_high"]
        if low is None or high is None:
            return Estimate(rate, n, None, None, "none"), coef / per_1k
        return Estimate(rate, n, low / per_1k, high / per_1k, method), coef / per_1k

    # -- MetricSource -----------------------------------------------------------------------------

    def lookup(self, name: str, args: tuple[str, ...] = ()) -> Estimate:
        """An Elo term or, for any other name, the suite metric; KeyError names the known agents/metrics."""
        if name in ELO_METRICS:
            return self._elo_term(name, tuple(args))[0]
        if name in BASELINE_METRICS:
            return self._baseline_term(name, tuple(args))
        if name in REPEAT_METRICS:
            return self._repeat_term(name, tuple(args))
        if name in HUMAN_METRICS and self.metrics.human is None:
            raise NoData(f"{name}: no human labels in this run: run with --gauge-labels FILE")
        if name == "mean_reward":
            if len(args) != 1 or args[0] not in self.rewards:
                known = ", ".join(sorted(self.rewards)) or "none"
                raise KeyError(f"mean_reward takes one agent, e.g. mean_reward(agent_x); agents: {known}")
            return self.rewards[args[0]]
        try:
            return self.metrics.lookup(name, tuple(args))
        except KeyError as err:
            reason = err.args[0] if err.args and isinstance(err.args[0], str) else str(err)
            if "unknown metric" in reason:
                raise KeyError(f"{reason}; {_elo_help()}") from None
            raise

    def without_usage(self, roles: tuple[str, ...] = ()) -> int:
        """Calls of ``roles`` (empty: every role) whose response had no usage (cost gates' lower bound)."""
        return self.metrics.without_usage(roles)

    def difference(self, left: Term, right: Term) -> Estimate:
        """``left - right``: two Elo terms from the same bootstrap resamples, two suite metrics from theirs;
        an Elo term minus a suite metric is a KeyError."""
        special = BASELINE_METRICS + REPEAT_METRICS
        if left.name in special or right.name in special:
            raise KeyError(f"cannot subtract {right} from {left}: baseline and repeat terms stand alone")
        l_elo, r_elo = left.name in ELO_METRICS, right.name in ELO_METRICS
        if not l_elo and not r_elo:
            return self.metrics.difference(left, right)
        if l_elo != r_elo:
            raise KeyError(
                f"cannot subtract {right} from {left}: one comes from the Elo fit, the other from the case "
                "metrics (no shared resamples)"
            )
        report = self._report()
        if left.name == right.name == "elo":
            a = self._agent("elo", tuple(left.args))
            b = self._agent("elo", tuple(right.args))
            return replace(elo_difference(report.result, a, b), n=self._tasks(a, b))
        ea, ca = self._elo_term(left.name, tuple(left.args))
        eb, cb = self._elo_term(right.name, tuple(right.args))
        n = min(ea.n, eb.n)
        if ea.value is None or eb.value is None:
            return Estimate(None, n, None, None, "none")
        value = ea.value - eb.value
        bounds = linear_interval(report.result, ca - cb) if ca.size and cb.size else None
        if bounds is None:
            return Estimate(value, n, None, None, "none")
        return Estimate(value, n, bounds[0], bounds[1], report.result.method)

    def _worst_tasks(self, agent: str) -> list[str]:
        """An Elo term's drivers: the agent's tasks by its per-task Elo, weakest first (tasks that allow
        a fit within themselves), e.g. ``t07 (Elo 812)``."""
        assert self.elo is not None
        per_task = self.elo.result.per_task
        scored = [(v[agent], t) for t, v in per_task.items() if agent in v and np.isfinite(v[agent])]
        return [f"{t} (Elo {v:.0f})" for v, t in sorted(scored)]

    def drivers(self, name: str, args: tuple[str, ...] = ()) -> list[str]:
        """What drove a gate's term: for an Elo term the agent's weakest tasks, otherwise the metric's own
        drivers (see ``SuiteMetrics.drivers``)."""
        if name in ELO_METRICS and len(args) == 1 and self.elo is not None:
            return self._worst_tasks(args[0].strip())
        if name in ELO_METRICS or name in REPEAT_METRICS:
            if name == "flaky_tasks" and args and args[0] in self.repeats:
                return list(flaky_tasks(self.repeats[args[0]])[1])
            return []
        if name in BASELINE_METRICS:
            if self.baseline is None:
                return []
            if name == DELTA:
                try:
                    inner = self._inner(tuple(args))
                except KeyError:
                    return []
                return self.baseline.drivers(inner.name, inner.args)
            return self.baseline.drivers(name, tuple(args))
        return self.metrics.drivers(name, tuple(args))
