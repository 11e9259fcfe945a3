"""What every report module shares: the :class:`ReportContext` and the facts derived from it (the suite's
name, cases, tasks, pairs, agents, prices). The number and table formatting is :mod:`.format`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ..analysis.adaptive import AdaptiveSummary
from ..analysis.baseline import BaselineComparison
from ..analysis.elo import EloResult
from ..analysis.elo_report import EloReport
from ..analysis.gates import GateResult
from ..analysis.metrics import Estimate, SuiteMetrics
from ..analysis.repeats import RepeatCounts
from ..records import CaseRecord, LedgerRecord, SuiteMeta
from ..records.prices import Price, PriceRow, PriceTable
from .format import fmt_price

__all__ = [
    "APPROXIMATE_BELOW",
    "ReportContext",
    "agent_failure_lines",
    "agents_of",
    "approximate_note",
    "case_counts",
    "category_counts",
    "declared_pairs",
    "failures_by_agent",
    "format_notes",
    "judge_format_notes",
    "metric_of",
    "price_basis",
    "prices_of",
    "suite_name",
    "task_count",
    "truncated_turns",
]


@dataclass
class ReportContext:
    """Everything one suite's reports are rendered from; built once per suite by ``finish.finish_run``.

    ``elo`` is optional (None when the suite has no compute tiers): when set, the conclusion links
    ``elo.md``/``elo.svg``.
    ``baseline`` is the comparison with ``--gauge-baseline`` (``baseline_note`` says why there is none when
    one was asked for); ``repeats`` each agent's per-task successes and samples. ``seed``, ``backend`` and
    ``prices`` are the run's settings the reports quote (the options object stays with the process).
    """

    meta: SuiteMeta
    records: Sequence[CaseRecord]
    ledger: Sequence[LedgerRecord]
    metrics: SuiteMetrics
    gates: Sequence[GateResult]
    seed: int
    backend: str
    prices: tuple[PriceRow, ...] = ()
    elo: EloResult | None = None
    baseline: BaselineComparison | None = None
    baseline_note: str = ""
    repeats: Mapping[str, RepeatCounts] = field(default_factory=dict)
    interrupted: str | None = None  # "interrupted: N of M cases" when the run was stopped (Ctrl-C, SIGTERM)
    adaptive: AdaptiveSummary | None = None  # --gauge-adaptive: where the run stopped and what it saved
    elo_report: EloReport | None = None  # the Elo fit behind elo.md/elo.json/elo.svg (None: they say why not)
    baseline_link: str = ""  # the baseline folder as baseline.md links it (relative to reports/)
    familywise: str = "per-gate"  # --gauge-familywise: per-gate or holm (docs/protocol.md#family-wise-error)
    agent_failures: Mapping[str, tuple[int, str]] = field(default_factory=dict)  # failed transcripts
    unsandboxed: bool = False  # --gauge-unsandboxed: programs ran without the sandbox (every report says so)


def truncated_turns(ledger: Iterable[LedgerRecord]) -> dict[str, int]:
    """Agent and user-simulator answers cut by ``max_tokens`` (``finish_reason: "length"``), per role."""
    counts = Counter(
        x.role
        for x in ledger
        if x.finish_reason == "length" and x.status == "ok" and x.role in ("agent", "user_sim")
    )
    return {role: counts[role] for role in ("agent", "user_sim") if counts[role]}


APPROXIMATE_BELOW = 20
"""Below this many tasks the 95% intervals are approximate (docs/protocol.md#coverage)."""


def approximate_note(n_tasks: int) -> str | None:
    """The warning printed when a suite has too few tasks for its intervals to reach 95% coverage."""
    if n_tasks >= APPROXIMATE_BELOW:
        return None
    return (
        f"intervals are approximate: {n_tasks} tasks (< {APPROXIMATE_BELOW}); with heterogeneous tasks "
        "a 95% interval may cover less (docs/protocol.md#coverage)"
    )


def metric_of(ctx: ReportContext, name: str) -> Estimate | None:
    """The suite metric ``name``, or None when the suite has none."""
    return ctx.metrics.metrics.get(name)


# --------------------------------------------------------------------------------------------------
# Facts derived from the context


def suite_name(ctx: ReportContext) -> str:
    """The suite's name (from its metadata, else its first record)."""
    return ctx.meta.name or (ctx.records[0].suite if ctx.records else "suite")


def prices_of(ctx: ReportContext) -> dict[str, Price]:
    """The price of every priced model of the run's price table."""
    table = PriceTable.from_rows(ctx.prices)
    return {m: p for m in table.prices if (p := table.price(m)) is not None}


def price_basis(prices: dict[str, Price], model: str) -> str:
    """How a model is priced and where the price came from (``unknown`` when it has none, never $0)."""
    price = prices.get(model)
    if price is None:
        return "no price (unknown)"
    cached = f" / {fmt_price(price.cached_input)} cached in" if price.cached_input is not None else ""
    if price.cache_write is not None:  # shown only when configured (else 1.25 x input, docs#costs)
        cached += f" / {fmt_price(price.cache_write)} cache write"
    if price.cache_write_1h is not None:
        cached += f" / {fmt_price(price.cache_write_1h)} 1 h cache write"
    return f"{fmt_price(price.input)} in / {fmt_price(price.output)} out{cached} per M ({price.source})"


def _case_ids(selected: Sequence[str], suite: str) -> list[str]:
    prefix = f"{suite}::"
    return [s[len(prefix) :] if s.startswith(prefix) else s for s in selected]


def case_counts(ctx: ReportContext) -> tuple[int, int, list[str]]:
    """(expected, recorded, missing case ids in collection order)."""
    recorded = {r.case_id for r in ctx.records}
    selected = _case_ids(ctx.meta.selected, suite_name(ctx))
    expected = ctx.metrics.expected_cases
    if expected is None:
        expected = len(selected) if selected else len(ctx.records)
    missing = [c for c in selected if c not in recorded]
    return expected, len(ctx.records), missing


def category_counts(ctx: ReportContext) -> dict[str, int]:
    """Tasks per category, sorted by category."""
    cats: dict[str, str] = dict(ctx.meta.categories)
    if not cats:
        cats = {str(t.get("task_id")): str(t.get("category", "")) for t in ctx.meta.tasks}
    if not cats:
        cats = {r.task_id: r.category for r in ctx.records}
    return dict(sorted(Counter(cats.values()).items()))


def task_count(ctx: ReportContext) -> int:
    """How many tasks the suite has (declared, else recorded)."""
    return len(ctx.meta.categories or ctx.meta.tasks or {r.task_id for r in ctx.records})


def declared_pairs(ctx: ReportContext) -> list[tuple[str, str, str]]:
    """(pair_id, left, right): declared pairs, then any recorded pair not declared."""
    out: list[tuple[str, str, str]] = []
    for left, right in ctx.meta.pairs:
        out.append((f"{left}-vs-{right}", left, right))
    known = {p for p, _, _ in out}
    for pid, info in ctx.metrics.pairs.items():
        if pid not in known:
            out.append((pid, info.agent_left, info.agent_right))
    return out


def agents_of(ctx: ReportContext) -> list[str]:
    """The declared agents, then any recorded agent not declared."""
    agents = list(ctx.meta.agents)
    for a in sorted({x for r in ctx.records for x in (r.agent_left, r.agent_right)}):
        if a not in agents:
            agents.append(a)
    return agents


def judge_format_notes(ctx: ReportContext) -> list[str]:
    """One sentence per judge model that was not asked with the suite's first ``response_format``
    (a gateway refused it; the judge fell back once for the run), counted from the verdicts."""
    first_judge = (ctx.meta.judge_models or ("judge",))[0]
    used: dict[str, Counter[str]] = {}
    for record in ctx.records:
        asked = [(j.judge, j.response_format) for j in record.judgments]
        for judge, fmt in asked or [(first_judge, record.judge_response_format)]:
            if fmt is not None:
                used.setdefault(judge, Counter())[fmt] += 1
    return format_notes(ctx.meta.judge_format or "none", used)


def format_notes(first: str, used: Mapping[str, Mapping[str, int]]) -> list[str]:
    """Sentences for the terminal and ``conclusion.md``: which judge model was not asked with the first
    format of the chain (``used``: model -> format label -> verdicts), e.g. ``judge model m: the gateway
    refused response_format json_schema; 12 verdicts asked with json_object``."""
    notes: list[str] = []
    for model in sorted(used):
        fallen = {label: n for label, n in used[model].items() if label != first}
        if not fallen:
            continue
        how = ", ".join(
            f"{n} verdict{'s' if n != 1 else ''} asked with {label}" for label, n in sorted(fallen.items())
        )
        notes.append(
            f"judge model {model}: the gateway refused response_format {first}, so the judge fell back"
            f" once per model for the rest of the run ({how})"
        )
    return notes


def failures_by_agent(rows: Mapping[str, Iterable[Mapping[str, object]]]) -> dict[str, tuple[int, str]]:
    """Per agent, its transcripts that failed (a program that exited non-zero or timed out, a model
    agent whose calls failed): how many, and the first one's error (its cause, before "Fix:"). One pass
    over each agent's rows, none of them kept."""
    out: dict[str, tuple[int, str]] = {}
    for agent in sorted(rows):
        count, first = 0, ""
        for row in rows[agent]:
            if row.get("error"):
                first = first if count else str(row["error"])
                count += 1
        if count:
            out[agent] = (count, first.split(". Fix:", 1)[0][:300])
    return out


def agent_failure_lines(ctx: ReportContext) -> list[str]:
    """One line per agent with failed transcripts, and the sandbox opt-out: the terminal's and
    conclusion.md's words on what is not a result."""
    lines = [
        f"agent {agent}: {n} transcript(s) failed, not scored: {cause}"
        for agent, (n, cause) in ctx.agent_failures.items()
    ]
    if ctx.unsandboxed:
        lines.append(
            "unsandboxed: programs and workspace commands ran without the sandbox (--gauge-unsandboxed)"
        )
    return lines
