"""Did this change make it worse? One run compared with a baseline run of the same suite, paired by task.

Suites match by name, agents by name, tasks by ``task_id``; only the tasks both runs have enter the
deltas (tasks added or removed are listed, as are agents whose model or prompt changed). Per agent:
success-rate and mean-reward deltas with paired score intervals over tasks (Tango's, with a studentized
side for fractional differences: :func:`.paired.paired_interval`), McNemar's exact test on the
(task, sample) units that flipped, and the lists of units that regressed ("passed before, fails now")
and were fixed. Judge metrics and cost per success: paired ratio deltas. Elo: the change of each
agent's Elo relative to a reference agent both runs share (of the agents whose model and prompt did not
change, the one whose mean reward moved least), fitted on the shared tasks with the same task resamples
in both runs.

Everything here is pure: :class:`RunSide` is the typed input (built from records by the session layer
or the baseline loader) and :class:`BaselineComparison` the result, which also serves the gate terms
``delta(METRIC)``, ``regressions(agent)`` and ``fixes(agent)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..records import CaseRecord
from ..records.run_side import Outcome, RunSide, Unit, outcomes_from_records
from .elo import fit_elo
from .elo_report import comparisons_from_records
from .gates import BASELINE_METRICS, DELTA_METRICS, NoData
from .metrics import Estimate, classify_pairs
from .paired import PairedTally, mcnemar_exact, paired_mean_delta, paired_ratio_delta
from .power import min_detectable, noise_floor
from .resampling import bootstrap_means, percentile_interval, task_counts
from .skewed import cost_interval_note, ratio_delta_interval

if TYPE_CHECKING:
    from ..records import FloatArray
    from .resampling import Counts

__all__ = [
    "AgentComparison",
    "BaselineComparison",
    "Outcome",
    "RunSide",
    "TaskFlip",
    "compare_runs",
    "mean_rewards",
    "outcomes_from_records",
]

_JUDGE = ("flip_rate", "lrs", "lrs_close", "lrs_distant", "position_bias")
_AGENT = ("success_rate", "mean_reward", "elo")


@dataclass(frozen=True)
class TaskFlip:
    """A (task, sample) unit whose success changed, with both rewards and links to both transcripts."""

    task_id: str
    sample: int
    reward_before: float
    reward_now: float
    link_before: str | None
    link_now: str | None

    def label(self) -> str:
        """``task`` or ``task#sample`` for samples after the first."""
        return self.task_id if self.sample == 0 else f"{self.task_id}#{self.sample}"


@dataclass(frozen=True)
class AgentComparison:
    """One agent's paired comparison on the shared tasks; ``changed`` says what its manifest changed."""

    agent: str
    success_before: float | None
    success_now: float | None
    success_delta: Estimate
    reward_delta: Estimate
    mcnemar_p: float
    regressions: tuple[TaskFlip, ...]
    fixes: tuple[TaskFlip, ...]
    min_detectable: float | None
    noise_floor: float | None
    changed: tuple[str, ...] = ()


