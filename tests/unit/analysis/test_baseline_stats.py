"""The statistical core of baselines, repeats and sample sizes: hand-computed cases, and in the
slow tier validity against known truth on simulated per-task outcomes (vectorised: one column per run).

The simulations draw each task's true success probability from a Beta around 0.6 (``conc`` is its
concentration: small = tasks an agent mostly passes or mostly fails, large = every task alike), then
baseline and current outcomes independently per run; a "drop of d" scales every task's probability by
``1 - d / mean``, so the mean falls by exactly ``d``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_gauge._internal.analysis.intervals import t_quantile, z_value
from pytest_gauge._internal.analysis.paired import (
    PairedTally,
    mcnemar_exact,
    mcnemar_mid_p,
    mcnemar_randomized,
    paired_interval,
    paired_mean_delta,
    paired_ratio_delta,
    tango_interval,
)
from pytest_gauge._internal.analysis.power import (
    gate_needed_n,
    min_detectable,
    needed_n,
    noise_floor,
    unit_sd,
)
from pytest_gauge._internal.analysis.repeats import (
    RepeatCounts,
    flaky_tasks,
    noise_floor_of,
    pass_at_k,
    pass_at_k_values,
    pass_hat_k,
    pass_hat_k_values,
)
from pytest_gauge._internal.analysis.resampling import bootstrap_means, percentile_bounds, task_counts

T = 44
ROUNDS = 2000
RUNS = 200


# -- hand-computed cases ---------------------------------------------------------------------------


def test_z_values_match_the_normal_table() -> None:
    assert z_value(0.95) == pytest.approx(1.959964, abs=1e-6)
    assert z_value(0.6) == pytest.approx(0.841621, abs=1e-6)  # the 80% power quantile


def test_mcnemar_exact_and_mid_p_by_hand() -> None:
    # 5 regressed, 1 fixed: P(X <= 1 | n=6) = 7/64, two-sided 14/64; mid-p = 2 * (7/64 - 6/128)
    assert mcnemar_exact(5, 1) == pytest.approx(14 / 64)
    assert mcnemar_mid_p(5, 1) == pytest.approx(2 * (7 / 64 - 3 / 64))
    assert mcnemar_exact(1, 5) == mcnemar_exact(5, 1)
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(3, 3) == 1.0
    assert mcnemar_exact(8, 0) == pytest.approx(2 / 256)
    # randomized: strictly more extreme tables (0 or 6 of 6) plus u times the observed (1 or 5)
    assert mcnemar_randomized(5, 1, 0.0) == pytest.approx(2 / 64)
    assert mcnemar_randomized(5, 1, 1.0) == pytest.approx(14 / 64)
    assert mcnemar_randomized(2, 2, 1.0) == pytest.approx(1.0)


def test_paired_mean_delta_by_hand_and_paired_beats_unpaired() -> None:
    before = np.tile([1.0, 1.0, 0.0, 0.0, 1.0], 4)
    now = np.tile([1.0, 0.0, 0.0, 0.0, 1.0], 4)
    est = paired_mean_delta(now, before)
    assert est.value == pytest.approx(-0.2)
    assert est.n == 20
    assert est.low is not None and est.high is not None
    # 4 of 20 tasks regressed, none fixed: McNemar p = 0.125, so the interval reaches just past 0
    assert -1.0 <= est.low <= -0.2 < 0.0 < est.high < 0.05
    # the same delta with each run's tasks resampled on their own (unpaired) is wider
    apart = bootstrap_means(now, task_counts(20, 500, 2)) - bootstrap_means(before, task_counts(20, 500, 3))
    low, high = percentile_bounds(apart[:, None])
    assert est.high - est.low < float(high[0] - low[0])
    # identical runs: no task flipped, yet the interval keeps Tango's width (+-t^2 / (n + t^2))
    same = paired_mean_delta(before, before)
    assert same.value == 0.0 and same.low is not None and same.high is not None
    z2 = float(t_quantile(19.0)) ** 2
    assert same.high == pytest.approx(z2 / (20 + z2), abs=1e-9)
    assert same.low == pytest.approx(-same.high, abs=1e-9)


def test_paired_ratio_delta_uses_the_same_tasks_for_both_ratios() -> None:
    # cost per success; task 2 costs the same in both runs but lost its success
    tally = PairedTally(
        current_num=np.array([1.0, 2.0, 3.0]),
        current_den=np.array([1.0, 0.0, 1.0]),
        baseline_num=np.array([1.0, 2.0, 3.0]),
        baseline_den=np.array([1.0, 1.0, 1.0]),
    )
    est = paired_ratio_delta(tally, task_counts(3, 400, 2))
    assert est.value == pytest.approx(6 / 2 - 6 / 3)
    assert est.n == 2
    assert est.value is not None and est.low is not None and est.high is not None
    assert est.low <= est.value <= est.high
    # both ratios from the same resampled tasks: identical runs give a zero-width interval at 0
    same = PairedTally(tally.current_num, tally.baseline_den, tally.current_num, tally.baseline_den)
    unchanged = paired_ratio_delta(same, task_counts(3, 400, 2))
    assert (unchanged.value, unchanged.low, unchanged.high) == (0.0, 0.0, 0.0)


def test_power_formulas_by_hand() -> None:
    sd = 0.5
    # ((1.96 + 0.8416) * 0.5 / 0.1)^2 = 196.2 -> 197
    assert needed_n(0.1, sd) == 197
    assert needed_n(-0.1, sd) == 197
    assert needed_n(0.0, sd) is None
    mdr = min_detectable(sd, 197)
    assert mdr is not None and mdr == pytest.approx(0.1, rel=0.01)
    floor = noise_floor(sd, 100)
    assert floor == pytest.approx(1.959964 * 0.05)
    assert unit_sd(0.2, 0.6, 16) == pytest.approx(0.4 / (2 * 1.959964) * 4)


def test_gate_needed_n_cases() -> None:
    # upper(lrs_close) <= 0.3 at n=24 with value 0.35 [0.2, 0.5]: sd = 0.3/3.92*sqrt(24)
    res = gate_needed_n(0.35, 0.2, 0.5, 24, 0.3)
    sd = 0.3 / (2 * 1.959964) * math.sqrt(24)
    assert res.n == math.ceil(((1.959964 + 0.841621) * sd / 0.05) ** 2)
    assert res.text == f"about {res.n} tasks ({res.low} or more) would decide it"  # 50% interval reaches 0
    assert res.low is not None and res.low < res.n and res.high is None
    assert gate_needed_n(0.3, 0.2, 0.4, 24, 0.3).n is None  # on the threshold: no size decides it
    assert gate_needed_n(None, None, None, 0, 0.3).n is None
    # min_n is a floor
    assert gate_needed_n(0.9, 0.85, 0.95, 10, 0.5, min_n=30).n == 30


def test_pass_at_k_and_pass_hat_k_by_hand() -> None:
    c, n = np.array([0, 1, 3]), np.array([3, 3, 3])
    # pass@2 per task: 1 - C(n-c,2)/C(3,2) = 0, 1 - 1/3, 1
    assert pass_at_k_values(c, n, 2) == pytest.approx([0.0, 2 / 3, 1.0])
    # pass^2 per task: C(c,2)/C(3,2) = 0, 0, 1
    assert pass_hat_k_values(c, n, 2) == pytest.approx([0.0, 0.0, 1.0])
    counts = RepeatCounts(("a", "b", "c"), c, n)
    at = pass_at_k(counts, 2, rounds=300, seed=1)
    hat = pass_hat_k(counts, 2, rounds=300, seed=1)
    assert at.value == pytest.approx(5 / 9) and at.n == 3
    assert hat.value == pytest.approx(1 / 3)
    flaky, ids = flaky_tasks(counts)
    assert flaky.value == 1 and ids == ("b",)
    with pytest.raises(ValueError, match="needs at least 4 samples"):
        pass_at_k_values(c, n, 4)


def test_noise_floor_with_and_without_repeats() -> None:
    # two samples per task, c = 1 of 2 everywhere: v = 1*1/(2*1) = 0.5, var_run = 0.5/2/T
    counts = RepeatCounts(tuple("abcd"), np.array([1, 1, 1, 1]), np.array([2, 2, 2, 2]))
    assert noise_floor_of(counts) == pytest.approx(1.959964 * math.sqrt(2 * 4 * 0.25 / 16))
    # one sample: the pooled bound p(1-p) = 0.25
    single = RepeatCounts(tuple("abcd"), np.array([1, 0, 1, 0]), np.array([1, 1, 1, 1]))
    assert noise_floor_of(single) == pytest.approx(1.959964 * math.sqrt(2 * 4 * 0.25 / 16))


# -- validity against known truth (slow tier) ------------------------------------------------------


def _truth(conc: float, seed: int, mean: float = 0.6) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.beta(mean * conc, (1 - mean) * conc, size=T)


def _runs(p: np.ndarray, drop: float, rng: np.random.Generator, runs: int = RUNS) -> tuple[np.ndarray, ...]:
    """Baseline and current outcomes (tasks x runs) and per-run upper 95% bounds of the paired delta."""
    q = p * (1.0 - drop / p.mean())
    before = (rng.random((T, runs)) < p[:, None]).astype(np.float64)
    now = (rng.random((T, runs)) < q[:, None]).astype(np.float64)
    d = now - before
    _, high = percentile_bounds(bootstrap_means(d, task_counts(T, ROUNDS, 7)))
    return before, now, d, high


def _stated_mdr(d: np.ndarray) -> float:
    sd = d.std(axis=0, ddof=1)
    values = [min_detectable(float(s), T) for s in sd]
    return float(np.median([v for v in values if v is not None]))


@pytest.mark.slow
@pytest.mark.parametrize("conc", [4.0, 1000.0])
def test_no_change_rarely_fails_and_mcnemar_null_holds(conc: float) -> None:
    rng = np.random.default_rng(11)
    before, now, _, high = _runs(_truth(conc, 5), 0.0, rng)
    false_fail = float(np.mean(high < 0))  # gate upper(delta(success_rate(a))) >= 0 fails
    assert false_fail <= 0.05
    b = ((before == 1) & (now == 0)).sum(axis=0)
    c = ((before == 0) & (now == 1)).sum(axis=0)
    u = rng.random(RUNS)
    randomized = [mcnemar_randomized(int(x), int(y), float(w)) for x, y, w in zip(b, c, u, strict=True)]
    from scipy import stats  # imported here: scipy.stats costs a worker about 1 s (tests/conftest.py)

    assert stats.kstest(randomized, "uniform").pvalue > 0.01
    exact = np.array([mcnemar_exact(int(x), int(y)) for x, y in zip(b, c, strict=True)])
    assert float(np.mean(exact <= 0.05)) <= 0.05  # the exact test is valid (conservative)


@pytest.mark.slow
@pytest.mark.parametrize("conc", [1.0, 4.0, 1000.0])
def test_a_drop_equal_to_the_stated_mdr_is_caught_70_to_90_percent(conc: float) -> None:
    """The suite states its MDR from the comparison it sees (which includes the drop), so the honest
    check is at the fixed point: the drop equals the MDR stated under that drop."""
    p = _truth(conc, 6)
    rng = np.random.default_rng(12)
    drop = _stated_mdr(_runs(p, 0.0, rng)[2])
    for _ in range(2):
        drop = _stated_mdr(_runs(p, drop, rng)[2])
    caught = float(np.mean(_runs(p, drop, rng)[3] < 0))
    assert 0.70 <= caught <= 0.90, (drop, caught)


@pytest.mark.slow
def test_a_quarter_drop_on_44_tasks_is_caught_when_tasks_differ() -> None:
    """0.25 on 44 tasks: caught >= 80% when tasks are mostly-pass or mostly-fail (concentration 0.5);
    with every task alike the best any 95% paired test can do is ~66% (see the report)."""
    rng = np.random.default_rng(13)
    caught = float(np.mean(_runs(_truth(0.5, 7), 0.25, rng, runs=400)[3] < 0))
    assert caught >= 0.80


@pytest.mark.slow
def test_pass_at_k_and_pass_hat_k_are_unbiased() -> None:
    rng = np.random.default_rng(14)
    p = _truth(2.0, 8)
    n, k, runs = 5, 3, 4000
    c = rng.binomial(n, p[:, None], size=(T, runs))
    at = np.mean([pass_at_k_values(c[:, j], np.full(T, n), k).mean() for j in range(runs)])
    hat = np.mean([pass_hat_k_values(c[:, j], np.full(T, n), k).mean() for j in range(runs)])
    truth_at = float(np.mean(1 - (1 - p) ** k))
    truth_hat = float(np.mean(p**k))
    # simulation error of a mean of 4000 runs: well under 0.005
    assert at == pytest.approx(truth_at, abs=0.005)
    assert hat == pytest.approx(truth_hat, abs=0.005)
    # the plug-in estimator (c/n)^k is biased upward for pass^k by far more than the tolerance
    plug = np.mean(((c / n) ** k).mean(axis=0))
    assert plug - truth_hat > 0.02


@pytest.mark.slow
def test_needed_n_decides_the_gate_70_to_90_percent() -> None:
    """Pilots of 24 tasks for ``upper(rate) <= 0.3`` (true rate 0.25) whose interval crosses the threshold
    each state a needed_n; suites of that size whose true rate is the pilot's observed rate (the effect
    holds) decide the gate in 70-90% of runs, pooled over 20 pilots (one pilot's spread estimate is noisy)."""
    rng = np.random.default_rng(15)
    threshold = 0.3

    def suite(rate: float, n: int, runs: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        tasks = rng.beta(rate * 2, (1 - rate) * 2, size=(n, runs))  # heterogeneous tasks, mean ``rate``
        x = (rng.random((n, runs)) < tasks).astype(np.float64)
        low, high = percentile_bounds(bootstrap_means(x, task_counts(n, 1000, 3)))
        return x.mean(axis=0), low, high

    value, low, high = suite(0.25, 24, RUNS)
    decided: list[float] = []
    for v, lo, hi in zip(value, low, high, strict=True):
        if not (lo < threshold < hi) or abs(v - threshold) < 0.04 or len(decided) == 20:
            continue
        size = gate_needed_n(float(v), float(lo), float(hi), 24, threshold).n
        assert size is not None and size > 24
        if size > 400:
            continue
        _, low_n, high_n = suite(float(v), size, 100)
        decided.append(float(np.mean((high_n < threshold) | (low_n > threshold))))
    assert len(decided) == 20
    assert 0.70 <= float(np.mean(decided)) <= 0.90, decided


# --------------------------------------------------------------------------------------------------
# Paired deltas of near-deterministic agents (temperature 0): the non-inferiority and no-change checks

PAIRED_RUNS = 1500


def _task_rates(rng: np.random.Generator, process: str, shape: tuple[int, int]) -> np.ndarray:
    """Per-task success probabilities: 85% of tasks at 0.01 or 0.99 (temperature 0), or an always/never
    30/70 mixture with 5% of tasks at 0.5, or Beta(1, 1)."""
    u = rng.random(shape)
    if process == "near-deterministic":
        return np.where(u < 0.425, 0.01, np.where(u < 0.85, 0.99, rng.uniform(0.2, 0.8, shape)))
    if process == "always/never":
        return np.where(u < 0.3, 1.0, np.where(u < 0.95, 0.0, 0.5))
    return rng.beta(1.0, 1.0, shape)


def _regressed(rng: np.random.Generator, process: str, p: np.ndarray) -> np.ndarray:
    """The current run's probabilities: 0.05 lower on average over the task population (the margin)."""
    if process == "near-deterministic":
        return np.where((p == 0.99) & (rng.random(p.shape) < 0.05 / (0.425 * 0.98)), 0.01, p)
    if process == "always/never":
        return np.where((p == 1.0) & (rng.random(p.shape) < 0.05 / 0.3), 0.0, p)
    return p * 0.9


@pytest.mark.parametrize("process", ["near-deterministic", "always/never", "Beta(1, 1)"])
def test_paired_deltas_hold_at_temperature_zero(process: str) -> None:
    """``lower(delta(success_rate(a))) >= -0.05`` with the truth at the margin passes wrongly <= 3% at 20
    and 44 tasks, and ``upper(delta(...)) >= 0`` with 3 samples and no change fires <= 3% (6,000 runs:
    the studentized interval of fractional changes fires near its nominal 2.5%, Monte Carlo error 0.2
    points). The task
    bootstrap passed the first wrongly in 16% (20 tasks) and 6.5% (44) of near-deterministic runs and
    27% / 7.3% of always/never ones: with no task flipping its interval was [0, 0]."""
    rng = np.random.default_rng(2026)
    for tasks in (20, 44):
        p = _task_rates(rng, process, (PAIRED_RUNS, tasks))
        d = rng.binomial(1, _regressed(rng, process, p)) - rng.binomial(1, p).astype(np.float64)
        low, _ = paired_interval(d.astype(np.float64))
        assert float(np.mean(low >= -0.05)) <= 0.03, (tasks, float(np.mean(low >= -0.05)))
        many = _task_rates(rng, process, (4 * PAIRED_RUNS, tasks))  # near its nominal 2.5%: 6,000 runs
        now, before = rng.binomial(3, many) / 3.0, rng.binomial(3, many) / 3.0
        _, high = paired_interval(now - before)
        assert float(np.mean(high < 0.0)) <= 0.03, (tasks, float(np.mean(high < 0.0)))


def test_tango_interval_matches_its_closed_forms() -> None:
    """With no discordant unit the bounds are +-z^2 / (n + z^2); the restricted MLE inside the statistic
    matches scipy's numerical maximum."""
    low, high = tango_interval(np.array([0.0]), np.array([0.0]), np.array([20.0]))
    z2 = 1.959963984540054**2
    assert float(high[0]) == pytest.approx(z2 / (20 + z2), abs=1e-9)
    assert float(low[0]) == pytest.approx(-z2 / (20 + z2), abs=1e-9)
    low, high = tango_interval(np.array([2.0]), np.array([5.0]), np.array([30.0]))
    assert float(low[0]) < -0.1 < float(high[0])
    from scipy.optimize import minimize_scalar

    x, y, n, d = 3.0, 5.0, 40.0, 0.1
    best = minimize_scalar(
        lambda q: -(x * np.log(q + d) + y * np.log(q) + (n - x - y) * np.log(1 - 2 * q - d)),
        bounds=(1e-9, (1 - d) / 2 - 1e-9),
        method="bounded",
    )
    stat = (x - y - n * d) / np.sqrt(n * (2 * best.x + d * (1 - d)))
    from pytest_gauge._internal.analysis.paired import _tango_stat

    assert float(_tango_stat(np.array(x), np.array(y), np.array(n), np.array(d))) == pytest.approx(
        stat, rel=1e-5
    )


@pytest.mark.parametrize("process", ["near-deterministic", "always/never", "Beta(1, 1)"])
def test_the_guides_ci_gates_fail_an_unchanged_agent_at_most_five_percent(process: str) -> None:
    """The CI example's gates (docs/guide.md: ``upper(delta(success_rate(agent_x))) >= 0`` and
    ``upper(delta(mean_reward(agent_x))) >= 0``) on two independent runs of an unchanged agent at 44
    tasks fail the run <= 5% of the time (``PAIRED_RUNS`` runs: Monte Carlo error under 0.5 points);
    measured 0.7% / 0.07% / 2.0% (near-deterministic / always-never / Beta(1, 1)). The gate it replaced,
    ``regressions(agent_x) <= 2``, failed 27.3% / 1.6% / 98.1% of the same runs."""
    rng = np.random.default_rng(5)
    p = _task_rates(rng, process, (PAIRED_RUNS, 44))
    now, before = rng.binomial(1, p), rng.binomial(1, p)
    _, high_success = paired_interval((now - before).astype(np.float64))
    reward_now, reward_before = rng.binomial(4, p) / 4.0, rng.binomial(4, p) / 4.0
    _, high_reward = paired_interval(reward_now - reward_before)
    fails = float(np.mean((high_success < 0) | (high_reward < 0)))
    assert fails <= 0.05, fails
    regressions = np.sum((before == 1) & (now == 0), axis=-1)
    if process != "always/never":  # where tasks flip, the count gate is no test of "no change"
        assert float(np.mean(regressions > 2)) > 0.2


@pytest.mark.parametrize("process", ["near-deterministic", "always/never", "Beta(1, 1)"])
def test_more_samples_per_task_never_cost_paired_power(process: str) -> None:
    """A true 5-point drop at 44 tasks: caught by ``upper(delta(success_rate(a))) >= 0`` at least as
    often with 3 samples per task as with 1 (3,000 runs: Monte Carlo error of the difference under 1
    point; the hull of the score and t intervals caught it 2.5% of the time with 3 samples against 6.2%
    with 1 on Beta(1, 1) tasks), while the non-inferiority gate at its margin still passes wrongly <= 3%
    and the no-change gate fires <= 3% with 3 samples."""
    rng = np.random.default_rng(46)
    p = _task_rates(rng, process, (3000, 44))
    q = _regressed(rng, process, p)
    caught = {}
    for m in (1, 3):
        _, high = paired_interval(rng.binomial(m, q) / m - rng.binomial(m, p) / m)
        caught[m] = float(np.mean(high < 0.0))
    assert caught[3] >= caught[1] - 0.01, caught
    low, _ = paired_interval(rng.binomial(3, q) / 3.0 - rng.binomial(3, p) / 3.0)
    assert float(np.mean(low >= -0.05)) <= 0.03
    _, high = paired_interval(rng.binomial(3, p) / 3.0 - rng.binomial(3, p) / 3.0)
    assert float(np.mean(high < 0.0)) <= 0.03
