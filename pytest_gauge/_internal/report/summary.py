"""The compact plain-text summary for the terminal and ``GITHUB_STEP_SUMMARY``."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from ..analysis.familywise import family_of
from ..analysis.metrics import SUMMARY_METRICS
from ..analysis.reproducibility import reproducibility_text
from ..records import ROLES, LedgerRecord
from ..records.ledger_columns import per_ledger
from .adaptive import adaptive_lines
from .baseline import baseline_summary, gate_ci, gate_value, needed_lines
from .common import (
    ReportContext,
    agent_failure_lines,
    approximate_note,
    case_counts,
    declared_pairs,
    judge_format_notes,
    suite_name,
    task_count,
)
from .costs import spent_this_run
from .format import (
    counted,
    estimate_cells,
    fmt_ci,
    fmt_int,
    fmt_p_value,
    fmt_pct,
    fmt_per_success,
    fmt_rate,
    fmt_task_ci,
    fmt_usd,
    text_table,
)
from .recommend import recommendations
from .self_preference import self_preference_line

__all__ = ["render_summary"]

_MAX_SUMMARY_GATES = 8
_SENT = {"live": "live", "sim": "simulated", "replay": "replayed"}  # where uncached calls went


def render_summary(ctx: ReportContext) -> str:
    """A compact plain-text table for the terminal and GITHUB_STEP_SUMMARY (about 25 lines)."""
    lines = _header_lines(ctx) + _metric_lines(ctx) + _gate_lines(ctx) + adaptive_lines(ctx.adaptive)
    lines += baseline_summary(ctx.baseline, ctx.baseline_note)
    lines += _cost_lines(ctx) + judge_format_notes(ctx) + self_preference_line(ctx)
    fired = [r for r in recommendations(ctx.metrics) if r.fired]
    lines.append(
        f"recommendations: {len(fired)} fired (see reports/conclusion.md)"
        if fired
        else "recommendations: none fired"
    )
    return "\n".join(lines) + "\n"


def _header_lines(ctx: ReportContext) -> list[str]:
    """What was run: cases recorded, tasks, pairs, orders; a stopped run and small suites say so."""
    expected, recorded, missing = case_counts(ctx)
    lines = [
        f"suite {suite_name(ctx)}: {recorded}/{expected} cases recorded"
        + (f" ({len(missing)} missing)" if missing else "")
        + f", {counted(task_count(ctx), 'task')}, {counted(len(declared_pairs(ctx)), 'pair')}"
        + f", orders {ctx.meta.orders}"
    ]
    if ctx.interrupted is not None:
        lines.append(f"{ctx.interrupted} (the run was stopped): the numbers cover the finished cases only")
    lines += agent_failure_lines(ctx)
    note = approximate_note(ctx.metrics.n_tasks)
    if note is not None:
        lines.append(note)
    return lines


def _metric_lines(ctx: ReportContext) -> list[str]:
    """The headline metrics with their intervals, and LRS close minus distant."""
    m = ctx.metrics
    rows: list[list[str]] = [["metric", "value", "95% interval", "n"]]
    for name in SUMMARY_METRICS:
        e = m.metrics.get(name)
        rows.append([name, *_reorder(estimate_cells(e))])
    d = m.lrs_close_minus_distant
    p = "" if m.p_value is None else f"  p={fmt_p_value(m.p_value)}"
    rows.append(["lrs_close - distant", fmt_rate(d.value), fmt_ci(d.low, d.high) + p, str(d.n)])
    return text_table(rows, "lrlr")


def _gate_lines(ctx: ReportContext) -> list[str]:
    """Gate counts by status, the first gates as a table, and how many more tasks would decide them."""
    if not ctx.gates and ctx.interrupted is not None:  # a stopped run evaluates none (conclusion.md too)
        return [f"gates: not evaluated, {ctx.interrupted} (--gauge-gates-on-partial evaluates them)"]
    if not ctx.gates:
        return ["gates: none declared"]
    counts = Counter(g.status.upper() for g in ctx.gates)
    lines = [
        "gates: "
        + ", ".join(f"{counts[s]} {s}" for s in ("PASS", "FAIL", "INCONCLUSIVE", "SKIPPED") if counts[s])
    ]
    shown = ctx.gates[:_MAX_SUMMARY_GATES]
    holm = any(g.holm_level is not None for g in shown)  # the one-sided level Holm tested it at
    repeats = any(g.reproducibility is not None or g.no_figure for g in shown)  # how often it would repeat
    grows = [
        [g.status.upper(), g.gate.canonical(), gate_value(g), gate_ci(g), f"n={g.n}"]
        + ([] if not holm else ["" if g.holm_level is None else f"holm level {g.holm_level:.3g}"])
        + ([] if not repeats else [reproducibility_text(g.reproducibility) or g.no_figure])
        for g in shown
    ]
    lines += ["  " + ln for ln in text_table(grows, "llrlrll"[: len(grows[0])])]
    if len(ctx.gates) > _MAX_SUMMARY_GATES:
        lines.append(f"  … and {len(ctx.gates) - _MAX_SUMMARY_GATES} more (see conclusion.md)")
    lines += [f"  needed: {line}" for line in needed_lines(ctx.gates)]
    family = family_of([g.gate for g in ctx.gates], ctx.familywise)
    if family.confident_fail:
        lines.append(f"  {family.sentence()}")
    return lines


def _cost_lines(ctx: ReportContext) -> list[str]:
    """Cost by role (unknown usage never shown as $0), cost per success, judge share, this run's spend."""
    m = ctx.metrics
    crow: list[list[str]] = [["role", "calls", "attempts", "input tok", "output tok", "cost"]]
    for role in ROLES:
        rc = m.costs.per_role.get(role)
        if rc is not None:
            crow.append(
                [
                    role,
                    fmt_int(rc.calls),
                    fmt_int(rc.attempts),
                    fmt_int(rc.input_tokens),
                    fmt_int(rc.output_tokens),
                    _at_least(rc.cost, rc.usage_missing),
                ]
            )
    without_usage = sum(rc.usage_missing for rc in m.costs.per_role.values())
    crow.append(["total", "", "", "", "", _at_least(m.costs.total_cost, without_usage)])
    lines = text_table(crow, "lrrrrr")
    if without_usage:
        calls = "call" if without_usage == 1 else "calls"
        lines.append(f"{without_usage} {calls} without usage: their cost is unknown, never counted as $0")
    lines.append(
        f"cost per success {fmt_per_success(m.costs.cost_per_success, m.costs.successes, m.costs.total_cost)}"
        f"{fmt_task_ci(m.metrics.get('cost_per_success'), fmt_usd)} ({m.costs.successes} successes), "
        f"judge share {fmt_pct(m.costs.judge_share)}"
    )
    return [*lines, _spent_line(ctx)]


