"""How many more tasks a verdict needs: sample size, minimum detectable effect and noise floor, from the
spread a run already measured (normal approximation to the task-resampling interval).

A 95% interval at ``n`` tasks has half-width ``z * sd / sqrt(n)``, where ``sd`` is the per-task standard
deviation of the quantity (recovered from the interval itself by :func:`unit_sd`). A gate is decided when
its interval lies on one side of the threshold; if the observed effect ``|value - threshold|`` holds, the
interval clears the threshold with probability ``power`` once ``n >= ((z + z_power) * sd / effect)^2``
(the usual two-sided sample-size formula). The same algebra read the other way gives the smallest
effect a suite of ``n`` tasks detects with that power (:func:`min_detectable`), and with ``z_power = 0``
the smallest difference between two runs that is more than noise (:func:`noise_floor`).

More samples per task are the other way to a narrower interval, but only for the within-task part of the
spread. A one-way variance-components decomposition of the per-(task, sample) outcomes
(:func:`variance_components`) splits it into between-task ``s2_b`` and within-task ``s2_w``, so that the
standard error of a per-task mean at ``n`` tasks and ``k`` samples is ``sqrt(s2_b / n + s2_w / (n k))``.
:func:`needed_samples` solves that for ``k`` at the current ``n``; when ``s2_b / n`` alone exceeds the
needed precision no number of samples decides the gate, only more tasks do.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from .gates import GateResult
from .intervals import Z95, z_value

__all__ = [
    "POWER",
    "NeededN",
    "VarianceComponents",
    "gate_needed_n",
    "min_detectable",
    "needed_n",
    "needed_samples",
    "noise_floor",
    "size_range",
    "spread_by_agent",
    "unit_sd",
    "variance_components",
    "with_needed_n",
]

POWER = 0.8
"""The power the sample-size statements aim for."""
_MAX_N = 10**7


def _z_power(power: float) -> float:
    """One-sided normal quantile of ``power`` (0.8 -> 0.8416)."""
    return z_value(2.0 * power - 1.0)


def unit_sd(low: float, high: float, n: int, confidence: float = 0.95) -> float:
    """The per-task standard deviation implied by an interval of width ``high - low`` at ``n`` tasks."""
    if n <= 0:
        raise ValueError("n must be > 0")
    return (high - low) / (2.0 * z_value(confidence)) * math.sqrt(n)


def needed_n(effect: float, sd: float, confidence: float = 0.95, power: float = POWER) -> int | None:
    """Tasks needed for an interval at ``confidence`` to exclude a value ``effect`` away, with ``power``;
    None when the effect is 0 (no size decides it) or the size is absurd (over ten million)."""
    if effect == 0 or not math.isfinite(effect) or not math.isfinite(sd):
        return None
    if sd <= 0:
        return 1
    n = ((z_value(confidence) + _z_power(power)) * sd / abs(effect)) ** 2
    return math.ceil(n) if n <= _MAX_N else None


def min_detectable(sd: float, n: int, confidence: float = 0.95, power: float = POWER) -> float | None:
    """The smallest true effect that ``n`` tasks detect with ``power`` (None without tasks)."""
    if n <= 0 or not math.isfinite(sd):
        return None
    return (z_value(confidence) + _z_power(power)) * sd / math.sqrt(n)


def noise_floor(sd: float, n: int, z: float = Z95) -> float | None:
    """The smallest observed difference that is more than noise: ``z`` standard errors (None without n)."""
    if n <= 0 or not math.isfinite(sd):
        return None
    return z * sd / math.sqrt(n)


@dataclass(frozen=True)
class VarianceComponents:
    """One-way variance components of per-(task, sample) outcomes: between-task ``between`` (s2_b) and
    within-task ``within`` (s2_w) variance, over ``tasks`` tasks with ``samples`` samples each on average."""

    between: float
    within: float
    tasks: int
    samples: float


def variance_components(groups: Sequence[Sequence[float]]) -> VarianceComponents | None:
    """The ANOVA (method-of-moments) estimates of s2_b and s2_w from each task's outcomes.

    ``s2_w = MSW``, ``s2_b = max(0, (MSB - MSW) / n0)`` with ``n0 = (N - sum n_i^2 / N) / (T - 1)`` (the
    unbalanced form; ``n0`` is the samples per task when balanced). None without two tasks or without a
    task with two samples (one sample per task cannot separate the two parts). Empty tasks are ignored.
    """
    cells = [[float(x) for x in g] for g in groups if len(g) > 0]
    t, total = len(cells), sum(len(g) for g in cells)
    if t < 2 or total <= t:
        return None
    means = [sum(g) / len(g) for g in cells]
    grand = sum(sum(g) for g in cells) / total
    msw = sum((x - m) ** 2 for g, m in zip(cells, means, strict=True) for x in g) / (total - t)
    msb = sum(len(g) * (m - grand) ** 2 for g, m in zip(cells, means, strict=True)) / (t - 1)
    n0 = (total - sum(len(g) ** 2 for g in cells) / total) / (t - 1)
    return VarianceComponents(max(0.0, (msb - msw) / n0), msw, t, total / t)


def spread_by_agent(outcomes: Mapping[tuple[str, str, int], float]) -> dict[str, VarianceComponents]:
    """Each agent's variance components of ``(task, agent, sample) -> outcome`` (agents where they are
    identifiable: two tasks or more and some task with two samples or more)."""
    per: dict[str, dict[str, list[float]]] = {}
    for (task, agent, _), x in sorted(outcomes.items()):
        per.setdefault(agent, {}).setdefault(task, []).append(x)
    out: dict[str, VarianceComponents] = {}
    for agent, tasks in per.items():
        vc = variance_components(list(tasks.values()))
        if vc is not None:
            out[agent] = vc
    return out


def needed_samples(
    between: float,
    within: float,
    n: int,
    effect: float,
    confidence: float = 0.95,
    power: float = POWER,
) -> int | None:
    """Samples per task that, at ``n`` tasks, give the standard error needed to decide an ``effect``
    with ``power``: the least ``k`` with ``between / n + within / (n k) <= (effect / (z + z_power))^2``.

    None when samples cannot do it (the between-task part alone is too wide: ``n * se^2 <= between``),
    when the effect is 0, or when the answer is absurd (over ten million).
    """
    if n <= 0 or effect == 0 or not all(map(math.isfinite, (between, within, effect))):
        return None
    se2 = (abs(effect) / (z_value(confidence) + _z_power(power))) ** 2
    room = n * se2 - between
    if room <= 0:
        return None
    k = within / room
    return max(1, math.ceil(k)) if k <= _MAX_N else None


RANGE_Z = 0.6744897501960817
"""The range of a size is the sizes at the ends of the effect's 50% interval (``value - threshold`` plus
or minus this many standard errors): the middle half of where the true effect, so the true size, may be."""


@dataclass(frozen=True)
class NeededN:
    """A gate's sample-size estimate: ``n`` tasks would decide it if the observed effect holds (None:
    no size would, or it cannot be estimated), the range of sizes at the ends of the effect's 50%
    interval (``high`` None: unbounded, the interval reaches the threshold), and the sentence saying so."""

    n: int | None
    current_n: int
    text: str
    low: int | None = None
    high: int | None = None


def size_range(low: int | None, high: int | None) -> str:
    """``(30-200)``, ``(30 or more)``, or nothing without a lower end."""
    if low is None:
        return ""
    return f"({low} or more)" if high is None else f"({low}-{high})"


def _effect_ends(effect: float, se: float) -> tuple[float, float | None]:
    """The effect's 50% interval ends on its own side: the far one, and the near one (None when the
    interval reaches 0: some truths in it no size decides)."""
    far = abs(effect) + RANGE_Z * se
    near = abs(effect) - RANGE_Z * se
    return far, near if near > 0 else None


def gate_needed_n(
    value: float | None,
    low: float | None,
    high: float | None,
    n: int,
    threshold: float,
    min_n: int | None = None,
    confidence: float = 0.95,
) -> NeededN:
    """The suite size that would put a gate's interval entirely on the side of its observed value.

    For a gate that is inconclusive or whose interval contains the threshold. ``min_n`` is a floor (a gate
    below its ``min_n`` needs at least that many). Without a value or an interval there is nothing to
    extrapolate from, and a value exactly on the threshold is decided by no size.
    """
    if value is None or low is None or high is None or n <= 0:
        return NeededN(None, n, "no estimate: the metric has no value or no interval yet")
    effect = value - threshold
    sd = unit_sd(low, high, n, confidence)
    size = needed_n(effect, sd, confidence)
    if size is None:
        why = "the observed value sits on the threshold" if effect == 0 else "the effect is too small"
        return NeededN(None, n, f"no suite size would decide it ({why})")
    floor = min_n or 0
    far, near = _effect_ends(effect, sd / math.sqrt(n))
    small = needed_n(far, sd, confidence)
    large = None if near is None else needed_n(near, sd, confidence)
    lo_n = None if small is None else max(small, floor)
    hi_n = None if large is None else max(large, floor)
    size = max(size, floor)
    text = " ".join(x for x in (f"about {size} tasks", size_range(lo_n, hi_n)) if x)
    return NeededN(size, n, f"{text} would decide it", lo_n, hi_n)


def _in_tasks(result: GateResult, tasks: int | None) -> tuple[int, int | None]:
    """The gate's size and ``min_n`` counted in tasks: a case-level rate counts cases (``n`` = 96 for 24
    tasks x 4 cases), and extrapolating from that count said "about N tasks" with N too large by the
    cases-per-task factor, so its interval is read as one over ``tasks`` tasks instead."""
    n, min_n = result.n, result.gate.min_n
    if tasks is None or tasks <= 0 or n <= tasks:
        return n, min_n
    return tasks, None if min_n is None else math.ceil(min_n * tasks / n)


def with_needed_n(
    result: GateResult, spread: VarianceComponents | None = None, tasks: int | None = None
) -> GateResult:
    """The gate result with ``needed_n`` when it is inconclusive or its interval contains the threshold
    (a verdict a few more tasks could turn), and one sentence saying so; else unchanged.

    With the variance components of the gate's per-task outcomes (``spread``, same task count), also the
    samples per task that would decide it at the current size (``needed_samples``), when more samples
    than now would do and can (not when the between-task spread alone is too wide, nor below ``min_n``).
    ``tasks``: the suite's task count, so that sizes are in tasks when the gate's ``n`` counts cases.
    """
    gate = result.gate
    low, high = result.low, result.high
    crossing = low is not None and high is not None and low < gate.threshold < high
    if result.status == "skipped" or not (result.status == "inconclusive" or crossing):
        return result
    units, min_tasks = _in_tasks(result, tasks)
    est = _not_below(gate_needed_n(result.value, low, high, units, gate.threshold, min_tasks), units)
    k, k_range = _samples(result, spread, est)
    text = est.text
    if k is not None:
        tasks_text = " ".join(x for x in (f"about {est.n} tasks", size_range(est.low, est.high)) if x)
        text = f"{tasks_text}, or {k} samples per task {size_range(*k_range)}, would decide it"
    state: str = result.status
    if state != "inconclusive":
        state += ", interval across the threshold"
    line = f"{gate.expression()}: {state} at n={result.n}; {text}"
    return replace(result, needed_n=est.n, needed=line, needed_samples=k, needed_range=(est.low, est.high))


def _not_below(est: NeededN, units: int) -> NeededN:
    """A gate undecided at its size is never told that as many tasks or fewer would decide it (the
    interval is skewed near the threshold, where the normal extrapolation reads it as narrower than it
    is): it is told what would help instead."""
    if est.n is None or est.n > units:
        return est
    text = (
        f"more tasks than its {units} would barely move it (undecided at a size that should decide the "
        "observed effect: its interval is skewed at the threshold); more samples per task or a wider "
        "margin would"
    )
    return NeededN(None, units, text)


def _samples(
    result: GateResult, spread: VarianceComponents | None, est: NeededN
) -> tuple[int | None, tuple[int | None, int | None]]:
    """The samples per task that would decide the gate at its size, with their range at the ends of the
    effect's 50% interval (``needed_samples`` at each end; the near end None when unbounded)."""
    gate = result.gate
    short = gate.min_n is not None and result.n < gate.min_n
    if est.n is None or result.value is None or spread is None or short or spread.tasks != result.n:
        return None, (None, None)
    effect = result.value - gate.threshold
    k = needed_samples(spread.between, spread.within, result.n, effect)
    if k is None or k <= spread.samples:
        return None, (None, None)  # no samples would do, or this many already would: no "more samples"
    se = math.sqrt(spread.between / result.n + spread.within / (result.n * spread.samples))
    far, near = _effect_ends(effect, se)
    k_low = needed_samples(spread.between, spread.within, result.n, far)
    k_high = None if near is None else needed_samples(spread.between, spread.within, result.n, near)
    return k, (k_low, k_high)
