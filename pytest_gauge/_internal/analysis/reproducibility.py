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
outcome sits in too few tasks); a difference of two rates, whose interval is far from normal when
events are few, is rerun instead (:func:`case_rate_reproducibility`) from the per-task counts. This is
calibrated where gates' thresholds are fixed before the data (of the verdicts printed as ~80%, about
80% repeat: docs/calibration.md); for one fixed truth it is an estimate from one run, as uncertain
as the run. Pure functions."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from .intervals import Z95, cluster_difference, cluster_wilson, t_quantile
from .repeat_figure import case_rate_figures, withheld

if TYPE_CHECKING:
    from ..records import FloatArray
    from .gates import Gate, GateResult
    from .power import VarianceComponents

__all__ = [
    "MIN_FIGURE_TASKS",
    "REPLAYS",
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


_ARRAY_OPS = {"<=": np.less_equal, ">=": np.greater_equal, "<": np.less, ">": np.greater, "==": np.equal}
REPLAYS = 400
"""Simulated reruns per case-rate gate (:func:`case_rate_reproducibility`): Monte Carlo error about 2
points at 80%."""


def _replay_rng(result: GateResult) -> np.random.Generator:
    """A generator seeded by the gate's text, so the figure is the same on every run of the same data."""
    digest = hashlib.sha256(result.gate.canonical().encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "big"))


def _task_spread(k: FloatArray, n: FloatArray) -> float | None:
    """The prior sample size ``a + b`` of the tasks' rates as a Beta, by moments over tasks (the
    beta-binomial's intra-task correlation from the spread of the tasks' rates, Kleinman 1973): large
    where tasks are alike, small where they are all or nothing; None when every case agreed (no event,
    or events only) or fewer than two tasks have cases."""
    has = n > 0
    tasks, cases = float(np.sum(has)), float(np.sum(n))
    if tasks < 2 or cases <= 0:
        return None
    p = float(np.sum(k)) / cases
    if p <= 0.0 or p >= 1.0:
        return None
    rates = np.where(has, k / np.maximum(n, 1.0), p)
    spread = float(np.sum(n * (rates - p) ** 2)) / (p * (1.0 - p))
    span = cases - float(np.sum(n * n)) / cases - (tasks - 1.0)
    rho = (spread - (tasks - 1.0)) / span if span > 0 else 1.0
    rho = min(max(rho, 1e-3), 0.999)
    return (1.0 - rho) / rho


def _same_tasks(k: FloatArray, n: FloatArray, rng: np.random.Generator, shape: tuple[int, int]) -> FloatArray:
    """Reruns on the same tasks, from the tasks' own beta-binomial (:func:`_task_spread`): per rerun the
    suite's rate drawn from a task bootstrap (the truth's uncertainty), each task's rate from its
    posterior given that rate and its own cases, then its cases at that rate (the rerun's noise). Where
    tasks are alike a task's few cases say little and the rerun is close to a fresh draw; where they are
    all or nothing (always and never tasks) each task reruns as it was. Where every case agreed the tasks
    rerun the same."""
    cases = n.astype(np.int64)
    total = _task_spread(k, n)
    if total is None:
        return np.broadcast_to(k, shape).astype(np.float64)
    picks = rng.integers(0, shape[1], shape)
    suite = np.clip(k[picks].sum(axis=1) / np.maximum(n[picks].sum(axis=1), 1e-12), 1e-6, 1.0 - 1e-6)
    a, b = suite[:, None] * total, (1.0 - suite[:, None]) * total
    rate = rng.beta(a + k, b + n - k, shape)
    return rng.binomial(cases, rate).astype(np.float64)


def _log_beta_binomial(cases: int, events: int) -> float:
    """log P(``events`` of ``cases``) when the task's rate has Jeffreys' prior Beta(1/2, 1/2)."""
    lg = math.lgamma
    choose = lg(cases + 1) - lg(events + 1) - lg(cases - events + 1)
    return choose + lg(events + 0.5) + lg(cases - events + 0.5) - lg(cases + 1.0) - math.log(math.pi)


def _event_task_counts(n: FloatArray, rng: np.random.Generator) -> FloatArray:
    """A fresh task's events among its ``n`` cases given that it has one at least: the beta-binomial of
    a rate with Jeffreys' prior Beta(1/2, 1/2), conditioned on one event or more. A suite with no event
    says nothing of how many cases an event task would have (every case, as an always task, or one);
    the prior's U shape puts weight on both."""
    cases = n.astype(np.int64)
    out = np.zeros(n.shape)
    u = rng.random(n.shape)
    for size in (int(s) for s in np.unique(cases) if s > 0):
        logs = np.array([_log_beta_binomial(size, j) for j in range(1, size + 1)])
        cdf = np.cumsum(np.exp(logs - logs.max()))
        where = cases == size
        picked = np.searchsorted(cdf / cdf[-1], u[where], side="left") + 1
        out[where] = np.minimum(picked, size)
    return out


