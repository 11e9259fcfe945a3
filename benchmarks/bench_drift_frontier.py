"""Adaptive runs under drift: how much of the no-drift saving any variant of the drift check can keep.

Run: ``python benchmarks/bench_drift_frontier.py`` (``--runs 1000``). The check of
docs/gates.md#drift passes a rate gate early only when it holds with every task not yet run 1.5 logits
beyond the 95% bound of the tasks run. Its variants here: that bound at a lower confidence (``z`` 1.9,
1.8, 1.64 instead of the interval's own t quantile) and a margin scaled by the share of tasks not run
(``1.5 (1 - f)``: a 1.5-logit move over the whole run read as a linear one). For each it prints the
wrong passes (suite mean at the threshold, so every pass is wrong) of the full run and of the variant
under every drift shape of ``bench_drift.py`` plus steps at 4/5 and 9/10, on Beta tasks (44 and 100,
``bench_drift.py``'s suites) and logit-normal ones (100 and 200 tasks, every task's logit moving, as in
tests/unit/analysis/test_drift.py), and the mean share of tasks a clear gate runs without drift
(Beta, logit-normal, heavy-tailed and two-point logits). Then the ceiling: an oracle that knows a step
comes just after look j and the rate before it, and passes at look j when the mean so far is below the
4% quantile of that mean under the rate before the step (full run plus 2.5 points; each look its own
budget, so optimistic). The procedure is vectorized over runs; at the check's own settings it must give
the verdicts of ``bench_drift.checked`` (the plugin's ``drift_hold``), which the bench verifies first.
About a minute of CPU at 1,500 runs.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the benchmarks import each other by name

import bench_adaptive as ba
import bench_drift as bd

from pytest_gauge._internal.analysis.drift import DRIFT_LOGITS, trend_critical, trend_z
from pytest_gauge._internal.analysis.intervals import cluster_wilson, cluster_wilson_df, t_quantile
from pytest_gauge._internal.analysis.sequential import critical_quantile, equal_looks, widen_wilson

Array = np.ndarray
Rule = Callable[[float, Array, Array, Array, Array], tuple[Array, Array]]
_widen = np.vectorize(lambda v, lo, hi, q, new: widen_wilson(v, lo, hi, quantile=q, new_quantile=new))


def _shift(p: Array, logits: float) -> Array:
    inside = (p > 0.0) & (p < 1.0)
    x = np.log(np.clip(p, 1e-12, 1 - 1e-12) / np.clip(1.0 - p, 1e-12, 1.0))
    return np.asarray(np.where(inside, 1.0 / (1.0 + np.exp(-(x + logits))), p))


def rule(z: float | None = None, scaled: bool = False) -> Rule:
    """(lowest, highest) rate of the whole run when the tasks not run move against the verdict: the
    check's (:func:`~pytest_gauge._internal.analysis.drift.worst_rates`) with the bound at quantile ``z``
    (None: the interval's own) and the margin times the share not run (``scaled``)."""

    def worst(f: float, value: Array, low: Array, high: Array, q95: Array) -> tuple[Array, Array]:
        if z is not None:
            low, high = _widen(value, low, high, q95, z)
        margin = DRIFT_LOGITS * (1.0 - f) if scaled else DRIFT_LOGITS
        return f * low + (1 - f) * _shift(low, -margin), f * high + (1 - f) * _shift(high, margin)

    return worst


def procedure(k: Array, n: Array, threshold: float, worst: Rule | None) -> tuple[Array, Array]:
    """(verdict 1/0/-1, tasks run) of ``upper(x) <= threshold`` decided look by look (looks of 5 tasks),
    a decision before the last look held by the trend test and ``worst`` (None: no drift check)."""
    runs, total = k.shape
    verdict, tasks, open_ = np.full(runs, -1), np.zeros(runs, dtype=np.int64), np.ones(runs, dtype=bool)
    for look in equal_looks(total, 5):
        rows = np.flatnonzero(open_)
        if rows.size == 0 or not (math.isfinite(look.critical) or look.final):
            continue
        kk, nn = k[rows, : look.tasks], n[rows, : look.tasks]
        value, low, high = cluster_wilson(kk, nn)
        df = cluster_wilson_df(kk, nn)
        q95 = t_quantile(df)
        qk = np.array([critical_quantile(look.critical, float(d)) for d in df])
        av_low, av_high = _widen(value, low, high, q95, qk)
        got = np.where(av_high <= threshold, 1, np.where(av_low > threshold, 0, -1))
        if look.final:
            got = np.where(av_high <= threshold, 1, 0)
        elif worst is not None:
            down, up = worst(look.tasks / total, value, low, high, q95)
            hold = np.abs(trend_z(kk, nn)) >= trend_critical(look.tasks)
            hold |= (got == 1) & ~((down <= threshold) & (up <= threshold))
            hold |= (got == 0) & ~((down > threshold) & (up > threshold))
            got = np.where(hold, -1, got)
        done = rows[(got >= 0) | look.final]
        verdict[done], tasks[done] = got[(got >= 0) | look.final], look.tasks
        open_[done] = False
    return verdict, tasks


def _logit_normal(
    rng: np.random.Generator, course: Array, truth: float, runs: int, tails: str = "normal"
) -> tuple[Array, Array]:
    """4 cases per task, every task's logit on ``course`` plus its own (normal sd 1, t 2 df, or +-1.5),
    centred so the mean rate over the run is ``truth``."""

    def draw(g: np.random.Generator, shape: tuple[int, int]) -> Array:
        if tails == "heavy-tailed":
            return g.standard_t(2, shape)
        if tails == "two-point":
            return np.where(g.random(shape) < 0.5, -1.5, 1.5)
        return g.standard_normal(shape)

    def expit(x: Array) -> Array:
        with np.errstate(over="ignore"):  # t tails: exp overflows to inf, the rate to 0
            return np.asarray(1 / (1 + np.exp(-x)))

    ref = course + draw(np.random.default_rng(0), (200, course.size))
    lo, hi = -8.0, 8.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if float(np.mean(expit(mid + ref))) < truth else (lo, mid)
    rate = expit(0.5 * (lo + hi) + course + draw(rng, (runs, course.size)))
    return rng.binomial(4, rate).astype(np.float64), np.full((runs, course.size), 4.0)


def _ln_course(shape: str, tasks: int, move: float = 1.5) -> Array:
    pos = np.linspace(0.0, 1.0, tasks)
    if shape == "linear":
        return np.asarray(move * (pos - 0.5))
    return np.where(pos < {"step at 1/2": 0.5, "step at 2/3": 2 / 3, "step at 3/4": 0.75,
                           "step at 4/5": 0.8, "step at 9/10": 0.9}[shape], 0.0, move)  # fmt: skip


def _beta_step(rng: np.random.Generator, runs: int, tasks: int, at: int, move: float) -> tuple[Array, Array]:
    """``bench_drift``'s Beta suite with its mean logit stepping by ``move`` after task ``at``."""
    course = np.where(np.arange(tasks) < at, -0.5, 0.5)
    mean = bd._expit(bd._centre(move, course) + move * course)
    rates = rng.beta(4.0 * mean, 4.0 * (1.0 - mean), (runs, tasks))
    return rng.binomial(6, rates).astype(np.float64), np.full((runs, tasks), 6.0)


SHAPES = (*bd.SHAPES, "step at 4/5", "step at 9/10")


def drift_cells(runs: int) -> list[tuple[str, tuple[Array, Array], float]]:
    cells = []
    for tasks in (100, 44):
        for i, shape in enumerate(SHAPES):
            for move in (1.5, -1.5) if shape in ("linear", "step at 3/4") else (1.5,):
                rng = np.random.default_rng([50, tasks, i, round(10 * move) + 100])
                if shape in bd.SHAPES:
                    data = bd.drifting(rng, move, runs, tasks, shape)
                else:
                    at = int(
                        np.sum(np.linspace(0, 1, tasks) < {"step at 4/5": 0.8, "step at 9/10": 0.9}[shape])
                    )
                    data = _beta_step(rng, runs, tasks, at, move)
                cells.append((f"Beta {tasks}, {shape} {move:+.1f}", (data[0], data[1]), bd.THRESHOLD))
    for tasks, truth in ((100, 0.3), (200, 0.65)):
        for i, shape in enumerate(SHAPES):
            data = _logit_normal(np.random.default_rng([51, tasks, i]), _ln_course(shape, tasks), truth, runs)
            cells.append((f"logit-normal {tasks}, {shape}", data, truth))
    return cells


def stationary_cells(runs: int) -> list[tuple[str, tuple[Array, Array], float]]:
    beta = [
        (tasks, ba.KINDS[0].simulate(np.random.default_rng([52, tasks]), 0.55, runs, tasks))
        for tasks in (100, 44)
    ]
    out = [(f"Beta {t}, 0.55 vs 0.65", (d[0], d[1]), 0.65) for t, d in beta]
    for i, tails in enumerate(("normal", "heavy-tailed", "two-point")):
        data = _logit_normal(np.random.default_rng([53, i]), np.zeros(100), 0.2, runs, tails)
        out.append((f"{tails} 100, 0.2 vs 0.3", data, 0.3))
    out.append(
        (
            "logit-normal 200, 0.55 vs 0.65",
            _logit_normal(np.random.default_rng(54), np.zeros(200), 0.55, runs),
            0.65,
        )
    )
    return out


def oracle_share(data: tuple[Array, Array], threshold: float, pre: Callable[[int, int], Array]) -> float:
    """The ceiling's mean share of tasks run on stationary ``data``: pass at the first look j whose mean
    is below the 4% quantile of the mean of j tasks stationary at the rate before a step just after j
    (``pre(j, seed)``: those means)."""
    k, n = data
    total = k.shape[1]
    looks = [look.tasks for look in equal_looks(total, 5) if math.isfinite(look.critical) and not look.final]
    stop = np.full(k.shape[0], total)
    for j in reversed(looks):
        cut = float(np.quantile(pre(j, j), 0.04))
        stop = np.where(k[:, :j].sum(axis=1) / n[:, :j].sum(axis=1) <= cut, j, stop)
    share: float = stop.mean() / total
    return share


def _pre_beta(tasks: int, runs: int) -> Callable[[int, int], Array]:
    def pre(j: int, seed: int) -> Array:
        k, n = _beta_step(np.random.default_rng([55, seed]), runs, tasks, j, 1.5)
        return np.asarray(k[:, :j].sum(axis=1) / n[:, :j].sum(axis=1))

    return pre


def _pre_ln(tasks: int, truth: float, runs: int, tails: str) -> Callable[[int, int], Array]:
    def pre(j: int, seed: int) -> Array:
        course = np.where(np.arange(tasks) < j, 0.0, 1.5)
        k, n = _logit_normal(np.random.default_rng([56, seed]), course, truth, runs, tails)
        return np.asarray(k[:, :j].sum(axis=1) / n[:, :j].sum(axis=1))

    return pre


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1000)
    args = parser.parse_args()
    runs = args.runs
    for shape in ("step at 3/4", "step at 1/2"):  # the vectorized procedure is the plugin's check
        data = bd.drifting(np.random.default_rng([57, len(shape)]), 1.5, 200, 100, shape)
        expected, expected_run = bd.checked(ba.KINDS[0], data, equal_looks(100, 5))
        got, got_run = procedure(data[0], data[1], bd.THRESHOLD, rule())
        assert np.array_equal(expected, got) and np.array_equal(expected_run, got_run), shape
    rules = {
        "now": rule(),
        "z 1.9": rule(1.9),
        "z 1.8": rule(1.8),
        "z 1.64": rule(1.645),
        "scaled": rule(scaled=True),
    }
    print("wrong passes %, suite mean at the threshold: full run | " + " | ".join(rules))
    worst = dict.fromkeys(rules, -1.0)
    for name, (k, n), threshold in drift_cells(runs):
        _, _, high = cluster_wilson(k, n)
        full = float(np.mean(high <= threshold))
        row = []
        for label, worst_rule in rules.items():
            wrong = float(np.mean(procedure(k, n, threshold, worst_rule)[0] == 1))
            worst[label] = max(worst[label], wrong - full)
            row.append(f"{100 * wrong:5.1f}")
        print(f"{name:32s} {bd._pc(full, runs):>11s} | " + " | ".join(row), flush=True)
    print(
        f"{'largest excess over the full run':32s} {'':11s} | "
        + " | ".join(f"{100 * w:+5.1f}" for w in worst.values())
    )
    print("mean share of tasks run without drift: unchecked | " + " | ".join(rules) + " | oracle ceiling")
    pres = [_pre_beta(100, runs), _pre_beta(44, runs)]
    pres += [_pre_ln(100, 0.3, runs, tails) for tails in ("normal", "heavy-tailed", "two-point")]
    pres.append(_pre_ln(200, 0.65, runs, "normal"))
    for (name, (k, n), threshold), pre in zip(stationary_cells(runs), pres, strict=True):
        shares = [
            float(np.mean(procedure(k, n, threshold, r)[1])) / k.shape[1] for r in (None, *rules.values())
        ]
        print(
            f"{name:32s} "
            + " | ".join(f"{s:.3f}" for s in shares)
            + f" | {oracle_share((k, n), threshold, pre):.3f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
