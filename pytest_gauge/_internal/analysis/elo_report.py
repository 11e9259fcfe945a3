"""The Elo side of a suite's numbers (docs/protocol.md#elo): judged cases to Bradley-Terry comparisons,
ledger tokens per task, and Elo per token by compute tier, gathered into one :class:`EloReport` for the
reports and gates.

Tokens per task are nominal (every attempt with usage, cache hits included) and averaged over the agent's
tasks. "All roles" charges an agent its transcripts (agent and simulated-user calls, plus any other call
filed under its transcript work) and half of the judge tokens of every case it was judged in.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..records import CaseRecord, LedgerRecord
from ..records.work_key import parse_work
from .elo import Comparison, EloResult, fit_elo, tier_table
from .metric_table import names_from

__all__ = [
    "ELO_METRICS",
    "NO_ELO",
    "EloReport",
    "TokenStats",
    "agent_tokens",
    "build_elo_report",
    "comparisons_from_records",
    "finite",
    "ordered_agents",
    "tier_rows",
    "token_stats",
]

ELO_METRICS: tuple[str, ...] = names_from("elo")
"""Gate metric names served from the Elo fit; each takes one agent, e.g. ``elo(agent_x@bo4)``."""

NO_ELO = "elo needs at least two agents with judged cases"
_NO_FAMILIES: Mapping[str, Sequence[tuple[str, str]]] = MappingProxyType({})


# --------------------------------------------------------------------------------------------------
# Inputs: comparisons and tokens


def comparisons_from_records(records: Sequence[CaseRecord]) -> list[Comparison]:
    """One comparison per non-error judged case (both blind orders count): a = declared left agent,
    ``score_a`` 1 if the judge preferred it, 0 if it preferred the right agent, 0.5 on a tie."""
    out: list[Comparison] = []
    for r in records:
        if r.judge_choice == "error" or r.agent_left == r.agent_right:
            continue
        preferred = r.preferred_agent
        score = 0.5 if preferred is None else (1.0 if preferred == r.agent_left else 0.0)
        out.append(Comparison(r.task_id, r.agent_left, r.agent_right, score))
    return out


@dataclass(frozen=True)
class TokenStats:
    """Nominal tokens per task of one agent, averaged over its ``tasks`` (all roles, and its own calls)."""

    tokens_per_task: float
    agent_tokens_per_task: float
    tasks: int


def token_stats(ledger: Sequence[LedgerRecord], records: Sequence[CaseRecord]) -> dict[str, TokenStats]:
    """Per agent: mean over its tasks of its transcripts' tokens plus half the judge tokens of its cases
    (``tokens_per_task``) and of its own agent-role tokens (``agent_tokens_per_task``).

    An agent's tasks are those it has transcript calls or case records in. Judge calls of a case without a
    record cannot be attributed and are left out.
    """
    cases = {r.case_id: (r.task_id, r.agent_left, r.agent_right) for r in records}
    tasks: dict[str, set[str]] = {}
    total: dict[str, float] = {}
    own: dict[str, float] = {}
    for r in records:
        tasks.setdefault(r.agent_left, set()).add(r.task_id)
        tasks.setdefault(r.agent_right, set()).add(r.task_id)
    for x in ledger:
        work = parse_work(x.work)
        if work is not None and work.kind == "transcript":
            task, agent = work.owner, work.who
            tasks.setdefault(agent, set()).add(task)
            if x.usage is None:
                continue
            total[agent] = total.get(agent, 0.0) + x.usage.total_tokens
            if x.role == "agent":
                own[agent] = own.get(agent, 0.0) + x.usage.total_tokens
        elif work is not None and x.usage is not None:
            case = cases.get(work.owner)
            if case is None:
                continue
            _task, left, right = case
            for agent in {left, right}:
                total[agent] = total.get(agent, 0.0) + x.usage.total_tokens / 2.0
    out: dict[str, TokenStats] = {}
    for agent in sorted(tasks):
        n = len(tasks[agent])
        out[agent] = TokenStats(total.get(agent, 0.0) / n, own.get(agent, 0.0) / n, n)
    return out


# --------------------------------------------------------------------------------------------------
# The report


@dataclass
class EloReport:
    """Everything ``elo.md``/``elo.json``/``elo.svg`` and Elo gates need.

    ``tiers`` are :func:`elo.tier_table` rows (tokens per task = all roles, None without token data);
    ``families`` keep only tiers
    whose agent has comparisons (dropped ones are listed in ``notes``); ``judged_tasks`` counts, per agent,
    the tasks with at least one non-error comparison of it.
    """

    result: EloResult
    tokens: dict[str, TokenStats]
    families: dict[str, list[tuple[str, str]]]
    tiers: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)
    judged_tasks: dict[str, int] = field(default_factory=dict)
    seed: int = 0
    suite: str = ""


def build_elo_report(
    records: Sequence[CaseRecord],
    ledger: Sequence[LedgerRecord],
    *,
    families: Mapping[str, Sequence[tuple[str, str]]] = _NO_FAMILIES,
    seed: int = 0,
    rounds: int = 1000,
    anchor: float = 1000.0,
) -> EloReport | None:
    """Fit Elo on the judged cases, join tokens per task, and tabulate compute tiers; None when fewer
    than two agents have non-error comparisons."""
    comparisons = comparisons_from_records(records)
    agents = {c.a for c in comparisons} | {c.b for c in comparisons}
    if len(agents) < 2:
        return None
    result = fit_elo(comparisons, anchor=anchor, rounds=rounds, seed=seed)
    tokens = token_stats(ledger, records)
    notes: list[str] = []
    kept: dict[str, list[tuple[str, str]]] = {}
    for family, tiers in families.items():
        rows = [(str(t), str(a)) for t, a in tiers]
        missing = [f"{t} ({a})" for t, a in rows if a not in result.elo]
        if missing:
            notes.append(
                f"family {family!r}: tier(s) {', '.join(missing)} have no judged comparisons and are left out"
            )
        rows = [(t, a) for t, a in rows if a in result.elo]
        if rows:
            kept[family] = rows
    per_task_tokens = {a: s.tokens_per_task for a, s in tokens.items() if s.tokens_per_task > 0}
    judged: dict[str, set[str]] = {}
    for c in comparisons:
        judged.setdefault(c.a, set()).add(c.task_id)
        judged.setdefault(c.b, set()).add(c.task_id)
    return EloReport(
        result=result,
        tokens=tokens,
        families=kept,
        tiers=tier_table(kept, result, per_task_tokens),
        notes=notes,
        judged_tasks={a: len(judged[a]) for a in sorted(judged)},
        seed=seed,
        suite=records[0].suite if records else "",
    )


def agent_tokens(report: EloReport, agent: str) -> TokenStats | None:
    return report.tokens.get(agent)


def ordered_agents(report: EloReport) -> list[str]:
    """Agents by Elo, best first (name breaks ties)."""
    return sorted(report.result.agents, key=lambda a: (-report.result.elo[a], a))


def tier_rows(report: EloReport) -> dict[str, tuple[dict[str, Any], dict[str, Any] | None]]:
    """Each tier agent's row and the previous tier's row of its family (first family wins)."""
    out: dict[str, tuple[dict[str, Any], dict[str, Any] | None]] = {}
    prev: dict[str, Any] | None = None
    family: str | None = None
    for row in report.tiers:
        if row["family"] != family:
            family, prev = row["family"], None
        out.setdefault(row["agent"], (row, prev))
        prev = row
    return out


def finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)
