"""How many more tasks a verdict needs: sample size, minimum detectable effect and noise floor, from the
spread a run already measured (normal approximation to the task-resampling interval).

A 95% interval at ``n`` tasks has half-width ``z * sd / sqrt(n)``, where ``sd`` is the per-task standard
deviation of the quantity (recovered from the interval itself by :func:`unit_sd`). A gate is decided when
its interval lies on one side of the threshold; if the observed effect ``|value - threshold|`` holds, the
interval clears the threshold with probability ``power`` once ``n >= ((z + z_power) * sd / effect)^2``
(the usual two-sided sample-size formula). The same algebra read the other way gives the smallest
effect a suite of ``n`` tasks detects with that power (:func:`min_detectable`), and with ``z_power = 0``
the smallest difference between two runs that is more than noise (:func:`noise_floor`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from .gates import GateResult
from .paired import Z95, z_value

__all__ = [
    "POWER",
    "NeededN",
    "gate_needed_n",
    "min_detectable",
    "needed_n",
    "noise_floor",
    "unit_sd",
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
class NeededN:
    """A gate's sample-size estimate: ``n`` tasks would decide it if the observed effect holds (None:
    no size would, or it cannot be estimated), and the sentence saying so."""

    n: int | None
    current_n: int
    text: str


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
    size = max(size, min_n or 0)
    return NeededN(size, n, f"about {size} tasks would decide it")


def with_needed_n(result: GateResult) -> GateResult:
    """The gate result with ``needed_n`` when it is inconclusive or its interval contains the threshold
    (a verdict a few more tasks could turn), and one sentence saying so; else unchanged."""
    gate = result.gate
    low, high = result.low, result.high
    crossing = low is not None and high is not None and low < gate.threshold < high
    if result.status == "skipped" or not (result.status == "inconclusive" or crossing):
        return result
    est = gate_needed_n(result.value, low, high, result.n, gate.threshold, gate.min_n)
    state: str = result.status
    if state != "inconclusive":
        state += ", interval across the threshold"
    text = f"{gate.expression()}: {state} at n={result.n}; {est.text}"
    return replace(result, needed_n=est.n, needed=text)
