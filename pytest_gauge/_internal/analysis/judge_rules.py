"""The judge against the rules: how often a judge picks the higher rule reward, whether its
``reward_a/b`` track the rule rewards (rank correlation, calibration table), per judge model, for the
main verdict and for the panel's majority; and whether a cheaper panel model is as accurate.

Pure helpers over case records; :mod:`.metrics` puts the per-task sums into its shared task bootstrap.
``PRIMARY`` names the main verdict (``CaseRecord.judge_choice``), ``PANEL`` the majority of the judge
models' first verdicts (a case without a strict majority has no panel verdict).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..records import CaseRecord, Judgment

if TYPE_CHECKING:
    from ..records import FloatArray

__all__ = [
    "CALIBRATION_EDGES",
    "NON_INFERIORITY",
    "PANEL",
    "PRIMARY",
    "CalibrationBin",
    "CheaperJudge",
    "RewardPoint",
    "average_ranks",
    "calibration",
    "correlation_rows",
    "panel_choice",
    "rank_moments",
    "reward_points",
]

PRIMARY = "main"
"""The main verdict of each case (the first judge model's first repeat, ``CaseRecord.judge_choice``)."""

PANEL = "panel"
"""The majority of the judge models' first verdicts (only with ``extra_models``)."""

CALIBRATION_EDGES: tuple[float, ...] = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
"""Judge reward bins of the calibration table (the last bin includes 1.0)."""

NON_INFERIORITY = 0.05
"""A cheaper panel model is "as accurate" when the lower bound of its accuracy minus the main judge's
(shared task resamples) is at least ``-NON_INFERIORITY``."""


@dataclass(frozen=True)
class RewardPoint:
    """One side of one verdict: the judge's reward for it and the rule reward, in task ``task``."""

    task: int
    judge_reward: float
    rule_reward: float


@dataclass(frozen=True)
class CalibrationBin:
    """Judge rewards in ``[low, high)`` (the last bin closed): how many, and their mean rule reward."""

    low: float
    high: float
    n: int
    mean_rule_reward: float | None

    def to_json(self) -> dict[str, Any]:
        """Plain JSON form."""
        return {"low": self.low, "high": self.high, "n": self.n, "mean_rule_reward": self.mean_rule_reward}


@dataclass(frozen=True)
class CheaperJudge:
    """A panel model at most ``cost_ratio`` times the main judge's cost per call whose accuracy is within
    :data:`NON_INFERIORITY` of the main judge's (``difference_low`` is the lower bound of the difference)."""

    model: str
    main: str
    cost_ratio: float
    difference: float
    difference_low: float

    def to_json(self) -> dict[str, Any]:
        """Plain JSON form."""
        return {
            "model": self.model,
            "main": self.main,
            "cost_ratio": self.cost_ratio,
            "difference": self.difference,
            "difference_low": self.difference_low,
        }


def panel_choice(judgments: Sequence[Judgment]) -> str | None:
    """The strict majority of the judge models' first non-error verdicts (A, B or tie), or None."""
    firsts: dict[str, tuple[int, str]] = {}
    for jd in judgments:
        if jd.judge not in firsts or jd.repeat < firsts[jd.judge][0]:
            firsts[jd.judge] = (jd.repeat, jd.choice)
    if len(firsts) < 2:
        return None
    votes = Counter(c for _, c in firsts.values() if c in ("A", "B", "tie"))
    if not votes:
        return None
    choice, count = votes.most_common(1)[0]
    return choice if 2 * count > sum(votes.values()) else None


def reward_points(r: CaseRecord, jd: Judgment, task: int) -> list[RewardPoint]:
    """Both sides of one non-error verdict with rewards, mapped from slots to the rule rewards."""
    if jd.choice == "error" or jd.reward_a is None or jd.reward_b is None:
        return []
    left_in_a = r.blind_order == "A=left"
    reward_left, reward_right = (jd.reward_a, jd.reward_b) if left_in_a else (jd.reward_b, jd.reward_a)
    return [RewardPoint(task, reward_left, r.reward_left), RewardPoint(task, reward_right, r.reward_right)]


def average_ranks(values: FloatArray) -> FloatArray:
    """Ranks 1..n with ties given their average rank (as Spearman's correlation needs)."""
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values), dtype=np.float64)
    ranks[order] = np.arange(1, len(values) + 1, dtype=np.float64)
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=ranks)
    return np.asarray(sums[inverse] / counts[inverse], dtype=np.float64)


def rank_moments(points: Sequence[RewardPoint], n_tasks: int) -> FloatArray:
    """Per-task sums (n, x, y, xx, yy, xy) of the two reward ranks, so a task-weighted Pearson
    correlation of the ranks (Spearman's rho on the full data) can be resampled by tasks."""
    out = np.zeros((n_tasks, 6), dtype=np.float64)
    if not points:
        return out
    x = average_ranks(np.array([p.judge_reward for p in points], dtype=np.float64))
    y = average_ranks(np.array([p.rule_reward for p in points], dtype=np.float64))
    task = np.array([p.task for p in points])
    for col, val in enumerate((np.ones_like(x), x, y, x * x, y * y, x * y)):
        out[:, col] = np.bincount(task, weights=val, minlength=n_tasks)
    return out


def correlation_rows(moments: FloatArray) -> FloatArray:
    """Pearson correlation per row of (n, x, y, xx, yy, xy) sums; NaN where a variance is 0."""
    n, sx, sy, sxx, syy, sxy = (moments[:, i] for i in range(6))
    safe = np.where(n > 0, n, 1.0)
    cov = sxy - sx * sy / safe
    vx, vy = sxx - sx * sx / safe, syy - sy * sy / safe
    ok = (n > 1) & (vx > 1e-12) & (vy > 1e-12)
    rho = np.where(ok, cov / np.sqrt(np.where(ok, vx * vy, 1.0)), np.nan)
    return np.asarray(rho, dtype=np.float64)


def calibration(points: Sequence[RewardPoint]) -> list[CalibrationBin]:
    """Judge reward bins (:data:`CALIBRATION_EDGES`) against the mean rule reward of their sides."""
    bins: list[CalibrationBin] = []
    last = len(CALIBRATION_EDGES) - 2
    for i, (low, high) in enumerate(itertools.pairwise(CALIBRATION_EDGES)):
        top = high if i == last else None
        inside = [p.rule_reward for p in points if low <= p.judge_reward < high or p.judge_reward == top]
        mean = float(np.mean(inside)) if inside else None
        bins.append(CalibrationBin(low, high, len(inside), mean))
    return bins
