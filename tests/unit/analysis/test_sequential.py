"""Group-sequential statistics of adaptive runs: the exact boundaries against published values,
an independent multivariate-normal computation and a seeded Monte Carlo of Brownian paths; the t
quantiles against scipy; and hand-computed cases of every rule of ``decide``."""

from __future__ import annotations

import itertools
import math
from statistics import NormalDist

import numpy as np
import pytest

from pytest_gauge._internal.analysis.gates import parse_gate
from pytest_gauge._internal.analysis.intervals import Z95
from pytest_gauge._internal.analysis.sequential import (
    ALPHA_SIDE,
    MIN_TASKS,
    RHO,
    Decision,
    Look,
    boundaries,
    critical_quantile,
    crossing_probabilities,
    decide,
    equal_looks,
    look_boundaries,
    spending_boundaries,
    spent,
    t_upper_tail,
    widen,
    widen_wilson,
)

Z975 = Z95
EQUAL5 = [k / 5 for k in range(1, 6)]
UNEQUAL = [0.1, 0.35, 0.4, 0.9, 1.0]


def _crossed_by_paths(
    fractions: list[float], critical: tuple[float, ...], paths: int, seed: int
) -> np.ndarray:
    """Share of seeded Brownian paths whose FIRST crossing of c_k * sqrt(t_k) is at look k (one per k)."""
    rng = np.random.default_rng(seed)
    steps = np.diff([0.0, *fractions])
    w = np.cumsum(rng.standard_normal((paths, len(fractions))) * np.sqrt(steps), axis=1)
    over = w >= np.asarray(critical) * np.sqrt(fractions)
    first = np.where(over.any(axis=1), over.argmax(axis=1), -1)
    return np.array([np.mean(first == k) for k in range(len(fractions))])


def test_one_look_is_the_fixed_test() -> None:
    assert boundaries([1.0]) == pytest.approx((Z975,), abs=1e-9)
    assert boundaries([0.5]) == pytest.approx((NormalDist().inv_cdf(1 - ALPHA_SIDE * 0.5**RHO),), abs=1e-9)
    assert spent(0.5) == pytest.approx(0.025 * 0.5**RHO) and spent(1.7) == 0.025 and spent(0.0) == 0.0
    assert spent(0.5, rho=3.0) == pytest.approx(0.025 / 8)


def test_lan_demets_obrien_fleming_matches_the_published_boundaries() -> None:
    """Lan & DeMets' O'Brien-Fleming-type spending, 2 - 2 Phi(z_{0.0125} / sqrt(t)), five equal looks,
    one-sided 0.025: 4.877, 3.357, 2.680, 2.290, 2.031 (Reboussin et al. 2000; gsDesign sfLDOF)."""
    z = NormalDist().inv_cdf(1 - ALPHA_SIDE / 2)
    cumulative = [2 - 2 * NormalDist().cdf(z / math.sqrt(t)) for t in EQUAL5]
    got = spending_boundaries(EQUAL5, cumulative)
    assert got == pytest.approx((4.877, 3.357, 2.680, 2.290, 2.031), abs=6e-4)


@pytest.mark.parametrize("fractions", [EQUAL5, UNEQUAL], ids=["equal", "unequal"])
def test_exact_recursion_against_scipy_multivariate_normal(fractions: list[float]) -> None:
    """P(Z_1 < c_1, ..., Z_k < c_k) from scipy's multivariate normal (Genz's method, an independent
    algorithm) gives the alpha spent by look k; the recursion spent alpha * t_k**RHO."""
    from scipy import stats  # imported in the tests: scipy.stats costs a worker about 1 s

    cs = boundaries(fractions)
    cov = np.array([[math.sqrt(min(a, b) / max(a, b)) for b in fractions] for a in fractions])
    for k in range(1, len(fractions) + 1):
        stay = stats.multivariate_normal.cdf(
            np.array(cs[:k]), mean=np.zeros(k), cov=cov[:k, :k], abseps=1e-6, releps=0
        )
        assert 1.0 - stay == pytest.approx(spent(fractions[k - 1]), abs=2e-6)


