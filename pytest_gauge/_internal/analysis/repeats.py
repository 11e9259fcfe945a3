"""Repeats: pass@k, pass^k, flaky tasks and the run-to-run noise floor, from per-task success counts.

With ``samples = n`` transcripts per (task, agent), task ``t`` has ``c_t`` successes out of ``n_t``.

* ``pass@k`` (at least one of k attempts succeeds): the unbiased estimator ``1 - C(n-c, k) / C(n, k)``
  per task (Chen et al., 2021), averaged over tasks.
* ``pass^k`` (all k attempts succeed): ``C(c, k) / C(n, k)`` per task, averaged over tasks; unbiased
  for the mean of ``p_t^k``.
* flaky tasks: ``0 < c_t < n_t``.

Intervals are Wilson intervals on the effective count over tasks (``intervals.task_mean_wilson``); ``n``
is the number of tasks with at least ``k`` samples. The noise floor is the smallest success-rate
difference between two runs of the same suite and agent that is more than noise:
``1.96 * sqrt(2 * sum_t v_t / n_t) / T``, with ``v_t`` the within-task
variance ``p_t (1 - p_t)`` estimated without bias by ``c (n - c) / (n (n - 1))`` when a task has two
samples or more; with one sample it is not identifiable and the bound ``p (1 - p)`` of the pooled rate is
used (the law of total variance), which overstates the floor when tasks differ in difficulty.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from .estimates import Estimate, wilson
from .intervals import Z95, task_mean_wilson
from .metric_table import names_from

if TYPE_CHECKING:
    from ..records import FloatArray

__all__ = [
    "REPEAT_METRICS",
    "RepeatCounts",
    "counts_by_agent",
    "flaky_tasks",
    "noise_floor_of",
    "pass_at_k",
    "pass_at_k_values",
    "pass_hat_k",
    "pass_hat_k_values",
]

IntArray = npt.NDArray[np.int64]
REPEAT_METRICS: tuple[str, ...] = names_from("repeats")
"""Gate terms over repeated samples: ``pass_at_k(agent, k)``, ``pass_hat_k(agent, k)``,
``flaky_tasks(agent)``."""


@dataclass(frozen=True)
class RepeatCounts:
    """One agent's per-task successes ``c`` and samples ``n`` (same task order), and the task ids."""

    task_ids: tuple[str, ...]
    successes: IntArray
    samples: IntArray

    def __post_init__(self) -> None:
        if self.successes.shape != self.samples.shape or len(self.task_ids) != self.samples.shape[0]:
            raise ValueError("task_ids, successes and samples must have one entry per task")
        if np.any(self.successes < 0) or np.any(self.successes > self.samples):
            raise ValueError("successes must be in 0..samples per task")


def _comb_ratio(top: IntArray, bottom: IntArray, k: int) -> FloatArray:
    """``C(top, k) / C(bottom, k)`` elementwise as a stable product ``prod_i (top - i) / (bottom - i)``."""
    out = np.ones(top.shape, dtype=np.float64)
    for i in range(k):
        out *= np.clip(top - i, 0, None) / (bottom - i)
    return out


def pass_at_k_values(successes: IntArray, samples: IntArray, k: int) -> FloatArray:
    """Per-task unbiased pass@k, ``1 - C(n - c, k) / C(n, k)``; every task needs ``n >= k``."""
    _check_k(samples, k)
    return 1.0 - _comb_ratio(samples - successes, samples, k)


def pass_hat_k_values(successes: IntArray, samples: IntArray, k: int) -> FloatArray:
    """Per-task unbiased pass^k, ``C(c, k) / C(n, k)``; every task needs ``n >= k``."""
    _check_k(samples, k)
    return _comb_ratio(successes, samples, k)


def _check_k(samples: IntArray, k: int) -> None:
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if samples.size and int(samples.min()) < k:
        raise ValueError(
            f"k={k} needs at least {k} samples per task; the fewest a task has is {samples.min()}"
        )


