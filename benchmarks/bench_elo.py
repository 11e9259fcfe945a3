"""Benchmark the Bradley-Terry fit and the Elo bootstrap against plain row-by-row reference implementations.

Run: ``python benchmarks/bench_elo.py``. Prints wall times and reference/ours ratios; exits 1 if a ratio
is below 10 (or the two implementations disagree). The reference is the obvious approach: maximise the
Bradley-Terry log-likelihood over the raw comparison rows with scipy's L-BFGS-B (analytic gradient),
and for the bootstrap, rebuild the rows of each resample and refit them (warm-started, like ours).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import numpy as np
from scipy.optimize import minimize

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_gauge._internal.analysis.elo import Comparison, EloResult, fit_bradley_terry, fit_elo

T = TypeVar("T")

MIN_RATIO = 10.0
REPEATS = 3  # each timing is the best of this many runs (the machine may be shared)


def best_time(fn: Callable[[], T]) -> tuple[float, T]:
    """Minimum wall time over REPEATS calls, with the last result."""
    best = math.inf
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def reference_fit(k: int, a: np.ndarray, b: np.ndarray, score: np.ndarray, x0: np.ndarray) -> np.ndarray:
    """Plain MLE over rows: NLL = sum s*log(1+e^-(ta-tb)) + (1-s)*log(1+e^(ta-tb)), L-BFGS-B."""

    def f(theta: np.ndarray) -> tuple[float, np.ndarray]:
        d = theta[a] - theta[b]
        nll = float(np.sum(score * np.logaddexp(0.0, -d) + (1.0 - score) * np.logaddexp(0.0, d)))
        r = 1.0 / (1.0 + np.exp(-d)) - score  # d nll / d d
        grad = np.bincount(a, weights=r, minlength=k) - np.bincount(b, weights=r, minlength=k)
        return nll, grad

    res = minimize(
        f, x0, jac=True, method="L-BFGS-B", options={"ftol": 1e-15, "gtol": 1e-9 * len(a), "maxiter": 10_000}
    )
    theta: np.ndarray = np.asarray(res.x, dtype=np.float64)
    return np.asarray(theta - theta.mean(), dtype=np.float64)


def bench_fit(rng: np.random.Generator) -> tuple[float, float, float]:
    k, n = 100, 1_000_000
    true = rng.normal(0.0, 1.0, k)
    a = rng.integers(0, k, n)
    b = rng.integers(0, k - 1, n)
    b += b >= a
    score = (rng.random(n) < 1.0 / (1.0 + np.exp(-(true[a] - true[b])))).astype(float)
    agents = [f"a{i:03d}" for i in range(k)]

    def ours_fit() -> np.ndarray:
        wins = np.bincount(a * k + b, weights=score, minlength=k * k).reshape(k, k)
        wins += np.bincount(b * k + a, weights=1.0 - score, minlength=k * k).reshape(k, k)
        return fit_bradley_terry(agents, wins)

    t_ours, ours = best_time(ours_fit)
    t_ref, ref = best_time(lambda: reference_fit(k, a, b, score, np.zeros(k)))
    err = float(np.abs(ours - ref).max())
    print(f"[fit] {k} agents x {n:,} comparisons")
    print(f"  (wall times: best of {REPEATS} runs)")
    print(f"  ours (aggregate + Newton): {t_ours:8.3f} s")
    print(f"  reference (L-BFGS over rows): {t_ref:8.3f} s")
    print(f"  ratio reference/ours: {t_ref / t_ours:8.1f}x   max |theta diff| = {err:.2e}")
    print(f"  max |theta - true| = {np.abs(ours - (true - true.mean())).max():.3f}")
    return t_ours, t_ref, err


def bench_bootstrap(rng: np.random.Generator, ref_rounds: int = 100) -> tuple[float, float, float]:
    k, n_tasks, rounds, seed = 20, 50, 1000, 7
    true = rng.normal(0.0, 0.8, k)
    agents = [f"a{i:02d}" for i in range(k)]
    tasks = [f"t{t:03d}" for t in range(n_tasks)]
    pairs = [(i, j) for i in range(k) for j in range(i + 1, k)]
    comps: list[Comparison] = []
    rows: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for task in tasks:
        ai = np.array([p[0] for p in pairs])
        bi = np.array([p[1] for p in pairs])
        p_win = 1.0 / (1.0 + np.exp(-(true[ai] - true[bi])))
        u = rng.random(len(pairs))
        score = np.where(u < 0.1, 0.5, (u < 0.1 + 0.9 * p_win).astype(float))  # ~10% ties
        rows.append((ai, bi, score))
        comps.extend(
            Comparison(task, agents[i], agents[j], float(s)) for i, j, s in zip(ai, bi, score, strict=True)
        )

    def ours_boot() -> EloResult:
        return fit_elo(comps, rounds=rounds, seed=seed)

    t_ours, result = best_time(ours_boot)

    # The same resamples as fit_elo draws (tasks sorted by id; seeded Generator).
    from pytest_gauge._internal.analysis.resampling import resample_counts

    counts = resample_counts(n_tasks, rounds, np.random.default_rng(seed))
    a_all = np.concatenate([r[0] for r in rows])
    b_all = np.concatenate([r[1] for r in rows])
    s_all = np.concatenate([r[2] for r in rows])
    full = reference_fit(k, a_all, b_all, s_all, np.zeros(k))
    t0 = time.perf_counter()
    worst = 0.0
    for r in range(ref_rounds):
        drawn = [t for t in range(n_tasks) for _ in range(int(counts[r, t]))]
        a = np.concatenate([rows[t][0] for t in drawn])
        b = np.concatenate([rows[t][1] for t in drawn])
        s = np.concatenate([rows[t][2] for t in drawn])
        theta = reference_fit(k, a, b, s, full)
        elo = 400.0 / math.log(10.0) * theta + 1000.0
        worst = max(worst, float(np.abs(elo - result.samples[r]).max()))
    t_ref_part = time.perf_counter() - t0
    t_ref = t_ref_part * rounds / ref_rounds
    print(
        f"[bootstrap] {k} agents x {n_tasks} tasks x all pairs ({len(comps):,} comparisons), {rounds} rounds"
    )
    print(f"  ours (fit_elo incl. per-task fits): {t_ours:8.3f} s")
    print(
        f"  reference (refit rows per round): {t_ref:8.3f} s  "
        f"(timed {ref_rounds} rounds = {t_ref_part:.2f} s, extrapolated linearly to {rounds})"
    )
    print(f"  ratio reference/ours: {t_ref / t_ours:8.1f}x   max |Elo diff| on timed rounds = {worst:.2e}")
    return t_ours, t_ref, worst


def main() -> int:
    rng = np.random.default_rng(20261129)
    f_ours, f_ref, f_err = bench_fit(rng)
    b_ours, b_ref, b_err = bench_bootstrap(rng)
    ok = True
    for label, ours, ref in (("fit", f_ours, f_ref), ("bootstrap", b_ours, b_ref)):
        if ref / ours < MIN_RATIO:
            print(f"FAIL: {label} ratio {ref / ours:.1f}x < {MIN_RATIO:g}x")
            ok = False
    if f_err > 1e-5 or b_err > 1e-3:
        print(f"FAIL: implementations disagree (theta {f_err:.2e}, Elo {b_err:.2e})")
        ok = False
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
