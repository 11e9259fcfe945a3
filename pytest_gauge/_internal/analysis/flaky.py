"""``exclude_flaky=P`` (docs/reproducibility.md#leaving-out-flaky-tasks): a gate evaluated without the
tasks whose flake rate in the verdict history, before this run, is above ``P``, and what that costs in the
difference the gate can decide.

The flake rates come from :func:`pytest_gauge._internal.analysis.history.task_flakes` over the earlier runs
with each task's current key; the end of the run passes them in (None without ``--gauge-history``, and the
gate is then evaluated on every task, with a note). The decidable difference is
:func:`~pytest_gauge._internal.analysis.power.min_detectable` at 80% power from the gate's own interval, with
every task and without the excluded ones: leaving tasks out narrows nothing, it widens the interval.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from ..records import CaseRecord, LedgerRecord, SuiteMeta
from .gates import Gate, GateResult, evaluate_gates
from .numbers import NumbersSettings, gate_source
from .power import min_detectable, unit_sd, with_needed_n

__all__ = [
    "NO_HISTORY",
    "Exclusion",
    "apply_exclusions",
    "decidable_difference",
    "exclusion_note",
    "flaky_above",
    "subset_evaluator",
]

NO_HISTORY = "needs --gauge-history for flake rates: every task kept"
Evaluator = Callable[[Gate, frozenset[str]], GateResult]


@dataclass(frozen=True)
class Exclusion:
    """One gate's exclusion: the bound, the tasks left out (by id) of the run's ``tasks``, and the
    decidable difference with every task and with the rest (None without an interval)."""

    bound: float
    excluded: tuple[str, ...]
    tasks: int
    with_all: float | None
    without: float | None


def flaky_above(rates: Mapping[str, float], tasks: Sequence[str], bound: float) -> tuple[str, ...]:
    """The run's tasks whose flake rate is strictly above ``bound`` (a task without a record is kept)."""
    return tuple(t for t in tasks if rates.get(t, 0.0) > bound)


def decidable_difference(result: GateResult) -> float | None:
    """The smallest true difference from the threshold the gate's interval decides with 80% power."""
    if result.low is None or result.high is None or result.n <= 0:
        return None
    return min_detectable(unit_sd(result.low, result.high, result.n), result.n)


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


def exclusion_note(ex: Exclusion) -> str:
    """The gate message's tail: how many tasks were left out, which, and the decidable difference."""
    head = f"exclude_flaky={ex.bound:g}: {len(ex.excluded)} of {ex.tasks} tasks left out as flaky"
    if not ex.excluded:
        return f"{head} (decidable difference {_num(ex.with_all)})"
    names = ", ".join(ex.excluded[:10]) + (
        f", +{len(ex.excluded) - 10} more" if len(ex.excluded) > 10 else ""
    )
    return (
        f"{head} ({names}); decidable difference {_num(ex.with_all)} with every task, "
        f"{_num(ex.without)} without them"
    )


def apply_exclusions(
    results: Sequence[GateResult],
    tasks: Sequence[str],
    rates: Mapping[str, float] | None,
    evaluate: Evaluator,
) -> tuple[list[GateResult], dict[str, Exclusion]]:
    """Each ``exclude_flaky`` gate evaluated again on the tasks at or below its bound (``evaluate``),
    its message saying what was left out; other gates unchanged. Every task above the bound: the gate
    is inconclusive. Also each such gate's :class:`Exclusion`, by canonical expression."""
    out: list[GateResult] = []
    found: dict[str, Exclusion] = {}
    for r in results:
        bound = r.gate.exclude_flaky
        if bound is None or r.status == "skipped":
            out.append(r)
            continue
        if rates is None:
            out.append(replace(r, message=f"{r.message} (exclude_flaky: {NO_HISTORY})"))
            continue
        excluded = flaky_above(rates, tasks, bound)
        kept = frozenset(tasks) - set(excluded)
        if not kept:
            ex = Exclusion(bound, excluded, len(tasks), decidable_difference(r), None)
            message = f"INCONCLUSIVE {r.gate.expression()}: every task is flaky; {exclusion_note(ex)}"
            new = GateResult(r.gate, "inconclusive", None, None, None, 0, message)
        else:
            sub = evaluate(r.gate, kept) if excluded else r
            ex = Exclusion(bound, excluded, len(tasks), decidable_difference(r), decidable_difference(sub))
            new = replace(sub, message=f"{sub.message} ({exclusion_note(ex)})")
        found[r.gate.canonical()] = ex
        out.append(new)
    return out, found


def subset_evaluator(
    meta: SuiteMeta,
    records: Sequence[CaseRecord],
    ledger: Sequence[LedgerRecord],
    opts: NumbersSettings,
) -> Evaluator:
    """A gate evaluated on the run's records and ledger of the given tasks only (no baseline comparison,
    no labels: those are of the whole run), with its needed n in those tasks."""

    def evaluate(gate: Gate, kept: frozenset[str]) -> GateResult:
        mine = [r for r in records if r.task_id in kept]
        calls = [r for r in ledger if r.task_id in kept]
        numbers = gate_source(
            meta, mine, calls, opts, comparison=(None, "not compared: flaky tasks left out"), labels=None,
            tasks=sorted(kept),
        )  # fmt: skip
        source = numbers.source
        (result,) = evaluate_gates(
            [gate],
            source,
            drivers=lambda g: source.drivers(g.left.name, g.left.args),
        )
        return with_needed_n(result, None, len(kept))

    return evaluate
