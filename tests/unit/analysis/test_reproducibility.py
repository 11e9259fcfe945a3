"""How often a verdict would repeat: the figure's arithmetic, the gate option
``reproducible=P``, and its calibration against simulated reruns (docs/protocol.md#reproducibility)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from pytest_gauge._internal.analysis.gates import OPS, Gate, GateResult, GateSyntaxError, parse_gate
from pytest_gauge._internal.analysis.intervals import cluster_wilson, t_quantile
from pytest_gauge._internal.analysis.power import variance_components
from pytest_gauge._internal.analysis.repeat_figure import withheld
from pytest_gauge._internal.analysis.reproducibility import (
    Reproducibility,
    case_rate_reproducibility,
    components_within_share,
    gate_reproducibility,
    repeat_probability,
    reproducibility_text,
    with_reproducibility,
)

Array = np.ndarray
Process = Callable[[np.random.Generator, int], tuple[Array, Array]]


def _result(text: str, status: str, value: float, low: float, high: float, n: int = 44) -> GateResult:
    return GateResult(parse_gate(text), status, value, low, high, n, f"{status.upper()} {text}: detail")  # type: ignore[arg-type]


def test_repeat_probability_is_one_half_on_the_threshold_and_grows_with_the_margin() -> None:
    assert repeat_probability(0.0, 0.1) == pytest.approx(0.5)
    assert repeat_probability(0.1414, 0.1) == pytest.approx(0.841, abs=1e-3)  # one predictive sd
    assert repeat_probability(-0.1414, 0.1) == repeat_probability(0.1414, 0.1)
    assert repeat_probability(0.05, 0.0) == 1.0


def test_gate_reproducibility_reads_the_compared_side_and_separates_within_task_noise() -> None:
    r = _result("upper(x) <= 0.5", "pass", 0.3, 0.2, 0.4 + 0.0)
    rep = gate_reproducibility(r, within=0.25)
    assert rep is not None
    se = 0.1 / 1.959963984540054
    assert rep.fresh_tasks == pytest.approx(repeat_probability(0.1, se))
    assert rep.same_tasks == pytest.approx(repeat_probability(0.1, se * 0.5))
    assert gate_reproducibility(_result("upper(x) <= 0.5", "inconclusive", 0.3, 0.2, 0.4)) is None
    exact = _result("total_cost <= 1", "pass", 0.5, 0.5, 0.5)
    assert gate_reproducibility(exact) is None  # an accounting figure has no sampling spread


def test_a_count_gate_repeats_like_a_poisson_count() -> None:
    r = _result("regressions(a) <= 2", "pass", 0.0, 0.0, 0.0)
    rep = gate_reproducibility(r, count=True)
    assert rep is not None and rep.same_tasks == pytest.approx(repeat_probability(-2.5, 1.0))


def test_always_or_never_tasks_rerun_the_same_on_the_same_tasks() -> None:
    k = np.array([0.0] * 14 + [12.0] * 6)
    n = np.full(20, 12.0)
    _, low, high = cluster_wilson(k, n)
    r = _result("upper(x) <= 0.65", "pass", 0.3, float(low), float(high), 240)
    assert float(high) < 0.65
    rep = case_rate_reproducibility(r, (k, n))
    assert rep is not None and rep.same_tasks == 1.0 and 0.5 < rep.fresh_tasks < 1.0
    assert case_rate_reproducibility(r, (k, n)) == rep  # a closed form: the same every run


@pytest.mark.parametrize(("tasks", "cases"), [(44, 6), (20, 6), (44, 12)])
def test_a_suite_with_no_event_or_events_in_few_tasks_gets_no_figure(tasks: int, cases: int) -> None:
    """No event on any task (the example's judge gate: 44 tasks x 6 cases), or events in fewer than
    MIN_OUTCOME_TASKS tasks: how a rerun's events would cluster is unknown (Jeffreys' share of event
    tasks printed 74-95% depending on how it was assumed), so the figure is withheld and says why; the
    mirror (every case an event) likewise; events in MIN_OUTCOME_TASKS tasks get a figure."""
    from pytest_gauge._internal.analysis.repeat_figure import MIN_OUTCOME_TASKS  # deferred: one test
    from pytest_gauge._internal.analysis.reproducibility import data_shortfall  # deferred: as above

    k, n = np.zeros(tasks), np.full(tasks, float(cases))
    _, low, high = (float(x) for x in cluster_wilson(k, n))
    rep = case_rate_reproducibility(_result("upper(x) <= 0.3", "pass", 0.0, low, high, tasks * cases), (k, n))
    assert rep is None
    assert data_shortfall(tasks, (k, n)) == f"{tasks} tasks, no event"
    assert data_shortfall(tasks, (n.copy(), n)) == f"{tasks} tasks, no non-event"
    few = k.copy()
    few[: MIN_OUTCOME_TASKS - 1] = 1.0
    assert data_shortfall(tasks, (few, n)) == f"{tasks} tasks, {MIN_OUTCOME_TASKS - 1} events in 3 of them"
    few[MIN_OUTCOME_TASKS - 1] = 1.0
    assert data_shortfall(tasks, (few, n)) is None
    _, low, high = (float(x) for x in cluster_wilson(few, n))
    assert case_rate_reproducibility(_result("upper(x) <= 0.5", "pass", 0.1, low, high), (few, n)) is not None


def test_a_difference_of_two_rates_gets_a_closed_form_figure_or_says_why_not() -> None:
    """Two rates over shared tasks: no figure where they differ on fewer than MIN_OUTCOME_TASKS tasks
    (and the reason says so); where a task's two rates differ only as always against never, a same-task
    rerun repeats them (figure 1), a fresh one need not; the same figure on every call."""
    from pytest_gauge._internal.analysis.intervals import cluster_difference  # deferred: one test
    from pytest_gauge._internal.analysis.repeat_figure import MIN_OUTCOME_TASKS  # deferred: as above
    from pytest_gauge._internal.analysis.reproducibility import data_shortfall  # deferred: as above

    n = np.full(20, 6.0)
    k1 = np.zeros(20)
    k2 = np.zeros(20)
    k1[: MIN_OUTCOME_TASKS - 1] = 6.0
    assert (
        data_shortfall(20, (k1, n, k2, n))
        == f"20 tasks, the two rates differ on {MIN_OUTCOME_TASKS - 1} of them"
    )
    k1[: MIN_OUTCOME_TASKS + 2] = 6.0
    assert data_shortfall(20, (k1, n, k2, n)) is None
    _, low, high = (float(x) for x in cluster_difference(k1, n, k2, n))
    text = "lower(lrs_close - lrs_distant) >= 0.05"
    rep = case_rate_reproducibility(_result(text, "pass", 0.3, low, high, 20), (k1, n, k2, n))
    assert rep is not None and rep.same_tasks == 1.0 and 0.5 < rep.fresh_tasks < 1.0
    assert case_rate_reproducibility(_result(text, "pass", 0.3, low, high, 20), (k1, n, k2, n)) == rep
    few = k1.copy()
    few[MIN_OUTCOME_TASKS - 1 :] = 0.0
    _, low, high = (float(x) for x in cluster_difference(few, n, k2, n))
    assert case_rate_reproducibility(_result(text, "pass", 0.15, low, high, 20), (few, n, k2, n)) is None


def test_a_rerun_below_min_n_or_without_a_bound_is_not_the_same_verdict() -> None:
    """A rerun with fewer cases than ``min_n`` (or none) would be inconclusive: it does not repeat."""
    k = np.array([1.0, 0.0, 2.0, 0.0] * 5)
    n = np.array([2.0, 0.0, 2.0, 2.0] * 5)
    _, low, high = (float(x) for x in cluster_wilson(k, n))
    plain = case_rate_reproducibility(_result("upper(x) <= 0.9", "pass", 0.3, low, high, 30), (k, n))
    gate = "upper(x) <= 0.9; min_n=30"
    needy = case_rate_reproducibility(_result(gate, "pass", 0.3, low, high, 30), (k, n))
    assert plain is not None and needy is not None
    # the same tasks keep their 30 cases: min_n plays no part (the two differ by their seeds' draws)
    assert min(needy.same_tasks, plain.same_tasks) >= 0.95  # t-widened: 0.97-0.98
    assert abs(needy.same_tasks - plain.same_tasks) <= 0.03
    assert needy.fresh_tasks < plain.fresh_tasks - 0.2  # fresh tasks hold fewer than 30 cases half the time


def test_reproducible_option_parses_and_round_trips() -> None:
    g = parse_gate("upper(lrs_distant) <= 0.2; reproducible=0.9")
    assert (g.reproducible, g.unreproducible) == (0.9, "fail")
    soft = parse_gate("upper(lrs_distant) <= 0.2; min_n=5; reproducible = 0.8 : inconclusive")
    assert (soft.reproducible, soft.unreproducible) == (0.8, "inconclusive")
    for gate in (g, soft):
        assert parse_gate(gate.canonical()) == gate
    assert soft.canonical() == "upper(lrs_distant) <= 0.2; min_n=5; reproducible=0.8:inconclusive"
    for bad in ("x <= 1; reproducible=1.5", "x <= 1; reproducible", "x <= 1; reproducible=0.9:warn"):
        with pytest.raises(GateSyntaxError, match="reproducible"):
            parse_gate(bad)


@pytest.mark.parametrize("mode", ["fail", "inconclusive"])
def test_a_pass_that_would_not_repeat_enough_fails_or_is_inconclusive(mode: str) -> None:
    suffix = "" if mode == "fail" else ":inconclusive"
    r = _result(f"upper(x) <= 0.5; reproducible=0.9{suffix}", "pass", 0.4, 0.3, 0.48)
    out = with_reproducibility(r, Reproducibility(0.64, 0.58))
    assert out.status == mode
    assert "holds on ~64% of reruns (~58% on fresh tasks), below reproducible=0.9" in out.message
    kept = with_reproducibility(r, Reproducibility(0.95, 0.9))
    assert kept.status == "pass" and kept.message.endswith("holds on ~95% of reruns (~90% on fresh tasks)")
    plain = with_reproducibility(
        _result("upper(x) <= 0.5", "pass", 0.4, 0.3, 0.48), Reproducibility(0.64, 0.64)
    )
    assert plain.status == "pass" and plain.message.endswith("; holds on ~64% of reruns")
    assert reproducibility_text(Reproducibility(0.999, 0.999)) == "holds on >99% of reruns"


# --- calibration: predicted against actual rerun agreement (slow tier) ---------------------------------


def _always(share: float, cases: int) -> Process:
    def draw(rng: np.random.Generator, tasks: int) -> tuple[Array, Array]:
        return (rng.random(tasks) < share).astype(float), np.full(tasks, float(cases))

    return draw


def _rare_partial(rng: np.random.Generator, tasks: int) -> tuple[Array, Array]:
    """Rare events spread within their tasks: 5% of tasks at 0.3, the rest never, 6 cases each (many
    runs see no event; the fresh-task figure of a run with none must not be over-confident)."""
    return np.where(rng.random(tasks) < 0.05, 0.3, 0.0), np.full(tasks, 6.0)


def _unequal(rng: np.random.Generator, tasks: int) -> tuple[Array, Array]:
    from scipy.special import expit, logit  # imported here: scipy costs a worker about 1 s

    return expit(logit(0.1) + rng.normal(0.0, 2.0, tasks)), rng.choice([4.0, 12.0], tasks)


def _temperature_zero(rng: np.random.Generator, tasks: int) -> tuple[Array, Array]:
    u = rng.random(tasks)
    p = np.where(u < 0.425, 0.01, np.where(u < 0.85, 0.99, rng.uniform(0.2, 0.8, tasks)))
    return p, np.full(tasks, 4.0)


PROCESSES: dict[str, Process] = {
    "always 10% / never 90%, 12 cases": _always(0.1, 12),
    "always 30% / never 70%, 4 cases": _always(0.3, 4),
    "mostly zero events: always 2% / never 98%, 6 cases": _always(0.02, 6),
    "rare events within tasks: 5% of tasks at 0.3, 6 cases": _rare_partial,
    "logit-normal sd 2, 4 or 12 cases": _unequal,
    "temperature 0: 85% of tasks at 0.01 or 0.99": _temperature_zero,
}
RUNS = 500
TOLERANCE = 0.05


def _rate_gate(rng: np.random.Generator, low: float, high: float, run: int) -> tuple[Gate, bool]:
    """A random-side gate whose threshold sits within about 3 standard errors of this run's bound
    ``(low, high)`` (a quarter of the interval's width each), where a verdict is not sure to repeat: the
    predictive figure is calibrated whatever the threshold's distance; a plug-in one is 6-8 points too
    high."""
    bound = "upper" if rng.random() < 0.5 else "lower"
    threshold = (high if bound == "upper" else low) + rng.uniform(-3.0, 3.0) * max((high - low) / 4.0, 0.01)
    op = "<=" if bound == "upper" else ">="
    gate = parse_gate(f"{bound}(x{run}) {op} {threshold!r}")
    return gate, bool(OPS[op](high if bound == "upper" else low, threshold))


def _passes(gates: list[Gate], k: Array, n: Array) -> Array:
    """Whether each row's suite (rows of ``k``, ``n``) passes its gate: one batched ``cluster_wilson``,
    the same numbers as one suite at a time (tests/unit/analysis/test_interval_coverage.py)."""
    _, low, high = cluster_wilson(k, n)
    sides = zip(gates, low, high, strict=True)
    return np.array([OPS[g.op](float(hi if g.bound == "upper" else lo), g.threshold) for g, lo, hi in sides])


def _rate_cell(process: Process, tasks: int, seed: int) -> tuple[float, float, float, float, int]:
    """(predicted same, actual same, predicted fresh, actual fresh, runs with a figure) over RUNS
    simulated suites; the reruns' verdicts are computed at the end in one batch."""
    rng = np.random.default_rng([seed, tasks])
    gates, verdicts, predicted = [], [], []
    same_runs: list[tuple[Array, Array]] = []
    fresh_runs: list[tuple[Array, Array]] = []
    for run in range(RUNS):
        p, n = process(rng, tasks)
        k = rng.binomial(n.astype(int), p).astype(float)
        value, low, high = (float(x) for x in cluster_wilson(k, n))
        gate, passed = _rate_gate(rng, low, high, run)
        result = GateResult(gate, "pass" if passed else "fail", value, low, high, int(n.sum()), "")
        rep = case_rate_reproducibility(result, (k, n))
        if rep is None:  # withheld: the rarer outcome in too few tasks (repeat_figure.withheld)
            assert withheld(k, n) is not None
            continue
        same_runs.append((rng.binomial(n.astype(int), p).astype(float), n))
        p2, n2 = process(rng, tasks)
        fresh_runs.append((rng.binomial(n2.astype(int), p2).astype(float), n2))
        gates.append(gate)
        verdicts.append(passed)
        predicted.append((rep.same_tasks, rep.fresh_tasks))
    if not predicted:
        return 0.0, 0.0, 0.0, 0.0, 0
    passed_now = np.array(verdicts)
    same, fresh = (
        _passes(gates, np.stack([r[0] for r in runs]), np.stack([r[1] for r in runs])) == passed_now
        for runs in (same_runs, fresh_runs)
    )
    pred = np.array(predicted, dtype=float)
    shown = len(predicted)
    return float(pred[:, 0].mean()), float(same.mean()), float(pred[:, 1].mean()), float(fresh.mean()), shown


CAUTIOUS = pytest.mark.xfail(
    reason="a known cautious miss: always 10% / never 90% at 44 tasks, fresh tasks, 78.9% printed where"
    " 84.3% repeat (events in about 4 tasks: the spread is taken at the crossing, never narrower)",
    strict=False,
)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "tasks"),
    [
        pytest.param(n, t, marks=CAUTIOUS) if n.startswith("always 10%") and t == 44 else (n, t)
        for n in PROCESSES
        for t in (20, 44)
    ],
)
def test_case_rate_reproducibility_matches_simulated_reruns(name: str, tasks: int) -> None:
    """Within 5 points of the share of simulated reruns that repeat the verdict, on the same tasks and
    on fresh ones, thresholds within 3 standard errors of each run's own bound (measured: within 4.9
    points but the cautious cell; MC error about 2 points at 500 runs; the target design, thresholds
    fixed before the data, is test_reproducibility_calibration.py's)."""
    ps, a_s, pf, a_f, shown = _rate_cell(PROCESSES[name], tasks, seed=26)
    if shown < 100:  # events in a task or two on most runs (2 or fewer expected): withheld, not checked
        rare = ("mostly zero", "rare events", "always 10%")
        assert name.startswith(rare) and (tasks == 20 or not name.startswith("always")), (
            f"{name}: {shown} shown"
        )
        return
    assert abs(ps - a_s) <= TOLERANCE, (
        f"{name}, {tasks} tasks, same tasks: predicted {ps:.3f}, actual {a_s:.3f}"
    )
    assert abs(pf - a_f) <= TOLERANCE, (
        f"{name}, {tasks} tasks, fresh tasks: predicted {pf:.3f}, actual {a_f:.3f}"
    )


