"""The exact (Clopper-Pearson) bound of a rate over tasks, vectorised: each task counted as one trial
whose outcome is its share of events, the rate's successes ``p * T_eff`` out of Kish's effective number
of tasks ``T_eff = N^2 / sum(n^2)``.

A task's share of events lies in [0, 1], and among variables on [0, 1] of a given mean the Bernoulli one
(a task always or never with the event) is the most spread (Hoeffding 1956), so the binomial tail over
tasks bounds the rate's tail whatever the tasks' shapes. Where the events sit in a few whole tasks this
is the exact test, where a cluster variance estimated from those few tasks rests on a t quantile with one
or two degrees of freedom; elsewhere it is conservative. :func:`~.intervals.cluster_wilson` takes the
tighter of the two bounds on each side (docs/protocol.md#coverage).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ..records import FloatArray

__all__ = ["beta_cdf", "beta_fraction", "beta_quantile", "exact_task_bounds"]

_TAIL = 0.025
_FRACTION_STEPS = 300  # continued-fraction terms: enough for shape parameters up to ~10^4 (1e-12)
_STEPS = 100  # Newton steps (bisection where a step leaves the bracket)
_lgamma = np.frompyfunc(math.lgamma, 1, 1)


def _log_gamma(x: FloatArray) -> FloatArray:
    return np.asarray(_lgamma(x), dtype=np.float64)


_SCALAR_MAX = 32
"""Up to this many entries the continued fraction runs on Python floats, entry by entry: the same
operations in the same order (the same bits), 8 us an entry where a numpy pass costs 330 us a call."""
_TINY = 1e-300


def _fraction(x: FloatArray, a: FloatArray, b: FloatArray) -> FloatArray:
    """The incomplete beta continued fraction (modified Lentz), a fixed number of terms for every entry."""
    if x.size <= _SCALAR_MAX:
        entries = zip(x.ravel().tolist(), a.ravel().tolist(), b.ravel().tolist(), strict=True)
        values = [beta_fraction(*entry) for entry in entries]
        return np.array(values, dtype=np.float64).reshape(x.shape)
    tiny = _TINY
    c = np.ones_like(x)
    d = 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / np.where(np.abs(d) > tiny, d, tiny)
    h = d.copy()
    done = np.zeros(x.shape, dtype=bool)  # converged entries keep their value: a batch gives each row's bits
    for m in range(1, _FRACTION_STEPS):
        for num in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + num * d
            d = 1.0 / np.where(np.abs(d) > tiny, d, tiny)
            c = 1.0 + num / c
            c = np.where(np.abs(c) > tiny, c, tiny)
            h = np.where(done, h, h * d * c)
        done |= np.abs(d * c - 1.0) < 1e-15
        if np.all(done):
            break
    return h


def beta_fraction(x: float, a: float, b: float, steps: int = _FRACTION_STEPS) -> float:
    """The incomplete beta continued fraction of one entry on Python floats, for ``x < (a+1)/(a+b+2)``:
    :func:`_fraction`'s operations in its order (the same bits), stopping where the batch freezes it."""
    c = 1.0
    d = 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, steps):
        for num in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + num / c
            c = c if abs(c) > _TINY else _TINY
            h = h * d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def beta_cdf(x: FloatArray, a: FloatArray, b: FloatArray) -> FloatArray:
    """The regularised incomplete beta function ``I_x(a, b)``, elementwise (a, b > 0)."""
    x, a, b = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (x, a, b)))
    xc = np.clip(x, 1e-300, 1.0 - 1e-16)
    flip = xc >= (a + 1.0) / (a + b + 2.0)
    xs, as_, bs = np.where(flip, 1.0 - xc, xc), np.where(flip, b, a), np.where(flip, a, b)
    front = _log_gamma(as_ + bs) - _log_gamma(as_) - _log_gamma(bs) + as_ * np.log(xs) + bs * np.log1p(-xs)
    value = np.exp(front) * _fraction(xs, as_, bs) / as_
    out = np.where(flip, 1.0 - value, value)
    return np.asarray(np.where(x <= 0.0, 0.0, np.where(x >= 1.0, 1.0, np.clip(out, 0.0, 1.0))))