@dataclass(frozen=True)
class BaselineComparison:
    """The whole comparison; ``lookup``/``drivers`` serve the baseline gate terms."""

    suite: str
    shared_tasks: tuple[str, ...]
    added_tasks: tuple[str, ...]
    removed_tasks: tuple[str, ...]
    added_agents: tuple[str, ...]
    removed_agents: tuple[str, ...]
    agents: Mapping[str, AgentComparison]
    judge: Mapping[str, Estimate]
    cost_per_success: Estimate
    elo_reference: str | None
    elo: Mapping[str, Estimate]
    setup_changes: tuple[str, ...] = ()  # the judge's or user simulator's model, prompt or settings

    @property
    def judge_changes(self) -> tuple[str, ...]:
        """The changes of the judge (model, prompt, settings): its metrics then compare two judges."""
        return tuple(c for c in self.setup_changes if c.startswith("judge"))

    def _agent(self, term: str, args: tuple[str, ...]) -> AgentComparison:
        if len(args) != 1:
            raise KeyError(f"{term} takes one agent, e.g. {term}(agent_x); got {len(args)} arguments")
        if args[0] not in self.agents:
            known = ", ".join(sorted(self.agents)) or "none"
            raise KeyError(f"{term}({args[0]}): agent not in both runs; agents in both: {known}")
        return self.agents[args[0]]

    def delta(self, name: str, args: tuple[str, ...]) -> Estimate:
        """The delta estimate of ``name(args)``; KeyError naming what is known."""
        if name in ("success_rate", "mean_reward"):
            a = self._agent(name, args)
            return a.success_delta if name == "success_rate" else a.reward_delta
        if name == "elo":
            self._agent(name, args)
            if args[0] not in self.elo:
                raise KeyError(
                    f"delta(elo({args[0]})): no Elo delta (the runs share no unchanged reference agent)"
                )
            return self.elo[args[0]]
        if args:
            raise KeyError(f"delta({name}(...)): {name} takes no argument here (suite-level delta)")
        if name == "cost_per_success":
            return self.cost_per_success
        if name in self.judge:
            if self.judge_changes:
                raise NoData(
                    f"the judge changed since the baseline ({'; '.join(self.judge_changes)}): delta({name})"
                    " would compare two judges, not one judge's drift (allow_inconclusive to accept it)"
                )
            return self.judge[name]
        raise KeyError(f"delta({name}): unknown metric; delta(...) takes {', '.join(DELTA_METRICS)}")

    def lookup(self, name: str, args: tuple[str, ...]) -> Estimate:
        """``regressions(agent)`` / ``fixes(agent)`` as counts (n = shared units), or a delta by
        ``lookup("delta", ("success_rate(agent_x)",))``-style inner name and args."""
        if name in ("regressions", "fixes"):
            a = self._agent(name, args)
            flips = a.regressions if name == "regressions" else a.fixes
            n = a.success_delta.n
            return Estimate(float(len(flips)), n, float(len(flips)), float(len(flips)), "exact")
        raise KeyError(f"unknown baseline metric {name!r}; baseline terms: {', '.join(BASELINE_METRICS)}")

    def drivers(self, name: str, args: tuple[str, ...]) -> list[str]:
        """The units that drove ``regressions``/``fixes``/``delta(success_rate|mean_reward(agent))``."""
        if name in ("regressions", "fixes", "success_rate", "mean_reward") and len(args) == 1:
            a = self.agents.get(args[0])
            if a is None:
                return []
            flips = a.fixes if name == "fixes" else a.regressions
            return [f"{f.label()} (reward {f.reward_before:.2f} -> {f.reward_now:.2f})" for f in flips]
        return []

    def to_json(self) -> dict[str, Any]:
        """The ``"baseline"`` section of ``metrics.json``."""
        return {
            "shared_tasks": len(self.shared_tasks),
            "added_tasks": list(self.added_tasks),
            "removed_tasks": list(self.removed_tasks),
            "added_agents": list(self.added_agents),
            "removed_agents": list(self.removed_agents),
            "agents": {name: _agent_json(a) for name, a in self.agents.items()},
            "judge": {f"delta({k})": v.to_json() for k, v in self.judge.items()},
            "delta(cost_per_success)": self.cost_per_success.to_json(),
            "elo_reference": self.elo_reference,
            "elo": {f"delta(elo({k}))": v.to_json() for k, v in self.elo.items()},
            "setup_changes": list(self.setup_changes),
        }


def _agent_json(a: AgentComparison) -> dict[str, Any]:
    def flips(items: Sequence[TaskFlip]) -> list[dict[str, Any]]:
        return [
            {
                "task_id": f.task_id,
                "sample": f.sample,
                "reward_before": f.reward_before,
                "reward_now": f.reward_now,
                "transcript_before": f.link_before,
                "transcript_now": f.link_now,
            }
            for f in items
        ]

    return {
        "success_rate_before": a.success_before,
        "success_rate_now": a.success_now,
        "delta(success_rate)": a.success_delta.to_json(),
        "delta(mean_reward)": a.reward_delta.to_json(),
        "mcnemar_p": a.mcnemar_p,
        "regressions": flips(a.regressions),
        "fixes": flips(a.fixes),
        "min_detectable_regression": a.min_detectable,
        "noise_floor": a.noise_floor,
        "changed": list(a.changed),
    }


