"""Paired gates a suite is too small to pass, found at collection (docs/protocol.md#paired-deltas).

A non-inferiority gate on a paired delta (``lower(delta(success_rate(a))) >= -0.05``) passes only when
the interval's lower bound clears the margin. The paired score interval keeps width where no
task moved, ``+-t^2 / (T + t^2)`` (t on T - 1 df), its narrowest lower side on an unchanged agent: on a
suite with fewer tasks than the margin needs, an agent that did not change never passes the gate,
whatever its samples (a margin of 0.05 needs 76 tasks; 44 give +-0.085). Said at collection, before a
paid run.
"""

from __future__ import annotations

from collections.abc import Iterable

from .gates import DELTA, OPS, Gate, parse_gates, parse_term
from .intervals import t_quantile

__all__ = ["PAIRED_SCORE_METRICS", "fewest_tasks", "unchanged_half_width", "undecidable_gates"]

PAIRED_SCORE_METRICS = ("success_rate", "mean_reward")
"""The deltas whose interval is the paired score interval (:func:`.paired.paired_interval`)."""
_MOST_TASKS = 100_000


def unchanged_half_width(tasks: int) -> float:
    """The paired score interval's half-width when no task moved: ``t^2 / (T + t^2)``, t on T - 1 df."""
    z2 = float(t_quantile(float(max(tasks - 1, 1)))) ** 2
    return z2 / (tasks + z2)


def _passes_unchanged(gate: Gate, tasks: int) -> bool:
    """Whether the gate passes on ``tasks`` tasks of which none moved (its best case at that margin)."""
    half = unchanged_half_width(tasks)
    bound = -half if gate.bound == "lower" else half
    return bool(OPS[gate.op](bound, gate.threshold))


def _non_inferiority(gate: Gate) -> bool:
    """A bound of a paired-score delta that an unchanged agent passes on enough tasks: ``lower(...)``
    against a negative margin, ``upper(...)`` against a positive one."""
    if gate.right is not None or gate.left.name != DELTA or len(gate.left.args) != 1:
        return False
    if parse_term(gate.left.args[0]).name not in PAIRED_SCORE_METRICS:
        return False
    if gate.bound == "lower":
        return gate.op in (">=", ">") and gate.threshold < 0
    if gate.bound == "upper":
        return gate.op in ("<=", "<") and gate.threshold > 0
    return False


def fewest_tasks(gate: Gate) -> int | None:
    """The fewest tasks on which this non-inferiority gate can pass (None: not such a gate, or no size)."""
    if not _non_inferiority(gate):
        return None
    lo, hi = 2, 2
    while not _passes_unchanged(gate, hi):
        if hi >= _MOST_TASKS:
            return None
        lo, hi = hi, min(2 * hi, _MOST_TASKS)
    while lo < hi:  # the half-width falls with the task count: bisection finds the first that passes
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if _passes_unchanged(gate, mid) else (mid + 1, hi)
    return hi


def undecidable_gates(suite: str, gates: Iterable[str], tasks: int) -> list[str]:
    """One line per paired gate that ``tasks`` tasks can never pass, with the size it needs."""
    lines = []
    for gate in parse_gates(list(gates)):
        need = fewest_tasks(gate)
        if need is not None and tasks < need:
            lines.append(
                f"suite {suite}: gate {gate.canonical()!r}: this gate needs at least {need} tasks to be "
                f"decidable at this margin (the suite has {tasks}): with no task changed its 95% interval "
                f"is +-{unchanged_half_width(tasks):.3f}, so an unchanged agent cannot pass it; "
                "widen the margin or add tasks"
            )
    return lines