def test_exact_recursion_against_a_monte_carlo_of_brownian_paths() -> None:
    """200k seeded paths, 20 looks of 5 tasks over 100: every look's first-crossing share and their total
    within 4 Monte Carlo standard errors of the spent alpha."""
    fractions = [k / 20 for k in range(1, 21)]
    cs = boundaries(fractions)
    paths = 200_000
    mc = _crossed_by_paths(fractions, cs, paths, seed=18)
    exact = np.diff([0.0, *[spent(t) for t in fractions]])
    se = np.sqrt(exact * (1 - exact) / paths)
    assert np.all(np.abs(mc - exact) <= 4 * se + 1e-6), (mc, exact)
    total_se = math.sqrt(ALPHA_SIDE * (1 - ALPHA_SIDE) / paths)
    assert abs(mc.sum() - ALPHA_SIDE) <= 4 * total_se


@pytest.mark.parametrize("fractions", [EQUAL5, UNEQUAL, [0.25, 0.5]], ids=["equal", "unequal", "cut-short"])
def test_crossing_probabilities_are_the_spent_increments(fractions: list[float]) -> None:
    cs = boundaries(fractions)
    got = crossing_probabilities(fractions, cs)
    want = np.diff([0.0, *[spent(t) for t in fractions]])
    assert np.allclose(got, want, rtol=1e-7, atol=1e-12)


@pytest.mark.parametrize("rho", [1.5, 2.0, 3.0])
def test_boundaries_decrease_in_t_for_rho_above_one(rho: float) -> None:
    cs = boundaries([k / 10 for k in range(1, 11)], rho=rho)
    assert all(b < a for a, b in itertools.pairwise(cs)), cs
    assert cs[-1] > Z975  # looking costs something at the end


def test_a_plan_cut_short_keeps_the_boundaries_so_far() -> None:
    """Spending depends only on the looks taken so far: stopping the plan early changes no boundary."""
    full = boundaries(UNEQUAL)
    assert boundaries(UNEQUAL[:3]) == pytest.approx(full[:3], abs=1e-9)


@pytest.mark.parametrize("bad", [[], [0.0, 1.0], [0.5, 0.5], [0.6, 0.4], [0.5, 1.2]])
def test_bad_fractions_are_refused(bad: list[float]) -> None:
    with pytest.raises(ValueError, match=r"strictly increasing|at least one look"):
        boundaries(bad)


def test_equal_looks() -> None:
    looks = equal_looks(44, 5)
    assert [look.tasks for look in looks] == [5, 10, 15, 20, 25, 30, 35, 40, 44]
    assert [look.index for look in looks] == list(range(1, 10)) and {look.planned for look in looks} == {9}
    assert [look.final for look in looks] == [False] * 8 + [True]
    # looks before MIN_TASKS test nothing; the first look that tests spends alpha(20/44) at once
    assert MIN_TASKS == 20 and [look.critical for look in looks[:3]] == [math.inf] * 3
    tested = [20, 25, 30, 35, 40, 44]
    assert [look.critical for look in looks[3:]] == pytest.approx(boundaries([t / 44 for t in tested]))
    small = equal_looks(12, 5)  # a suite smaller than MIN_TASKS: only its final look tests, at 1.96
    assert [look.critical for look in small] == [math.inf, math.inf, pytest.approx(Z975)]


def test_look_boundaries_of_uneven_looks_and_a_plan_cut_short() -> None:
    assert look_boundaries([7, 14, 21, 30], 30) == pytest.approx(
        (math.inf, math.inf, *boundaries([0.7, 1.0]))
    )
    assert look_boundaries([7, 14, 21], 30) == pytest.approx((math.inf, math.inf, boundaries([0.7])[0]))
    assert look_boundaries([5, 10], 40) == (math.inf, math.inf)
    with pytest.raises(ValueError, match="tasks through each look"):
        look_boundaries([5, 50], 40)


