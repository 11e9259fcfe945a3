"""What the pooled Elo fit estimates when tasks disagree (docs/protocol.md#elo-estimand).

Run: ``python benchmarks/bench_elo_estimand.py``. Five agents with mean per-task strengths -0.8, -0.3,
0, 0.4, 0.7 (logits); on each task every agent's strength is its mean plus a normal task effect of sd
``tau`` (tasks disagree about the order), and every pair is judged in both orders on 20,000 tasks (the
expected wins, so the fit is the estimand itself, without sampling error). Prints the pooled fit's Elo
gap between the worst and best agent against the gap of the mean per-task strengths, and the shrinkage.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_gauge._internal.analysis.elo import ELO_PER_THETA, fit_bradley_terry

THETA = np.array([-0.8, -0.3, 0.0, 0.4, 0.7])
TASKS = 20_000
TAUS = (0.0, 0.5, 1.0, 1.5, 2.0)


def pooled_gap(tau: float, rng: np.random.Generator) -> float:
    """The pooled fit's worst-to-best strength gap (logits) when task effects have sd ``tau``."""
    k = len(THETA)
    i, j = np.triu_indices(k, 1)
    strengths = THETA + tau * rng.standard_normal((TASKS, k))
    p = 1.0 / (1.0 + np.exp(-(strengths[:, i] - strengths[:, j])))
    wins = np.zeros((k, k))
    wins[i, j] = 2.0 * p.sum(axis=0)
    wins[j, i] = 2.0 * TASKS - wins[i, j]
    fit = fit_bradley_terry([f"a{n}" for n in range(k)], wins)
    return float(fit[-1] - fit[0])


def main() -> None:
    """Print one line per task-disagreement level."""
    rng = np.random.default_rng(8)
    truth = float(THETA[-1] - THETA[0])
    for tau in TAUS:
        gap = pooled_gap(tau, rng)
        print(
            f"task effect sd {tau:.1f}: pooled gap {ELO_PER_THETA * gap:.0f} Elo, mean per-task gap "
            f"{ELO_PER_THETA * truth:.0f} Elo, shrunk by {1 - gap / truth:.1%}"
        )


if __name__ == "__main__":
    main()
