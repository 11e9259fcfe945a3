"""What every report module shares: the :class:`ReportContext`, the number and table formatting (one place, so
every report prints the same value the same way) and the facts derived from the context."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ..analysis.adaptive import AdaptiveSummary
from ..analysis.baseline import BaselineComparison
from ..analysis.elo import EloResult
from ..analysis.gates import GateResult
from ..analysis.metrics import Estimate, SuiteMetrics
from ..analysis.repeats import RepeatCounts
from ..gateway.prices import Price, PriceTable
from ..options import GaugeOptions
from ..records import CaseRecord, LedgerRecord, SuiteMeta

__all__ = [
    "APPROXIMATE_BELOW",
    "DASH",
    "ROLES",
    "ReportContext",
    "approximate_note",
    "judge_format_notes",
    "truncated_turns",
    "usd_at_least",
]

ROLES: tuple[str, ...] = ("agent", "user_sim", "judge")
DASH = "–"
_MAX_REASON = 160


@dataclass
class ReportContext:
    """Everything one suite's reports are rendered from; built once per suite by ``finish.finish_run``.

    ``elo`` is optional (None when the suite has no compute tiers): when set, the conclusion links
    ``elo.md``/``elo.svg``.
    ``baseline`` is the comparison with ``--gauge-baseline`` (``baseline_note`` says why there is none when
    one was asked for); ``repeats`` each agent's per-task successes and samples.
    """

    meta: SuiteMeta
    records: Sequence[CaseRecord]
    ledger: Sequence[LedgerRecord]
    metrics: SuiteMetrics
    gates: Sequence[GateResult]
    options: GaugeOptions
    elo: EloResult | None = None
    baseline: BaselineComparison | None = None
    baseline_note: str = ""
    repeats: Mapping[str, RepeatCounts] = field(default_factory=dict)
    interrupted: str | None = None  # "interrupted: N of M cases" when the run was stopped (Ctrl-C, SIGTERM)
    adaptive: AdaptiveSummary | None = None  # --gauge-adaptive: where the run stopped and what it saved


# --------------------------------------------------------------------------------------------------
# Number formatting (one place, so every report prints the same value the same way)


def usd_at_least(total: float | None, without_usage: int) -> str:
    """A total in dollars that never shows an unknown part as $0: ``at least $X (N calls without
    usage)`` when some calls reported no usage, ``unknown`` when a price is missing."""
    if total is None or not without_usage:
        return _usd(total)
    calls = "call" if without_usage == 1 else "calls"
    return f"at least {_usd(total)} ({without_usage} {calls} without usage)"


def truncated_turns(ledger: Iterable[LedgerRecord]) -> dict[str, int]:
    """Agent and user-simulator answers cut by ``max_tokens`` (``finish_reason: "length"``), per role."""
    counts = Counter(
        x.role
        for x in ledger
        if x.finish_reason == "length" and x.status == "ok" and x.role in ("agent", "user_sim")
    )
    return {role: counts[role] for role in ("agent", "user_sim") if counts[role]}


def _unsign_zero(text: str) -> str:
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def _rate(x: float | None) -> str:
    """A rate or reward: three decimals; null as a dash."""
    if x is None or not math.isfinite(x):
        return DASH
    return _unsign_zero(f"{x:.3f}")


def _num(x: float | None) -> str:
    """Three decimals, or three significant digits for small magnitudes (gate values may be costs)."""
    if x is None or not math.isfinite(x):
        return DASH
    if x == 0 or abs(x) >= 0.01:
        return _unsign_zero(f"{x:.3f}")
    return _unsign_zero(f"{x:.{min(12, 2 - math.floor(math.log10(abs(x))))}f}")


def _per_success(cost: float | None, successes: int, total: float | None) -> str:
    """Cost per success: ``no success`` when nothing succeeded (not a price problem), ``unknown`` when a
    model has no price, else dollars."""
    if successes == 0:
        return "no success (undefined)" if total is not None else "no success (and cost unknown)"
    return _usd(cost)


def _usd(x: float | None) -> str:
    """Dollars; ``unknown`` (never $0) when no price was configured."""
    if x is None or not math.isfinite(x):
        return "unknown"
    if abs(x) >= 100:
        return f"${x:,.2f}"
    if abs(x) >= 1:
        return f"${x:.4f}"
    return "$" + _unsign_zero(f"{x:.6f}")


def _price(x: float) -> str:
    return f"${x:g}"


def _int(n: int) -> str:
    return f"{n:,}"


def _pct(x: float | None) -> str:
    return DASH if x is None or not math.isfinite(x) else f"{100 * x:.1f}%"


def _bool(b: bool | None) -> str:
    return DASH if b is None else ("true" if b else "false")


def _ci(low: float | None, high: float | None, fmt: Callable[[float | None], str] = _rate) -> str:
    if low is None or high is None:
        return DASH
    return f"[{fmt(low)}, {fmt(high)}]"


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


def _task_ci(e: Estimate | None, fmt: Callable[[float | None], str]) -> str:
    """`` [low, high]`` (95%, resampling tasks) after a cost ratio, or nothing without an interval."""
    if e is None or e.low is None or e.high is None or e.method == "exact":
        return ""
    return f" {_ci(e.low, e.high, fmt)}"


def _cell(text: str) -> str:
    """Text safe inside a markdown table cell: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _short(text: str, limit: int = _MAX_REASON) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _table(header: Sequence[str], rows: Iterable[Sequence[str]], align: str | None = None) -> list[str]:
    """A markdown table; ``align`` has one 'l' or 'r' per column."""
    align = align or "l" * len(header)
    marks = ["---:" if a == "r" else "---" for a in align]
    out = ["| " + " | ".join(_cell(h) for h in header) + " |", "| " + " | ".join(marks) + " |"]
    out.extend("| " + " | ".join(_cell(c) for c in row) + " |" for row in rows)
    return out


