"""Which cases to label: a stratified sample of a run's cases, with weights that keep
the human-label estimates unbiased for the whole suite (docs/protocol.md#human-labels).

Each case goes into the first stratum that fits (``LABEL_STRATA``): the judge chose the lower rule reward
(``disagree``), its verdict flipped with the order (``flip``), a close pair (``close``), the rest. The
``n`` cases are shared equally between the non-empty strata (a stratum smaller than its share gives the
rest to the others, in that order), drawn at random within each, and offered in a shuffled order so the
page never shows a case's stratum. A case's weight is its stratum's size over the cases drawn from it:
its inverse inclusion probability.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..records import CaseRecord
from ..records.labels import LABEL_STRATA, SampleCase
from .metrics import classify_pairs

__all__ = ["allocate", "sample_cases", "strata_of"]


def _flipped(records: Sequence[CaseRecord]) -> set[tuple[str, str, int]]:
    """The (task, pair, sample) groups judged in both orders, neither an error, whose preferred agent
    differs between the orders (``flip_rate``'s numerator)."""
    groups: dict[tuple[str, str, int], dict[str, CaseRecord]] = {}
    for r in records:
        groups.setdefault((r.task_id, r.pair_id, r.sample), {}).setdefault(r.blind_order, r)
    out: set[tuple[str, str, int]] = set()
    for key, by_order in groups.items():
        ab, ba = by_order.get("A=left"), by_order.get("A=right")
        if ab is None or ba is None or "error" in (ab.judge_choice, ba.judge_choice):
            continue
        if ab.preferred_agent != ba.preferred_agent:
            out.add(key)
    return out


def strata_of(records: Sequence[CaseRecord], close_threshold: float = 0.1) -> dict[str, list[str]]:
    """The case ids of each stratum (``LABEL_STRATA`` order, the records' order within each)."""
    classes = classify_pairs(records, close_threshold)
    flips = _flipped(records)
    strata: dict[str, list[str]] = {s: [] for s in LABEL_STRATA}
    for r in records:
        if r.lower_reward_selected:
            strata["disagree"].append(r.case_id)
        elif (r.task_id, r.pair_id, r.sample) in flips:
            strata["flip"].append(r.case_id)
        elif classes.get((r.agent_left, r.agent_right)) == "close":
            strata["close"].append(r.case_id)
        else:
            strata["rest"].append(r.case_id)
    return strata


def allocate(sizes: Sequence[int], n: int) -> list[int]:
    """How many cases each stratum gives: ``n`` shared equally between the non-empty strata, a stratum
    smaller than its share giving the rest to the others (earlier strata first on a remainder)."""
    take = [0] * len(sizes)
    left = min(n, sum(sizes))
    while left > 0:
        room = [i for i, s in enumerate(sizes) if take[i] < s]
        share, extra = divmod(left, len(room))
        for k, i in enumerate(room):
            add = min(sizes[i] - take[i], share + (k < extra))
            take[i] += add
            left -= add
    return take


def sample_cases(
    records: Sequence[CaseRecord], n: int, seed: int = 0, close_threshold: float = 0.1
) -> list[SampleCase]:
    """``n`` cases (all of them when the run has fewer) drawn by stratum with their weights, shuffled."""
    rng = np.random.default_rng(seed)
    strata = strata_of(records, close_threshold)
    names = list(strata)
    counts = allocate([len(strata[s]) for s in names], n)
    drawn: list[tuple[str, str, float]] = []
    for name, k in zip(names, counts, strict=True):
        ids = strata[name]
        if not k:
            continue
        picks = rng.choice(len(ids), size=k, replace=False)
        drawn += [(ids[int(i)], name, len(ids) / k) for i in sorted(picks)]
    order = rng.permutation(len(drawn))
    return [
        SampleCase(drawn[int(i)][0], drawn[int(i)][1], drawn[int(i)][2], pos) for pos, i in enumerate(order)
    ]
