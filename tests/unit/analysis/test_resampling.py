"""The shared, read-only task resample matrix (analysis/resampling.py's task_counts)."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_gauge._internal.analysis.resampling import resample_counts, task_counts


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


@pytest.mark.parametrize("n", [1, 3, 8, 101])
@pytest.mark.parametrize("rounds", [1, 2, 31, 33, 257])
def test_the_chunked_draws_are_one_draw_of_the_whole_matrix(n: int, rounds: int) -> None:
    """Drawn a chunk of rounds at a time (odd and even sizes, a last chunk cut short): the counts of one
    ``rng.integers`` draw of every round at once."""
    idx = np.random.default_rng(5).integers(0, n, size=(rounds, n))
    whole = np.stack([np.bincount(row, minlength=n) for row in idx]).astype(np.float64)
    assert np.array_equal(resample_counts(n, rounds, np.random.default_rng(5)), whole)
    assert np.array_equal(resample_counts(n, rounds, np.random.default_rng(5), chunk=256), whole)
