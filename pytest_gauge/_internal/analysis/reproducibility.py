"""How often a gate's verdict would repeat (docs/protocol.md#reproducibility).

A verdict compares a bound (or the value) with a threshold. Rerun the suite and the estimate moves, and
with it the bound: its predictive distribution given this run, under a flat prior on the true value, is
normal around this run's bound with variance ``2 se_x^2`` (the unknown truth's uncertainty plus the new
run's own noise), where ``se_x`` is the part of the estimate's standard error a rerun redraws:

* **same tasks** (new model samples and judge draws): the within-task part, ``se^2 * w`` with ``w`` the
  within-task share of the estimate's variance (:func:`components_within_share` for per-task means of
  samples), ``w = 1`` where one run cannot separate it (then both figures are the same);
* **fresh tasks** of the same number: the whole ``se``, read off the gate's own interval.

The verdict repeats with probability ``Phi(|bound - threshold| / (sqrt(2) se_x))``. A single case
rate's figure is the same predictive on the rate's own scale (:mod:`.repeat_figure`: the bound
inverted at the threshold, Student's t for the spread read from the tasks; withheld where the rarer
outcome sits in too few tasks); a difference of two rates likewise from its per-task counts
(:mod:`.repeat_difference`: withheld where the two rates differ on too few tasks). Both add the
noise of the rerun's own interval width. This is
calibrated where gates' thresholds are fixed before the data (of the verdicts printed as ~80%, about
80% repeat: docs/calibration.md); for one fixed truth it is an estimate from one run, as uncertain
as the run. Pure functions."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from .intervals import Z95, t_quantile
from .repeat_difference import difference_figures, difference_withheld
from .repeat_figure import case_rate_figures, withheld

if TYPE_CHECKING:
    from ..records import FloatArray
    from .gates import GateResult
    from .power import VarianceComponents

__all__ = [
    "MIN_FIGURE_TASKS",
    "MIN_RATE_TASKS",
    "Reproducibility",
    "case_rate_reproducibility",
    "components_within_share",
    "data_shortfall",
    "gate_reproducibility",
    "repeat_probability",
    "reproducibility_text",
    "with_reproducibility",
    "without_figure",
]


@dataclass(frozen=True)
class Reproducibility:
    """The estimated probability that a rerun gives the same verdict: on the same tasks (new samples and
    judge draws) and on a fresh task sample of the same size."""

    same_tasks: float
    fresh_tasks: float

    def to_json(self) -> dict[str, float]:
        """``metrics.json``'s ``reproducibility`` of a gate (rounded to 3 decimals: an estimate)."""
        return {"same_tasks": round(self.same_tasks, 3), "fresh_tasks": round(self.fresh_tasks, 3)}