@pytest.mark.parametrize("df", [1.0, 3.0, 9.0, 39.0, 99.5])
@pytest.mark.parametrize("c", [-1.0, 1.5, Z975, 2.6, 4.5])
def test_critical_quantile_matches_scipy(c: float, df: float) -> None:
    from scipy import stats

    assert critical_quantile(c, df) == pytest.approx(stats.t.isf(stats.norm.sf(c), df), rel=1e-8)
    assert t_upper_tail(c, df) == pytest.approx(stats.t.sf(c, df), rel=1e-9)
    assert t_upper_tail(-c, df) == pytest.approx(stats.t.sf(-c, df), rel=1e-9)
    assert critical_quantile(c, None) == c


def test_critical_quantile_refuses_no_degrees_of_freedom() -> None:
    with pytest.raises(ValueError, match="degrees of freedom"):
        critical_quantile(2.0, 0.0)


def test_widen_each_side_around_the_value() -> None:
    assert widen(0.5, 0.4, 0.7, factor=1.5) == pytest.approx((0.35, 0.8))
    assert widen(0.5, None, 0.7, factor=2.0) == pytest.approx((None, 0.9))
    assert widen(None, 0.4, 0.7, factor=2.0) == (None, None)
    assert widen(-1.0, -3.0, 0.0, factor=1.0) == (-3.0, 0.0)


def _wilson(p: float, n: float, z: float) -> tuple[float, float]:
    """Wilson's score interval, written out (the reference for widen_wilson)."""
    d = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / d
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return centre - half, centre + half


@pytest.mark.parametrize(("p", "n"), [(0.08, 100.0), (0.5, 30.0), (0.02, 40.0), (0.97, 25.0), (0.3, 7.5)])
def test_widen_wilson_recomputes_the_wilson_interval_at_the_new_quantile(p: float, n: float) -> None:
    low, high = _wilson(p, n, Z975)
    assert widen_wilson(p, low, high, quantile=Z975, new_quantile=3.1) == pytest.approx(_wilson(p, n, 3.1))
    # a rare rate's upper side grows faster than a linear widening: linear would pass gates it must not
    if p < 0.1:
        wilson_high = widen_wilson(p, low, high, quantile=Z975, new_quantile=3.1)[1]
        linear_high = widen(p, low, high, factor=3.1 / Z975)[1]
        assert wilson_high is not None and linear_high is not None and wilson_high > linear_high


def test_widen_wilson_keeps_clipped_bounds_and_none() -> None:
    _, high = _wilson(0.0, 50.0, Z975)
    assert widen_wilson(0.0, 0.0, high, quantile=Z975, new_quantile=3.0) == pytest.approx(
        (0.0, _wilson(0.0, 50.0, 3.0)[1])
    )
    assert widen_wilson(None, 0.1, 0.2, quantile=Z975, new_quantile=3.0) == (None, None)
    assert widen_wilson(0.5, None, 1.0, quantile=Z975, new_quantile=3.0) == (None, 1.0)


def test_decide_with_a_wilson_interval() -> None:
    look = Look(index=4, planned=9, tasks=20, total_tasks=44, critical=3.1)
    low, high = _wilson(0.08, 100.0, Z975)
    got, av_low, av_high = decide(
        parse_gate("upper(x) <= 0.2"),
        0.08,
        low,
        high,
        100,
        look=look,
        df=None,
        nominal_quantile=Z975,
        wilson=True,
    )
    assert (av_low, av_high) == pytest.approx(_wilson(0.08, 100.0, 3.1))
    assert av_high is not None and av_high > 0.2 and got is None  # linear widening would have passed it
    linear, _, lin_high = decide(
        parse_gate("upper(x) <= 0.2"), 0.08, low, high, 100, look=look, df=None, nominal_quantile=Z975
    )
    assert linear == "pass" and lin_high is not None and lin_high < 0.2


# decide(): a look whose critical value is 2 * 1.96 doubles every side of a normal-quantile interval
MID = Look(index=2, planned=4, tasks=20, total_tasks=40, critical=2 * Z975)
END = Look(index=4, planned=4, tasks=40, total_tasks=40, critical=2 * Z975)


