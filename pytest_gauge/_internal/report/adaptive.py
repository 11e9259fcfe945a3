"""Where an adaptive run stopped (``--gauge-adaptive``): conclusion.md's section, the summary line and
metrics.json's block, from the suite's :class:`~pytest_gauge._internal.analysis.adaptive.AdaptiveSummary`."""

from __future__ import annotations

from ..analysis.adaptive import AdaptiveSummary
from .format import fmt_usd

__all__ = ["adaptive_json", "adaptive_lines", "adaptive_section"]


def _where(s: AdaptiveSummary) -> str:
    if s.stopped_after is None:
        return f"ran every look ({s.tasks_run} of {s.total_tasks} tasks, {s.planned} looks)"
    why = "the budget ran out" if s.budget_out else "every gate decided"
    return (
        f"stopped after look {s.stopped_after} of {s.planned}: {s.tasks_run} of {s.total_tasks} tasks run,"
        f" {why}"
    )


def _saved(s: AdaptiveSummary) -> str:
    return (
        f"not spent (estimated from the tasks run): about {s.calls_saved:,} calls, {s.tokens_saved:,}"
        f" tokens, {fmt_usd(s.cost_saved)} nominal cost"
    )


def adaptive_lines(s: AdaptiveSummary | None) -> list[str]:
    """The terminal summary's lines (none for a run without ``--gauge-adaptive``)."""
    if s is None:
        return []
    lines = [f"adaptive: {_where(s)}"]
    if s.last_gate:
        lines.append(f"  decided last: {s.last_gate}")
    if s.calls_saved:
        lines.append(f"  {_saved(s)}")
    if s.undecided:
        lines.append(f"  undecided when the run ended: {', '.join(s.undecided)}")
    lines += [f"  kept the run going: {w}" for w in s.waiting]
    return lines


def adaptive_section(s: AdaptiveSummary | None) -> list[str]:
    """conclusion.md's "Adaptive run" section."""
    if s is None:
        return []
    lines = [
        "## Adaptive run",
        "",
        f"Tasks were taken in seeded looks and the gates re-evaluated after each look with anytime-valid"
        f" 95% intervals (alpha spending over the planned looks); the run {_where(s)}.",
    ]
    if s.last_gate:
        lines += ["", f"- decided last: `{s.last_gate}`"]
    if s.stopped_after is not None:
        skipped = "not run" if s.budget_out else "skipped as not needed"
        lines.append(f"- {_saved(s)}; the remaining cases were {skipped}")
    if s.undecided:
        lines.append(f"- undecided when the run ended: {', '.join(f'`{g}`' for g in s.undecided)}")
    lines += [f"- kept the run going to its last look: {w}" for w in s.waiting]
    return lines


def adaptive_json(s: AdaptiveSummary | None) -> dict[str, object] | None:
    """metrics.json's ``adaptive`` block (null without ``--gauge-adaptive``)."""
    if s is None:
        return None
    return {
        "stopped_after_look": s.stopped_after,
        "planned_looks": s.planned,
        "tasks_run": s.tasks_run,
        "tasks_total": s.total_tasks,
        "budget_ran_out": s.budget_out,
        "decided_last": s.last_gate,
        "undecided": list(s.undecided),
        "waits_for_last_look": list(s.waiting),
        "not_spent": {"calls": s.calls_saved, "tokens": s.tokens_saved, "cost": s.cost_saved},
    }
