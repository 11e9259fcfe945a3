"""The shared, read-only task resample matrix (analysis/resampling.py's task_counts): the same draws as
the float64 matrix, held a byte a count, and products that do not depend on how they are blocked."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from pytest_gauge._internal.analysis import resampling
from pytest_gauge._internal.analysis.resampling import CountMatrix, resample_counts, task_counts


@pytest.mark.parametrize(("n", "rounds", "seed"), [(7, 50, 3), (40, 300, 11)])
def test_a_held_matrix_is_shared_and_equals_fresh_draws(n: int, rounds: int, seed: int) -> None:
    fresh = resample_counts(n, rounds, np.random.default_rng(seed))
    first = task_counts(n, rounds, seed)
    assert task_counts(n, rounds, seed) is first  # held: shared, not drawn again
    dense = first.dense()
    assert np.array_equal(dense, fresh) and dense.sum() == n * rounds and first.shape == (rounds, n)
    dense[0, 0] = 99.0  # a copy: no caller can change another's resamples
    assert np.array_equal(first.dense(), fresh)
    other = task_counts(n, rounds, seed + 1)
    assert other is not first and not np.array_equal(other.dense(), dense)
    del first, other
    again = task_counts(n, rounds, seed)  # released: drawn again, the same draws
    assert np.array_equal(again.dense(), fresh)


@pytest.mark.parametrize("n", [1, 3, 8, 101])
@pytest.mark.parametrize("rounds", [1, 2, 31, 33, 257])
def test_the_chunked_draws_are_one_draw_of_the_whole_matrix(n: int, rounds: int) -> None:
    """Drawn a chunk of rounds at a time (odd and even sizes, a last chunk cut short): the counts of one
    ``rng.integers`` draw of every round at once, as float64 and as bytes alike."""
    idx = np.random.default_rng(5).integers(0, n, size=(rounds, n))
    whole = np.stack([np.bincount(row, minlength=n) for row in idx]).astype(np.float64)
    assert np.array_equal(resample_counts(n, rounds, np.random.default_rng(5)), whole)
    assert np.array_equal(resample_counts(n, rounds, np.random.default_rng(5), chunk=256), whole)
    assert np.array_equal(CountMatrix.draw(n, rounds, np.random.default_rng(5)).dense(), whole)


def _heavy(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Values of very different sizes (lognormal scale): sums whose last bits depend on their order."""
    return rng.standard_normal(shape) * np.exp(3.0 * rng.standard_normal(shape))


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize(("n", "rounds"), [(5, 40), (300, 600), (1000, 2000)])
def test_a_product_is_the_float64_matrix_times_each_column(n: int, rounds: int, seed: int) -> None:
    """``counts @ values``: for a vector, the float64 matrix's product bit for bit; for a ``tasks x K``
    array, that product column by column, and the matrix-matrix product's values to rounding."""
    rng = np.random.default_rng(seed)
    counts = CountMatrix.draw(n, rounds, np.random.default_rng(seed + 10))
    dense = counts.dense()
    vector, array = _heavy(rng, (n,)), _heavy(rng, (n, 4))
    assert np.array_equal(counts @ vector, dense @ vector)
    by_column = np.column_stack([dense @ np.ascontiguousarray(array[:, j]) for j in range(4)])
    product = counts @ array
    assert product.shape == (rounds, 4) and np.array_equal(product, by_column)
    assert np.allclose(product, dense @ array, rtol=1e-12, atol=1e-9 * float(np.abs(array).sum()))
    cube = _heavy(rng, (n, 2, 3))
    assert np.array_equal((counts @ cube).reshape(rounds, 6), counts @ cube.reshape(n, 6))


@pytest.mark.parametrize(("n", "rounds"), [(700, 300), (33, 1001)])
@pytest.mark.parametrize("block", [16, 64, 5000])
def test_a_product_does_not_depend_on_the_block_of_rounds(
    monkeypatch: pytest.MonkeyPatch, n: int, rounds: int, block: int
) -> None:
    """Any block of a multiple of 16 rounds (BLAS's kernels take rows 4 to 16 at a time) gives the
    whole matrix's product, the float64 one included."""
    counts = CountMatrix.draw(n, rounds, np.random.default_rng(4))
    values = _heavy(np.random.default_rng(3), (n, 5))
    expected = counts @ values
    monkeypatch.setattr(resampling, "BLOCK_ROUNDS", block)
    assert np.array_equal(counts @ values, expected)
    dense = counts.dense()
    assert np.array_equal(expected[:, 2], dense @ np.ascontiguousarray(values[:, 2]))


def test_a_count_past_255_widens_the_matrix(monkeypatch: pytest.MonkeyPatch) -> None:
    """A task drawn more than 255 times in a resample (possible from 256 tasks on) is counted right."""
    blocks = [np.full((2, 300), 1), np.array([[300] + [0] * 299, [0] * 299 + [300]])]

    def fixed(n: int, rounds: int, rng: np.random.Generator, chunk: int) -> Iterator[tuple[int, np.ndarray]]:
        yield from ((2 * i, b) for i, b in enumerate(blocks))

    monkeypatch.setattr(resampling, "_count_blocks", fixed)
    counts = CountMatrix.draw(300, 4, np.random.default_rng(0))
    assert np.array_equal(counts.dense(), np.vstack(blocks).astype(np.float64))
    assert np.array_equal(counts @ np.ones(300), np.full(4, 300.0))


@pytest.mark.parametrize(("n", "rounds"), [(0, 5), (4, 0), (0, 0)])
def test_an_empty_matrix_gives_the_empty_or_zero_products(n: int, rounds: int) -> None:
    counts = CountMatrix.draw(n, rounds, np.random.default_rng(0))
    for values in (np.ones(n), np.ones((n, 3))):
        product = counts @ values
        assert product.shape == (rounds, *values.shape[1:]) and np.array_equal(
            product, counts.dense() @ values
        )


def test_a_product_with_values_of_another_length_is_refused() -> None:
    counts = CountMatrix.draw(6, 10, np.random.default_rng(0))
    with pytest.raises(ValueError, match="counts of 6 tasks times values of shape"):
        counts @ np.ones(5)
