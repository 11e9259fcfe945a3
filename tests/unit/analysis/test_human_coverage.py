"""Coverage of the human-label intervals: suites with a known human truth (the
simulator's hidden quality: which side is really better) and a judge right with a task-dependent
probability; 40 cases drawn by ``labels sample`` and labelled with the truth; the agreement and kappa
intervals must cover the whole suite's values in ≥ 93% of runs. A control shows the check can fail:
the same intervals at 60% of their width miss the target."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_gauge._internal.analysis.estimates import kappa_of
from pytest_gauge._internal.analysis.human import human_findings
from pytest_gauge._internal.analysis.label_sample import sample_cases
from pytest_gauge._internal.records import CaseRecord
from pytest_gauge._internal.records.labels import Label
from tests.unit.analysis.test_metrics import case

_CATS = {"A": 0, "B": 1, "tie": 2}


def _suite(
    rng: np.random.Generator, tasks: int, per_task: int, conc: float
) -> tuple[list[CaseRecord], dict[str, str], np.ndarray]:
    """One suite: each case's true better slot (ties 10%), rule rewards that follow the truth 85% of the
    time, and a judge that sees the truth with its task's probability, Beta(0.75 c, 0.25 c). The draws
    are batched over the suite's cases; also returns each case's (judge, truth) cell of the 3x3 table."""
    quality = rng.beta(conc * 0.75, conc * 0.25, size=tasks)
    size = tasks * per_task
    human = rng.choice(3, size=size, p=[0.45, 0.45, 0.1])
    sees = rng.random(size) < np.repeat(quality, per_task)
    other = (human + 1 + rng.integers(0, 2, size)) % 3  # one of the two wrong categories, evenly
    judge = np.where(sees, human, other)
    swapped = rng.random(size) < 0.15
    names = list(_CATS)
    records, truth = [], {}
    for i in range(size):
        t, c = divmod(i, per_task)
        h = names[human[i]]
        rewards = (1.0, 0.5) if h == "A" else (0.5, 1.0) if h == "B" else (0.7, 0.7)
        if swapped[i]:
            rewards = (rewards[1], rewards[0])
        j = names[judge[i]]
        r = case(f"t{t}", f"p{c % 2}", "x", "y" if c % 2 else "z", "AB", j, rewards=rewards, sample=c)
        records.append(r)
        truth[r.case_id] = h
    return records, truth, 3 * judge + human


def _coverage(runs: int, tasks: int, conc: float, shrink: float = 1.0) -> tuple[float, float]:
    rng = np.random.default_rng(29)
    hit_a = hit_k = 0
    for i in range(runs):
        records, truth, cells = _suite(rng, tasks, 10, conc)
        whole_a = float(np.mean(cells % 4 == 0))  # the table's diagonal: 0, 4 and 8
        table = np.bincount(cells, minlength=9).astype(float)
        whole_k = float(kappa_of(table[None, :])[0])
        sample = sample_cases(records, 40, seed=i)
        labels = [Label("s", c.case_id, truth[c.case_id], "sim", weight=c.weight) for c in sample]
        found = human_findings(records, labels)
        for est, whole, kind in (
            (found.agreement["main"], whole_a, "a"),
            (found.kappa["main"], whole_k, "k"),
        ):
            assert est.value is not None and est.low is not None and est.high is not None
            half_low, half_high = (est.value - est.low) * shrink, (est.high - est.value) * shrink
            inside = est.value - half_low <= whole <= est.value + half_high
            hit_a += inside and kind == "a"
            hit_k += inside and kind == "k"
    return hit_a / runs, hit_k / runs


@pytest.mark.slow
@pytest.mark.parametrize(("tasks", "conc"), [(20, 4.0), (30, 1.0)])
def test_agreement_and_kappa_intervals_cover_at_40_labelled_cases(tasks: int, conc: float) -> None:
    agreement, kappa = _coverage(500, tasks, conc)
    assert agreement >= 0.93, agreement
    assert kappa >= 0.93, kappa


@pytest.mark.slow
def test_the_coverage_check_fails_intervals_that_are_too_narrow() -> None:
    agreement, kappa = _coverage(300, 20, 4.0, shrink=0.5)
    assert agreement < 0.93 and kappa < 0.93, (agreement, kappa)