def _fresh_tasks(
    counts: tuple[FloatArray, ...], rng: np.random.Generator, shape: tuple[int, int]
) -> tuple[FloatArray, ...]:
    """Reruns on fresh tasks: the task bootstrap of a task bootstrap (the population is uncertain too).
    A rate with no event on any task (or events on every case) gets, in each rerun, event tasks at a
    share drawn from Jeffreys' posterior of the share of tasks that show one, Beta(1/2, T + 1/2) over
    its T tasks with cases (the interval's own rule: one trial per task), each with the events of
    :func:`_event_task_counts`: the bootstrap alone would never draw a task unlike the ones seen, and
    making every case of such a task an event assumed the most clustered population of all."""
    first = rng.integers(0, shape[1], shape)
    picks = np.take_along_axis(first, rng.integers(0, shape[1], shape), axis=1)
    out = [c[picks] for c in counts]
    for i in range(0, len(counts), 2):
        k, n = counts[i], counts[i + 1]
        events, total = float(np.sum(k)), float(np.sum(n))
        if total > 0 and events in (0.0, total):
            share = rng.beta(0.5, float(np.sum(n > 0)) + 0.5, (shape[0], 1))
            odd = (rng.random(shape) < share) & (out[i + 1] > 0)
            drawn = _event_task_counts(out[i + 1], rng)
            flipped = drawn if events == 0.0 else out[i + 1] - drawn
            out[i] = np.where(odd, flipped, out[i])
    return tuple(out)


def _compared(gate: Gate, counts: tuple[FloatArray, ...]) -> FloatArray:
    """The gate's compared number (bound or value) for each row of per-task counts: a case rate's
    ``cluster_wilson``, a difference of two the ``cluster_difference``."""
    value, low, high = cluster_wilson(*counts) if len(counts) == 2 else cluster_difference(*counts)
    return {"upper": high, "lower": low}.get(gate.bound, value)


def _widened(compared: FloatArray, current: float | None, tasks: int, rng: np.random.Generator) -> FloatArray:
    """The reruns' compared numbers moved away from this run's by a t-like factor per rerun,
    ``sqrt(T / chi2_(T-1))``: the spread a predictive drawn from one run's tasks shows is itself an
    estimate from ``T`` tasks (a bootstrap's is ``(T - 1) / T`` of the variance), and taking it as
    known made runs near their thresholds look surer than their reruns were."""
    if current is None or not math.isfinite(current) or tasks < 2:
        return compared
    scale = np.sqrt(tasks / rng.chisquare(tasks - 1, compared.shape))
    return np.asarray(current + scale * (compared - current))


def _repeats(
    result: GateResult, rerun: tuple[FloatArray, ...], rng: np.random.Generator
) -> npt.NDArray[np.bool_]:
    """Which reruns give this run's verdict: a rerun with no number to compare or fewer cases than the
    gate's ``min_n`` would be inconclusive, not the same verdict."""
    gate = result.gate
    current = {"upper": result.high, "lower": result.low}.get(gate.bound, result.value)
    compared = _widened(_compared(gate, rerun), current, rerun[1].shape[-1], rng)
    verdict = _ARRAY_OPS[gate.op](compared, gate.threshold)
    cases = np.min(np.stack([np.sum(c, axis=-1) for c in rerun[1::2]]), axis=0)
    decided = np.isfinite(compared) & (cases >= (gate.min_n or 0))
    return np.asarray(decided & (verdict == (result.status == "pass")), dtype=np.bool_)


def case_rate_reproducibility(result: GateResult, counts: tuple[FloatArray, ...]) -> Reproducibility | None:
    """A case rate's (or a difference of two's) reproducibility from its per-task counts (``(k, n)`` or
    ``(k1, n1, k2, n2)``). A single rate's is in closed form (:func:`~.repeat_figure.case_rate_figures`;
    None where its counts cannot support one: :func:`~.repeat_figure.withheld`); a difference's by
    :data:`REPLAYS` simulated reruns, the share that gives this run's verdict. A task whose cases all
    agreed reruns the same on the same tasks (an always or never task); the same-task figure is at
    least the fresh-task one."""
    if result.status not in ("pass", "fail"):
        return None
    gate = result.gate
    if len(counts) == 2:
        same_p, fresh_p = case_rate_figures(
            counts[0], counts[1], gate.threshold, gate.bound or "", gate.min_n or 0
        )
        same_f, fresh_f = float(same_p), float(fresh_p)
        return None if not math.isfinite(fresh_f) else Reproducibility(same_f, fresh_f)
    rng = _replay_rng(result)
    shape = (REPLAYS, counts[0].shape[-1])
    same = tuple(
        _same_tasks(c, counts[i + 1], rng, shape) if i % 2 == 0 else np.broadcast_to(c, shape)
        for i, c in enumerate(counts)
    )
    fresh = _fresh_tasks(counts, rng, shape)
    shares = [float(np.mean(_repeats(result, rerun, rng))) for rerun in (same, fresh)]
    # A fresh-task rerun redraws all a same-task one does and more: the binomial within tasks overstates
    # the noise where a task's cases are negatively correlated (slot A in both orders of one pair).
    return Reproducibility(max(shares), shares[1])


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


def data_shortfall(tasks: int | None, counts: tuple[FloatArray, ...] | None) -> str | None:
    """Why the run cannot support a figure (``8 tasks``, ``44 tasks, 2 events in 2 of them``), or None:
    fewer than :data:`MIN_FIGURE_TASKS` tasks, or a case rate whose rarer outcome sits in fewer than
    :data:`~.repeat_figure.MIN_OUTCOME_TASKS` tasks (:func:`~.repeat_figure.withheld`)."""
    rate = counts if counts is not None and len(counts) == 2 else None
    why = withheld(rate[0], rate[1]) if rate is not None else None
    if tasks is None or tasks >= MIN_FIGURE_TASKS or why is not None:
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
