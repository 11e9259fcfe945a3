"""The Bradley-Terry fit check beside the Elo table: flags what one strength per agent cannot reproduce
(intransitive preferences), and rarely anything else (transitive preferences with heterogeneous tasks,
near-deterministic agents), by simulation with known truth."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_gauge._internal.analysis.bt_fit import bt_fit_check
from pytest_gauge._internal.analysis.elo import Comparison, check_graph, fit_bradley_terry, fit_elo


def _suite(
    rng: np.random.Generator, win: np.ndarray, tasks: int, spread: float, per_pair: int
) -> list[Comparison]:
    """``win[i, j]``: the probability agent i beats j (on the logit scale each task shifts it by a normal
    of sd ``spread``, so tasks are heterogeneous); ``per_pair`` comparisons of each pair per task."""
    k = win.shape[0]
    out = []
    for t in range(tasks):
        for i in range(k):
            for j in range(i + 1, k):
                logit = np.log(win[i, j] / (1.0 - win[i, j])) + rng.normal(0.0, spread)
                p = 1.0 / (1.0 + np.exp(-logit))
                for _ in range(per_pair):
                    out.append(Comparison(f"t{t:03d}", f"a{i}", f"a{j}", float(rng.random() < p)))
    return out


def _bt(theta: list[float]) -> np.ndarray:
    th = np.asarray(theta)
    return np.asarray(1.0 / (1.0 + np.exp(-(th[:, None] - th[None, :]))))


def _flag_rate(win: np.ndarray, tasks: int, spread: float, suites: int, seed: int) -> float:
    """Share of suites (tasks x every pair twice, vectorised) whose fit check flags a pair."""
    rng = np.random.default_rng(seed)
    k = win.shape[0]
    agents = tuple(f"a{i}" for i in range(k))
    upper = np.triu(np.ones((k, k), dtype=bool), 1)
    logit = np.log(win / (1.0 - win))
    flagged = 0
    for _ in range(suites):
        p = 1.0 / (1.0 + np.exp(-(logit + rng.normal(0.0, spread, (tasks, k, k)))))
        wins = np.where(upper, rng.binomial(2, p), 0).astype(np.float64)
        tensor = wins + np.transpose(np.where(upper, 2.0 - wins, 0.0), (0, 2, 1))
        if check_graph(agents, tensor.sum(axis=0)):
            continue  # no MLE (the leader never lost): no check, as in fit_elo
        theta = fit_bradley_terry(agents, tensor.sum(axis=0))
        flagged += bool(bt_fit_check(agents, tensor, theta).misfits)
    return flagged / suites


@pytest.mark.parametrize("seed", range(5))
def test_an_intransitive_triple_is_flagged_for_any_seed(seed: int) -> None:
    win = np.full((3, 3), 0.5)
    win[0, 1], win[1, 2], win[0, 2] = 0.75, 0.75, 0.25  # a0 > a1 > a2 > a0
    res = fit_elo(_suite(np.random.default_rng(seed), win, 30, 0.3, 2), rounds=0)
    assert res.fit_check is not None and res.fit_check.poorly_fitted == ("a0", "a1", "a2")
    reason = res.fit_check.reason("a0")
    assert reason is not None and "a0 beat a1 in" in reason


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "win", "spread"),
    [
        ("transitive, heterogeneous tasks", _bt([-0.8, -0.3, 0.0, 0.4, 0.7]), 0.8),
        ("a near-deterministic leader", _bt([3.5, 0.0, -0.3, 0.3]), 0.3),
    ],
)
def test_a_model_that_fits_is_rarely_flagged(name: str, win: np.ndarray, spread: float) -> None:
    """Family-wise 5% by Bonferroni over the pairs (30 tasks, each pair twice per task); 300 suites: a
    share of 5% has a Monte Carlo standard error of 1.3 points, so the test allows 8.5% (measured: 0-1%,
    Bonferroni with a least gap of 0.1 being conservative)."""
    np.fill_diagonal(win, 0.5)
    rate = _flag_rate(win, 30, spread, 300, seed=len(name))
    assert rate <= 0.085, (name, rate)


def test_a_pair_compared_on_few_tasks_is_not_checked() -> None:
    tensor = np.zeros((3, 2, 2))
    tensor[:, 0, 1] = 2.0  # a always beats b on 3 tasks
    check = bt_fit_check(("a", "b"), tensor, np.array([0.0, 0.0]))
    assert check.pairs_checked == 0 and check.misfits == ()