def _usable(counts: RepeatCounts, k: int) -> tuple[IntArray, IntArray]:
    keep = counts.samples >= k
    return counts.successes[keep], counts.samples[keep]


def _mean_estimate(values: FloatArray, rounds: int, seed: int) -> Estimate:
    """The mean of per-task values in [0, 1] with :func:`~.intervals.task_mean_wilson`'s interval
    (``rounds`` and ``seed`` are kept for the callers; the interval no longer resamples)."""
    n = int(values.shape[0])
    if n == 0:
        return Estimate(None, 0, None, None, "none")
    if n == 1:
        value = float(values[0])
        return Estimate(value, 1, 0.0, 1.0, "task-wilson", 1.0)
    mean, low, high, df = task_mean_wilson(np.asarray(values, dtype=np.float64))
    return Estimate(float(mean), n, float(low), float(high), "task-wilson", float(df))


def pass_at_k(counts: RepeatCounts, k: int, rounds: int = 2000, seed: int = 0) -> Estimate:
    """pass@k over the tasks with at least ``k`` samples, with a seeded task-resampling interval."""
    c, n = _usable(counts, k)
    return _mean_estimate(pass_at_k_values(c, n, k), rounds, seed)


def pass_hat_k(counts: RepeatCounts, k: int, rounds: int = 2000, seed: int = 0) -> Estimate:
    """pass^k over the tasks with at least ``k`` samples, with a seeded task-resampling interval."""
    c, n = _usable(counts, k)
    return _mean_estimate(pass_hat_k_values(c, n, k), rounds, seed)


def flaky_tasks(counts: RepeatCounts) -> tuple[Estimate, tuple[str, ...]]:
    """The number of tasks with some but not all samples succeeding (tasks with 2+ samples), with a
    Wilson interval on that share scaled to a count, and the flaky task ids."""
    multi = counts.samples >= 2
    flaky = multi & (counts.successes > 0) & (counts.successes < counts.samples)
    n = int(multi.sum())
    ids = tuple(t for t, f in zip(counts.task_ids, flaky, strict=True) if f)
    if n == 0:
        return Estimate(None, 0, None, None, "none"), ids
    low, high = wilson(len(ids), n)
    return Estimate(float(len(ids)), n, low * n, high * n, "wilson"), ids


def noise_floor_of(counts: RepeatCounts, z: float = Z95) -> float | None:
    """The smallest success-rate difference between two independent runs of this suite that is more than
    noise (see the module text); None without tasks."""
    n_t = counts.samples[counts.samples > 0].astype(np.float64)
    c_t = counts.successes[counts.samples > 0].astype(np.float64)
    tasks = n_t.shape[0]
    if tasks == 0:
        return None
    if bool(np.all(n_t >= 2)):
        within = c_t * (n_t - c_t) / (n_t * (n_t - 1.0))
    else:
        pooled = float(c_t.sum() / n_t.sum())
        within = np.full(tasks, pooled * (1.0 - pooled))
    var_run = float((within / n_t).sum()) / tasks**2
    return z * math.sqrt(2.0 * var_run)


def counts_by_agent(successes: Mapping[tuple[str, str, int], bool]) -> dict[str, RepeatCounts]:
    """Per agent, each task's successes and samples from ``(task, agent, sample) -> success``."""
    per: dict[str, dict[str, list[int]]] = {}
    for (task, agent, _), ok in sorted(successes.items()):
        cell = per.setdefault(agent, {}).setdefault(task, [0, 0])
        cell[0] += int(ok)
        cell[1] += 1
    return {
        agent: RepeatCounts(
            tuple(tasks),
            np.array([v[0] for v in tasks.values()], dtype=np.int64),
            np.array([v[1] for v in tasks.values()], dtype=np.int64),
        )
        for agent, tasks in sorted(per.items())
    }