def _text_table(rows: Sequence[Sequence[str]], align: str) -> list[str]:
    """A plain-text table with padded columns (first row is the header)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [c.rjust(w) if a == "r" else c.ljust(w) for c, w, a in zip(row, widths, align, strict=True)]
        lines.append("  ".join(cells).rstrip())
    return lines


def _estimate_cells(e: Estimate | None, fmt: Callable[[float | None], str] = _rate) -> list[str]:
    if e is None:
        return [DASH, "0", DASH]
    return [fmt(e.value), str(e.n), _ci(e.low, e.high, fmt)]


def _metric(ctx: ReportContext, name: str) -> Estimate | None:
    return ctx.metrics.metrics.get(name)


# --------------------------------------------------------------------------------------------------
# Facts derived from the context


def _suite(ctx: ReportContext) -> str:
    return ctx.meta.name or (ctx.records[0].suite if ctx.records else "suite")


def _prices(ctx: ReportContext) -> dict[str, Price]:
    table = PriceTable.from_rows(ctx.options.prices)
    return {m: p for m in table.prices if (p := table.price(m)) is not None}


def _price_basis(prices: dict[str, Price], model: str) -> str:
    """How a model is priced and where the price came from (``unknown`` when it has none, never $0)."""
    price = prices.get(model)
    if price is None:
        return "no price (unknown)"
    cached = f" / {_price(price.cached_input)} cached in" if price.cached_input is not None else ""
    return f"{_price(price.input)} in / {_price(price.output)} out{cached} per M ({price.source})"


def _case_ids(selected: Sequence[str], suite: str) -> list[str]:
    prefix = f"{suite}::"
    return [s[len(prefix) :] if s.startswith(prefix) else s for s in selected]


def _cases(ctx: ReportContext) -> tuple[int, int, list[str]]:
    """(expected, recorded, missing case ids in collection order)."""
    recorded = {r.case_id for r in ctx.records}
    selected = _case_ids(ctx.meta.selected, _suite(ctx))
    expected = ctx.metrics.expected_cases
    if expected is None:
        expected = len(selected) if selected else len(ctx.records)
    missing = [c for c in selected if c not in recorded]
    return expected, len(ctx.records), missing


def _categories(ctx: ReportContext) -> dict[str, int]:
    cats: dict[str, str] = dict(ctx.meta.categories)
    if not cats:
        cats = {str(t.get("task_id")): str(t.get("category", "")) for t in ctx.meta.tasks}
    if not cats:
        cats = {r.task_id: r.category for r in ctx.records}
    return dict(sorted(Counter(cats.values()).items()))


def _n_tasks(ctx: ReportContext) -> int:
    return len(ctx.meta.categories or ctx.meta.tasks or {r.task_id for r in ctx.records})


def _declared_pairs(ctx: ReportContext) -> list[tuple[str, str, str]]:
    """(pair_id, left, right): declared pairs, then any recorded pair not declared."""
    out: list[tuple[str, str, str]] = []
    for left, right in ctx.meta.pairs:
        out.append((f"{left}-vs-{right}", left, right))
    known = {p for p, _, _ in out}
    for pid, info in ctx.metrics.pairs.items():
        if pid not in known:
            out.append((pid, info.agent_left, info.agent_right))
    return out


def _agents(ctx: ReportContext) -> list[str]:
    agents = list(ctx.meta.agents)
    for a in sorted({x for r in ctx.records for x in (r.agent_left, r.agent_right)}):
        if a not in agents:
            agents.append(a)
    return agents


def judge_format_notes(ctx: ReportContext) -> list[str]:
    """One sentence per judge model that was not asked with the suite's first ``response_format``
    (a gateway refused it; the judge fell back once for the run), counted from the verdicts."""
    from ..run.judge_format import format_notes

    first_judge = (ctx.meta.judge_models or ("judge",))[0]
    used: dict[str, Counter[str]] = {}
    for record in ctx.records:
        asked = [(j.judge, j.response_format) for j in record.judgments]
        for judge, fmt in asked or [(first_judge, record.judge_response_format)]:
            if fmt is not None:
                used.setdefault(judge, Counter())[fmt] += 1
    return format_notes(ctx.meta.judge_format or "none", used)
