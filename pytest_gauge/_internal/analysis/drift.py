"""Can a rate gate be decided before the last look although the rate may move during the run? The
check an adaptive run makes before it stops early on a gate (docs/gates.md#drift).

An early stop reads the tasks run so far as a sample of all of them, which holds only when nothing
changes during the run (a gateway route switching, a model update, a cache warming). Two checks, both
needed: (1) exchangeability: the tasks' rates show no trend in run order (:func:`trend_z` against
:func:`trend_critical`, two-sided 5%), which catches a move the looks have seen; (2) the remaining
tasks cannot flip it: the verdict still holds if every task not yet run sat :data:`DRIFT_LOGITS` beyond
the tasks run so far (their 95% bound) on the unfavourable side (:func:`worst_rates`), which covers a
move no look has seen yet: a step just after the deciding look is seen by no test at that look, so
only this bound stands against it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from .intervals import t_quantile

if TYPE_CHECKING:
    from ..records import FloatArray

__all__ = ["DRIFT_LOGITS", "MIN_TREND_TASKS", "drift_hold", "trend_critical", "trend_z", "worst_rates"]

DRIFT_LOGITS = 1.5
"""The move of a rate during the run that an early stop stands against by construction (a moderate
drift: odds times 4.5, 0.2 to 0.53, 0.5 to 0.82): a step of this size just after the deciding look cannot
carry the whole run's rate across the threshold (a step at 3/4 of 100 tasks: 1.2% wrong passes, the full
run 1.6%, 22% with the former 75% floor; benchmarks/bench_drift.py, tests/unit/analysis/test_drift.py).
A larger move is caught only when the looks have seen it (:func:`trend_critical`)."""
MIN_TREND_TASKS = 10
"""Fewer tasks give no trend test (a look that decides needs 20 anyway)."""


def trend_z(k: FloatArray, n: FloatArray) -> FloatArray:
    """z of the slope of the tasks' rates ``k / n`` on their run position (last axis, in run order):
    weighted least squares (weights: cases), HC1 standard error over tasks; 0 where it is undefined
    (no spread of rates, fewer than :data:`MIN_TREND_TASKS` tasks with cases)."""
    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    present = n > 0
    tasks = np.sum(present, axis=-1).astype(np.float64)
    w = np.where(present, n, 0.0)
    wsum = np.maximum(np.sum(w, axis=-1, keepdims=True), 1e-300)
    y = np.where(present, k / np.where(present, n, 1.0), 0.0)
    x = np.broadcast_to(np.linspace(0.0, 1.0, k.shape[-1]), k.shape)
    x_bar = np.sum(w * x, axis=-1, keepdims=True) / wsum
    y_bar = np.sum(w * y, axis=-1, keepdims=True) / wsum
    dx = np.where(present, x - x_bar, 0.0)
    sxx = np.sum(w * dx * dx, axis=-1)
    slope = np.sum(w * dx * (y - y_bar), axis=-1) / np.where(sxx > 0, sxx, 1.0)
    resid = np.where(present, y - y_bar - slope[..., None] * dx, 0.0)
    scale = tasks / np.maximum(tasks - 2.0, 1.0)
    var = scale * np.sum((w * dx * resid) ** 2, axis=-1) / np.where(sxx > 0, sxx, 1.0) ** 2
    ok = (tasks >= MIN_TREND_TASKS) & (sxx > 0) & (var > 0)
    return np.asarray(np.where(ok, slope / np.sqrt(np.where(ok, var, 1.0)), 0.0), dtype=np.float64)


def trend_critical(tasks: int) -> float:
    """|trend z| from which ``tasks`` tasks count as not exchangeable: Student's t on ``tasks - 2``
    degrees of freedom, two-sided 5% (HC1 with t, as Stata's robust regression). On stationary tasks
    (logit-normal, heavy-tailed, two-point mixture, Beta; 4,000 runs) it fires at 5.2-6.7% of looks of
    30-95 tasks and 6.6-7.5% at 20 (the HC1 variance is a little small on few tasks)."""
    return float(t_quantile(max(tasks - 2, 1)))


def _shift(p: float, logits: float) -> float:
    """``p`` moved by ``logits`` on the logit scale (0 and 1 stay)."""
    if p <= 0.0 or p >= 1.0:
        return p
    x = math.log(p / (1.0 - p)) + logits
    return 1.0 / (1.0 + math.exp(-x))


def worst_rates(low: float, high: float, seen: int, total: int) -> tuple[float, float]:
    """(lowest, highest) plausible rate of the whole run of ``total`` tasks when the ``seen`` run so far
    have the 95% interval (``low``, ``high``) and every task not yet run sits :data:`DRIFT_LOGITS` below
    ``low`` resp. above ``high``: the task-weighted mean of the two parts."""
    f = min(max(seen / max(total, 1), 0.0), 1.0)
    down = f * low + (1.0 - f) * _shift(low, -DRIFT_LOGITS)
    up = f * high + (1.0 - f) * _shift(high, DRIFT_LOGITS)
    return down, up


def drift_hold(
    k: FloatArray,
    n: FloatArray,
    total: int,
    passes: Callable[[float], bool],
    status: str,
    bounds: tuple[float | None, float | None],
) -> str | None:
    """Why a rate gate decided ``status`` ("pass" or "fail") on the tasks so far (``k``, ``n`` in run
    order, ``total`` planned; ``bounds`` their rate's 95% interval) must wait for the last look, or
    None: its rate has a trend in run order (:func:`trend_critical`), or the tasks not yet run, moved
    :data:`DRIFT_LOGITS` against the verdict, could flip it (``passes``: the gate's comparison of a
    value with its threshold)."""
    seen = len(np.asarray(k))
    if seen >= total:
        return None
    z = float(trend_z(k, n))
    critical = trend_critical(int(np.sum(np.asarray(n) > 0)))
    if abs(z) >= critical:
        return (
            f"not decided early: its rate moves in run order over the {seen} tasks run (trend z = "
            f"{z:+.2f}, |z| >= {critical:.2f}): the tasks run so far may not stand for the rest"
        )
    low, high = bounds
    if low is None or high is None:
        return "not decided early: its rate has no interval to bound the tasks not run"
    down, up = worst_rates(low, high, seen, total)
    sides = [passes(down), passes(up)]
    if (status == "pass" and all(sides)) or (status == "fail" and not any(sides)):
        return None
    return (
        f"not decided early: if the {total - seen} of {total} tasks not run moved {DRIFT_LOGITS:g} "
        f"logits against it, the run's rate could be {down:.3g}-{up:.3g}, which the {status} does not "
        "clear (an early stop must stand a moderate move of the rate later in the run)"
    )
