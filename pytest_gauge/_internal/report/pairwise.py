"""``pairwise_table.md``: one row per judged case, in collection order."""

from __future__ import annotations

from ..records import CaseRecord
from .common import ReportContext, case_counts, suite_name
from .format import DASH, fmt_bool, fmt_int, fmt_rate, fmt_usd, md_code, md_table, md_text, shorten

__all__ = ["render_pairwise_table"]

_PAIR_COLUMNS = (
    "pair_id",
    "task_id",
    "agent_left",
    "agent_right",
    "blind_order",
    "judge_choice",
    "reward_left",
    "reward_right",
    "selected_reward",
    "lower_reward_selected",
    "task_success_left",
    "task_success_right",
    "user_sat_left",
    "user_sat_right",
    "input_tokens_incl_shared",
    "output_tokens_incl_shared",
    "est_cost_incl_shared",
    "judge_reward_a",
    "judge_reward_b",
    "judge_reason",
)


def _reason(r: CaseRecord) -> str:
    if r.judge_choice == "error":
        return md_text(shorten(f"error: {r.judge_error or r.judge_reason or 'unparseable verdict'}"))
    return md_text(shorten(r.judge_reason)) if r.judge_reason.strip() else DASH


def render_pairwise_table(ctx: ReportContext) -> str:
    """The per-case table (docs/protocol.md#case-record columns plus the judge's own rewards and reason),
    in collection order."""
    suite = suite_name(ctx)
    expected, recorded, missing = case_counts(ctx)
    with_sample = any(r.sample != 0 for r in ctx.records)
    with_flags = any(r.user_flags_left or r.user_flags_right for r in ctx.records)
    lines = [
        f"# Pairwise results: {suite}",
        "",
        f"{recorded} of {expected} cases recorded, one row per judged case (task × pair × order), "
        "in collection order.",
        "",
        "- `agent_left`/`agent_right` are the pair as declared (the same in both orders); `blind_order` says "
        "who sat in slot A (`A=left` or `A=right`).",
        "- `judge_choice`, `judge_reward_a` and `judge_reward_b` are in slot terms; `reward_*` are the rule "
        "verifier's rewards (0 if a hard constraint broke).",
        f"- `{DASH}` means null: `selected_reward` and `lower_reward_selected` on a tie or judge error, "
        "`user_sat_*` when the simulated user gave no answer.",
        "- Tokens and `est_cost_incl_shared` cover the case's judge calls plus both transcripts it judged "
        "(transcripts are shared between cases, so suite totals come from the ledger: see token_cost.md); "
        "`est_cost_incl_shared` is `unknown` when a model involved has no price, and `at least` a figure "
        "when some of the case's calls were answered without usage (their cost is unknown).",
        "",
    ]
    header = list(_PAIR_COLUMNS)
    align = "llllll" + "rrr" + "l" * 5 + "rrr" + "rr" + "l"
    if with_flags:  # the user audit flagged a transcript: its cases rest on it (docs/protocol.md#user-audit)
        header.insert(14, "user_flags")
        align = align[:14] + "l" + align[14:]
    if with_sample:
        header.insert(2, "sample")
        align = align[:2] + "r" + align[2:]
    rows = []
    for r in ctx.records:
        row = [
            r.pair_id,
            r.task_id,
            r.agent_left,
            r.agent_right,
            r.blind_order,
            r.judge_choice,
            fmt_rate(r.reward_left),
            fmt_rate(r.reward_right),
            fmt_rate(r.selected_reward),
            fmt_bool(r.lower_reward_selected),
            fmt_bool(r.task_success_left),
            fmt_bool(r.task_success_right),
            fmt_bool(r.user_sat_left),
            fmt_bool(r.user_sat_right),
            fmt_int(r.input_tokens_incl_shared),
            fmt_int(r.output_tokens_incl_shared),
            _est_cost(r),
            fmt_rate(r.judge_reward_a),
            fmt_rate(r.judge_reward_b),
            _reason(r),
        ]
        if with_flags:
            row.insert(14, _flags(r))
        if with_sample:
            row.insert(2, str(r.sample))
        rows.append(row)
    if rows:
        lines += md_table(header, rows, align)
    else:
        lines.append("No case was recorded.")
    if missing:
        lines += ["", f"## Missing cases ({len(missing)})", ""]
        lines.append("Selected but not recorded (the case errored before a verdict); metrics exclude them:")
        lines.append("")
        lines += [f"- {md_code(c)}" for c in missing]
    return "\n".join(lines) + "\n"


def _flags(r: CaseRecord) -> str:
    """The user audit's flags of a case's two transcripts, ``left: kind; right: kind``, or a dash."""
    sides = [
        (side, flags) for side, flags in (("left", r.user_flags_left), ("right", r.user_flags_right)) if flags
    ]
    return "; ".join(f"{side}: {', '.join(flags)}" for side, flags in sides) or DASH


def _est_cost(r: CaseRecord) -> str:
    """The case's cost: ``at least $X (N without usage)`` when some of its calls had no usage."""
    if not r.unpriced_calls or r.est_cost_incl_shared is None:
        return fmt_usd(r.est_cost_incl_shared)
    return f"at least {fmt_usd(r.est_cost_incl_shared)} ({r.unpriced_calls} without usage)"
