"""The bootstrap over tasks, in one place: the seeded resample matrix and the percentile intervals and
resampled means/ratios every task-resampled statistic takes from it (metrics, paired deltas, repeats,
Elo).

A resample is a row of a ``rounds x tasks`` count matrix (how often each task is drawn); a statistic of
per-task sums is then one matrix product, and statistics computed from the same matrix share their
resamples, so their differences get consistent intervals. Inputs may carry a trailing axis of simulated
runs (``tasks x M``) for the validity simulations.

The run's matrix (:func:`task_counts`) is a :class:`CountMatrix`: the counts as one-byte integers (a
count past 255 widens them), an eighth of float64's memory (2 MB, not 16 MB, at 1,000 tasks and 2,000
rounds), multiplied a block of rounds and one column at a time. Each product is then a matrix-vector
product over whole rows, whose sums depend neither on the block (a multiple of 16 rounds: BLAS's
kernels take rows 4 to 16 at a time), nor on the number of columns or of BLAS threads; a float64
matrix times a ``tasks x K`` array is a matrix-matrix product, whose last bits change with the
number of threads, so with the machine.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Union

import numpy as np
import numpy.typing as npt

from .memory import BLOCK_ROUNDS

if TYPE_CHECKING:
    from ..records import FloatArray

__all__ = [
    "CountMatrix",
    "Counts",
    "bootstrap_means",
    "bootstrap_ratios",
    "percentile_bounds",
    "percentile_interval",
    "ratio_rows",
    "resample_counts",
    "task_counts",
]


def _tail(confidence: float) -> float:
    """The lower tail of a two-sided interval, in percent (exactly 2.5 for 95%)."""
    return 2.5 if confidence == 0.95 else (1.0 - confidence) / 2.0 * 100.0


def _count_blocks(
    n_units: int, rounds: int, rng: np.random.Generator, chunk: int
) -> Iterator[tuple[int, npt.NDArray[np.intp]]]:
    """The resample counts ``chunk`` rounds at a time: (first round, ``rows x n_units`` counts)."""
    for start in range(0, rounds, chunk):
        rows = min(chunk, rounds - start)
        idx = rng.integers(0, n_units, size=(rows, n_units))
        flat = (np.arange(rows)[:, None] * n_units + idx).ravel()
        yield start, np.bincount(flat, minlength=rows * n_units).reshape(rows, n_units)


def resample_counts(n_units: int, rounds: int, rng: np.random.Generator, chunk: int = 32) -> FloatArray:
    """``rounds x n_units`` matrix: how often each unit is drawn in each resample (with replacement).

    Drawn ``chunk`` rounds at a time into the result, so the peak is the result plus one chunk's
    temporaries (three arrays of ``chunk x n_units``: 4 MB at 5,000 tasks, where 256 rounds took 30 MB
    on top of the 80 MB matrix); the draws are the same as one ``rng.integers(0, n_units, (rounds,
    n_units))`` for any even ``chunk`` (numpy draws two bounded 32-bit values from each 64-bit one, so
    only an odd number of draws per call would shift them).
    """
    out = np.zeros((max(rounds, 0), n_units), dtype=np.float64)
    if n_units == 0 or rounds <= 0:
        return out
    for start, block in _count_blocks(n_units, rounds, rng, chunk):
        out[start : start + len(block)] = block
    return out


class CountMatrix:
    """A ``rounds x tasks`` resample count matrix held as small unsigned integers (read-only), and its
    products with per-task values: ``counts @ values`` is :func:`resample_counts`' float64 matrix times
    ``values``, each column a matrix-vector product of whole rows (see the module docstring)."""

    def __init__(self, counts: npt.NDArray[np.unsignedinteger[Any]]) -> None:
        counts.flags.writeable = False
        self._counts = counts

    @classmethod
    def draw(cls, n_units: int, rounds: int, rng: np.random.Generator, chunk: int = 32) -> CountMatrix:
        """The counts of :func:`resample_counts` (the same draws), one byte each until one passes 255."""
        out: npt.NDArray[np.unsignedinteger[Any]] = np.zeros((max(rounds, 0), n_units), dtype=np.uint8)
        if n_units and rounds > 0:
            for start, block in _count_blocks(n_units, rounds, rng, chunk):
                if (
                    int(block.max(initial=0)) > np.iinfo(out.dtype).max
                ):  # a count past 255: never past n_units
                    out = out.astype(np.min_scalar_type(n_units))
                out[start : start + len(block)] = block
        return cls(out)

    @property
    def shape(self) -> tuple[int, int]:
        rounds, tasks = self._counts.shape
        return rounds, tasks

    def dense(self) -> FloatArray:
        """The matrix as float64 (what :func:`resample_counts` returns for the same draws)."""
        return self._counts.astype(np.float64)

    def __matmul__(self, values: npt.ArrayLike) -> FloatArray:
        """``(rounds, ...)``: the counts times ``values`` of shape ``(tasks,)`` or ``(tasks, ...)``."""
        values = np.asarray(values, dtype=np.float64)
        tasks = values.shape[0] if values.ndim else -1
        if tasks != self._counts.shape[1]:
            raise ValueError(f"counts of {self._counts.shape[1]} tasks times values of shape {values.shape}")
        width = int(np.prod(values.shape[1:], dtype=np.int64))
        columns = np.ascontiguousarray(values.reshape(tasks, width).T)  # one contiguous row per column
        out = np.empty((self._counts.shape[0], len(columns)), dtype=np.float64)
        for start in range(0, self._counts.shape[0], BLOCK_ROUNDS):
            block = self._counts[start : start + BLOCK_ROUNDS].astype(np.float64)
            for j, column in enumerate(columns):
                out[start : start + len(block), j] = block @ column
        return out.reshape(self._counts.shape[0], *values.shape[1:])


Counts = Union["FloatArray", CountMatrix]
"""A resample count matrix: the run's :class:`CountMatrix`, or a float64 one (the validity simulations)."""


