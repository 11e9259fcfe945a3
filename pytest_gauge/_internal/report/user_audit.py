"""conclusion.md's "The simulated user audited" section: the user simulator's own errors per kind, with
their rates, and the transcripts flagged (docs/protocol.md#user-audit); shown when any is flagged."""

from __future__ import annotations

from ..run.user_audit import USER_AUDIT_KINDS
from .common import ReportContext
from .format import estimate_cells, md_code, md_table

__all__ = ["user_audit_section"]

_LISTED = 20
_WHAT = {
    "leaked_fact": "revealed a hidden fact the agent had not asked for",
    "ended_early": "ended (or was satisfied) while the agent's last reply was still a question",
    "silent": "said nothing in a turn",
    "no_task": "never stated the task",
    "contradicted": "gave a fact a value other than its persona's or hidden facts' (or its own earlier one)",
    "cooperative": "was satisfied though the rules failed and the agent asked nothing",
    "judged": "erred in the audit model's reading of its turns (UserSimulator(audit_model=...))",
}


def user_audit_section(ctx: ReportContext) -> list[str]:
    """The section's lines; none when no transcript is flagged."""
    m = ctx.metrics
    flagged = m.drivers("user_sim_error_rate")
    if not flagged:
        return []
    rows = [["any", "", *estimate_cells(m.lookup("user_sim_error_rate"))]]
    for kind in USER_AUDIT_KINDS:
        rows.append([md_code(kind), _WHAT[kind], *estimate_cells(m.lookup("user_sim_error_rate", (kind,)))])
    shown = ", ".join(md_code(x) for x in flagged[:_LISTED])
    more = f" and {len(flagged) - _LISTED} more" if len(flagged) > _LISTED else ""
    return [
        "## The simulated user audited",
        "",
        "Transcripts whose simulated user did not play its part, by rules on its turns; the verdicts of "
        "their cases rest on them (the case records' `user_flags_left/right`, the HTML report's `user` "
        "marker). Gate on it with `user_sim_error_rate <= 0.05` or `user_sim_error_rate(KIND)`.",
        "",
        *md_table(["kind", "the user", "rate", "n", "95% interval"], rows, "llrrl"),
        "",
        f"Flagged transcripts: {shown}{more}.",
    ]
