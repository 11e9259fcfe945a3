"""The one metric table: every metric a gate may name, with its description, the argument lists it
takes and where its number comes from. The gate checker (:mod:`.gate_precheck`), the evaluator
(:mod:`.metrics`, :mod:`.gate_source`, :mod:`.baseline`), the reports (the HTML glossary, the summary
table) and the docs test read names and signatures from here: a new metric is one row here and its
number where ``source`` says (docs/architecture.md#adding-a-metric-with-a-gate)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "DELTA_METRICS",
    "METRICS",
    "SIGNATURES",
    "SUITE_METRICS",
    "ArgKind",
    "Metric",
    "Source",
    "names_from",
]

ArgKind = Literal["agent", "tier", "class", "agreement", "judge", "k", "user_error"]
"""``agent``: an agent of the suite; ``tier``: an agent in a compute family; ``class``: close | distant;
``agreement``: repeats | judges; ``judge``: a judge model; ``k``: a whole number >= 1; ``user_error``: a
kind of the user audit. Two ``agent`` arguments name a declared pair."""

Source = Literal["suite", "elo", "rewards", "baseline", "repeats"]
"""Where a metric's number comes from: ``suite``: :class:`~.metrics.SuiteMetrics` (the case and ledger
metrics); ``elo``: the Elo fit; ``rewards``: the per-agent mean rewards; ``baseline``: the comparison
with ``--gauge-baseline``; ``repeats``: the per-task successes of repeated samples."""


@dataclass(frozen=True)
class Metric:
    """One metric a gate may name: its name and description (arguments included), the argument lists it
    accepts (``signatures``; ``()``: no argument), where its number comes from (``source``), whether
    ``delta(...)`` takes it, and for suite metrics whether it has one suite-wide estimate in
    :attr:`SuiteMetrics.metrics` (``headline``), a row in the terminal summary's table (``summary``) and
    estimates per pair or per agent (``per``)."""

    name: str
    description: str
    signatures: tuple[tuple[ArgKind, ...], ...] = ((),)
    source: Source = "suite"
    headline: bool = True
    summary: bool = False
    per: Literal["pair", "agent"] | None = None
    delta: bool = False


METRICS: tuple[Metric, ...] = (
    Metric(
        "lrs",
        "lower-reward-selected rate; lrs(close), lrs(distant), lrs(agent_x, agent_y)",
        summary=True,
        per="pair",
        signatures=((), ("class",), ("agent", "agent")),
        delta=True,
    ),
    Metric("lrs_close", "LRS over close pairs", summary=True, delta=True),
    Metric("lrs_distant", "LRS over distant pairs", summary=True, delta=True),
    Metric("lrs_close_minus_distant", "LRS(close) - LRS(distant)"),
    Metric(
        "flip_rate",
        "position-flip rate; flip_rate(agent_x, agent_y)",
        summary=True,
        per="pair",
        signatures=((), ("agent", "agent")),
        delta=True,
    ),
    Metric(
        "position_bias",
        "share of non-tie verdicts for slot A; position_bias(agent_x, agent_y)",
        summary=True,
        per="pair",
        signatures=((), ("agent", "agent")),
        delta=True,
    ),
    Metric(
        "judge_error_rate",
        "error verdicts / all cases; judge_error_rate(agent_x, agent_y)",
        summary=True,
        per="pair",
        signatures=((), ("agent", "agent")),
    ),
    Metric(
        "sat_but_failed_rate",
        "user satisfied but task failed, per transcript; sat_but_failed_rate(agent)",
        summary=True,
        per="agent",
        signatures=((), ("agent",)),
    ),
    Metric(
        "success_rate",
        "successful transcripts; success_rate(agent)",
        summary=True,
        per="agent",
        signatures=((), ("agent",)),
        delta=True,
    ),
    Metric(
        "empty_turn_rate",
        "transcripts with an empty or blank turn (any role); empty_turn_rate(agent)",
        headline=False,
        per="agent",
        signatures=((), ("agent",)),
    ),
    Metric(
        "user_sim_error_rate",
        "transcripts whose simulated user erred (leaked a fact, ended early, stayed silent, never stated "
        "the task, or was satisfied with a failure it never questioned); user_sim_error_rate(kind)",
        signatures=((), ("user_error",)),
    ),
    Metric("verbosity_word_rate", "share of judge reasons with length/style words"),
    Metric("longer_wins_rate", "longer response chosen among equal-reward, unequal-length cases"),
    Metric(
        "judge_agreement",
        "observed agreement; judge_agreement(repeats|judges)",
        signatures=((), ("agreement",)),
    ),
    Metric("judge_kappa", "Cohen's kappa; judge_kappa(repeats|judges)", signatures=((), ("agreement",))),
    Metric(
        "judge_accuracy",
        "non-tie verdicts on unequal-reward cases choosing the higher rule reward: the main verdict; "
        "judge_accuracy(close|distant), judge_accuracy(judge|panel), "
        "judge_accuracy(judge|panel, close|distant)",
        signatures=((), ("class",), ("judge",), ("judge", "class")),
    ),
    Metric(
        "judge_rank_corr",
        "Spearman's rho of judge rewards vs rule rewards; judge_rank_corr(judge)",
        headline=False,
        signatures=((), ("judge",)),
    ),
    Metric(
        "human_judge_agreement",
        "judge verdicts equal to the blind human labels (--gauge-labels); human_judge_agreement(judge|panel)",
        headline=False,
        signatures=((), ("judge",)),
    ),
    Metric(
        "human_judge_kappa",
        "Cohen's kappa, judge vs human labels; human_judge_kappa(judge|panel)",
        headline=False,
        signatures=((), ("judge",)),
    ),
    Metric(
        "human_rules_agreement",
        "human labels equal to the rules' higher-reward slot (tie: equal)",
        headline=False,
    ),
    Metric("labeller_agreement", "two labellers' labels of one case agreeing", headline=False),
    Metric("labeller_kappa", "Cohen's kappa between labellers of one case", headline=False),
    Metric("cost_per_success", "total cost / successful transcripts", delta=True),
    Metric("total_cost", "agent + user_sim + judge cost"),
    Metric("agent_cost", "cost of agent calls"),
    Metric("user_sim_cost", "cost of user-simulator calls"),
    Metric("judge_cost", "cost of judge calls"),
    Metric("judge_cost_share", "judge cost / total cost"),
    Metric("elo", "Bradley-Terry Elo of an agent; elo(agent)", (("agent",),), "elo", delta=True),
    Metric(
        "delta_elo", "Elo gain over the previous compute tier; delta_elo(agent@tier)", (("tier",),), "elo"
    ),
    Metric("elo_per_1k_tokens", "Elo gain per 1k tokens; elo_per_1k_tokens(agent@tier)", (("tier",),), "elo"),
    Metric(
        "mean_reward",
        "mean rule reward, tasks weighted equally; mean_reward(agent)",
        (("agent",),),
        "rewards",
        delta=True,
    ),
    Metric(
        "regressions",
        "tasks that regressed since the baseline; regressions(agent)",
        (("agent",),),
        "baseline",
    ),
    Metric("fixes", "tasks fixed since the baseline; fixes(agent)", (("agent",),), "baseline"),
    Metric(
        "pass_at_k", "chance one of k attempts succeeds; pass_at_k(agent, k)", (("agent", "k"),), "repeats"
    ),
    Metric("pass_hat_k", "chance all k attempts succeed; pass_hat_k(agent, k)", (("agent", "k"),), "repeats"),
    Metric(
        "flaky_tasks",
        "tasks with some but not all samples succeeding; flaky_tasks(agent)",
        (("agent",),),
        "repeats",
    ),
)
"""Every metric a gate may name: the suite metrics first, in the order the help, ``SuiteMetrics.metrics``
and the reports list them, then those served by the Elo fit, the rewards, the baseline and repeats."""

SUITE_METRICS: tuple[Metric, ...] = tuple(m for m in METRICS if m.source == "suite")
"""The case and ledger metrics of :class:`~.metrics.SuiteMetrics` (the HTML glossary lists these)."""

SIGNATURES: dict[str, tuple[tuple[ArgKind, ...], ...]] = {m.name: m.signatures for m in METRICS}
"""Metric name -> the argument lists it accepts (what the gate checker reads)."""

DELTA_METRICS: tuple[str, ...] = tuple(m.name for m in METRICS if m.delta)
"""What ``delta(...)`` accepts (current minus baseline)."""


def names_from(source: Source) -> tuple[str, ...]:
    """The names of the metrics whose number comes from ``source``, in the table's order."""
    return tuple(m.name for m in METRICS if m.source == source)
