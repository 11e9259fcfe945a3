"""The case value (task × pair × order × sample) and the suite's deterministic, readable case list.

Collection must be identical on every xdist worker, so the list depends only on the suite and the run
seed (for ``orders="seeded"``), never on time or worker.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from .tasks import Task

__all__ = ["Case", "build_cases", "seeded_order"]


@dataclass(frozen=True, slots=True)
class Case:
    """One judged case. ``case_id`` is also the pytest test id, e.g. ``t013-agent_x-vs-agent_y-BA``."""

    suite: str
    task_id: str
    left: str
    right: str
    order: str  # "AB": left agent in slot A; "BA": right agent in slot A
    sample: int = 0
    samples: int = 1

    @property
    def pair_id(self) -> str:
        return f"{self.left}-vs-{self.right}"

    @property
    def case_id(self) -> str:
        suffix = f"-s{self.sample}" if self.samples > 1 else ""
        return f"{self.task_id}-{self.pair_id}-{self.order}{suffix}"

    @property
    def blind_order(self) -> str:
        return "A=left" if self.order == "AB" else "A=right"


def seeded_order(seed: int, task_id: str, pair_id: str, sample: int) -> str:
    """The single order of a seeded run: a reproducible coin from (seed, task, pair, sample)."""
    digest = hashlib.sha256(f"{seed}|{task_id}|{pair_id}|{sample}".encode()).digest()
    return "AB" if digest[0] % 2 == 0 else "BA"


def build_cases(
    suite: str,
    tasks: Sequence[Task],
    pairs: Sequence[tuple[str, str]],
    *,
    orders: str,
    samples: int,
    seed: int,
) -> list[Case]:
    """All cases in collection order: task, then pair, then sample, then order (AB before BA)."""
    cases = []
    for task in tasks:
        for left, right in pairs:
            for sample in range(samples):
                if orders == "both":
                    chosen = ["AB", "BA"]
                else:
                    chosen = [seeded_order(seed, task.task_id, f"{left}-vs-{right}", sample)]
                for order in chosen:
                    cases.append(Case(suite, task.task_id, left, right, order, sample, samples))
    return cases
