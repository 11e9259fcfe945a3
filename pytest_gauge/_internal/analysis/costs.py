"""What a run cost, from the ledger: per-role totals, the run's total, cost per success and the judge's
share (docs/protocol.md#costs), and the per-task cost tallies of the two cost ratio estimators.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..records import LedgerRecord, roles_in
from ..records.totals import role_totals
from .estimates import Accumulator, Estimate, Key, Stat, exact_estimate

if TYPE_CHECKING:
    from ..records import FloatArray

__all__ = [
    "COST_INCLUDES_RETRIES",
    "COST_RATIOS",
    "CostSummary",
    "RoleCost",
    "cost_ratios",
    "cost_summary",
    "fixed_costs",
]

COST_INCLUDES_RETRIES = True
"""Costs sum every ledger attempt: retries, failed requests that reported usage, and cache hits (nominal)."""


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


def cost_summary(ledger: Sequence[LedgerRecord], successes: int) -> CostSummary:
    """Per-role ledger totals, the total (None: unknown), cost per success and the judge's share."""
    per_role: dict[str, RoleCost] = {}
    for role in roles_in(ledger):
        totals = role_totals(ledger, role)
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


def fixed_costs(costs: CostSummary, n_ledger: int) -> dict[str, Estimate]:
    """The ledger sums gates may use: exact accounting figures of this run."""
    return {
        "total_cost": exact_estimate(costs.total_cost, n_ledger),
        **{f"{role}_cost": exact_estimate(c.cost, c.attempts) for role, c in costs.per_role.items()},
    }


COST_RATIOS = ("cost_per_success", "judge_cost_share")


def cost_ratios(
    acc: Accumulator, ledger: Sequence[LedgerRecord], success: FloatArray, costs: CostSummary
) -> dict[Key, Stat]:
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
        ("cost_per_success",): Stat("ratio", per_success, n=costs.successes, value=costs.cost_per_success),
        ("judge_cost_share",): Stat(
            "ratio", share, n=costs.per_role["judge"].attempts, value=costs.judge_share
        ),
    }