def _decide(
    gate: str, value: float | None, low: float | None, high: float | None, n: int = 50, *, look: Look = MID
) -> tuple[Decision, float | None, float | None]:
    return decide(parse_gate(gate), value, low, high, n, look=look, df=None, nominal_quantile=Z975)


@pytest.mark.parametrize(
    ("gate", "value", "low", "high", "look", "want"),
    [
        # upper(x) <= 0.5: AV interval [v - 2(v-l), v + 2(h-v)]
        ("upper(x) <= 0.5", 0.3, 0.25, 0.4, MID, "pass"),  # AV [0.2, 0.5]: high meets 0.5
        ("upper(x) <= 0.5", 0.3, 0.25, 0.41, MID, None),  # AV high 0.52
        ("upper(x) <= 0.5", 0.7, 0.6, 0.8, MID, None),  # AV low 0.5 does not break <= 0.5
        ("upper(x) <= 0.5", 0.7, 0.61, 0.8, MID, "fail"),  # AV low 0.52 > 0.5
        ("upper(x) < 0.5", 0.3, 0.25, 0.4, MID, None),  # AV high 0.5 is not < 0.5
        ("upper(x) < 0.5", 0.7, 0.6, 0.8, MID, "fail"),  # AV low 0.5 >= 0.5
        ("upper(x) <= 0.5", 0.4, 0.35, 0.46, END, "fail"),  # final: AV high 0.52 > 0.5, nominal 0.46 passes
        ("upper(x) <= 0.5", 0.4, 0.35, 0.45, END, "pass"),  # final: AV high 0.5
        # lower(x) >= 0.5: symmetric
        ("lower(x) >= 0.5", 0.7, 0.6, 0.8, MID, "pass"),  # AV low 0.5
        ("lower(x) >= 0.5", 0.7, 0.61, 0.8, MID, "pass"),
        ("lower(x) >= 0.5", 0.7, 0.59, 0.8, MID, None),  # AV low 0.48
        ("lower(x) >= 0.5", 0.3, 0.2, 0.39, MID, "fail"),  # AV high 0.48 < 0.5
        ("lower(x) > 0.5", 0.7, 0.6, 0.8, MID, None),  # AV low 0.5 is not > 0.5
        ("lower(x) >= 0.5", 0.55, 0.52, 0.6, END, "fail"),  # final: AV low 0.49
        # point: decided early only when the whole AV interval is on one side; the value at the end
        ("x <= 0.5", 0.3, 0.25, 0.4, MID, "pass"),
        ("x <= 0.5", 0.45, 0.35, 0.6, MID, None),
        ("x <= 0.5", 0.8, 0.7, 0.9, MID, "fail"),  # AV low 0.6 > 0.5
        ("x <= 0.5", 0.45, 0.35, 0.6, END, "pass"),  # final: the point value
        ("x >= 0.5", 0.45, 0.35, 0.6, END, "fail"),
        ("x <= 0.5", 0.45, None, None, MID, None),  # no interval: waits
        ("x <= 0.5", 0.45, None, None, END, "pass"),  # but never None at the end with a value
        ("upper(x) <= 0.5", 0.45, None, None, END, None),  # a bound gate without a bound stays open
        # '==' waits for the final look, then the ordinary comparison
        ("x == 1", 1.0, 1.0, 1.0, MID, None),
        ("x == 1", 1.0, 1.0, 1.0, END, "pass"),
        ("x == 1", 0.0, 0.0, 0.0, END, "fail"),
        # min_n: undecided below it, at every look
        ("upper(x) <= 0.5; min_n=60", 0.3, 0.25, 0.4, MID, None),
        ("upper(x) <= 0.5; min_n=60", 0.3, 0.25, 0.4, END, None),
        ("upper(x) <= 0.5; min_n=50", 0.3, 0.25, 0.4, MID, "pass"),
        # counts are exact and only grow
        ("regressions(a) <= 3", 4.0, None, None, MID, "fail"),
        ("regressions(a) <= 3", 3.0, None, None, MID, None),
        ("regressions(a) <= 3", 3.0, None, None, END, "pass"),
        ("regressions(a) < 3", 3.0, None, None, MID, "fail"),
        ("fixes(a) >= 2", 2.0, None, None, MID, "pass"),
        ("fixes(a) >= 2", 1.0, None, None, MID, None),
        ("fixes(a) >= 2", 1.0, None, None, END, "fail"),
        ("regressions(a) == 0", 0.0, None, None, MID, None),
        ("regressions(a) == 0", 0.0, None, None, END, "pass"),
        ("regressions(a) <= 3; min_n=60", 4.0, None, None, MID, None),
        # without a value nothing is decided
        ("x <= 0.5", None, None, None, END, None),
    ],
)
def test_decide(
    gate: str, value: float | None, low: float | None, high: float | None, look: Look, want: Decision
) -> None:
    got, _, _ = _decide(gate, value, low, high, look=look)
    assert got == want


