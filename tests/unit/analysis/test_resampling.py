"""The shared, read-only task resample matrix (analysis/resampling.py's task_counts)."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_gauge.analysis.resampling import resample_counts, task_counts


@pytest.mark.parametrize(("n", "rounds", "seed"), [(7, 50, 3), (40, 300, 11)])
def test_a_held_matrix_is_shared_and_equals_fresh_draws(n: int, rounds: int, seed: int) -> None:
    fresh = resample_counts(n, rounds, np.random.default_rng(seed))
    first = task_counts(n, rounds, seed)
    assert task_counts(n, rounds, seed) is first  # held: shared, not drawn again
    assert np.array_equal(first, fresh) and first.sum() == n * rounds
    with pytest.raises(ValueError):
        first[0, 0] = 99.0  # read-only: no caller can change another's resamples
    other = task_counts(n, rounds, seed + 1)
    assert other is not first and not np.array_equal(other, first)
    del first, other
    again = task_counts(n, rounds, seed)  # released: drawn again, the same draws
    assert np.array_equal(again, fresh)