# --------------------------------------------------------------------------------------------------
# Computation


def _per_task(side: RunSide, agent: str, tasks: Sequence[str]) -> tuple[FloatArray, FloatArray]:
    """Per-task mean success and mean reward of ``agent`` over its samples (tasks in the given order)."""
    succ = np.zeros(len(tasks))
    reward = np.zeros(len(tasks))
    index = {t: i for i, t in enumerate(tasks)}
    n = np.zeros(len(tasks))
    for (task, a, _), o in side.outcomes.items():
        if a == agent and task in index:
            i = index[task]
            succ[i] += o.success
            reward[i] += o.reward
            n[i] += 1
    safe = np.where(n > 0, n, 1.0)
    return succ / safe, reward / safe


def _changes(agent: str, current: RunSide, baseline: RunSide) -> tuple[str, ...]:
    out: list[str] = []
    key = f"agent:{agent}"
    before, now = baseline.models.get(key), current.models.get(key)
    if before != now and before is not None and now is not None:
        out.append(f"model {before} -> {now}")
    pkey = f"prompt:agent:{agent}"
    if baseline.prompts.get(pkey) != current.prompts.get(pkey):
        out.append("prompt changed")
    return tuple(out)


def _compare_agent(agent: str, current: RunSide, baseline: RunSide, tasks: Sequence[str]) -> AgentComparison:
    cur_s, cur_r = _per_task(current, agent, tasks)
    base_s, base_r = _per_task(baseline, agent, tasks)
    shared = set(tasks)
    units = sorted(u for u in current.outcomes if u[1] == agent and u[0] in shared and u in baseline.outcomes)
    regressions: list[TaskFlip] = []
    fixes: list[TaskFlip] = []
    for u in units:
        now, before = current.outcomes[u], baseline.outcomes[u]
        if now.success != before.success:
            flip = TaskFlip(
                u[0], u[2], before.reward, now.reward, baseline.links.get(u), current.links.get(u)
            )
            (fixes if now.success else regressions).append(flip)
    success = paired_mean_delta(cur_s, base_s)
    n = len(tasks)
    d = cur_s - base_s
    sd = float(d.std(ddof=1)) if n > 1 and bool(np.any(d != 0)) else math.nan  # no flips: unknown
    return AgentComparison(
        agent=agent,
        success_before=float(base_s.mean()) if n else None,
        success_now=float(cur_s.mean()) if n else None,
        success_delta=success,
        reward_delta=paired_mean_delta(cur_r, base_r),
        mcnemar_p=mcnemar_exact(len(regressions), len(fixes)),
        regressions=tuple(regressions),
        fixes=tuple(fixes),
        min_detectable=min_detectable(sd, n),
        noise_floor=noise_floor(sd, n),
        changed=_changes(agent, current, baseline),
    )


def _judge_tallies(
    records: Sequence[CaseRecord], tasks: Sequence[str], close_threshold: float
) -> dict[str, tuple[FloatArray, FloatArray]]:
    """Per-task (numerator, denominator) of the judge metrics (definitions: docs/protocol.md#metrics)."""
    index = {t: i for i, t in enumerate(tasks)}
    out = {m: (np.zeros(len(tasks)), np.zeros(len(tasks))) for m in _JUDGE}
    classes = classify_pairs(records, close_threshold)

    def add(metric: str, i: int, hit: bool) -> None:
        out[metric][0][i] += hit
        out[metric][1][i] += 1

    groups: dict[tuple[str, str, int], dict[str, CaseRecord]] = {}
    for r in records:
        i = index.get(r.task_id)
        if i is None:
            continue
        groups.setdefault((r.task_id, r.pair_id, r.sample), {})[r.blind_order] = r
        if r.judge_choice not in ("A", "B"):
            continue
        add("position_bias", i, r.judge_choice == "A")
        if r.reward_left != r.reward_right:
            low = r.lower_reward_selected is True
            add("lrs", i, low)
            add(f"lrs_{classes[(r.agent_left, r.agent_right)]}", i, low)
    for (task, _, _), by_order in groups.items():
        ab, ba = by_order.get("A=left"), by_order.get("A=right")
        if ab is None or ba is None or "error" in (ab.judge_choice, ba.judge_choice):
            continue
        add("flip_rate", index[task], ab.preferred_agent != ba.preferred_agent)
    return out