def _spent_line(ctx: ReportContext) -> str:
    """What this run itself sent and paid (cache hits cost nothing), never a bare $0 for unknown usage."""
    spend = spent_this_run(ctx.ledger)
    sent = _SENT.get(ctx.backend, "live")
    live_missing = _sent_tally(ctx.ledger).live_missing
    return (
        f"spent this run {_at_least(spend.spent_usd, live_missing)} ({spend.live_calls} {sent},"
        f" {_cached_calls(ctx.ledger, spend.cached_calls)}"
        + (f", {live_missing} without usage)" if live_missing else ")")
        + (f", {spend.possibly_billed} more possibly billed" if spend.possibly_billed else "")
        + _batched(ctx.ledger)
    )


@dataclass(frozen=True)
class _SentTally:
    """What the spent line counts beside the totals: live attempts without usage, live attempts a batch
    answered, and cache hits repeating a request this run sent itself."""

    live_missing: int
    batched: int
    repeats: int


@per_ledger
def _sent_tally(ledger: Sequence[LedgerRecord]) -> _SentTally:
    """:class:`_SentTally` in one pass (each pass over the ledger's columns makes every record again)."""
    live_missing = batched = 0
    sent: set[str] = set()
    hits: list[str | None] = []
    for x in ledger:
        if x.cache_hit:
            hits.append(x.request)
            continue
        live_missing += 1 if x.usage_missing else 0
        batched += 1 if x.batched else 0
        if x.request:
            sent.add(x.request)
    return _SentTally(live_missing, batched, sum(1 for request in hits if request in sent))


def _batched(ledger: Sequence[LedgerRecord]) -> str:
    """How many calls a batch answered (``--gauge-batch``: priced at the batch price), when any."""
    batched = _sent_tally(ledger).batched
    return f"; {batched} answered in batches, at the batch price" if batched else ""


def _cached_calls(ledger: Sequence[LedgerRecord], cached: int) -> str:
    """The cache hits, saying how many repeated a request this run had itself sent (a first run with
    an empty cache still has those: the same user-simulator turn for two agents, a best-of sample)."""
    repeats = _sent_tally(ledger).repeats
    if not repeats:
        return f"{cached} cached calls"
    if repeats == cached:
        return f"{cached} cached calls, all repeats of this run's own requests"
    return f"{cached} cached calls, {repeats} of them repeats of this run's own requests"


def _at_least(cost: float | None, without_usage: int) -> str:
    return ("at least " if without_usage and cost is not None else "") + fmt_usd(cost)


def _reorder(cells: list[str]) -> list[str]:
    """(value, n, interval) → (value, interval, n) for the summary's column order."""
    return [cells[0], cells[2], cells[1]]
