"""The bootstrap over tasks, in one place: the seeded resample matrix and the percentile intervals and
resampled means/ratios every task-resampled statistic takes from it (metrics, paired deltas, repeats,
Elo).

A resample is a row of a ``rounds x tasks`` count matrix (how often each task is drawn); a statistic of
per-task sums is then one matrix product, and statistics computed from the same matrix share their
resamples, so their differences get consistent intervals. Inputs may carry a trailing axis of simulated
runs (``tasks x M``) for the validity simulations.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ..records import FloatArray

__all__ = [
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


def resample_counts(n_units: int, rounds: int, rng: np.random.Generator, chunk: int = 32) -> FloatArray:
    """``rounds x n_units`` matrix: how often each unit is drawn in each resample (with replacement).

    Drawn ``chunk`` rounds at a time into the result, so the peak is the result plus one chunk's
    temporaries (three arrays of ``chunk x n_units``: 4 MB at 5,000 tasks, where 256 rounds took 30 MB
    on top of the 80 MB matrix, the controller's peak); the draws are the same as one
    ``rng.integers(0, n_units, (rounds, n_units))`` for any even ``chunk`` (numpy draws two bounded
    32-bit values from each 64-bit one, so only an odd number of draws per call would shift them).
    """
    out = np.zeros((max(rounds, 0), n_units), dtype=np.float64)
    if n_units == 0 or rounds <= 0:
        return out
    for start in range(0, rounds, chunk):
        rows = min(chunk, rounds - start)
        idx = rng.integers(0, n_units, size=(rows, n_units))
        flat = (np.arange(rows)[:, None] * n_units + idx).ravel()
        out[start : start + rows] = np.bincount(flat, minlength=rows * n_units).reshape(rows, n_units)
    return out


_SHARED: dict[tuple[int, int, int], weakref.ref[FloatArray]] = {}


def task_counts(n_tasks: int, rounds: int, seed: int) -> FloatArray:
    """The seeded ``rounds x n_tasks`` resample matrix (how often each task is drawn in each resample).

    Read-only and shared: while a caller still holds the matrix of the same size, rounds and seed (the
    metrics' and the mean rewards' of one suite), the next caller gets that one instead of a copy of
    its draws (each is ``rounds x tasks`` float64: 80 MB at 5,000 tasks and 2,000 rounds). Nothing here
    keeps it alive: drawn again, it is the same draws."""
    key = (n_tasks, rounds, seed)
    kept = _SHARED.get(key)
    counts = kept() if kept is not None else None
    if counts is None:
        counts = resample_counts(n_tasks, rounds, np.random.default_rng(seed))
        counts.flags.writeable = False
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


def bootstrap_means(values: FloatArray, counts: FloatArray) -> FloatArray:
    """Resampled means of per-task ``values`` (shape ``(T,)`` or ``(T, M)``): ``(R,)`` or ``(R, M)``."""
    n = values.shape[0]
    if n == 0:
        return np.full((counts.shape[0], *values.shape[1:]), np.nan)
    return np.asarray(counts @ values / n, dtype=np.float64)


def ratio_rows(num: FloatArray, den: FloatArray) -> FloatArray:
    """``num / den`` elementwise, NaN where the denominator is 0 (an undefined resample)."""
    safe = np.where(den > 0, den, 1.0)
    return np.asarray(np.where(den > 0, num / safe, np.nan), dtype=np.float64)


def bootstrap_ratios(num: FloatArray, den: FloatArray, counts: FloatArray) -> FloatArray:
    """Resampled ratios ``sum(num) / sum(den)`` over tasks; NaN where a resample's denominator is 0."""
    return ratio_rows(counts @ num, counts @ den)
