"""What the end of a run keeps does not grow with the suite: the analysis holds no resample matrix
(``rounds x tasks`` counts) once its numbers are made, and never draws one it could share."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from pytest_gauge._internal.analysis import resampling
from pytest_gauge._internal.analysis.baseline import mean_rewards, outcomes_from_records
from pytest_gauge._internal.analysis.metrics import compute_metrics
from pytest_gauge._internal.analysis.resampling import task_counts
from pytest_gauge._internal.records import CaseRecord
from tests.unit.analysis.test_metrics import _simulate


def _held_matrices() -> list[tuple[int, int, int]]:
    """The resample matrices someone still holds (a drawn one is registered until released)."""
    gc.collect()
    return [key for key, ref in resampling._SHARED.items() if ref() is not None]


def _records(seed: int) -> list[CaseRecord]:
    return _simulate(np.random.default_rng(seed), 0.3, 0.1, n_tasks=30)


@pytest.mark.parametrize("seed", [2, 9])
def test_metrics_keep_no_resample_matrix_and_redraw_the_same(seed: int) -> None:
    records = _records(seed)
    held = compute_metrics(records, seed=seed, rounds=400)
    assert held._table.boot(("lrs", "close")) is not None  # computed while the matrix was held
    assert _held_matrices() == []  # the metrics alive, their matrix gone
    later = held.bootstrap_difference("lrs_close", (), "lrs", ("distant",))  # drawn again, then released
    assert _held_matrices() == []
    fresh = compute_metrics(records, seed=seed, rounds=400).bootstrap_difference(
        "lrs_close", (), "lrs", ("distant",)
    )
    assert (later.value, later.low, later.high) == (fresh.value, fresh.low, fresh.high)


def test_a_held_matrix_stays_shared_when_another_size_is_drawn() -> None:
    first = task_counts(11, 60, 5)
    other = task_counts(12, 60, 5)  # another size: drawn, and the first one is still the one shared
    assert task_counts(11, 60, 5) is first and task_counts(12, 60, 5) is other
    del first, other
    assert _held_matrices() == []


def test_mean_rewards_draw_one_matrix_for_agents_of_as_many_tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    drawn: list[tuple[int, int]] = []
    real = resampling.CountMatrix.draw

    def counting(n: int, rounds: int, rng: np.random.Generator, chunk: int = 32) -> resampling.CountMatrix:
        drawn.append((n, rounds))
        return real(n, rounds, rng, chunk)

    monkeypatch.setattr(resampling.CountMatrix, "draw", counting)
    outcomes = outcomes_from_records(_records(4))
    agents = {a for _, a, _ in outcomes}
    assert len(agents) == 4
    rewards = mean_rewards(outcomes, rounds=300, seed=1)
    assert sorted(rewards) == sorted(agents) and drawn == [(30, 300)]
    assert _held_matrices() == []