def _cost_tally(side: RunSide, tasks: Sequence[str]) -> tuple[FloatArray, FloatArray] | None:
    """Per-task (cost, successes) for cost per success; None when any shared task's cost is unknown."""
    costs = [side.task_costs.get(t) for t in tasks]
    if any(c is None for c in costs):
        return None
    index = {t: i for i, t in enumerate(tasks)}
    succ = np.zeros(len(tasks))
    for (task, _, _), o in side.outcomes.items():
        if task in index:
            succ[index[task]] += o.success
    return np.array([float(c or 0.0) for c in costs]), succ


def _cost_delta(
    current: tuple[FloatArray, FloatArray],
    baseline: tuple[FloatArray, FloatArray],
    counts: Counts,
    seed: int,
) -> Estimate:
    """``delta(cost_per_success)``: the paired skewed-bill interval (:mod:`.skewed`), none with the reason
    below what it supports."""
    cur, base = PairedTally(current[0], current[1], baseline[0], baseline[1]).ratios()
    n = round(min(float(current[1].sum()), float(baseline[1].sum())))
    if cur is None or base is None:
        return Estimate(None, n, None, None, "none")
    costed = min(int(np.sum(current[0] > 0)), int(np.sum(baseline[0] > 0)))
    note = cost_interval_note(current[0].shape[0], costed)
    low, high = ratio_delta_interval(current, baseline, counts, seed) if note is None else (None, None)
    if low is None or high is None or not (np.isfinite(low[0]) and np.isfinite(high[0])):
        return Estimate(cur - base, n, None, None, "paired-skewed-ratio", note=note or "no interval")
    return Estimate(cur - base, n, float(low[0]), float(high[0]), "paired-skewed-ratio")


def _elo_deltas(
    current: RunSide, baseline: RunSide, agents: Sequence[str], tasks: Sequence[str], rounds: int, seed: int
) -> tuple[str | None, dict[str, Estimate]]:
    """Each agent's Elo relative to the reference, now minus before, fitted on the shared tasks; the
    reference is the first of ``agents`` (ordered most stable first) whose model and prompt did not change.
    Both fits use the same seed over the same sorted task list, so they resample the same tasks (paired)."""
    unchanged = [a for a in agents if not _changes(a, current, baseline)]
    if len(agents) < 2 or not unchanged:
        return None, {}
    ref = unchanged[0]
    fits = []
    shared = set(tasks)
    for side in (current, baseline):
        comps = [c for c in comparisons_from_records(side.records) if c.task_id in shared]
        if len({c.a for c in comps} | {c.b for c in comps}) < 2:
            return None, {}
        fits.append(fit_elo(comps, rounds=rounds, seed=seed))
    out: dict[str, Estimate] = {}
    for a in sorted(agents):
        if a == ref or not all(a in f.elo and ref in f.elo for f in fits):
            continue
        values = [f.elo[a] - f.elo[ref] for f in fits]
        samples = []
        for f in fits:
            i, j = f.agents.index(a), f.agents.index(ref)
            samples.append(f.samples[:, i] - f.samples[:, j] if f.samples.shape[0] else np.zeros(0))
        n = min(f.n_tasks for f in fits)
        if samples[0].size and samples[0].size == samples[1].size:
            low, high = percentile_interval(samples[0] - samples[1])
            method = "paired-bootstrap-tasks" if fits[0].n_tasks == fits[1].n_tasks else "bootstrap-tasks"
            out[a] = Estimate(values[0] - values[1], n, low, high, method)
        else:
            out[a] = Estimate(values[0] - values[1], n, None, None, "none")
    return ref, out


