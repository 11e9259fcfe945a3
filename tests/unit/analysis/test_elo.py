"""Bradley-Terry / Elo: recovery and coverage by simulation, a scipy reference, degenerate graphs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_gauge._internal.analysis.elo import (
    ELO_PER_THETA,
    Comparison,
    EloResult,
    check_graph,
    elo_difference,
    elo_estimate,
    elo_scale,
    fit_bradley_terry,
    fit_elo,
    ranks_from_intervals,
    tier_table,
)

TRUE_THETA = np.array([-0.8, -0.3, 0.0, 0.4, 0.7])


def simulate(rng: np.random.Generator, theta: np.ndarray, n_tasks: int) -> list[Comparison]:
    """Every pair once per task; a task shifts nobody (strengths are global), outcomes ~ Bradley-Terry."""
    k = len(theta)
    out = []
    for t in range(n_tasks):
        for i in range(k):
            for j in range(i + 1, k):
                p = 1.0 / (1.0 + math.exp(-(theta[i] - theta[j])))
                out.append(Comparison(f"t{t:02d}", f"a{i}", f"a{j}", float(rng.random() < p)))
    return out


def nll_reference(k: int, wins: np.ndarray, l2: float = 0.0) -> np.ndarray:
    """Independent reference: logistic-regression negative log-likelihood minimised by scipy BFGS."""
    from scipy.optimize import minimize  # imported here: about 1 s a worker pays (tests/conftest.py)

    i, j = np.nonzero(wins)
    w = wins[i, j]

    def f(theta: np.ndarray) -> tuple[float, np.ndarray]:
        d = theta[i] - theta[j]
        val = 0.5 * l2 * float(theta @ theta) + float(np.sum(w * np.logaddexp(0.0, -d)))
        g = -w / (1.0 + np.exp(d))
        grad = l2 * theta + np.bincount(i, weights=g, minlength=k) - np.bincount(j, weights=g, minlength=k)
        return val, grad

    res = minimize(f, np.zeros(k), jac=True, method="BFGS", options={"gtol": 1e-11, "maxiter": 10_000})
    theta: np.ndarray = np.asarray(res.x, dtype=np.float64)
    return np.asarray(theta - theta.mean(), dtype=np.float64)


@pytest.mark.slow  # a simulation study (seconds of CPU)
def test_recovery_and_interval_coverage() -> None:
    true_elo = elo_scale(TRUE_THETA - TRUE_THETA.mean())
    sims = 200
    covered = np.zeros(len(TRUE_THETA))
    estimates = []
    for s in range(sims):
        rng = np.random.default_rng(s)
        res = fit_elo(simulate(rng, TRUE_THETA, n_tasks=40), rounds=0)  # cluster-t needs no bootstrap
        assert res.problems == []
        est = np.array([res.elo[f"a{i}"] for i in range(len(TRUE_THETA))])
        lo = np.array([res.low[f"a{i}"] for i in range(len(TRUE_THETA))])
        hi = np.array([res.high[f"a{i}"] for i in range(len(TRUE_THETA))])
        estimates.append(est)
        covered += (lo <= true_elo) & (true_elo <= hi)
    mean_est = np.mean(estimates, axis=0)
    assert np.abs(mean_est - true_elo).max() < 10.0  # Elo points; per-run sd is ~35
    # nominal 95% (binomial sd ~1.5% per agent); the percentile bootstrap gave ~92-93% here. Heterogeneous
    # tasks and other sizes: tests/unit/analysis/test_interval_coverage.py
    assert covered.sum() >= 0.93 * sims * len(TRUE_THETA), covered
    assert (covered >= 0.9 * sims).all(), covered


def test_matches_scipy_logistic_regression() -> None:
    rng = np.random.default_rng(42)
    k = 6
    wins = rng.integers(0, 12, size=(k, k)).astype(float)
    wins[0, 1] += 0.5  # a tie contributes half each way
    wins[1, 0] += 0.5
    np.fill_diagonal(wins, 0.0)
    agents = [f"a{i}" for i in range(k)]
    ours = fit_bradley_terry(agents, wins)
    assert abs(ours.mean()) < 1e-12
    np.testing.assert_allclose(ours, nll_reference(k, wins), atol=1e-6)
    ours_l2 = fit_bradley_terry(agents, wins, l2=0.5)
    np.testing.assert_allclose(ours_l2, nll_reference(k, wins, l2=0.5), atol=1e-6)


def test_matches_scipy_many_agents() -> None:
    # 70 agents: past the size where the fit solves its Newton system without LAPACK
    rng = np.random.default_rng(8)
    k = 70
    theta = rng.normal(0.0, 1.0, k)
    n = rng.integers(5, 15, size=(k, k))
    n = np.triu(n, 1) + np.triu(n, 1).T
    p = 1.0 / (1.0 + np.exp(-(theta[:, None] - theta[None, :])))
    wins = np.triu(rng.binomial(n, p), 1).astype(float)
    wins = wins + np.tril((n - wins.T), -1)
    ours = fit_bradley_terry([f"a{i}" for i in range(k)], wins)
    np.testing.assert_allclose(ours, nll_reference(k, wins), atol=1e-6)


def test_fit_elo_equals_pooled_fit() -> None:
    comps = simulate(np.random.default_rng(3), TRUE_THETA, n_tasks=10)
    res = fit_elo(comps, rounds=50, anchor=1500.0)
    k = len(TRUE_THETA)
    wins = np.zeros((k, k))
    for c in comps:
        i, j = int(c.a[1:]), int(c.b[1:])
        wins[i, j] += c.score_a
        wins[j, i] += 1.0 - c.score_a
    theta = fit_bradley_terry(res.agents, wins)
    for i, a in enumerate(res.agents):
        assert res.elo[a] == pytest.approx(1500.0 + ELO_PER_THETA * theta[i], abs=1e-6)
    assert sum(res.elo.values()) / k == pytest.approx(1500.0)


def test_ties_count_half() -> None:
    # one win each plus two ties: equal strengths
    comps = [
        Comparison("t1", "a", "b", 1.0),
        Comparison("t1", "a", "b", 0.0),
        Comparison("t2", "a", "b", 0.5),
        Comparison("t2", "b", "a", 0.5),
    ]
    res = fit_elo(comps, rounds=20)
    assert res.elo["a"] == pytest.approx(1000.0, abs=1e-9) and res.elo["b"] == pytest.approx(1000.0, abs=1e-9)
    # one win and two ties for a: a scored 2 of 3 -> theta_a - theta_b = logit(2/3) = ln 2
    theta = fit_bradley_terry(["a", "b"], [[0.0, 2.0], [1.0, 0.0]])
    assert theta[0] - theta[1] == pytest.approx(math.log(2.0), abs=1e-9)
    res2 = fit_elo([*comps[:1], *comps[2:]], rounds=0)
    assert res2.elo["a"] - res2.elo["b"] == pytest.approx(ELO_PER_THETA * math.log(2.0), abs=1e-6)


def test_elo_scale() -> None:
    np.testing.assert_allclose(elo_scale([0.0, math.log(10.0)]), [1000.0, 1400.0])  # 400 points = 10:1 odds


def test_disconnected_graph_reported_and_finite() -> None:
    comps = [Comparison(f"t{t}", "a", "b", float(t % 3 != 0)) for t in range(6)]
    comps += [Comparison(f"t{t}", "c", "d", float(t % 2 == 0)) for t in range(6)]
    res = fit_elo(comps, rounds=100)
    assert any("disconnected" in p and "[a, b]" in p and "[c, d]" in p for p in res.problems), res.problems
    assert res.l2 > 0
    assert all(math.isfinite(v) for d in (res.elo, res.low, res.high) for v in d.values())
    assert np.isfinite(res.samples).all()
    assert res.elo["a"] > res.elo["b"]
    with pytest.raises(ValueError, match="disconnected"):
        split = np.array([[0, 4, 0, 0], [2, 0, 0, 0], [0, 0, 0, 3], [0, 0, 3, 0]])
        fit_bradley_terry(["a", "b", "c", "d"], split)


def test_always_winning_and_losing_agents_reported_and_finite() -> None:
    comps = []
    for t in range(8):
        comps.append(Comparison(f"t{t}", "champ", "b", 1.0))
        comps.append(Comparison(f"t{t}", "champ", "c", 1.0))
        comps.append(Comparison(f"t{t}", "b", "c", float(t % 2)))
        comps.append(Comparison(f"t{t}", "b", "dud", 1.0))
        comps.append(Comparison(f"t{t}", "c", "dud", 1.0))
    res = fit_elo(comps, rounds=100)
    assert any("'champ' won every comparison" in p for p in res.problems), res.problems
    assert any("'dud' lost every comparison" in p for p in res.problems), res.problems
    assert all(math.isfinite(v) for d in (res.elo, res.low, res.high) for v in d.values())
    assert np.isfinite(res.samples).all()
    assert res.elo["champ"] > res.elo["b"] > res.elo["dud"]
    assert res.rank["champ"] == 1
    # no finite MLE: the sandwich around a ridge fit means nothing, the intervals are the bootstrap's
    assert res.method == "bootstrap-tasks"
    lo, hi = np.percentile(res.samples, [2.5, 97.5], axis=0)
    assert [res.low[a] for a in res.agents] == pytest.approx(list(lo))
    assert [res.high[a] for a in res.agents] == pytest.approx(list(hi))
    assert fit_elo(comps, rounds=0).method == "none"


def test_one_task_has_no_interval() -> None:
    res = fit_elo(simulate(np.random.default_rng(2), TRUE_THETA, n_tasks=1), rounds=50)
    assert res.method == "none" and all(math.isnan(v) for v in res.low.values())
    assert elo_estimate(res, "a0").low is None and elo_difference(res, "a1", "a0").low is None


def test_check_graph_groups_and_clean() -> None:
    agents = ["a", "b", "c", "d"]
    # {a, b} beat each other and always beat {c, d}, who beat each other
    wins = np.array([[0, 2, 1, 1], [1, 0, 1, 1], [0, 0, 0, 1], [0, 0, 1, 0]], dtype=float)
    problems = check_graph(agents, wins)
    assert any("[a, b] never lost" in p for p in problems), problems
    assert any("[c, d] never beat" in p for p in problems), problems
    wins[2, 0] = 1.0  # c beat a once: strongly connected, MLE exists
    assert check_graph(agents, wins) == []
    assert "agent 'e' has no comparisons" in check_graph([*agents, "e"], np.pad(wins, ((0, 1), (0, 1))))


def test_per_task_fits_only_well_posed_tasks() -> None:
    comps = [
        # t1: a cycle, every agent wins and loses once -> included
        Comparison("t1", "a", "b", 1.0),
        Comparison("t1", "b", "c", 1.0),
        Comparison("t1", "c", "a", 1.0),
        # t2: a beats everyone -> perfect separation, omitted
        Comparison("t2", "a", "b", 1.0),
        Comparison("t2", "a", "c", 1.0),
        Comparison("t2", "b", "c", 0.5),
    ]
    res = fit_elo(comps, rounds=20)
    assert set(res.per_task) == {"t1"}
    assert res.per_task["t1"] == pytest.approx({"a": 1000.0, "b": 1000.0, "c": 1000.0})


def test_rank_rule_by_hand() -> None:
    low = {"A": 1100.0, "B": 1050.0, "C": 900.0, "D": 950.0}
    high = {"A": 1200.0, "B": 1150.0, "C": 1000.0, "D": 1060.0}
    # C: A and B sit wholly above it (D's 950 does not exceed 1000); D: only A's 1100 exceeds 1060
    assert ranks_from_intervals(list(low), low, high) == {"A": 1, "B": 1, "C": 3, "D": 2}


def test_bootstrap_deterministic_and_difference() -> None:
    comps = simulate(np.random.default_rng(9), TRUE_THETA, n_tasks=30)
    r1 = fit_elo(comps, rounds=300, seed=5)
    r2 = fit_elo(list(reversed(comps)), rounds=300, seed=5)
    assert r1 == r2
    np.testing.assert_array_equal(r1.samples, r2.samples)
    assert r1.method == "cluster-t"
    d = elo_difference(r1, "a4", "a0")
    assert d.value == pytest.approx(r1.elo["a4"] - r1.elo["a0"])
    se = math.sqrt(r1.cov[4, 4] + r1.cov[0, 0] - 2 * r1.cov[4, 0])
    t29 = 2.04523  # Student t, 97.5%, 29 df
    value = r1.elo["a4"] - r1.elo["a0"]
    assert (d.low, d.high) == pytest.approx((value - t29 * se, value + t29 * se), rel=1e-4)
    half = [r1.elo[f"a{i}"] - r1.low[f"a{i}"] for i in range(5)]
    assert half == pytest.approx(list(t29 * np.sqrt(np.diag(r1.cov))), rel=1e-4)
    # the sandwich is the bootstrap's variance in the limit: bootstrap var ~ (T - 1) / T x CR1 var
    diff = r1.samples[:, 4] - r1.samples[:, 0]
    assert np.var(diff) / (29 / 30 * se**2) == pytest.approx(1.0, abs=0.2)
    assert np.var(r1.samples, axis=0) / (29 / 30 * np.diag(r1.cov)) == pytest.approx(np.ones(5), abs=0.2)
    assert d.low is not None and d.low > 0  # a4 is 1.5 logits above a0 with 30 tasks
    assert d.n == 2 * 4 * 30 - 30  # comparisons involving a4 or a0
    e = elo_estimate(r1, "a2")
    assert (e.value, e.low, e.high) == (r1.elo["a2"], r1.low["a2"], r1.high["a2"])
    with pytest.raises(KeyError, match="unknown agent"):
        elo_estimate(r1, "zz")


def _hand_result(elo: dict[str, float], noise: dict[str, float]) -> EloResult:
    rng = np.random.default_rng(0)
    agents = tuple(elo)
    samples = np.stack([elo[a] + noise[a] * rng.standard_normal(400) for a in agents], axis=1)
    lo, hi = np.percentile(samples, [2.5, 97.5], axis=0)
    low = {a: float(lo[i]) for i, a in enumerate(agents)}
    high = {a: float(hi[i]) for i, a in enumerate(agents)}
    return EloResult(
        agents=agents,
        elo=elo,
        low=low,
        high=high,
        rank=ranks_from_intervals(agents, low, high),
        per_task={},
        problems=[],
        rounds=400,
        samples=samples,
        method="bootstrap-tasks",
    )


def test_tier_table_verdicts() -> None:
    elo = {"s1": 1000.0, "s2": 1100.0, "s4": 1150.0, "s8": 1155.0, "r1": 1000.0, "r2": 1020.0, "r3": 1100.0}
    noise = {"s1": 2.0, "s2": 2.0, "s4": 2.0, "s8": 40.0, "r1": 1.0, "r2": 1.0, "r3": 1.0}
    result = _hand_result(elo, noise)
    tokens = {"s1": 1000, "s2": 2000, "s4": 4000, "s8": 8000, "r1": 1000, "r2": 1500, "r3": 2000}
    families = {
        "best_of": [("1", "s1"), ("2", "s2"), ("4", "s4"), ("8", "s8")],
        "reflect": [("0", "r1"), ("1", "r2"), ("2", "r3")],
    }
    rows = tier_table(families, result, tokens)
    by = {(r["family"], r["tier"]): r for r in rows}
    assert by[("best_of", "1")]["verdict"] == "baseline" and by[("best_of", "1")]["delta_elo"] is None
    assert by[("best_of", "2")]["delta_elo_per_1k_tokens"] == pytest.approx(100.0)
    assert by[("best_of", "2")]["verdict"] == "improves"
    assert by[("best_of", "4")]["delta_elo_per_1k_tokens"] == pytest.approx(25.0)
    assert by[("best_of", "4")]["verdict"] == "diminishing returns"
    assert by[("best_of", "8")]["verdict"] == "no measurable gain"  # +5 with a +-80 interval
    assert by[("reflect", "1")]["delta_elo_per_1k_tokens"] == pytest.approx(40.0)
    assert by[("reflect", "2")]["delta_elo_per_1k_tokens"] == pytest.approx(160.0)
    assert by[("reflect", "2")]["verdict"] == "improves"
    assert set(rows[0]) == {
        "family", "tier", "agent", "tokens_per_task", "elo", "low", "high",
        "delta_elo", "delta_low", "delta_high", "delta_elo_per_1k_tokens", "verdict",
    }  # fmt: skip
    # explicit intervals override the bootstrap ones
    rows2 = tier_table(families, result, tokens, {("s1", "s2"): (-3.0, 200.0)})
    assert rows2[1]["verdict"] == "no measurable gain" and rows2[1]["delta_low"] == -3.0


def test_bad_input_rejected() -> None:
    with pytest.raises(ValueError):
        fit_elo([])
    with pytest.raises(ValueError, match="itself"):
        fit_elo([Comparison("t", "a", "a", 1.0)])
    with pytest.raises(ValueError, match="score_a"):
        fit_elo([Comparison("t", "a", "b", 2.0)])
    with pytest.raises(ValueError, match="2x2"):
        fit_bradley_terry(["a", "b"], np.zeros((3, 3)))
