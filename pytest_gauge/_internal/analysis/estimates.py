"""The values every suite statistic is built from: :class:`Estimate` (a value, its count and 95%
interval), the per-task accumulator the metric phases fill, and :class:`Stat` (one statistic's per-task
sums, resampled over tasks), with the Wilson interval and Cohen's kappa they use (docs/protocol.md#metrics).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..records import CaseRecord
from .intervals import Z95
from .judge_rules import correlation_rows
from .resampling import ratio_rows

if TYPE_CHECKING:
    from ..records import FloatArray
    from .resampling import Counts

__all__ = [
    "PAIR_CLASSES",
    "Accumulator",
    "Estimate",
    "Key",
    "Stat",
    "chosen_left",
    "clustered",
    "exact_estimate",
    "kappa_of",
    "none_estimate",
    "sum_stats",
    "wilson",
]

PAIR_CLASSES = ("close", "distant")
"""The two classes of a declared pair (docs/protocol.md#metrics)."""

Key = tuple[str, ...]
"""Internal key of a statistic, e.g. ``("lrs", "close")`` or ``("flip_rate", "pair", "p1")``."""


@dataclass(frozen=True)
class Estimate:
    """A rate or quantity with its count ``n`` (the denominator) and 95% interval ``low``..``high``."""

    value: float | None
    n: int
    low: float | None
    high: float | None
    method: str
    df: float | None = field(default=None, compare=False)  # a t interval's degrees of freedom (not in JSON)
    counts: tuple[FloatArray, ...] | None = field(default=None, compare=False, repr=False)  # per-task k, n
    note: str | None = field(default=None, compare=False)  # why there is no interval (not in JSON)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON form: value, n, low, high and the interval method."""
        return {"value": self.value, "n": self.n, "low": self.low, "high": self.high, "method": self.method}


def none_estimate(n: int = 0) -> Estimate:
    return Estimate(None, n, None, None, "none")


def exact_estimate(value: float | None, n: int) -> Estimate:
    return Estimate(value, n, value, value, "exact") if value is not None else none_estimate(n)


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for ``successes / n`` (independent units); raises ValueError for n <= 0."""
    if n <= 0:
        raise ValueError("wilson interval needs n > 0")
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be in 0..n, got {successes}/{n}")
    p = successes / n
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def kappa_of(conf: FloatArray) -> FloatArray:
    """Cohen's kappa per row of ``conf`` (rows of 9 = flattened 3x3 tables); NaN where undefined."""
    tables = conf.reshape(-1, 3, 3)
    n = tables.sum(axis=(1, 2))
    safe_n = np.where(n > 0, n, 1.0)
    po = np.trace(tables, axis1=1, axis2=2) / safe_n
    pe = (tables.sum(axis=2) * tables.sum(axis=1)).sum(axis=1) / (safe_n * safe_n)
    ok = (n > 0) & (pe < 1.0 - 1e-12)
    out = np.where(ok, (po - pe) / np.where(ok, 1.0 - pe, 1.0), np.nan)
    return np.asarray(out, dtype=np.float64)


@dataclass(frozen=True)
class Stat:
    """One bootstrappable statistic: per-task numerator/denominator sums, or per-task 3x3 tables (kappa)."""

    kind: str  # "ratio" | "kappa" | "corr"
    per_task: FloatArray  # (T, 2) for ratio, (T, 9) for kappa, (T, 6) rank moments for corr
    interval: str = "bootstrap"  # "bootstrap" | "wilson"
    n: int | None = None  # the count reported when the denominator is not one (costs)
    value: float | None = None  # the point value when computed elsewhere (the ledger's exact sums)

    def point(self) -> tuple[float | None, int]:
        tot = self.per_task.sum(axis=0)
        if self.kind == "ratio" and self.n is not None:
            return self.value, self.n
        if self.kind == "ratio":
            den = round(float(tot[1])) if self.n is None else self.n
            return (float(tot[0]) / float(tot[1]) if tot[1] > 0 else None), den
        if self.kind == "corr":
            rho = correlation_rows(tot[None, :])[0]
            return (None if math.isnan(rho) else float(rho)), round(float(tot[0]))
        k = kappa_of(tot[None, :])[0]
        return (None if math.isnan(k) else float(k)), round(float(tot.sum()))

    def samples(self, counts: Counts) -> FloatArray:
        agg = counts @ self.per_task
        if self.kind == "ratio":
            return ratio_rows(agg[:, 0], agg[:, 1])
        if self.kind == "corr":
            return correlation_rows(agg)
        return kappa_of(agg)


def clustered(st: Stat) -> bool:
    """A rate of 0/1 case outcomes over tasks: it gets the cluster-adjusted intervals."""
    return st.kind == "ratio" and st.interval == "bootstrap" and st.n is None


def sum_stats(stats: Sequence[Stat]) -> Stat:
    return Stat(stats[0].kind, np.sum([s.per_task for s in stats], axis=0), stats[0].interval)


class Accumulator:
    """Per-task accumulators (key -> (T, width) array) and what drove each statistic (key -> labels)."""

    def __init__(self, tasks: Sequence[str]) -> None:
        self.t_index = {t: i for i, t in enumerate(tasks)}
        self.n_tasks = len(tasks)
        self.data: dict[Key, FloatArray] = {}
        self.drivers: dict[Key, list[str]] = {}

    def add(self, key: Key, task: int, num: float, den: float = 1.0) -> None:
        arr = self.data.get(key)
        if arr is None:
            arr = self.data[key] = np.zeros((self.n_tasks, 2), dtype=np.float64)
        arr[task, 0] += num
        arr[task, 1] += den

    def ensure(self, key: Key, width: int = 2) -> None:
        if key not in self.data:
            self.data[key] = np.zeros((self.n_tasks, width), dtype=np.float64)

    def drive(self, keys: Sequence[Key], label: str) -> None:
        """Record ``label`` (a case id, group or transcript) as a driver of every key."""
        for key in keys:
            self.drivers.setdefault(key, []).append(label)

    def total(self, key: Key, column: int) -> int:
        """A column's sum over tasks, as a count."""
        return round(float(self.data[key][:, column].sum()))


def chosen_left(r: CaseRecord, choice: str) -> bool:
    """Whether slot verdict ``choice`` ("A"/"B") picked the declared left agent."""
    return bool((choice == "A") == (r.blind_order == "A=left"))
