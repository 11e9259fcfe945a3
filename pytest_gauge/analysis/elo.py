"""Bradley-Terry strengths on an Elo scale with task-clustered intervals (docs/protocol.md#elo).

Comparisons are aggregated once into a ``(n_tasks, k, k)`` wins tensor; the pooled fit is Newton's
method on the log-likelihood (mean-zero strengths, gradient-norm convergence). Intervals are
cluster-robust: the sandwich covariance of the strengths with the tasks as clusters
(:func:`cluster_covariance`) and a Student-t quantile on ``tasks - 1`` degrees of freedom, chosen by the
coverage simulation of test_interval_coverage.py (docs/protocol.md#coverage), where the task-resampling
percentile bootstrap covered less. The bootstrap is still drawn (``EloResult.samples``): paired baseline
deltas use it, and so do the intervals when the fit has no finite maximum (the sandwich of a ridge fit
means nothing). Its rounds are all refitted together by a batched Newton warm-started at the full-data
estimate. Data without a finite maximum (disconnected comparison graph, an agent that never loses or
never wins) is reported in ``EloResult.problems`` and fitted with a small ridge so every number stays
finite.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from .bt_fit import FitCheck, bt_fit_check
from .estimates import Estimate
from .intervals import t_quantile
from .resampling import task_counts

if TYPE_CHECKING:
    from ..records import FloatArray

__all__ = [
    "ELO_PER_THETA",
    "FALLBACK_L2",
    "Comparison",
    "EloResult",
    "check_graph",
    "cluster_covariance",
    "cluster_t_halfwidth",
    "elo_difference",
    "elo_estimate",
    "elo_scale",
    "fit_bradley_terry",
    "fit_elo",
    "linear_interval",
    "ranks_from_intervals",
    "tier_table",
]

ELO_PER_THETA = 400.0 / math.log(10.0)
FALLBACK_L2 = 1e-3
"""Ridge used when the maximum-likelihood estimate does not exist (keeps strengths finite)."""

_MAX_CHUNK_ELEMENTS = 4_000_000  # rounds * k * k per batched Newton chunk


@dataclass(frozen=True)
class Comparison:
    """One pairwise outcome within a task: ``score_a`` is 1 if ``a`` won, 0 if ``b`` won, 0.5 for a tie."""

    task_id: str
    a: str
    b: str
    score_a: float


# --------------------------------------------------------------------------------------------------
# Newton on the Bradley-Terry log-likelihood, batched over rounds


def _sigmoid(x: FloatArray) -> FloatArray:
    return np.asarray(0.5 * (1.0 + np.tanh(0.5 * x)), dtype=np.float64)


def _objective(w: FloatArray, theta: FloatArray, l2: FloatArray) -> FloatArray:
    """Penalised log-likelihood per round: sum_ij w_ij log sigma(t_i - t_j) - l2/2 |t|^2."""
    d = theta[:, :, None] - theta[:, None, :]
    ll = -(w * np.logaddexp(0.0, -d)).sum(axis=(1, 2))
    return np.asarray(ll - 0.5 * l2 * (theta * theta).sum(axis=1), dtype=np.float64)


def _newton(
    w: FloatArray, theta0: FloatArray, l2: FloatArray, tol: float, max_iter: int
) -> tuple[FloatArray, npt.NDArray[np.bool_]]:
    """Maximise the penalised likelihood for each round of ``w`` (R, k, k); returns theta (R, k), converged.

    Converged when max |gradient| <= tol * max(1, comparisons in the round). Steps are halved until the
    objective does not decrease, so the iteration is monotone even from a poor start.
    """
    r_count, k, _ = w.shape
    n = w + w.transpose(0, 2, 1)
    wins = w.sum(axis=2)
    scale = tol * np.maximum(1.0, n.sum(axis=(1, 2)) / 2.0)
    theta = theta0 - theta0.mean(axis=1, keepdims=True)
    converged = np.zeros(r_count, dtype=bool)
    active = np.ones(r_count, dtype=bool)
    obj = _objective(w, theta, l2)
    eye = np.eye(k)
    centre = np.full((k, k), 1.0 / k)
    for _ in range(max_iter + 1):
        idx = np.flatnonzero(active)
        if idx.size == 0:
            break
        th, ni, lam = theta[idx], n[idx], l2[idx]
        p = _sigmoid(th[:, :, None] - th[:, None, :])
        grad = wins[idx] - (ni * p).sum(axis=2) - lam[:, None] * th
        done = np.abs(grad).max(axis=1) <= scale[idx]
        converged[idx[done]] = True
        active[idx[done]] = False
        keep = ~done
        if not keep.any():
            break
        idx, th, ni, lam, p, grad = idx[keep], th[keep], ni[keep], lam[keep], p[keep], grad[keep]
        curv = ni * p * (1.0 - p)
        hess = -curv + eye * (curv.sum(axis=2) + lam[:, None])[:, :, None] + centre
        step = _solve_spd(hess, grad)
        step -= step.mean(axis=1, keepdims=True)
        old = obj[idx]
        t = np.ones(idx.size)
        new_th = th + step
        new_obj = _objective(w[idx], new_th, lam)
        bad = new_obj < old - 1e-12 * (1.0 + np.abs(old))
        for _half in range(60):
            if not bad.any():
                break
            t[bad] *= 0.5
            new_th[bad] = th[bad] + t[bad, None] * step[bad]
            new_obj[bad] = _objective(w[idx[bad]], new_th[bad], lam[bad])
            bad = new_obj < old - 1e-12 * (1.0 + np.abs(old))
        stalled = bad | (np.abs(t[:, None] * step).max(axis=1) <= 1e-15 * (1.0 + np.abs(th).max(axis=1)))
        new_th[bad] = th[bad]
        new_obj[bad] = old[bad]
        theta[idx] = new_th - new_th.mean(axis=1, keepdims=True)
        obj[idx] = new_obj
        active[idx[stalled]] = False
    return theta, converged


_LAPACK_MAX_K = 64


def _solve_spd(a: FloatArray, b: FloatArray) -> FloatArray:
    """Solve ``a x = b`` for a batch of symmetric positive-definite matrices (R, k, k), (R, k).

    Small or batched systems go to LAPACK. A single large system is solved by a plain numpy Cholesky
    instead: OpenBLAS multi-threads factorisations from about 100x100 on, and on a busy 2-core machine
    one such solve was measured at ~90 ms instead of ~0.1 ms.
    """
    r_count, k, _ = a.shape
    if k <= _LAPACK_MAX_K or r_count > 1:
        return np.asarray(np.linalg.solve(a, b[:, :, None])[:, :, 0], dtype=np.float64)
    work = a.copy()
    low = np.zeros_like(a)
    tiny = np.finfo(np.float64).tiny
    for j in range(k):
        d = np.sqrt(np.maximum(work[:, j, j], tiny))
        col = work[:, j:, j] / d[:, None]
        low[:, j:, j] = col
        rest = col[:, 1:]
        work[:, j + 1 :, j + 1 :] -= rest[:, :, None] * rest[:, None, :]
    y = np.empty_like(b)
    for i in range(k):
        y[:, i] = (b[:, i] - (low[:, i, :i] * y[:, :i]).sum(axis=1)) / low[:, i, i]
    x = np.empty_like(b)
    for i in range(k - 1, -1, -1):
        x[:, i] = (y[:, i] - (low[:, i + 1 :, i] * x[:, i + 1 :]).sum(axis=1)) / low[:, i, i]
    return x


def _reach_all(w: FloatArray) -> npt.NDArray[np.bool_]:
    """Per round: whether the directed 'beat' graph (edge i->j when i scored against j) is strongly
    connected, i.e. whether the maximum-likelihood estimate exists (Ford's condition)."""
    k = w.shape[1]
    full: npt.NDArray[np.bool_] = np.asarray((w + np.eye(k) > 0).all(axis=(1, 2)), dtype=bool)
    out = full.copy()
    todo = np.flatnonzero(~full)
    if todo.size:
        reach = (w[todo] > 0) | np.eye(k, dtype=bool)
        for _ in range(max(1, math.ceil(math.log2(max(k, 2)))) + 1):
            nxt = reach @ reach  # boolean matmul: paths of twice the length (no BLAS)
            if np.array_equal(nxt, reach):
                break
            reach = nxt
        out[todo] = reach.all(axis=(1, 2))
    return out


def fit_bradley_terry(
    agents: Sequence[str], wins: npt.ArrayLike, *, l2: float = 0.0, tol: float = 1e-10, max_iter: int = 200
) -> FloatArray:
    """Mean-zero Bradley-Terry strengths theta from ``wins[i, j]`` (times i beat j; a tie adds 0.5 each way).

    Newton on the log-likelihood (ridge ``l2``), converged when max |gradient| <= tol * max(1, comparisons).
    Raises ValueError when ``l2 == 0`` and the MLE does not exist (see :func:`check_graph`).
    """
    w = _wins_matrix(agents, wins)
    if l2 < 0:
        raise ValueError("l2 must be >= 0")
    if l2 == 0.0:
        problems = check_graph(agents, w)
        if problems:
            raise ValueError("Bradley-Terry MLE does not exist: " + "; ".join(problems) + " (pass l2 > 0)")
    return _fit_one(w, l2, tol, max_iter)


def _fit_one(w: FloatArray, l2: float, tol: float, max_iter: int) -> FloatArray:
    """:func:`fit_bradley_terry`'s Newton fit of one checked wins matrix."""
    k = w.shape[0]
    theta, _ = _newton(w[None], np.zeros((1, k)), np.array([float(l2)]), tol, max_iter)
    return np.asarray(theta[0], dtype=np.float64)


def _wins_matrix(agents: Sequence[str], wins: npt.ArrayLike) -> FloatArray:
    w = np.array(wins, dtype=np.float64)
    k = len(agents)
    if w.shape != (k, k):
        raise ValueError(f"wins must be {k}x{k} for {k} agents, got shape {w.shape}")
    if (w < 0).any() or not np.isfinite(w).all():
        raise ValueError("wins must be finite and non-negative")
    np.fill_diagonal(w, 0.0)
    return w


def _components(adj: npt.NDArray[np.bool_]) -> list[list[int]]:
    """Connected components of a symmetric boolean adjacency matrix, in index order."""
    linked = [[j for j, edge in enumerate(row) if edge] for row in adj.tolist()]  # lists: k is small
    seen = [False] * len(linked)
    comps: list[list[int]] = []
    for s in range(len(linked)):
        if seen[s]:
            continue
        stack, comp = [s], []
        seen[s] = True
        while stack:
            i = stack.pop()
            comp.append(i)
            for j in linked[i]:
                if not seen[j]:
                    seen[j] = True
                    stack.append(j)
        comps.append(sorted(comp))
    return comps


def check_graph(agents: Sequence[str], wins: npt.ArrayLike) -> list[str]:
    """Why the Bradley-Terry MLE would not exist: a disconnected comparison graph (components named), an
    agent (or group) that always wins or always loses. Empty list = the fit is well defined."""
    w = _wins_matrix(agents, wins)
    k = len(agents)
    names = list(agents)
    problems: list[str] = []
    played = (w + w.T) > 0
    comps = _components(played)
    absent = [c[0] for c in comps if len(c) == 1 and not played[c[0]].any()]
    for i in absent:
        problems.append(f"agent {names[i]!r} has no comparisons")
    real = [c for c in comps if not (len(c) == 1 and c[0] in absent)]
    if len(real) > 1:
        shown = " | ".join("[" + ", ".join(names[i] for i in c) + "]" for c in real)
        problems.append(
            f"comparison graph is disconnected: components {shown}; Elo between components is not identified"
        )
    beat = w > 0
    reach = beat | np.eye(k, dtype=bool)
    for _ in range(max(1, math.ceil(math.log2(max(k, 2)))) + 1):
        reach = reach @ reach
    strong = reach & reach.T
    for comp in real:
        sccs = _components(strong[np.ix_(comp, comp)])
        if len(sccs) == 1:
            continue
        for scc in sccs:
            members = [comp[i] for i in scc]
            others = [j for j in comp if j not in members]
            lost = w[np.ix_(others, members)].sum()
            won = w[np.ix_(members, others)].sum()
            who = [names[i] for i in members]
            if lost == 0 and won > 0:
                problems.append(_one_sided(who, won, top=True))
            elif won == 0 and lost > 0:
                problems.append(_one_sided(who, lost, top=False))
    return problems


_ONE_SIDED = {  # top: (verb, what the count counts, the MLE strength, what the group never did)
    True: ("won", "wins, no loss or tie", "infinite", "lost to"),
    False: ("lost", "losses, no win or tie", "minus infinity", "beat"),
}


def _one_sided(who: list[str], count: float, *, top: bool) -> str:
    """The problem of an agent or group that only won (``top``) or only lost against the others of its
    component: its MLE strength diverges."""
    verb, counted, strength, never = _ONE_SIDED[top]
    if len(who) == 1:
        return (
            f"agent {who[0]!r} {verb} every comparison ({count:g} {counted}): its MLE strength is {strength}"
        )
    return f"agents [{', '.join(who)}] never {never} any other agent: MLE strengths diverge"


def elo_scale(theta: npt.ArrayLike, anchor: float = 1000.0) -> FloatArray:
    """Bradley-Terry strength to Elo points: ``400 / ln(10) * theta + anchor``."""
    return np.asarray(ELO_PER_THETA * np.asarray(theta, dtype=np.float64) + anchor, dtype=np.float64)


# --------------------------------------------------------------------------------------------------
# Elo with bootstrap


@dataclass(frozen=True)
class EloResult:
    """Pooled Elo per agent (full-data estimate) with 95% intervals and ranks.

    ``method`` says how the intervals were made: ``cluster-t`` (Elo +- t(tasks - 1) x the cluster-robust
    standard error from ``cov``, the Elo-scale covariance), ``bootstrap-tasks`` (2.5/97.5 percentiles of
    the bootstrap, when the MLE does not exist) or ``none``. ``rank`` = 1 + number of agents whose lower
    bound exceeds this agent's upper bound. ``samples`` is the bootstrap Elo matrix (rounds x agents, in
    ``agents`` order; excluded from equality). ``problems`` lists why the MLE does not exist (then
    ``l2`` > 0 was used); ``notes`` says e.g. how many resamples needed the fallback ridge.
    """

    agents: tuple[str, ...]
    elo: dict[str, float]
    low: dict[str, float]
    high: dict[str, float]
    rank: dict[str, int]
    per_task: dict[str, dict[str, float]]
    problems: list[str]
    rounds: int
    samples: FloatArray = field(repr=False, compare=False, default_factory=lambda: np.zeros((0, 0)))
    notes: list[str] = field(default_factory=list)
    n_tasks: int = 0
    n_comparisons: int = 0
    anchor: float = 1000.0
    l2: float = 0.0
    pair_counts: FloatArray = field(repr=False, compare=False, default_factory=lambda: np.zeros((0, 0)))
    method: str = "none"
    cov: FloatArray = field(repr=False, compare=False, default_factory=lambda: np.zeros((0, 0)))
    fit_check: FitCheck | None = field(default=None, compare=False)  # None: the MLE does not exist

    def to_json(self) -> dict[str, Any]:
        """Plain JSON form (without the bootstrap samples)."""
        return {
            "agents": list(self.agents),
            "elo": dict(self.elo),
            "low": dict(self.low),
            "high": dict(self.high),
            "rank": dict(self.rank),
            "per_task": {t: dict(v) for t, v in self.per_task.items()},
            "problems": list(self.problems),
            "notes": list(self.notes),
            "rounds": self.rounds,
            "n_tasks": self.n_tasks,
            "n_comparisons": self.n_comparisons,
            "anchor": self.anchor,
            "l2": self.l2,
            "method": self.method,
        }


def ranks_from_intervals(
    agents: Sequence[str], low: Mapping[str, float], high: Mapping[str, float]
) -> dict[str, int]:
    """Rank = 1 + number of agents whose lower bound exceeds this agent's upper bound (ties share a rank)."""
    return {a: 1 + sum(1 for b in agents if b != a and low[b] > high[a]) for a in agents}


def _tensor(comparisons: Sequence[Comparison]) -> tuple[list[str], list[str], FloatArray]:
    if not comparisons:
        raise ValueError("fit_elo needs at least one comparison")
    agents = sorted({c.a for c in comparisons} | {c.b for c in comparisons})
    tasks = sorted({c.task_id for c in comparisons})
    a_idx = {a: i for i, a in enumerate(agents)}
    t_idx = {t: i for i, t in enumerate(tasks)}
    k = len(agents)
    ti = np.fromiter((t_idx[c.task_id] for c in comparisons), dtype=np.int64, count=len(comparisons))
    ai = np.fromiter((a_idx[c.a] for c in comparisons), dtype=np.int64, count=len(comparisons))
    bi = np.fromiter((a_idx[c.b] for c in comparisons), dtype=np.int64, count=len(comparisons))
    score = np.fromiter((float(c.score_a) for c in comparisons), dtype=np.float64, count=len(comparisons))
    if (ai == bi).any():
        bad = comparisons[int(np.flatnonzero(ai == bi)[0])]
        raise ValueError(f"comparison of {bad.a!r} with itself in task {bad.task_id!r}")
    if ((score < 0) | (score > 1) | ~np.isfinite(score)).any():
        raise ValueError("score_a must be in [0, 1] (1 win, 0 loss, 0.5 tie)")
    size = len(tasks) * k * k
    flat = np.bincount(ti * k * k + ai * k + bi, weights=score, minlength=size)
    flat += np.bincount(ti * k * k + bi * k + ai, weights=1.0 - score, minlength=size)
    return agents, tasks, np.asarray(flat, dtype=np.float64).reshape(len(tasks), k, k)


def _fit_batch(
    w: FloatArray, theta0: FloatArray, l2: float, tol: float, max_iter: int
) -> tuple[FloatArray, int]:
    """Fit each round of ``w`` (fallback ridge where no finite MLE exists); returns (thetas, #fallback)."""
    r_count, k, _ = w.shape
    thetas = np.empty((r_count, k))
    fallback = 0
    chunk = max(1, _MAX_CHUNK_ELEMENTS // max(1, k * k))
    for start in range(0, r_count, chunk):
        part = w[start : start + chunk]
        ok = _reach_all(part)
        lam = np.where(ok, l2, max(l2, FALLBACK_L2))
        fallback += int((~ok & (l2 < FALLBACK_L2)).sum())
        init = np.broadcast_to(theta0, (part.shape[0], k)).copy()
        thetas[start : start + chunk], _ = _newton(part, init, lam, tol, max_iter)
    return thetas, fallback


def cluster_covariance(tensor: npt.ArrayLike, theta: npt.ArrayLike, l2: float = 0.0) -> FloatArray:
    """Cluster-robust covariance of fitted mean-zero strengths, tasks as clusters (CR1 sandwich).

    ``tensor`` is ``(..., T, k, k)`` wins per task, ``theta`` the ``(..., k)`` fit of its sum over tasks;
    returns ``(..., k, k)`` on the strength scale. ``L+ M L+``: ``L`` the pooled Fisher information
    (plus the ridge ``l2``), ``L+`` its inverse on mean-zero vectors, ``M = T / (T - 1) sum_t s_t s_t'``
    with ``s_t`` task t's score (its wins minus the fit's expected wins, centred over tasks). Tasks are
    not independent comparisons (one task's transcripts are judged in every pair and both orders), so
    the model-based ``L+`` alone is too narrow; the sandwich takes the spread from the tasks. NaN with
    fewer than two tasks.
    """
    w = np.asarray(tensor, dtype=np.float64)
    th = np.asarray(theta, dtype=np.float64)
    tasks, k = w.shape[-3], w.shape[-1]
    n = w + np.swapaxes(w, -1, -2)
    p = _sigmoid(th[..., :, None] - th[..., None, :])
    scores = w.sum(axis=-1) - (n * p[..., None, :, :]).sum(axis=-1)
    scores = scores - scores.mean(axis=-2, keepdims=True)
    curv = n.sum(axis=-3) * p * (1.0 - p)
    eye, centre = np.eye(k), np.full((k, k), 1.0 / k)
    info = -curv + eye * (curv.sum(axis=-1) + l2)[..., :, None]
    pinv = np.linalg.inv(info + centre) - centre
    if tasks < 2:
        return np.full(info.shape, np.nan)
    meat = tasks / (tasks - 1.0) * np.einsum("...ti,...tj->...ij", scores, scores)
    return np.asarray(pinv @ meat @ pinv, dtype=np.float64)


def cluster_t_halfwidth(cov: npt.ArrayLike, tasks: int) -> FloatArray:
    """Half-widths of the 95% ``cluster-t`` intervals: ``t(tasks - 1) * sqrt(diag(cov))`` over the last
    two axes of ``cov`` (the covariance from :func:`cluster_covariance`, on the scale of the interval)."""
    c = np.asarray(cov, dtype=np.float64)
    var = np.maximum(np.diagonal(c, axis1=-2, axis2=-1), 0.0)
    return np.asarray(t_quantile(max(tasks - 1, 1)) * np.sqrt(var), dtype=np.float64)


def _per_task_elo(
    agents: list[str],
    tasks: list[str],
    tensor: FloatArray,
    *,
    l2: float,
    tol: float,
    max_iter: int,
    anchor: float,
) -> dict[str, dict[str, float]]:
    """Each task's own Elo fit, over the agents it compared, where its MLE exists."""
    per_task: dict[str, dict[str, float]] = {}
    for t, task in enumerate(tasks):
        w_t = tensor[t]
        present = np.flatnonzero((w_t + w_t.T).sum(axis=1) > 0)
        names = [agents[i] for i in present]
        sub = w_t[np.ix_(present, present)]
        if len(names) < 2 or check_graph(names, sub):
            continue
        if l2 == 0.0:  # checked just above: fit_bradley_terry would only check it again
            th = _fit_one(_wins_matrix(names, sub), l2, tol, max_iter)
        else:
            th = fit_bradley_terry(names, sub, l2=l2, tol=tol, max_iter=max_iter)
        per_task[task] = {a: float(v) for a, v in zip(names, elo_scale(th, anchor), strict=True)}
    return per_task


def fit_elo(
    comparisons: Sequence[Comparison],
    *,
    anchor: float = 1000.0,
    l2: float = 0.0,
    rounds: int = 1000,
    seed: int = 0,
    tol: float = 1e-10,
    max_iter: int = 200,
) -> EloResult:
    """Pooled Elo over all tasks with 95% cluster-robust intervals (:func:`cluster_covariance`, t on
    tasks - 1 df) and ``rounds`` seeded bootstrap resamples of tasks (the intervals' fallback when the
    MLE does not exist, and the paired baseline deltas)."""
    agents, tasks, tensor = _tensor(comparisons)
    k = len(agents)
    pooled = tensor.sum(axis=0)
    problems = check_graph(agents, pooled)
    l2_used = max(l2, FALLBACK_L2) if problems else l2
    theta = fit_bradley_terry(agents, pooled, l2=l2_used, tol=tol, max_iter=max_iter)
    elo = elo_scale(theta, anchor)
    notes: list[str] = []
    if problems:
        notes.append(f"fitted with ridge l2={l2_used:g} because the MLE does not exist")

    samples = np.zeros((0, k))
    if rounds > 0:
        counts = task_counts(len(tasks), rounds, seed)  # the metrics' matrix when it is still held
        boot_w = (counts @ tensor.reshape(len(tasks), k * k)).reshape(rounds, k, k)
        thetas, fallback = _fit_batch(boot_w, theta, l2_used, tol, max_iter)
        samples = elo_scale(thetas, anchor)
        if fallback:
            notes.append(
                f"{fallback} of {rounds} bootstrap resamples had no finite MLE (an agent never lost or never "
                f"won, or a disconnected graph) and were fitted with l2={FALLBACK_L2:g}"
            )
    cov = cluster_covariance(tensor, theta, l2_used) * ELO_PER_THETA**2
    method = "none"  # one task: no spread between tasks to measure, neither way
    if len(tasks) >= 2 and not problems:
        method = "cluster-t"
        half = cluster_t_halfwidth(cov, len(tasks))
        lo, hi = elo - half, elo + half
    elif len(tasks) >= 2 and samples.shape[0]:
        method = "bootstrap-tasks"
        lo, hi = np.percentile(samples, [2.5, 97.5], axis=0)
    else:
        lo = hi = np.full(k, np.nan)
    low = {a: float(lo[i]) for i, a in enumerate(agents)}
    high = {a: float(hi[i]) for i, a in enumerate(agents)}

    per_task = _per_task_elo(agents, tasks, tensor, l2=l2, tol=tol, max_iter=max_iter, anchor=anchor)

    return EloResult(
        agents=tuple(agents),
        elo={a: float(elo[i]) for i, a in enumerate(agents)},
        low=low,
        high=high,
        rank=ranks_from_intervals(agents, low, high),
        per_task=per_task,
        problems=problems,
        rounds=rounds,
        samples=samples,
        notes=notes,
        n_tasks=len(tasks),
        n_comparisons=len(comparisons),
        anchor=anchor,
        l2=l2_used,
        pair_counts=pooled + pooled.T,
        method=method,
        cov=cov,
        fit_check=None if problems else bt_fit_check(tuple(agents), tensor, theta),
    )


def _index(result: EloResult, agent: str) -> int:
    try:
        return result.agents.index(agent)
    except ValueError:
        raise KeyError(f"unknown agent {agent!r}; agents: {', '.join(result.agents)}") from None


def elo_estimate(result: EloResult, agent: str) -> Estimate:
    """An agent's Elo as an :class:`Estimate` (n = comparisons it took part in) for gates like ``elo(a)``."""
    i = _index(result, agent)
    n = round(float(result.pair_counts[i].sum())) if result.pair_counts.size else 0
    low, high = result.low[agent], result.high[agent]
    ok = math.isfinite(low) and math.isfinite(high)
    method = result.method if ok else "none"
    return Estimate(result.elo[agent], n, low if ok else None, high if ok else None, method)


def linear_interval(result: EloResult, coef: npt.ArrayLike) -> tuple[float, float] | None:
    """95% interval of ``sum_i coef_i * elo_i`` (``coef`` in ``result.agents`` order), e.g. a difference
    of two agents' Elo: ``cluster-t`` from the covariance, ``bootstrap-tasks`` from the percentiles of
    the resampled combination; None without an interval."""
    c = np.asarray(coef, dtype=np.float64)
    value = float(c @ np.array([result.elo[a] for a in result.agents]))
    if result.method == "cluster-t":
        half = float(t_quantile(result.n_tasks - 1)) * math.sqrt(max(float(c @ result.cov @ c), 0.0))
        return (value - half, value + half) if math.isfinite(half) else None
    if result.method == "bootstrap-tasks" and result.samples.shape[0]:
        low, high = np.percentile(result.samples @ c, [2.5, 97.5])
        return float(low), float(high)
    return None


def elo_difference(result: EloResult, a: str, b: str) -> Estimate:
    """``elo(a) - elo(b)``: full-data difference with its 95% interval (:func:`linear_interval`, the same
    method as the agents' intervals). n = comparisons involving a or b."""
    i, j = _index(result, a), _index(result, b)
    value = result.elo[a] - result.elo[b]
    pc = result.pair_counts
    n = round(float(pc[i].sum() + pc[j].sum() - pc[i, j])) if pc.size else 0
    coef = np.zeros(len(result.agents))
    coef[i], coef[j] = 1.0, -1.0
    bounds = linear_interval(result, coef)
    if bounds is None:
        return Estimate(value, n, None, None, "none")
    return Estimate(value, n, bounds[0], bounds[1], result.method)


def tier_table(
    families: Mapping[str, Sequence[tuple[str, str]]],
    result: EloResult,
    tokens_per_task: Mapping[str, float],
    delta_intervals: Mapping[tuple[str, str], tuple[float, float]] | None = None,
) -> list[dict[str, Any]]:
    """Elo per token by compute tier: each tier vs the previous tier of its family (docs/protocol.md#elo,
    step 3).

    ``families`` maps a family to its (tier, agent) list in increasing compute. ``delta_intervals`` keyed
    by (previous agent, agent) overrides the interval of the ΔElo. Verdicts: ``baseline`` (first
    tier); ``no measurable gain`` (ΔElo interval includes 0, or ΔElo <= 0); ``diminishing returns`` (Elo
    rises but ΔElo per 1k tokens is below the previous tier's); else ``improves``.
    """
    rows: list[dict[str, Any]] = []
    for family, tiers in families.items():
        prev_agent: str | None = None
        prev_rate: float | None = None
        for tier, agent in tiers:
            tokens = float(tokens_per_task[agent]) if agent in tokens_per_task else None
            row: dict[str, Any] = {
                "family": family,
                "tier": tier,
                "agent": agent,
                "tokens_per_task": tokens,
                "elo": result.elo[agent],
                "low": result.low[agent],
                "high": result.high[agent],
                "delta_elo": None,
                "delta_low": None,
                "delta_high": None,
                "delta_elo_per_1k_tokens": None,
                "verdict": "baseline",
            }
            if prev_agent is not None:
                est = elo_difference(result, agent, prev_agent)
                d_low, d_high = est.low, est.high
                if delta_intervals is not None and (prev_agent, agent) in delta_intervals:
                    d_low, d_high = (float(x) for x in delta_intervals[(prev_agent, agent)])
                delta = est.value if est.value is not None else 0.0
                prev_tokens = tokens_per_task.get(prev_agent)
                rate: float | None = None
                if tokens is not None and prev_tokens is not None and tokens - float(prev_tokens) > 0:
                    rate = delta / ((tokens - float(prev_tokens)) / 1000.0)
                includes_zero = d_low is None or d_high is None or d_low <= 0.0 <= d_high
                if includes_zero or delta <= 0:
                    verdict = "no measurable gain"
                elif rate is not None and prev_rate is not None and rate < prev_rate:
                    verdict = "diminishing returns"
                else:
                    verdict = "improves"
                row.update(
                    delta_elo=delta,
                    delta_low=d_low,
                    delta_high=d_high,
                    delta_elo_per_1k_tokens=rate,
                    verdict=verdict,
                )
                prev_rate = rate
            rows.append(row)
            prev_agent = agent
    return rows
