"""A ``replay-then-live`` run's misses as token_cost.md's "Sent live" section and the terminal's line
(docs/protocol.md#record-once-replay-on-pull-requests): pure rendering of
:class:`~pytest_gauge._internal.analysis.misses.LiveMisses`."""

from __future__ import annotations

from ..analysis.misses import LiveMisses
from .format import fmt_usd

__all__ = ["MISSES_HEADING", "misses_line", "render_misses_section"]

MISSES_HEADING = "## Sent live: not recorded"
_MAX_WORKS = 30  # work keys listed; the rest are counted


def _cost(m: LiveMisses) -> str:
    spent = m.spent
    if spent.cost is not None:
        return fmt_usd(spent.cost)
    return f"at least {fmt_usd(spent.priced_cost)} ({spent.unpriced} attempts unpriced)"


def misses_line(m: LiveMisses) -> str:
    """One terminal line: misses sent, replayed calls, and what the misses cost."""
    roles = ", ".join(f"{role} {n}" for role, n in m.by_role)
    return (
        f"replay-then-live: {m.calls} calls sent live ({roles or 'none'}), {m.replayed} replayed; "
        f"live spend {_cost(m)}, {m.spent.total_tokens} tokens"
    )


def render_misses_section(m: LiveMisses) -> str:
    """The section: the misses counted by role and priced apart, and the work each belongs to."""
    lines = [
        MISSES_HEADING,
        "",
        f"{m.calls} calls had no recorded answer (cache or cassettes) and were sent live; {m.replayed} were "
        "replayed. Only the sent calls cost anything this run.",
        "",
        "| role | calls sent |",
        "|---|---|",
        *(f"| {role} | {n} |" for role, n in m.by_role),
        "",
        f"Spent on them: {_cost(m)}, {m.spent.input_tokens} input and {m.spent.output_tokens} output tokens "
        f"over {m.spent.records} attempts.",
    ]
    if m.works:
        lines += ["", "Work sent live:", "", *(f"- `{w}`" for w in m.works[:_MAX_WORKS])]
        if len(m.works) > _MAX_WORKS:
            lines.append(f"- and {len(m.works) - _MAX_WORKS} more")
    return "\n".join(lines) + "\n"