def compare_runs(
    current: RunSide,
    baseline: RunSide,
    *,
    close_threshold: float = 0.1,
    rounds: int = 2000,
    seed: int = 0,
    elo_rounds: int = 1000,
) -> BaselineComparison:
    """Compare ``current`` with ``baseline`` on their shared tasks (see the module text); seeded."""
    base_tasks, cur_tasks = set(baseline.tasks), set(current.tasks)
    tasks = tuple(t for t in current.tasks if t in base_tasks)
    base_agents, cur_agents = set(baseline.agents()), set(current.agents())
    agents = sorted(base_agents & cur_agents)
    counts = task_counts(len(tasks), rounds, seed)
    per_agent = {a: _compare_agent(a, current, baseline, tasks) for a in agents}
    cur_j = _judge_tallies(current.records, tasks, close_threshold)
    base_j = _judge_tallies(baseline.records, tasks, close_threshold)
    judge = {
        m: paired_ratio_delta(PairedTally(cur_j[m][0], cur_j[m][1], base_j[m][0], base_j[m][1]), counts)
        for m in _JUDGE
    }
    cur_c, base_c = _cost_tally(current, tasks), _cost_tally(baseline, tasks)
    if cur_c is None or base_c is None:
        cost = Estimate(None, 0, None, None, "none")
    else:
        cost = _cost_delta(cur_c, base_c, counts, seed)
    # the reference: the agent whose outcomes moved least (a weakened agent with an unchanged manifest
    # would make every other agent look changed)
    stable = sorted(agents, key=lambda a: (abs(per_agent[a].reward_delta.value or 0.0), a))
    ref, elo = _elo_deltas(current, baseline, stable, tasks, elo_rounds, seed)
    return BaselineComparison(
        suite=current.suite,
        shared_tasks=tasks,
        added_tasks=tuple(t for t in current.tasks if t not in base_tasks),
        removed_tasks=tuple(t for t in baseline.tasks if t not in cur_tasks),
        added_agents=tuple(sorted(cur_agents - base_agents)),
        removed_agents=tuple(sorted(base_agents - cur_agents)),
        agents=per_agent,
        judge=judge,
        cost_per_success=cost,
        elo_reference=ref,
        elo=elo,
        setup_changes=setup_changes(current.setup, baseline.setup),
    )


def setup_changes(current: Mapping[str, str], baseline: Mapping[str, str]) -> tuple[str, ...]:
    """Every setting both runs record that differs (``judge:0 model sim-judge -> gpt-x``; prompts by
    hash: ``judge prompt changed``), sorted; a setting only one run records is not compared."""
    out = []
    for key in sorted(set(current) & set(baseline)):
        before, now = baseline[key], current[key]
        if before != now:
            out.append(f"{key} changed" if "prompt" in key else f"{key} {before} -> {now}")
    return tuple(out)


def mean_rewards(outcomes: Mapping[Unit, Outcome], rounds: int = 2000, seed: int = 0) -> dict[str, Estimate]:
    """Each agent's mean rule reward (tasks weighted equally, samples averaged within a task) with a
    task-resampling interval: the ``mean_reward(agent)`` gate term."""
    out: dict[str, Estimate] = {}
    counts: Counts | None = None  # the last agent's matrix, held so the next agent of as many tasks shares it
    for agent in sorted({a for _, a, _ in outcomes}):
        tasks = sorted({t for t, a, _ in outcomes if a == agent})
        side = RunSide("", tuple(tasks), (), outcomes, {})
        reward = _per_task(side, agent, tasks)[1]
        counts = task_counts(len(tasks), rounds, seed)
        low, high = percentile_interval(bootstrap_means(reward, counts))
        out[agent] = Estimate(float(reward.mean()), len(tasks), low, high, "bootstrap-tasks")
    return out
