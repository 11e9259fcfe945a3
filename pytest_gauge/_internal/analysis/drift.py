"""Does a rate move in run order? The check an adaptive run makes before it stops early on a gate
(docs/protocol.md#drift).

An early stop reads the tasks run so far as a sample of all of them, which holds only when nothing
changes during the run. A rate that drifts in run order (a gateway route switching, a model update, a
cache warming) is seen by the early looks in its early regime, and most of a drift is still ahead at
the look that would stop the run: a test for a trend at that look (:func:`trend_z`, even at a permissive
30% level) held back only a sixth of the wrong early passes (benchmarks/bench_drift.py). So a look
that decides a rate gate also asks where the rate is heading (:func:`extrapolated`: the linear trend in
run order fitted to the tasks so far, its mean over the whole run, with the slope's uncertainty carried
to the tasks not yet run), and the gate is decided early only when that extrapolation, widened by
:data:`EXTRAPOLATION_Z` standard errors, agrees (:func:`drift_hold`). Without drift the extrapolation
sits on the rate so far and only its width costs looks; with one it leans where the rate is going.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ..records import FloatArray

__all__ = ["EXTRAPOLATION_Z", "MIN_FRACTION", "MIN_TREND_TASKS", "drift_hold", "extrapolated", "trend_z"]

EXTRAPOLATION_Z = 3.0
"""Standard errors around the extrapolated rate that must lie on the decided side (benchmarks/
bench_drift.py, 600 runs: 1.5, 2.5 and 3 gave wrong passes of 17.0, 2.7 and 1.5% at 100 tasks under a
1.5-logit drift, the full run 1.7%; a clear gate's median run 65, 75 and 85 of 100 tasks, 60 unchecked).
3, not 2.5, since a drift that starts a third of the way in (flat, then 1.5 logits by the end) passed
wrongly 4.7% of 300 logit-normal runs at 2.5 and 3.0% at 3 with the 75% floor, the full run 1.7%."""
MIN_FRACTION = 0.75
"""No rate gate is decided early before this share of the planned tasks has run: a rate that steps up
half-way cannot be seen before (bench and tests/unit/analysis/test_drift.py: a 1.5-logit step half-way
passed wrongly 38.5% of adaptive runs with the extrapolation alone, 32.5 / 4.0 / 1.2% with a floor of
50 / 60 / 70%, the full run 0.8%). 75%, not 70%: a step of 1.5 logits at 2/3 of the run passed wrongly
18.0% of 300 runs at 70% (extrapolation at 2.5 sd), 3.7% at 75% (3 sd), the full run 1.0%; the mean share
of tasks a clear gate runs without drift goes from 0.77 to 0.82 (logit-normal, heavy-tailed and
heterogeneous tasks alike)."""
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


def extrapolated(k: FloatArray, n: FloatArray, total: int) -> tuple[FloatArray, FloatArray]:
    """(rate, standard error) of the whole run's mean task rate predicted from the tasks run so far
    (last axis, in run order, the first of ``total`` planned) under a linear trend in run order: the
    fitted line's mean over all ``total`` positions. Without a trend it is the rate so far; with one it
    leans towards where the rate is heading, and its standard error grows with how far the remaining
    tasks lie from those seen (zero without the tasks to fit a line)."""
    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    m = k.shape[-1]
    present = n > 0
    tasks = np.sum(present, axis=-1).astype(np.float64)
    w = np.where(present, n, 0.0)
    wsum = np.maximum(np.sum(w, axis=-1, keepdims=True), 1e-300)
    y = np.where(present, k / np.where(present, n, 1.0), 0.0)
    x = np.broadcast_to(np.arange(m, dtype=np.float64) / max(total - 1, 1), k.shape)
    x_bar = np.sum(w * x, axis=-1, keepdims=True) / wsum
    y_bar = np.sum(w * y, axis=-1, keepdims=True) / wsum
    dx = np.where(present, x - x_bar, 0.0)
    sxx = np.sum(w * dx * dx, axis=-1)
    safe = np.where(sxx > 0, sxx, 1.0)
    slope = np.sum(w * dx * (y - y_bar), axis=-1) / safe
    resid = np.where(present, y - y_bar - slope[..., None] * dx, 0.0)
    scale = tasks / np.maximum(tasks - 2.0, 1.0)
    var_slope = scale * np.sum((w * dx * resid) ** 2, axis=-1) / safe**2
    var_mean = scale * np.sum((w * resid) ** 2, axis=-1) / wsum[..., 0] ** 2
    reach = 0.5 - x_bar[..., 0]  # the whole run's mean position (0.5) less that of the tasks seen
    ok = (tasks >= MIN_TREND_TASKS) & (sxx > 0)
    mean = y_bar[..., 0] + np.where(ok, slope * reach, 0.0)
    se = np.sqrt(np.where(ok, var_mean + reach * reach * var_slope, 0.0))
    return np.asarray(np.clip(mean, 0.0, 1.0)), np.asarray(se)


def drift_hold(
    k: FloatArray, n: FloatArray, total: int, passes: Callable[[float], bool], status: str
) -> str | None:
    """Why a rate gate decided ``status`` ("pass" or "fail") on the tasks so far (``k``, ``n`` in run
    order, ``total`` planned) must wait for the last look, or None: the extrapolated rate +-
    :data:`EXTRAPOLATION_Z` standard errors does not lie wholly on the decided side (``passes``: the
    gate's comparison of a value with its threshold)."""
    seen = int(np.sum(np.asarray(n) > 0))
    if seen < MIN_FRACTION * total:
        return (
            f"not decided early: only {seen} of {total} tasks run, and an early stop needs "
            f"{MIN_FRACTION:.0%} of them (a rate that moves later in the run cannot be seen before)"
        )
    mean, se = extrapolated(k, n, total)
    low, high = float(mean - EXTRAPOLATION_Z * se), float(mean + EXTRAPOLATION_Z * se)
    sides = [passes(low), passes(high)]
    if (status == "pass" and all(sides)) or (status == "fail" and not any(sides)):
        return None
    z = float(trend_z(k, n))
    return (
        f"not decided early: its rate, extrapolated along its trend in run order to all {total} tasks, "
        f"is {float(mean):.3g} [{low:.3g}, {high:.3g}] (trend z = {z:+.2f}), which the {status} does not "
        "clear: the tasks run so far may not stand for the rest"
    )