def beta_quantile(q: float, a: FloatArray, b: FloatArray) -> FloatArray:
    """The ``q`` quantile of Beta(a, b), elementwise: Newton's method on :func:`beta_cdf` from the
    mean, safeguarded by bisection (to about 1e-13)."""
    a, b = np.broadcast_arrays(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
    shape = a.shape
    a, b = a.ravel(), b.ravel()
    lo, hi = np.zeros_like(a), np.ones_like(a)
    log_norm = _log_gamma(a + b) - _log_gamma(a) - _log_gamma(b)
    x = a / (a + b)
    active = np.arange(a.size)  # entries still moving: each entry's steps depend on it alone
    for _ in range(_STEPS):
        xa, aa, ba = x[active], a[active], b[active]
        f = beta_cdf(xa, aa, ba) - q
        done = (np.abs(f) < 1e-14) | (hi[active] - lo[active] < 1e-13)
        keep = ~done
        active, xa, aa, ba, f = active[keep], xa[keep], aa[keep], ba[keep], f[keep]
        if active.size == 0:
            break
        lo[active] = np.where(f < 0, xa, lo[active])
        hi[active] = np.where(f < 0, hi[active], xa)
        density = np.exp(log_norm[active] + (aa - 1.0) * np.log(xa) + (ba - 1.0) * np.log1p(-xa))
        step = xa - f / np.where(density > 0, density, np.inf)
        inside = (step > lo[active]) & (step < hi[active]) & (density > 0)
        x[active] = np.where(inside, step, 0.5 * (lo[active] + hi[active]))
    x = x.reshape(shape)
    return np.asarray(x)


def exact_task_bounds(
    k: FloatArray, n: FloatArray, *, rare_side: bool = False
) -> tuple[FloatArray, FloatArray]:
    """(low, high): the 95% Clopper-Pearson bounds of ``sum(k) / sum(n)`` (last axis: tasks) with
    ``p * T_eff`` successes out of Kish's ``T_eff`` tasks (fractional counts through the beta
    quantiles); 0 and 1 at the ends, NaN without cases. ``rare_side``: only the side of the rarer
    outcome is solved (high where ``p <= 0.5``, low where ``p >= 0.5``; the other is NaN), the only
    side an interval over tasks takes from it: each entry's value is the same, at half the work."""
    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    total = np.sum(n, axis=-1)
    safe = np.maximum(total, 1.0)
    p = np.clip(np.sum(k, axis=-1) / safe, 0.0, 1.0)
    kish = np.maximum(safe * safe / np.maximum(np.sum(n * n, axis=-1), 1.0), 1.0)
    s = p * kish
    fails = kish - s
    want_high = np.ones(p.shape, dtype=bool) if not rare_side else p <= 0.5
    want_low = np.ones(p.shape, dtype=bool) if not rare_side else p >= 0.5
    high = _solved(want_high & (fails > 0), 1.0 - _TAIL, s + 1.0, np.maximum(fails, 1e-12), 1.0)
    low = _solved(want_low & (s > 0), _TAIL, np.maximum(s, 1e-12), fails + 1.0, 0.0)
    high = np.where(want_high, high, np.nan)
    low = np.where(want_low, low, np.nan)
    empty = total <= 0
    return np.where(empty, np.nan, low), np.where(empty, np.nan, high)


def _solved(where: FloatArray, q: float, a: FloatArray, b: FloatArray, otherwise: float) -> FloatArray:
    """``beta_quantile(q, a, b)`` on the entries ``where`` is true (each entry's value does not depend
    on the others in the batch, so equal entries are solved once), ``otherwise`` elsewhere."""
    a, b = np.broadcast_arrays(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
    out = np.full(a.shape, otherwise, dtype=np.float64)
    mask = np.broadcast_to(np.asarray(where, dtype=bool), a.shape)
    if np.any(mask):  # each distinct (a, b) solved once: resampled rows repeat the same counts
        # a pair as one complex key: a 1-d sort, where a unique over the rows of a stacked array sorts
        # them as opaque records (most of a calibration run's time)
        pairs, where_in = np.unique(a[mask] + 1j * b[mask], return_inverse=True)
        out[mask] = _known_quantiles(q, pairs.real, pairs.imag)[where_in.ravel()]
    return out


_KNOWN: dict[tuple[float, float, float], float] = {}
_KNOWN_MAX = 1 << 18  # about 30 MB at most; cleared whole when full


def _known_quantiles(q: float, a: FloatArray, b: FloatArray) -> FloatArray:
    """:func:`beta_quantile` of each (a, b), remembered for the process: simulations and resamples ask
    for the same few count pairs again and again (the values are the same, solved once)."""
    keys = [(q, float(x), float(y)) for x, y in zip(a.tolist(), b.tolist(), strict=True)]
    missing = [i for i, key in enumerate(keys) if key not in _KNOWN]
    if missing:
        if len(_KNOWN) + len(missing) > _KNOWN_MAX:
            _KNOWN.clear()
        solved = beta_quantile(q, a[missing], b[missing])
        for i, value in zip(missing, solved.tolist(), strict=True):
            _KNOWN[keys[i]] = value
    return np.array([_KNOWN[key] for key in keys], dtype=np.float64)