def test_a_look_that_tests_nothing_decides_only_counts() -> None:
    early = Look(index=1, planned=9, tasks=5, total_tasks=44, critical=math.inf)
    assert _decide("upper(x) <= 0.5", 0.1, 0.05, 0.15, look=early) == (None, None, None)
    assert _decide("regressions(a) <= 3", 4.0, None, None, look=early)[0] == "fail"
    # a finite boundary computed over every look (boundaries() directly) still waits for MIN_TASKS
    before = Look(index=3, planned=9, tasks=15, total_tasks=44, critical=3.0)
    assert _decide("upper(x) <= 0.5", 0.1, 0.05, 0.15, look=before) == (None, None, None)
    at = Look(index=4, planned=9, tasks=20, total_tasks=44, critical=3.0)
    assert _decide("upper(x) <= 0.5", 0.1, 0.05, 0.15, look=at)[0] == "pass"
    tiny_end = Look(index=2, planned=2, tasks=12, total_tasks=12, critical=Z975)
    assert _decide("upper(x) <= 0.5", 0.1, 0.05, 0.15, look=tiny_end)[0] == "pass"


def test_decide_returns_the_anytime_valid_interval() -> None:
    _, low, high = _decide("upper(x) <= 0.5", 0.3, 0.25, 0.4)
    assert (low, high) == pytest.approx((0.2, 0.5))
    # cluster methods: the t quantile on tasks - 1 df with the boundary's tail, over the metric's own
    from scipy import stats

    look = Look(1, 4, 20, 40, critical=2.8)
    q95 = stats.t.isf(0.025, 9)
    _, low, high = decide(
        parse_gate("upper(x) <= 1"), 0.5, 0.4, 0.7, 10, look=look, df=9.0, nominal_quantile=q95
    )
    factor = stats.t.isf(stats.norm.sf(2.8), 9) / q95
    assert (low, high) == pytest.approx((0.5 - 0.1 * factor, 0.5 + 0.2 * factor))


@pytest.mark.slow
@pytest.mark.parametrize("kind", range(3), ids=["rate", "close-distant-lrs", "paired-regression"])
def test_error_control_at_the_threshold(kind: int) -> None:
    """Known truth at the threshold, 500 seeded suites of 44 tasks (the example's size), looks of 5 tasks:
    (a) ``upper(position_bias) <= 0.65`` with ``cluster_wilson`` on Beta-heterogeneous tasks, (b)
    ``lower(lrs_close - lrs_distant) >= 0.2`` with ``cluster_difference``, (c) ``lower(delta(mean_reward))
    >= -0.05`` with the paired task bootstrap (benchmarks/bench_adaptive.py simulates them). The adaptive
    run's wrong verdicts (here: passes) stay <= 5% and not above the fixed-size run's + one MC standard
    error of the difference; so do its anytime-valid intervals that exclude the truth (both sides)."""
    from benchmarks.bench_adaptive import KINDS, borderline

    r = borderline(KINDS[kind], 44)
    assert r["adaptive"] <= 0.05, r
    assert r["adaptive"] <= r["fixed"] + r["se"], r
    assert r["adaptive_excludes"] <= r["fixed_excludes"] + r["se_excludes"], r