def _phi(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def repeat_probability(margin: float, se: float, df: float | None = None) -> float:
    """``Phi(|margin| / (sqrt(2) se))``: the chance a rerun's bound lands on the same side of the
    threshold, ``margin`` being this run's bound minus the threshold (1 when nothing varies); with ``df``
    Student's t on ``df`` instead (``se`` estimated from that many: a heavier tail), by the normal
    approximation ``Phi(x (1 - 1/(4 df)) / sqrt(1 + x^2 / (2 df)))`` (within 0.001 at df 11)."""
    if se <= 0 or not math.isfinite(se):
        return 1.0 if margin != 0 else 0.5
    x = abs(margin) / (math.sqrt(2.0) * se)
    if df is not None and math.isfinite(df) and df >= 1:
        x = x * (1.0 - 1.0 / (4.0 * df)) / math.sqrt(1.0 + x * x / (2.0 * df))
    return _phi(x)


def case_rate_reproducibility(result: GateResult, counts: tuple[FloatArray, ...]) -> Reproducibility | None:
    """A case rate's (or a difference of two's) reproducibility from its per-task counts (``(k, n)`` or
    ``(k1, n1, k2, n2)``), in closed form (:func:`~.repeat_figure.case_rate_figures`,
    :func:`~.repeat_difference.difference_figures`); None where the counts cannot support one
    (:func:`~.repeat_figure.withheld`, :func:`~.repeat_difference.difference_withheld`). A task whose
    cases all agreed reruns the same on the same tasks (an always or never task); the same-task figure
    is at least the fresh-task one."""
    if result.status not in ("pass", "fail"):
        return None
    gate = result.gate
    bound, min_n = gate.bound or "", gate.min_n or 0
    if len(counts) == 2:
        same_p, fresh_p = case_rate_figures(counts[0], counts[1], gate.threshold, bound, min_n)
    else:
        k1, n1, k2, n2 = counts
        same_p, fresh_p = difference_figures(k1, n1, k2, n2, gate.threshold, bound, min_n)
    same_f, fresh_f = float(same_p), float(fresh_p)
    return None if not math.isfinite(fresh_f) else Reproducibility(same_f, fresh_f)


def components_within_share(spread: VarianceComponents | None) -> float | None:
    """The within-task share of a mean over tasks of per-task sample means: ``(s2_w / k) / (s2_b +
    s2_w / k)`` from the one-way variance components (``k`` the samples per task)."""
    if spread is None or spread.samples <= 0:
        return None
    within = spread.within / spread.samples
    total = spread.between + within
    return None if total <= 0 else min(1.0, within / total)


def _standard_error(result: GateResult, df: float | None) -> float | None:
    """The estimate's standard error read off the gate's interval: the compared side's distance from
    the value over the interval's quantile (t on its df, else normal); both sides for a point gate."""
    value, low, high = result.value, result.low, result.high
    if value is None or low is None or high is None or high <= low:
        return None
    q = float(t_quantile(df)) if df is not None and math.isfinite(df) else Z95
    side = {"upper": high - value, "lower": value - low}.get(result.gate.bound, (high - low) / 2.0)
    if side <= 0:  # a bound at the value (a rate at 0 has no lower side): use the other one
        side = max(high - value, value - low)
    return side / q


def _count_reproducibility(result: GateResult) -> Reproducibility | None:
    """An exact count (``regressions``, ``fixes``): a rerun's count is about as noisy as a Poisson count
    of this one's size, and this one is one such draw (variance ``2 max(c, 1)``, continuity 0.5)."""
    if result.value is None:
        return None
    c, t = result.value, result.gate.threshold
    edge = t + 0.5 if result.gate.op in ("<=", ">") else t - 0.5  # "<=": c' <= t passes; "<": c' < t
    if result.gate.op == "==":
        return None
    p = repeat_probability(c - edge, math.sqrt(max(c, 1.0)))
    return Reproducibility(p, p)


def gate_reproducibility(
    result: GateResult, *, df: float | None = None, within: float | None = None, count: bool = False
) -> Reproducibility | None:
    """The verdict's reproducibility: None unless the gate passed or failed on a number with an interval
    (an exact accounting figure, such as a cost, has no sampling spread to rerun). ``df``: the
    interval's t df; ``within``: the within-task share of its variance (None: not separable, 1)."""
    if result.status not in ("pass", "fail"):
        return None
    if count:
        return _count_reproducibility(result)
    se = _standard_error(result, df)
    bound = {"upper": result.high, "lower": result.low}.get(result.gate.bound, result.value)
    if se is None or bound is None:
        return None
    margin = bound - result.gate.threshold
    share = 1.0 if within is None else min(max(within, 0.0), 1.0)
    fresh = repeat_probability(margin, se, df)
    same = repeat_probability(margin, se * math.sqrt(share), df)
    return Reproducibility(same, fresh)


def _percent(p: float) -> str:
    if p >= 0.995:
        return ">99%"
    return f"~{max(1, round(100 * p))}%"


def reproducibility_text(rep: Reproducibility | None) -> str:
    """``holds on ~64% of reruns (~58% on fresh tasks)``, or the first part alone when both agree."""
    if rep is None:
        return ""
    same, fresh = _percent(rep.same_tasks), _percent(rep.fresh_tasks)
    return f"holds on {same} of reruns" + ("" if same == fresh else f" ({fresh} on fresh tasks)")


def with_reproducibility(result: GateResult, rep: Reproducibility | None) -> GateResult:
    """The result with its reproducibility (message and field); a PASS whose gate says
    ``reproducible=P`` and that would repeat on the same tasks less often than P fails, or is
    inconclusive with ``reproducible=P:inconclusive``."""
    if rep is None:
        return result
    text = reproducibility_text(rep)
    gate = result.gate
    required = gate.reproducible
    if required is None or result.status != "pass" or rep.same_tasks >= required:
        return replace(result, reproducibility=rep, message=f"{result.message}; {text}")
    status = gate.unreproducible
    head = result.message.split(":", 1)
    rest = head[1] if len(head) > 1 else ""
    message = (
        f"{status.upper()} {gate.expression()}: the pass {text}, below reproducible={required:g}"
        f" (as computed:{rest})"
    )
    return replace(result, status=status, reproducibility=rep, message=message)


MIN_FIGURE_TASKS = 12
"""Below this many tasks a gate gets no reproducibility figure, and says so: with thresholds fixed before
the data, case-rate figures at 10 tasks were 5-6 points over in a bin on processes without skew (every
task at 0.2, temperature 0, always/never), within 3.4 of it at 12 but temperature 0 (5.1 ± 1.5 points,
50-60% bin) (benchmarks/bench_calibration.py --sizes 10 12; docs/calibration.md)."""

MIN_RATE_TASKS = 20
"""Below this many tasks a case rate's figure (or a difference of two's) is withheld too, and says so:
at 12-18 tasks it was off by 6-14 points in a bin on the benchmark's skewed and always/never processes
(either way, 30,000 runs), the skewed rare-event difference by 5.4-5.8; at 20 every cell within 5
(benchmarks/bench_calibration.py --sizes 12 16 18 20; docs/calibration.md)."""


def data_shortfall(tasks: int | None, counts: tuple[FloatArray, ...] | None) -> str | None:
    """Why the run cannot support a figure (``8 tasks``, ``44 tasks, 2 events in 2 of them``), or None:
    fewer than :data:`MIN_FIGURE_TASKS` tasks (:data:`MIN_RATE_TASKS` for figures from per-task
    counts), a case rate whose rarer outcome sits in fewer than
    :data:`~.repeat_figure.MIN_OUTCOME_TASKS` tasks (:func:`~.repeat_figure.withheld`), or a difference
    of two whose rates differ on fewer (:func:`~.repeat_difference.difference_withheld`)."""
    rate = counts if counts is not None and len(counts) == 2 else None
    why = withheld(rate[0], rate[1]) if rate is not None else None
    if counts is not None and len(counts) == 4:
        why = difference_withheld(*counts)
    floor = MIN_FIGURE_TASKS if counts is None else MIN_RATE_TASKS
    if tasks is None or tasks >= floor or why is not None:
        return why
    if rate is None:
        return f"{tasks} tasks"
    events = int(np.sum(rate[0]))
    return f"{tasks} tasks, {events} event{'s' * (events != 1)}"


def without_figure(result: GateResult, why: str) -> GateResult:
    """The result of a run that cannot support a figure (``why``: :func:`data_shortfall`): its message
    says so, and a PASS whose gate says ``reproducible=P`` cannot be shown to repeat, so it is
    inconclusive with that reason."""
    if result.status not in ("pass", "fail"):
        return result
    text = f"not enough data to say how often a rerun repeats it ({why})"
    gate = result.gate
    if gate.reproducible is None or result.status != "pass":
        return replace(result, message=f"{result.message}; {text}", no_figure=text)
    head = result.message.split(":", 1)
    rest = head[1] if len(head) > 1 else ""
    message = (
        f"INCONCLUSIVE {gate.expression()}: the pass cannot be shown to hold on "
        f"reproducible={gate.reproducible:g} of reruns: {text} (as computed:{rest})"
    )
    return replace(result, status="inconclusive", message=message, no_figure=text)