def _interval(x: Array) -> tuple[float, float, float]:
    means = x.mean(axis=1)
    se = float(means.std(ddof=1)) / np.sqrt(len(means))
    q = float(t_quantile(len(means) - 1))
    v = float(means.mean())
    return v, v - q * se, v + q * se


def _mean_passes(gate: Gate, y: Array) -> bool:
    _, low, high = _interval(y)
    return bool(OPS[gate.op](high if gate.bound == "upper" else low, gate.threshold))


@pytest.mark.slow
@pytest.mark.parametrize("tasks", [20, 44])
def test_mean_of_samples_reproducibility_matches_simulated_reruns(tasks: int) -> None:
    """The normal path (a mean over tasks of 3 samples each, between- and within-task sd 0.2): the
    within share from the variance components separates a same-task rerun from a fresh one."""
    rng = np.random.default_rng([26, tasks])
    rows = []
    for run in range(1000):
        mu = rng.normal(0.5, 0.2, tasks)
        x = mu[:, None] + rng.normal(0.0, 0.2, (tasks, 3))
        v, low, high = _interval(x)
        bound = "upper" if run % 2 else "lower"
        threshold = float((high if bound == "upper" else low) + rng.uniform(-3.0, 3.0) * (high - low) / 4.0)
        op = "<=" if bound == "upper" else ">="
        gate = parse_gate(f"{bound}(mean_reward(a)) {op} {threshold!r}")
        passed = _mean_passes(gate, x)
        result = GateResult(gate, "pass" if passed else "fail", v, low, high, tasks, "")
        within = components_within_share(variance_components([list(r) for r in x]))
        rep = gate_reproducibility(result, df=tasks - 1, within=within)
        assert rep is not None
        same = _mean_passes(gate, mu[:, None] + rng.normal(0.0, 0.2, (tasks, 3))) == passed
        again = rng.normal(0.5, 0.2, tasks)[:, None] + rng.normal(0.0, 0.2, (tasks, 3))
        fresh = _mean_passes(gate, again) == passed
        rows.append((rep.same_tasks, same, rep.fresh_tasks, fresh))
    ps, a_s, pf, a_f = (float(x) for x in np.mean(np.array(rows, dtype=float), axis=0))
    assert abs(ps - a_s) <= TOLERANCE and abs(pf - a_f) <= TOLERANCE, (ps, a_s, pf, a_f)


