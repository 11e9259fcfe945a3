"""How well the Bradley-Terry model behind the Elo table fits each pair of agents (docs/protocol.md#elo-fit).

Elo summarises every agent by one strength, so the head-to-head share of a pair is predicted by the
difference of two numbers. An intransitive triple (A beats B, B beats C, C beats A, each 75% of the time)
fits as three equal strengths and the table says A = B = C; nothing in it shows that A beat B 75% head to
head. The check compares each pair's observed wins with the fit's prediction, over tasks as clusters:
``z = sum_t (w_t - p n_t) / sqrt(T / (T - 1) sum_t (w_t - p n_t)^2)``, with ``w_t`` the first agent's wins
(ties count half) and ``n_t`` the pair's comparisons on task ``t``, ``p`` the fitted probability. A pair
is flagged when ``|z|`` exceeds the Bonferroni 5% two-sided critical value over the pairs compared, and
when the gap between observed and fitted share is at least :data:`MIN_GAP` (a real misfit, not a large
suite's trifle). Agents in a flagged pair are poorly fitted; an Elo gate on one is inconclusive.
Only where the MLE exists (an agent that never lost or never won is a different problem, reported by
:func:`~pytest_gauge._internal.analysis.elo.check_graph`). Pure functions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from ..records import FloatArray

__all__ = ["MIN_GAP", "MIN_TASKS", "FitCheck", "PairMisfit", "bt_fit_check"]

MIN_GAP = 0.1
"""Least gap between a pair's observed and fitted share for a misfit to be flagged."""

MIN_TASKS = 5
"""Fewer tasks comparing a pair: no check of that pair (the cluster variance needs a few)."""


@dataclass(frozen=True)
class PairMisfit:
    """One pair whose head-to-head share the Elo fit does not reproduce."""

    a: str
    b: str
    observed: float  # a's share of the pair's comparisons (ties count half)
    fitted: float  # the Bradley-Terry probability that a wins
    comparisons: int
    z: float

    def text(self) -> str:
        """``A beat B in 75% of 240 comparisons; the Elo fit says 50% (z = 6.1)``."""
        return (
            f"{self.a} beat {self.b} in {100 * self.observed:.0f}% of {self.comparisons} comparisons; "
            f"the Elo fit says {100 * self.fitted:.0f}% (z = {self.z:.2g})"
        )

    def to_json(self) -> dict[str, Any]:
        """Plain JSON form."""
        return {
            "a": self.a,
            "b": self.b,
            "observed": round(self.observed, 4),
            "fitted": round(self.fitted, 4),
            "comparisons": self.comparisons,
            "z": round(self.z, 3),
        }


@dataclass(frozen=True)
class FitCheck:
    """The pairs the Elo fit does not reproduce, the agents in them, and the critical |z| used."""

    misfits: tuple[PairMisfit, ...]
    critical: float
    pairs_checked: int

    @property
    def poorly_fitted(self) -> tuple[str, ...]:
        return tuple(sorted({x for m in self.misfits for x in (m.a, m.b)}))

    def reason(self, agent: str) -> str | None:
        """Why an Elo figure of ``agent`` is not to be trusted (None: it fits)."""
        found = [m.text() for m in self.misfits if agent in (m.a, m.b)]
        if not found:
            return None
        return f"the Elo model fits {agent} poorly (intransitive or inconsistent results): " + "; ".join(
            found
        )

    def to_json(self) -> dict[str, Any]:
        """Plain JSON form."""
        return {
            "misfits": [m.to_json() for m in self.misfits],
            "poorly_fitted": list(self.poorly_fitted),
            "critical_z": round(self.critical, 3),
            "pairs_checked": self.pairs_checked,
        }


def _pair_z(wins: FloatArray, games: FloatArray, p: float) -> float:
    """Cluster-robust z of one pair's observed wins against the fitted probability (tasks as clusters)."""
    tasks = float(np.sum(games > 0))
    resid = wins - p * games
    var = float(np.sum(resid * resid)) * tasks / max(tasks - 1.0, 1.0)
    total = float(np.sum(resid))
    if var <= 0:
        return 0.0
    return total / math.sqrt(var)


def bt_fit_check(agents: tuple[str, ...], tensor: FloatArray, theta: FloatArray) -> FitCheck:
    """The misfits of a Bradley-Terry fit: ``tensor[t, i, j]`` is agent i's wins over j on task t (ties
    half), ``theta`` the fitted strengths (natural log-odds scale) in ``agents`` order."""
    k = len(agents)
    games = tensor + np.transpose(tensor, (0, 2, 1))
    checked = [(i, j) for i in range(k) for j in range(i + 1, k) if np.sum(games[:, i, j] > 0) >= MIN_TASKS]
    critical = NormalDist().inv_cdf(1.0 - 0.025 / max(len(checked), 1))
    found = []
    for i, j in checked:
        n = float(games[:, i, j].sum())
        p = 1.0 / (1.0 + math.exp(-(float(theta[i]) - float(theta[j]))))
        observed = float(tensor[:, i, j].sum()) / n
        z = _pair_z(tensor[:, i, j], games[:, i, j], p)
        if abs(z) > critical and abs(observed - p) >= MIN_GAP:
            found.append(PairMisfit(agents[i], agents[j], observed, p, round(n), z))
    return FitCheck(tuple(found), critical, len(checked))