_SHARED: dict[tuple[int, int, int], weakref.ref[CountMatrix]] = {}


def task_counts(n_tasks: int, rounds: int, seed: int) -> CountMatrix:
    """The seeded ``rounds x n_tasks`` resample matrix (how often each task is drawn in each resample).

    Read-only and shared: while a caller still holds the matrix of the same size, rounds and seed (the
    metrics' and the mean rewards' of one suite), the next caller gets that one instead of a copy of
    its draws (each is ``rounds x tasks`` bytes: 10 MB at 5,000 tasks and 2,000 rounds). Nothing here
    keeps it alive: drawn again, it is the same draws."""
    key = (n_tasks, rounds, seed)
    kept = _SHARED.get(key)
    counts = kept() if kept is not None else None
    if counts is None:
        counts = CountMatrix.draw(n_tasks, rounds, np.random.default_rng(seed))
        for dead in [k for k, ref in _SHARED.items() if ref() is None]:
            del _SHARED[dead]  # only the released ones: a held matrix of another size stays shared
        _SHARED[key] = weakref.ref(counts)
    return counts


def percentile_interval(samples: FloatArray, confidence: float = 0.95) -> tuple[float | None, float | None]:
    """The percentile interval of resampled values, ignoring NaN (undefined resamples); None when no
    resample is finite."""
    vals = samples[np.isfinite(samples)]
    if vals.size == 0:
        return None, None
    tail = _tail(confidence)
    low, high = np.percentile(vals, [tail, 100.0 - tail])
    return float(low), float(high)


def percentile_bounds(samples: FloatArray, confidence: float = 0.95) -> tuple[FloatArray, FloatArray]:
    """Column-wise percentile intervals of a ``rounds x M`` matrix (NaN ignored; NaN where none finite):
    one interval per simulated dataset, for validity simulations."""
    tail = _tail(confidence)
    finite = np.asarray(np.isfinite(samples).any(axis=0), dtype=bool)
    filled = np.where(finite[None, :], samples, 0.0)
    low, high = np.nanpercentile(filled, [tail, 100.0 - tail], axis=0)
    nan = np.full(samples.shape[1], np.nan)
    return np.where(finite, low, nan), np.where(finite, high, nan)


def bootstrap_means(values: FloatArray, counts: Counts) -> FloatArray:
    """Resampled means of per-task ``values`` (shape ``(T,)`` or ``(T, M)``): ``(R,)`` or ``(R, M)``."""
    n = values.shape[0]
    if n == 0:
        return np.full((counts.shape[0], *values.shape[1:]), np.nan)
    return np.asarray(counts @ values / n, dtype=np.float64)


def ratio_rows(num: FloatArray, den: FloatArray) -> FloatArray:
    """``num / den`` elementwise, NaN where the denominator is 0 (an undefined resample)."""
    safe = np.where(den > 0, den, 1.0)
    return np.asarray(np.where(den > 0, num / safe, np.nan), dtype=np.float64)


def bootstrap_ratios(num: FloatArray, den: FloatArray, counts: Counts) -> FloatArray:
    """Resampled ratios ``sum(num) / sum(den)`` over tasks; NaN where a resample's denominator is 0."""
    return ratio_rows(counts @ num, counts @ den)
