"""A judge that shares its model with a contestant, measured against the rules: how often it picks its
own model's transcript when that one has the lower rule reward, against the same rate for the other
agents' lower-reward transcripts (docs/protocol.md#self-preference). Pure: records and models in."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..records import CaseRecord
from .estimates import Estimate, none_estimate, wilson

__all__ = ["SelfPreference", "self_judging", "self_preference", "shared_models"]


def shared_models(models: Mapping[str, str | None]) -> dict[str, tuple[str, ...]]:
    """Each judge model that is also an agent's model (manifest keys ``judge:<i>`` and ``agent:<name>``),
    with those agents."""
    agents = {k.removeprefix("agent:"): v for k, v in models.items() if k.startswith("agent:") and v}
    judges = sorted({v for k, v in models.items() if k.startswith("judge:") and v})
    out = {j: tuple(sorted(a for a, m in agents.items() if m == j)) for j in judges}
    return {j: a for j, a in out.items() if a}


def self_judging(suite: str, judge: str, agents: Sequence[str]) -> str:
    """The collection warning for a judge that shares its model with contestants."""
    return (
        f"pytest-gauge: suite {suite}: the judge model {judge!r} is also the model of {', '.join(agents)}:"
        " a judge may prefer its own model's answers; its self-preference is measured against the rules"
        ' (conclusion.md, "Self-preference")'
    )


@dataclass(frozen=True)
class SelfPreference:
    """The primary judge's pick of the lower-reward transcript: when it is its own model's (``own``),
    when it is another agent's (``others``), and ``own - others`` (Newcombe's interval from the two
    Wilson intervals)."""

    judge_model: str
    own_agents: tuple[str, ...]
    own: Estimate
    others: Estimate
    difference: Estimate


def _rate(hits: int, n: int) -> Estimate:
    if n == 0:
        return none_estimate()
    low, high = wilson(hits, n)
    return Estimate(hits / n, n, low, high, "wilson")


def _newcombe(a: Estimate, b: Estimate) -> Estimate:
    if None in (a.value, a.low, a.high, b.value, b.low, b.high):
        return none_estimate(min(a.n, b.n))
    pa, la, ua = float(a.value or 0), float(a.low or 0), float(a.high or 0)
    pb, lb, ub = float(b.value or 0), float(b.low or 0), float(b.high or 0)
    d = pa - pb
    low = d - math.sqrt((pa - la) ** 2 + (ub - pb) ** 2)
    high = d + math.sqrt((ua - pa) ** 2 + (pb - lb) ** 2)
    return Estimate(d, min(a.n, b.n), low, high, "newcombe")


def self_preference(
    records: Sequence[CaseRecord], models: Mapping[str, str | None], judge_model: str
) -> SelfPreference | None:
    """The measure for ``judge_model`` (the suite's first judge, who gives each record's verdict), or
    None when no agent shares it. Counted: judged cases (A or B) whose two rule rewards differ."""
    own_agents = shared_models(models).get(judge_model)
    if not own_agents:
        return None
    counts = {True: [0, 0], False: [0, 0]}  # lower-reward side is the judge's own model: [picked, n]
    for r in records:
        if r.lower_reward_selected is None or r.reward_left == r.reward_right:
            continue
        lower = r.agent_left if r.reward_left < r.reward_right else r.agent_right
        tally = counts[lower in own_agents]
        tally[0] += bool(r.lower_reward_selected)
        tally[1] += 1
    own, others = _rate(*counts[True]), _rate(*counts[False])
    return SelfPreference(judge_model, own_agents, own, others, _newcombe(own, others))