def test_a_suite_too_small_gets_no_figure_and_says_so() -> None:
    """Below MIN_FIGURE_TASKS tasks (runs of 8 tasks printing about 85% repeated 70-74% of the time), or
    MIN_RATE_TASKS for a case rate or a difference of two: no number, the reason instead; a pass that
    must be reproducible cannot be shown to be, so it is inconclusive with that reason (with or without
    ``:inconclusive``)."""
    from pytest_gauge._internal.analysis.reproducibility import (  # deferred: one test
        MIN_FIGURE_TASKS,
        data_shortfall,
        without_figure,
    )

    few = MIN_FIGURE_TASKS - 1
    assert data_shortfall(few, None) == f"{few} tasks"
    assert data_shortfall(MIN_FIGURE_TASKS, None) is None
    k, n = np.array([1.0, 0.0, 2.0] * 3), np.full(9, 3.0)
    assert data_shortfall(9, (k, n)) == "9 tasks, 9 events"
    # a case rate's figure (or a difference's) needs MIN_RATE_TASKS tasks
    k, n = np.array([1.0, 0.0, 2.0, 0.0] * 5), np.full(20, 3.0)
    assert data_shortfall(19, (k[:19], n[:19])) == "19 tasks, 15 events"
    assert data_shortfall(19, (k[:19], n[:19], k[::-1][:19], n[:19])) == "19 tasks"
    assert data_shortfall(20, (k, n)) is None and data_shortfall(MIN_FIGURE_TASKS, None) is None
    plain = without_figure(_result("upper(x) <= 0.5", "pass", 0.3, 0.2, 0.4), f"{few} tasks")
    assert plain.status == "pass" and plain.reproducibility is None
    assert plain.message.endswith(f"not enough data to say how often a rerun repeats it ({few} tasks)")
    for mode in ("", ":inconclusive"):
        required = without_figure(
            _result(f"upper(x) <= 0.5; reproducible=0.9{mode}", "pass", 0.3, 0.2, 0.4), "3 tasks"
        )
        assert required.status == "inconclusive" and "cannot be shown to hold" in required.message
        assert "not enough data to say how often a rerun repeats it (3 tasks)" in required.message
    failed = without_figure(_result("upper(x) <= 0.5; reproducible=0.9", "fail", 0.6, 0.55, 0.7), "3 tasks")
    assert failed.status == "fail" and failed.message.endswith("(3 tasks)")
