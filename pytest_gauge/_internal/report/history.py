"""The verdict history as conclusion.md's "History" section and the terminal's lines
(docs/protocol.md#verdict-history): pure rendering of a
:class:`~pytest_gauge._internal.analysis.history.HistoryView`."""

from __future__ import annotations

from ..analysis.history import GateRecord, HistoryView, TaskFlake

__all__ = ["HISTORY_FILE", "HISTORY_HEADING", "history_json", "history_lines", "render_history_section"]

HISTORY_HEADING = "## History"
HISTORY_FILE = "history.json"  # reports/: the HTML page's trend view reads it
_FLAKY = (
    "A task is flaky when runs with the same task, rules, agents and judge gave it different outcomes "
    "(preferred agents or rule successes); its flake rate is the share of those runs that differ from its "
    "most common outcome (95% Wilson)."
)
_MAX_ROWS = 20  # flaky tasks listed; the rest are counted


def _runs(n: int) -> str:
    return "1 run" if n == 1 else f"{n} runs"


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _flake_row(f: TaskFlake) -> str:
    return f"| {f.task_id} | {f.runs} | {f.differing} | {_pct(f.rate)} | {_pct(f.low)}-{_pct(f.high)} |"


def _gate_row(g: GateRecord) -> str:
    shown = " ".join(g.statuses) or "-"
    return f"| `{g.expr}` | {g.count('pass')}/{len(g.statuses)} | {shown} |"


def render_history_section(view: HistoryView, path: str) -> str:
    """The section: the flaky tasks (runs with the same key whose outcome differs) with their rate and
    interval, how many tasks were stable, and each gate's record over the last runs."""
    flaky = view.flaky
    once = sum(1 for f in view.flakes if f.runs < 2)
    stable = len(view.flakes) - len(flaky) - once
    lines = [
        HISTORY_HEADING,
        "",
        f"{_runs(view.runs)} of this suite in `{path}` (this one included). {_FLAKY}",
        "",
        f"Flaky tasks: {len(flaky)} of {len(view.flakes)}; stable over 2+ runs: {stable}; seen once: {once}.",
    ]
    if flaky:
        lines += ["", "| task | runs | differing | flake rate | 95% interval |", "|---|---|---|---|---|"]
        lines += [_flake_row(f) for f in flaky[:_MAX_ROWS]]
        if len(flaky) > _MAX_ROWS:
            lines.append(f"\n{len(flaky) - _MAX_ROWS} more flaky tasks not listed.")
    if view.gates:
        lines += ["", f"Gates over the last {view.last} runs (oldest first):", ""]
        lines += ["| gate | passed | statuses |", "|---|---|---|", *(_gate_row(g) for g in view.gates)]
    return "\n".join(lines) + "\n"


def history_json(view: HistoryView) -> dict[str, object]:
    """The view as the HTML page's trend section shows it (keys sorted): each gate's statuses over the
    last runs (oldest first), the flaky tasks (id, runs, differing, rate, interval) and the counts."""
    once = sum(1 for f in view.flakes if f.runs < 2)
    return {
        "flaky": [[f.task_id, f.runs, f.differing, f.rate, f.low, f.high] for f in view.flaky],
        "gates": [[g.expr, list(g.statuses)] for g in view.gates],
        "last": view.last,
        "once": once,
        "runs": view.runs,
        "stable": len(view.flakes) - len(view.flaky) - once,
        "tasks": len(view.flakes),
    }


def history_lines(view: HistoryView) -> list[str]:
    """The terminal's lines: the flaky tasks in brief and each gate's record."""
    flaky = view.flaky
    names = ", ".join(f"{f.task_id} ({f.differing}/{f.runs})" for f in flaky[:10])
    more = f", +{len(flaky) - 10} more" if len(flaky) > 10 else ""
    head = f"history: {_runs(view.runs)}; flaky tasks {len(flaky)} of {len(view.flakes)}"
    lines = [f"{head}: {names}{more}" if flaky else head]
    lines += [
        f"history: gate {g.expr}: passed {g.count('pass')} of last {len(g.statuses)}" for g in view.gates
    ]
    return lines
