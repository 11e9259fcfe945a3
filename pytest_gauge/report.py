"""Pure rendering of one suite's reports (SPEC §10): the pair table, the token/cost table, the conclusion,
``metrics.json`` and the compact terminal summary.

No I/O, no clock, no run id: the same :class:`ReportContext` always renders to the same bytes, so reports
can be snapshot-tested and diffed between runs.
"""

from __future__ import annotations

import json
import math
import numbers
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .gates import GateResult
from .metrics import COST_INCLUDES_RETRIES, Estimate, SuiteMetrics
from .options import GaugeOptions
from .records import CaseRecord, LedgerRecord

__all__ = [
    "METRICS_FORMAT_VERSION",
    "REPORT_FILES",
    "RULES",
    "ModelCost",
    "Recommendation",
    "ReportContext",
    "Rule",
    "Spend",
    "model_costs",
    "recommendations",
    "render_conclusion",
    "render_metrics_json",
    "render_pairwise_table",
    "render_reports",
    "render_summary",
    "render_token_cost",
    "spent_this_run",
    "unpriced_warnings",
]

METRICS_FORMAT_VERSION = 1
REPORT_FILES: tuple[str, ...] = ("pairwise_table.md", "token_cost.md", "conclusion.md", "metrics.json")
"""The files :func:`render_reports` returns, in this order (written to ``<out>/<suite>/reports/``)."""

ROLES: tuple[str, ...] = ("agent", "user_sim", "judge")
DASH = "–"
_MAX_EXAMPLES = 5
_MAX_LISTED = 10
_MAX_REASON = 160
_MAX_SUMMARY_GATES = 8


@dataclass
class ReportContext:
    """Everything one suite's reports are rendered from; built once per suite by ``finish.finish_run``.

    ``elo`` is optional (an ``elo.EloResult`` or None): when set, the conclusion links ``elo.md``/``elo.svg``.
    """

    meta: dict[str, Any]
    records: Sequence[CaseRecord]
    ledger: Sequence[LedgerRecord]
    metrics: SuiteMetrics
    gates: Sequence[GateResult]
    options: GaugeOptions
    elo: Any = None


# --------------------------------------------------------------------------------------------------
# Number formatting (one place, so every report prints the same value the same way)


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
    return str(ctx.meta.get("name") or (ctx.records[0].suite if ctx.records else "suite"))


def _prices(ctx: ReportContext) -> dict[str, tuple[float, float]]:
    return {m: (float(i), float(o)) for m, i, o in ctx.options.prices}


def _price_basis(prices: dict[str, tuple[float, float]], model: str) -> str:
    price = prices.get(model)
    if price is None:
        return "no price (unknown)"
    return f"{_price(price[0])} in / {_price(price[1])} out per M"


def _case_ids(selected: Sequence[str], suite: str) -> list[str]:
    prefix = f"{suite}::"
    return [s[len(prefix) :] if s.startswith(prefix) else s for s in selected]


def _cases(ctx: ReportContext) -> tuple[int, int, list[str]]:
    """(expected, recorded, missing case ids in collection order)."""
    recorded = {r.case_id for r in ctx.records}
    selected = _case_ids(list(ctx.meta.get("selected") or []), _suite(ctx))
    expected = ctx.metrics.expected_cases
    if expected is None:
        expected = len(selected) if selected else len(ctx.records)
    missing = [c for c in selected if c not in recorded]
    return expected, len(ctx.records), missing


def _categories(ctx: ReportContext) -> dict[str, int]:
    cats: dict[str, str] = dict(ctx.meta.get("categories") or {})
    if not cats:
        cats = {str(t.get("task_id")): str(t.get("category", "")) for t in ctx.meta.get("tasks") or []}
    if not cats:
        cats = {r.task_id: r.category for r in ctx.records}
    return dict(sorted(Counter(cats.values()).items()))


def _n_tasks(ctx: ReportContext) -> int:
    return len(ctx.meta.get("categories") or ctx.meta.get("tasks") or {r.task_id for r in ctx.records})


def _declared_pairs(ctx: ReportContext) -> list[tuple[str, str, str]]:
    """(pair_id, left, right): declared pairs, then any recorded pair not declared."""
    out: list[tuple[str, str, str]] = []
    for pair in ctx.meta.get("pairs") or []:
        left, right = str(pair[0]), str(pair[1])
        out.append((f"{left}-vs-{right}", left, right))
    known = {p for p, _, _ in out}
    for pid, info in ctx.metrics.pairs.items():
        if pid not in known:
            out.append((pid, info.agent_left, info.agent_right))
    return out


def _agents(ctx: ReportContext) -> list[str]:
    agents = [str(a) for a in ctx.meta.get("agents") or []]
    for a in sorted({x for r in ctx.records for x in (r.agent_left, r.agent_right)}):
        if a not in agents:
            agents.append(a)
    return agents


@dataclass(frozen=True)
class ModelCost:
    """Ledger totals of one (role, model): calls, attempts, tokens and nominal cost (None = unknown)."""

    role: str
    model: str
    calls: int
    attempts: int
    failed: int
    input_tokens: int
    output_tokens: int
    cost: float | None
    priced_cost: float
    unpriced_attempts: int
    usage_missing: int
    cached_attempts: int


def model_costs(ledger: Sequence[LedgerRecord]) -> list[ModelCost]:
    """Per (role, model) totals over every attempt (retries and failed requests included), roles in order
    agent, user_sim, judge. Cost is unknown if any attempt reported usage without a price."""
    groups: dict[tuple[str, str], list[LedgerRecord]] = {}
    for rec in ledger:
        groups.setdefault((rec.role, rec.model), []).append(rec)
    order = {r: i for i, r in enumerate(ROLES)}
    out = []
    for (role, model), recs in sorted(groups.items(), key=lambda kv: (order.get(kv[0][0], 99), kv[0])):
        unpriced = sum(1 for x in recs if x.cost is None and x.usage is not None)
        priced = math.fsum(x.cost for x in recs if x.cost is not None)
        out.append(
            ModelCost(
                role=role,
                model=model,
                calls=len({x.call_id for x in recs}),
                attempts=len(recs),
                failed=sum(1 for x in recs if x.status != "ok"),
                input_tokens=sum(x.usage.prompt_tokens for x in recs if x.usage is not None),
                output_tokens=sum(x.usage.completion_tokens for x in recs if x.usage is not None),
                cost=None if unpriced else priced,
                priced_cost=priced,
                unpriced_attempts=unpriced,
                usage_missing=sum(1 for x in recs if x.usage_missing),
                cached_attempts=sum(1 for x in recs if x.cache_hit),
            )
        )
    return out


def unpriced_warnings(ledger: Sequence[LedgerRecord]) -> list[str]:
    """One warning line per model that reported usage without a configured price (its cost is unknown,
    never $0), then where prices are configured; empty when every model used is priced."""
    roles: dict[str, list[str]] = {}
    attempts: dict[str, int] = {}
    for c in model_costs(ledger):
        if c.unpriced_attempts:
            roles.setdefault(c.model, []).append(c.role)
            attempts[c.model] = attempts.get(c.model, 0) + c.unpriced_attempts
    if not roles:
        return []
    return [
        *(
            f"warning: no price configured for model {model!r} ({', '.join(roles[model])}, "
            f"{attempts[model]} attempts): its cost is unknown"
            for model in sorted(roles)
        ),
        "set prices per million tokens with the gauge_prices ini key (MODEL INPUT_PER_M OUTPUT_PER_M), "
        "--gauge-prices FILE or GAUGE_PRICES",
    ]


@dataclass(frozen=True)
class Spend:
    """What this run spent (live attempts) versus what it took from the cache (spent nothing).

    ``spent_usd`` is None when a live attempt reported usage for a model without a price.
    ``possibly_billed`` counts failed live attempts (e.g. timeouts) that may have been billed without usage.
    """

    live_calls: int
    cached_calls: int
    live_tokens: int
    cached_tokens: int
    spent_usd: float | None
    possibly_billed: int = 0

    def to_json(self) -> dict[str, Any]:
        """Plain JSON form (``metrics.json``'s ``spent_this_run``)."""
        return {
            "live_calls": self.live_calls,
            "cached_calls": self.cached_calls,
            "live_tokens": self.live_tokens,
            "cached_tokens": self.cached_tokens,
            "spent_usd": self.spent_usd,
            "possibly_billed": self.possibly_billed,
        }


def spent_this_run(ledger: Sequence[LedgerRecord], role: str | None = None) -> Spend:
    """Live vs cached attempts, tokens and cost actually spent this run (cache hits spend 0)."""
    recs = [x for x in ledger if role is None or x.role == role]
    live = [x for x in recs if not x.cache_hit]
    cached = [x for x in recs if x.cache_hit]
    unknown = any(x.cost is None and x.usage is not None for x in live)
    return Spend(
        live_calls=len(live),
        cached_calls=len(cached),
        live_tokens=sum(x.usage.total_tokens for x in live if x.usage is not None),
        cached_tokens=sum(x.usage.total_tokens for x in cached if x.usage is not None),
        spent_usd=None if unknown else math.fsum(x.cost for x in live if x.cost is not None),
        possibly_billed=sum(1 for x in live if x.possibly_billed),
    )


# --------------------------------------------------------------------------------------------------
# Recommendations: stated rules over the numbers


@dataclass(frozen=True)
class Rule:
    """A recommendation rule: fires when ``value(metrics) > threshold``; unmeasured (None) never fires."""

    key: str
    label: str
    threshold: float
    action: str
    value: Callable[[SuiteMetrics], float | None]
    integer: bool = False

    def text(self) -> str:
        """The rule as printed, e.g. ``flip rate upper bound > 0.2 → judge both orders and report ties``."""
        return f"{self.label} > {self.threshold:g} → {self.action}"


@dataclass(frozen=True)
class Recommendation:
    """One rule checked against this run: the number it saw and whether it fired."""

    rule: Rule
    value: float | None

    @property
    def fired(self) -> bool:
        """True when the number is known and above the threshold."""
        return self.value is not None and self.value > self.rule.threshold

    def value_text(self) -> str:
        """The number as printed (``not measured`` when None)."""
        if self.value is None:
            return "not measured"
        return str(round(self.value)) if self.rule.integer else _num(self.value)

    def line(self) -> str:
        """The printed recommendation with the number that triggered it."""
        r = self.rule
        return f"{r.label} = {self.value_text()} > {r.threshold:g} → {r.action}"


def _high(name: str) -> Callable[[SuiteMetrics], float | None]:
    def get(m: SuiteMetrics) -> float | None:
        e = m.metrics.get(name)
        return None if e is None else e.high

    return get


def _point(name: str) -> Callable[[SuiteMetrics], float | None]:
    def get(m: SuiteMetrics) -> float | None:
        e = m.metrics.get(name)
        return None if e is None else e.value

    return get


RULES: tuple[Rule, ...] = (
    Rule("flip_rate", "flip rate upper bound", 0.2, "judge both orders and report ties", _high("flip_rate")),
    Rule(
        "lrs_close",
        "LRS close upper bound",
        0.3,
        "do not gate close pairs on a single judge run; add repeats or a second judge",
        _high("lrs_close"),
    ),
    Rule(
        "judge_cost_share",
        "judge share of cost",
        0.5,
        "consider a cheaper judge or caching",
        lambda m: m.costs.judge_share,
    ),
    Rule(
        "sat_but_failed_rate",
        "sat-but-failed rate",
        0.1,
        "do not use user satisfaction as the success signal",
        _point("sat_but_failed_rate"),
    ),
    Rule(
        "judge_error_rate",
        "judge error rate",
        0.02,
        "raise judge max_tokens / check the verdict format",
        _point("judge_error_rate"),
    ),
    Rule(
        "missing_cases",
        "missing cases",
        0,
        "rerun the errored cases before trusting the metrics and gates",
        lambda m: None if m.missing_cases is None else float(m.missing_cases),
        integer=True,
    ),
)
"""The recommendation rules, checked in this order."""


def recommendations(metrics: SuiteMetrics, rules: Sequence[Rule] = RULES) -> list[Recommendation]:
    """Every rule checked against the metrics (fired or not), in rule order."""
    return [Recommendation(rule, rule.value(metrics)) for rule in rules]


# --------------------------------------------------------------------------------------------------
# pairwise_table.md

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
    "input_tokens",
    "output_tokens",
    "est_cost",
    "judge_reward_a",
    "judge_reward_b",
    "judge_reason",
)


def _reason(r: CaseRecord) -> str:
    if r.judge_choice == "error":
        return _short(f"error: {r.judge_error or r.judge_reason or 'unparseable verdict'}")
    return _short(r.judge_reason) if r.judge_reason.strip() else DASH


def render_pairwise_table(ctx: ReportContext) -> str:
    """The per-case table (SPEC §5 columns plus the judge's own rewards and reason), in collection order."""
    suite = _suite(ctx)
    expected, recorded, missing = _cases(ctx)
    with_sample = any(r.sample != 0 for r in ctx.records)
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
        "- Tokens and `est_cost` cover the case's judge calls plus both transcripts it judged "
        "(transcripts are shared between cases, so suite totals come from the ledger: see token_cost.md); "
        "`est_cost` is `unknown` when a model involved has no price.",
        "",
    ]
    header = list(_PAIR_COLUMNS)
    align = "llllll" + "rrr" + "l" * 5 + "rrr" + "rr" + "l"
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
            _rate(r.reward_left),
            _rate(r.reward_right),
            _rate(r.selected_reward),
            _bool(r.lower_reward_selected),
            _bool(r.task_success_left),
            _bool(r.task_success_right),
            _bool(r.user_sat_left),
            _bool(r.user_sat_right),
            _int(r.input_tokens),
            _int(r.output_tokens),
            _usd(r.est_cost),
            _rate(r.judge_reward_a),
            _rate(r.judge_reward_b),
            _reason(r),
        ]
        if with_sample:
            row.insert(2, str(r.sample))
        rows.append(row)
    if rows:
        lines += _table(header, rows, align)
    else:
        lines.append("No case was recorded.")
    if missing:
        lines += ["", f"## Missing cases ({len(missing)})", ""]
        lines.append("Selected but not recorded (the case errored before a verdict); metrics exclude them:")
        lines.append("")
        lines += [f"- `{c}`" for c in missing]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------------
# token_cost.md


def _role_price_basis(costs: list[ModelCost], role: str, prices: dict[str, tuple[float, float]]) -> str:
    models = [c.model for c in costs if c.role == role]
    if not models:
        return DASH
    if len(models) == 1:
        return _price_basis(prices, models[0])
    return "; ".join(f"{m}: {_price_basis(prices, m)}" for m in models)


def render_token_cost(ctx: ReportContext) -> str:
    """Role × calls × tokens × price basis × cost, totals, cost per success, judge share, spent this run."""
    suite = _suite(ctx)
    costs = ctx.metrics.costs
    prices = _prices(ctx)
    per_model = model_costs(ctx.ledger)
    lines = [f"# Token and cost accounting: {suite}", ""]
    lines.append(
        "Every gateway attempt in the ledger counts: retries and failed requests are included in the calls, "
        "attempts, tokens and cost"
        + ("" if COST_INCLUDES_RETRIES else " (not: this build excludes them)")
        + ". Costs are nominal: cached answers count at what they cost when they were made "
        "(what this run actually spent is under “Spent this run”). Token counts come from each response's "
        "`usage`; a call without usage is flagged `usage_missing`, listed below, and never estimated into "
        "the cost. A model without a configured price has cost `unknown`, never $0."
    )
    lines += ["", "## By role", ""]
    rows = []
    tot_calls = tot_attempts = tot_in = tot_out = tot_missing = 0
    for role in ROLES:
        rc = costs.per_role.get(role)
        if rc is None:
            continue
        rows.append(
            [
                role,
                _int(rc.calls),
                _int(rc.attempts),
                _int(rc.retries),
                _int(rc.input_tokens),
                _int(rc.output_tokens),
                _role_price_basis(per_model, role, prices),
                _usd(rc.cost),
                _int(rc.usage_missing),
            ]
        )
        tot_calls += rc.calls
        tot_attempts += rc.attempts
        tot_in += rc.input_tokens
        tot_out += rc.output_tokens
        tot_missing += rc.usage_missing
    total_text = _usd(costs.total_cost)
    if costs.total_cost is None and ctx.ledger:
        known = math.fsum(c.priced_cost for c in per_model)
        total_text = f"unknown (priced part {_usd(known)})"
    rows.append(
        [
            "**total**",
            _int(tot_calls),
            _int(tot_attempts),
            _int(tot_attempts - tot_calls),
            _int(tot_in),
            _int(tot_out),
            "",
            total_text,
            _int(tot_missing),
        ]
    )
    header = [
        "role",
        "calls",
        "attempts",
        "retries",
        "input tokens",
        "output tokens",
        "price basis",
        "cost",
        "usage missing",
    ]
    lines += _table(header, rows, "lrrrrrlrr")
    lines += [
        "",
        f"- Cost per success: {_usd(costs.cost_per_success)} "
        f"(total cost / {costs.successes} successful transcripts)",
        f"- Judge share of cost: {_pct(costs.judge_share)}",
    ]
    if not ctx.ledger:
        lines.append("- No ledger records: costs are unknown.")

    if per_model:
        lines += ["", "## By model", ""]
        mrows = [
            [
                c.role,
                c.model,
                _int(c.calls),
                _int(c.attempts),
                _int(c.failed),
                _int(c.input_tokens),
                _int(c.output_tokens),
                _price_basis(prices, c.model),
                _usd(c.cost),
            ]
            for c in per_model
        ]
        lines += _table(
            [
                "role",
                "model",
                "calls",
                "attempts",
                "failed",
                "input tokens",
                "output tokens",
                "price basis",
                "cost",
            ],
            mrows,
            "llrrrrrlr",
        )
        unpriced = [c for c in per_model if c.unpriced_attempts]
        if unpriced:
            lines.append("")
            for c in unpriced:
                lines.append(
                    f"- `{c.model}` ({c.role}) has no configured price: {c.unpriced_attempts} attempts "
                    "with usage have cost unknown, so the role and total costs are unknown."
                )

    lines += ["", "## Spent this run", ""]
    lines.append(
        "Live calls reached the gateway in this run; cached calls were answered from the response cache "
        "and spent nothing."
    )
    lines.append("")
    srows = []
    for role in ROLES:
        s = spent_this_run(ctx.ledger, role)
        srows.append(
            [
                role,
                _int(s.live_calls),
                _int(s.cached_calls),
                _int(s.live_tokens),
                _int(s.cached_tokens),
                _usd(s.spent_usd),
            ]
        )
    total = spent_this_run(ctx.ledger)
    srows.append(
        [
            "**total**",
            _int(total.live_calls),
            _int(total.cached_calls),
            _int(total.live_tokens),
            _int(total.cached_tokens),
            _usd(total.spent_usd),
        ]
    )
    lines += _table(
        ["role", "live calls", "cached calls", "live tokens", "cached tokens", "spent"], srows, "lrrrrr"
    )
    lines.append("")
    if total.live_calls == 0 and total.cached_calls > 0:
        lines.append("Fully cached run: nothing was spent ($0).")
    else:
        lines.append(f"Spent this run: {_usd(total.spent_usd)}.")
    if total.possibly_billed:
        lines.append(
            f"{total.possibly_billed} failed live attempts (timeouts) may have been billed without reporting "
            "usage; they are not in the spent total."
        )

    missing = sorted((x for x in ctx.ledger if x.usage_missing), key=LedgerRecord.sort_key)
    lines += ["", f"## Calls without usage ({len(missing)})", ""]
    if missing:
        lines.append(
            "These responses reported no `usage`: their tokens are not counted and they add nothing to the "
            "cost (never estimated)."
        )
        lines.append("")
        lines += _table(
            ["call_id", "attempt", "role", "model", "status"],
            [[x.call_id, str(x.attempt), x.role, x.model, x.status] for x in missing[:20]],
            "lrlll",
        )
        if len(missing) > 20:
            lines.append(f"\n… and {len(missing) - 20} more (see agent_runs.jsonl).")
    else:
        lines.append("Every response reported its usage.")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------------
# conclusion.md


def _models_of(ctx: ReportContext, prefix: str) -> list[str]:
    models: dict[str, Any] = dict(ctx.meta.get("models") or {})
    return [str(v) for k, v in sorted(models.items()) if k.startswith(prefix) and v]


def _section_tasks(ctx: ReportContext) -> list[str]:
    expected, recorded, missing = _cases(ctx)
    cats = _categories(ctx)
    n_tasks = _n_tasks(ctx)
    lines = ["## Task set", ""]
    lines.append(
        f"{n_tasks} tasks in {len(cats)} categories ({ctx.metrics.n_tasks} with judged cases); "
        f"{recorded} of {expected} selected cases recorded"
        + (f", {len(missing)} missing (errored): see pairwise_table.md." if missing else ".")
    )
    lines.append("")
    lines += _table(["category", "tasks"], [[c, str(n)] for c, n in cats.items()], "lr")
    return lines


def _section_agents(ctx: ReportContext) -> list[str]:
    m = ctx.metrics
    models: dict[str, Any] = dict(ctx.meta.get("models") or {})
    lines = ["## Agents and pairs", ""]
    rows = []
    for a in _agents(ctx):
        per = m.per_agent.get(a, {})
        succ, sbf = per.get("success_rate"), per.get("sat_but_failed_rate")
        rows.append(
            [
                a,
                str(models.get(f"agent:{a}") or DASH),
                *_estimate_cells(succ),
                *_estimate_cells(sbf),
            ]
        )
    lines += _table(
        ["agent", "model", "success rate", "n", "95% interval", "sat-but-failed", "n", "95% interval"],
        rows,
        "llrrlrrl",
    )
    user = _models_of(ctx, "user_sim")
    judges = [str(j) for j in ctx.meta.get("judge_models") or []] or _models_of(ctx, "judge:")
    lines += [
        "",
        f"User simulator: {', '.join(f'`{u}`' for u in user) or DASH}. "
        f"Judge: {', '.join(f'`{j}`' for j in judges) or DASH}.",
        "",
        f"Pairs are close when the gap between the two agents' mean rule rewards is ≤ {m.close_threshold:g}, "
        "otherwise distant.",
        "",
    ]
    prow = []
    per_pair_cases = Counter(r.pair_id for r in ctx.records)
    for pid, left, right in _declared_pairs(ctx):
        info = m.pairs.get(pid)
        per = m.per_pair.get(pid, {})
        prow.append(
            [
                pid,
                left,
                right,
                _rate(info.gap) if info else DASH,
                info.pair_class if info else DASH,
                str(per_pair_cases.get(pid, 0)),
                *[
                    f"{_rate(e.value)} (n={e.n})" if e else DASH
                    for e in (per.get(k) for k in ("lrs", "flip_rate", "position_bias", "judge_error_rate"))
                ],
            ]
        )
    lines += _table(
        [
            "pair",
            "left",
            "right",
            "reward gap",
            "class",
            "cases",
            "LRS",
            "flip rate",
            "position bias",
            "judge errors",
        ],
        prow,
        "lllrlrrrrr",
    )
    return lines


def _section_protocol(ctx: ReportContext) -> list[str]:
    meta = ctx.meta
    orders = meta.get("orders", "both")
    n_left = sum(1 for r in ctx.records if r.blind_order == "A=left")
    n_right = sum(1 for r in ctx.records if r.blind_order == "A=right")
    samples = int(meta.get("samples") or 1)
    repeats = int(meta.get("judge_repeats") or 1)
    judges = list(meta.get("judge_models") or [])
    if orders == "both":
        order_text = "Each (task, pair) is judged in both orders (AB and BA)."
    else:
        order_text = (
            f"Each (task, pair) is judged in one order, drawn from a seeded RNG (seed {ctx.options.seed}), "
            "so flips cannot be measured."
        )
    return [
        "## Blind protocol",
        "",
        "- Agents are anonymised: the judge sees only “Response A” and “Response B”; agent, model and vendor "
        "names are redacted from everything it sees, and instructions inside transcripts are not obeyed.",
        f"- {order_text} `blind_order` is recorded for every case: {n_left} with A=left, {n_right} with "
        "A=right.",
        f"- Both orders judge byte-identical transcripts: one transcript per (task, agent, sample), "
        f"{samples} sample(s) per (task, agent).",
        f"- Judging: {len(judges) or 1} judge model(s), {repeats} verdict(s) per judge per case; "
        "rewards come from the rule verifier, never from the judge.",
    ]


def _estimate_row(label: str, e: Estimate | None) -> list[str]:
    if e is None:
        return [label, DASH, "0", DASH, DASH]
    return [label, *_estimate_cells(e), e.method]


_EST_HEADER = ["", "value", "n", "95% interval", "method"]


def _section_lrs(ctx: ReportContext) -> list[str]:
    m = ctx.metrics
    diff = m.lrs_close_minus_distant
    lines = [
        "## Lower-reward-selected rate (LRS)",
        "",
        "Share of non-tie, non-error verdicts on cases whose two rule rewards differ where the judge chose "
        "the side with the lower reward.",
        "",
    ]
    lines += _table(
        _EST_HEADER,
        [
            _estimate_row("overall", _metric(ctx, "lrs")),
            _estimate_row("close pairs", _metric(ctx, "lrs_close")),
            _estimate_row("distant pairs", _metric(ctx, "lrs_distant")),
            _estimate_row("close − distant", diff),
        ],
        "lrrll",
    )
    lines.append("")
    p = "n/a" if m.p_value is None else _rate(m.p_value)
    lines.append(
        f"One-sided p-value for LRS(close) > LRS(distant): {p} (bootstrap over tasks, {m.rounds} resamples, "
        f"seed {m.seed})."
    )
    if diff.value is None:
        lines.append("The close − distant difference is not measurable: one of the classes has no cases.")
    elif diff.low is not None and diff.low > 0:
        lines.append(
            "The judge picks the lower-reward agent more often on close pairs than on distant pairs "
            "(the interval excludes 0): a single judge run is least reliable exactly where the agents "
            "are close."
        )
    else:
        lines.append("The close − distant difference is not distinguishable from 0 at this number of tasks.")
    return lines


def _section_position(ctx: ReportContext) -> list[str]:
    m = ctx.metrics
    lines = ["## Position effects", ""]
    lines += _table(
        _EST_HEADER,
        [
            _estimate_row("position-flip rate", _metric(ctx, "flip_rate")),
            _estimate_row("position bias (share of slot A)", _metric(ctx, "position_bias")),
        ],
        "lrrll",
    )
    lines += [
        "",
        "A flip is a (task, pair) judged in both orders whose preferred agent differs (a tie against a win "
        "counts). Position bias 0.5 is unbiased.",
    ]
    if m.flipped:
        lines += ["", f"Flipped groups ({len(m.flipped)}):", ""]
        lines += [f"- {f.label()}" for f in m.flipped[:_MAX_LISTED]]
        if len(m.flipped) > _MAX_LISTED:
            lines.append(f"- … and {len(m.flipped) - _MAX_LISTED} more")
    return lines


def _section_judge(ctx: ReportContext) -> list[str]:
    m = ctx.metrics
    lines = ["## Judge errors and reliability", ""]
    lines += _table(
        _EST_HEADER, [_estimate_row("judge error rate", _metric(ctx, "judge_error_rate"))], "lrrll"
    )
    errors = [r for r in ctx.records if r.judge_choice == "error"]
    lines += [
        "",
        "Errors are malformed, truncated or out-of-range verdicts; they are excluded from the LRS, position "
        "bias and flip denominators, never counted as ties.",
    ]
    if errors:
        lines.append("")
        lines += [
            f"- `{r.case_id}`: {_short(r.judge_error or 'unparseable verdict', 120)}"
            for r in errors[:_MAX_LISTED]
        ]
        if len(errors) > _MAX_LISTED:
            lines.append(f"- … and {len(errors) - _MAX_LISTED} more")
    lines.append("")
    ag = m.agreement
    measured = [k for k in ("repeats", "judges", "all") if k in ag.agreement and ag.agreement[k].n > 0]
    if measured:
        lines.append("Judge reliability, from repeated verdicts and/or a second judge on the same cases:")
        lines.append("")
        rows = []
        for k in measured:
            rows.append(_estimate_row(f"agreement ({k})", ag.agreement[k]))
            rows.append(_estimate_row(f"Cohen's kappa ({k})", ag.kappa.get(k)))
        lines += _table(_EST_HEADER, rows, "lrrll")
        if ag.accuracy:
            lines += ["", "Per-judge accuracy (chose the higher rule reward; 1 − LRS):", ""]
            arows = []
            for judge, by_cls in sorted(ag.accuracy.items()):
                for cls in ("all", "close", "distant"):
                    if cls in by_cls:
                        arows.append(_estimate_row(f"{judge} ({cls})", by_cls[cls]))
            lines += _table(_EST_HEADER, arows, "lrrll")
    else:
        lines.append(
            "Judge reliability was not measured: every case has a single verdict. Set `Judge(repeats=2)` "
            "or a second judge model to record agreement and Cohen's kappa."
        )
    return lines


def _section_verbosity(ctx: ReportContext) -> list[str]:
    v = ctx.metrics.verbosity
    lines = ["## Verbosity signal", ""]
    lines += _table(
        _EST_HEADER,
        [
            _estimate_row("reasons with length/style words", _metric(ctx, "verbosity_word_rate")),
            _estimate_row("longer response wins (equal rewards)", _metric(ctx, "longer_wins_rate")),
        ],
        "lrrll",
    )
    used = sorted(((w, n) for w, n in v.word_counts.items() if n), key=lambda x: (-x[1], x[0]))
    if used:
        lines += ["", "Words used: " + ", ".join(f"“{w}” × {n}" for w, n in used) + "."]
    return lines


def _section_satisfaction(ctx: ReportContext) -> list[str]:
    m = ctx.metrics
    lines = ["## User satisfaction vs task success", ""]
    lines += _table(
        _EST_HEADER,
        [
            _estimate_row("satisfied-but-failed rate", _metric(ctx, "sat_but_failed_rate")),
            _estimate_row("task success rate", _metric(ctx, "success_rate")),
        ],
        "lrrll",
    )
    lines += [
        "",
        "Per transcript (task, agent, sample): the simulated user said it was satisfied but the rule "
        "verifier found the task failed. Satisfaction never feeds the reward.",
    ]
    ex = m.sat_but_failed_examples
    if ex:
        lines += ["", f"Examples ({min(len(ex), _MAX_EXAMPLES)} of {len(ex)}):", ""]
        for task_id, agent, sample in ex[:_MAX_EXAMPLES]:
            lines.append(f"- task `{task_id}`, agent `{agent}`" + (f", sample {sample}" if sample else ""))
    return lines


def _section_cost(ctx: ReportContext) -> list[str]:
    # Nominal figures only: conclusion.md must be byte-identical when a re-run is answered from the cache,
    # so what this run spent (live vs cached) lives in token_cost.md and metrics.json alone.
    c = ctx.metrics.costs
    by_role = ", ".join(f"{r} {_usd(c.per_role[r].cost)}" for r in ROLES if r in c.per_role)
    return [
        "## Cost",
        "",
        f"- Total cost: {_usd(c.total_cost)} ({by_role}); nominal, retries and failed requests included.",
        f"- Cost per success: {_usd(c.cost_per_success)} ({c.successes} successful transcripts).",
        f"- Judge share of cost: {_pct(c.judge_share)}.",
        "",
        "Details, and what this run spent (live vs cached calls), in [token_cost.md](token_cost.md).",
    ]


def _section_gates(ctx: ReportContext) -> list[str]:
    lines = ["## Gates", ""]
    if not ctx.gates:
        return [*lines, "No gates were declared for this suite."]
    rows = [
        [g.gate.canonical(), g.status.upper(), _num(g.value), _ci(g.low, g.high, _num), str(g.n)]
        for g in ctx.gates
    ]
    lines += _table(["gate", "status", "value", "95% interval", "n"], rows, "llrlr")
    lines.append("")
    for g in ctx.gates:
        expr = g.gate.canonical()
        text = g.message if g.gate.expression() in g.message else f"{g.status.upper()} {expr}: {g.message}"
        lines.append(f"- {_short(text, 400)}")
    return lines


def _section_recommendations(ctx: ReportContext) -> list[str]:
    recs = recommendations(ctx.metrics)
    fired = [r for r in recs if r.fired]
    lines = ["## Recommendations", ""]
    if fired:
        lines += [f"- {r.line()}" for r in fired]
    else:
        lines.append("No recommendation rule fired.")
    lines += ["", "Rules checked:", ""]
    lines += _table(
        ["rule", "value", "fired"],
        [[r.rule.text(), r.value_text(), "yes" if r.fired else "no"] for r in recs],
        "lrl",
    )
    return lines


def _section_elo(ctx: ReportContext) -> list[str]:
    elo = getattr(ctx, "elo", None)
    if elo is None:
        return []
    lines = ["## Test-time compute (Elo)", ""]
    agents = getattr(elo, "agents", None)
    values = getattr(elo, "elo", None)
    if agents and isinstance(values, dict):
        low, high = getattr(elo, "low", {}) or {}, getattr(elo, "high", {}) or {}
        rank = getattr(elo, "rank", {}) or {}
        rows = [
            [
                str(a),
                f"{values[a]:.1f}",
                _ci(low.get(a), high.get(a), lambda x: DASH if x is None else f"{x:.1f}"),
                str(rank.get(a, DASH)),
            ]
            for a in agents
            if a in values
        ]
        lines += _table(["agent", "Elo", "95% interval", "rank"], rows, "lrlr")
        lines.append("")
    lines.append("Full table and tiers: [elo.md](elo.md). ![Elo by strategy](elo.svg)")
    return lines


def render_conclusion(ctx: ReportContext) -> str:
    """The conclusion: task set, protocol, LRS close vs distant, flips, judge, satisfaction, cost, gates and
    rule-based recommendations, each number with its n and 95% interval."""
    sections = [
        [f"# Conclusion: {_suite(ctx)}"],
        _section_tasks(ctx),
        _section_agents(ctx),
        _section_protocol(ctx),
        _section_lrs(ctx),
        _section_position(ctx),
        _section_judge(ctx),
        _section_verbosity(ctx),
        _section_satisfaction(ctx),
        _section_cost(ctx),
        _section_gates(ctx),
        _section_recommendations(ctx),
        _section_elo(ctx),
        [
            "## Files",
            "",
            "- [pairwise_table.md](pairwise_table.md): every judged case",
            "- [token_cost.md](token_cost.md): tokens and cost by role and model",
            "- [metrics.json](metrics.json): every number above, machine-readable",
            "- ../pairs/pair_results.jsonl, ../agent_runs.jsonl (the ledger), "
            "../agents/*.jsonl (transcripts)",
        ],
    ]
    return "\n\n".join("\n".join(s) for s in sections if s) + "\n"


# --------------------------------------------------------------------------------------------------
# metrics.json


def _canon(x: Any) -> Any:
    """Floats rounded to 6 decimals (no -0.0, NaN/inf as null), recursively; tuples as lists."""
    if isinstance(x, bool) or x is None or isinstance(x, int | str):
        return x
    if isinstance(x, float):
        if not math.isfinite(x):
            return None
        r = round(x, 6)
        return 0.0 if r == 0 else r
    if isinstance(x, dict):
        return {str(k): _canon(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_canon(v) for v in x]
    if isinstance(x, numbers.Integral):
        return int(x)
    if isinstance(x, numbers.Real):
        return _canon(float(x))
    return str(x)


def _est_json(e: Estimate) -> dict[str, Any]:
    return {"value": e.value, "n": e.n, "low": e.low, "high": e.high, "method": e.method}


def _metrics_block(ctx: ReportContext) -> dict[str, Any]:
    m = ctx.metrics
    out: dict[str, Any] = {name: _est_json(e) for name, e in m.metrics.items()}
    for agent, per in m.per_agent.items():
        for name, e in per.items():
            out[f"{name}({agent})"] = _est_json(e)
    for info in m.pairs.values():
        args = (info.agent_left, info.agent_right)
        for name in ("lrs", "flip_rate", "position_bias", "judge_error_rate"):
            try:
                out[f"{name}({', '.join(args)})"] = _est_json(m.lookup(name, args))
            except KeyError:
                continue
    for kind in ("repeats", "judges"):
        if kind in m.agreement.agreement:
            out[f"judge_agreement({kind})"] = _est_json(m.agreement.agreement[kind])
        if kind in m.agreement.kappa:
            out[f"judge_kappa({kind})"] = _est_json(m.agreement.kappa[kind])
    for judge, by_cls in m.agreement.accuracy.items():
        for cls, e in by_cls.items():
            out[f"judge_accuracy({judge})" if cls == "all" else f"judge_accuracy({judge}, {cls})"] = (
                _est_json(e)
            )
    return out


def render_metrics_json(ctx: ReportContext) -> str:
    """Every number of the reports as canonical JSON (sorted keys, 2-space indent, 6-decimal floats)."""
    m = ctx.metrics
    expected, recorded, missing = _cases(ctx)
    spend = spent_this_run(ctx.ledger)
    doc: dict[str, Any] = {
        "format_version": METRICS_FORMAT_VERSION,
        "suite": _suite(ctx),
        "metrics": _metrics_block(ctx),
        "gates": [
            {
                "expr": g.gate.canonical(),
                "status": g.status,
                "value": g.value,
                "low": g.low,
                "high": g.high,
                "n": g.n,
                "message": g.message,
            }
            for g in ctx.gates
        ],
        "spent_this_run": {
            **spend.to_json(),
            "per_role": {role: spent_this_run(ctx.ledger, role).to_json() for role in ROLES},
        },
        "cost_includes_retries": COST_INCLUDES_RETRIES,
        "costs": {
            # nominal only: the live/cached split is under spent_this_run (a cached re-run changes nothing)
            "per_role": {
                r: {k: v for k, v in c.to_json().items() if k != "cached_attempts"}
                for r, c in m.costs.per_role.items()
            },
            "per_model": [
                {
                    "role": c.role,
                    "model": c.model,
                    "calls": c.calls,
                    "attempts": c.attempts,
                    "failed": c.failed,
                    "input_tokens": c.input_tokens,
                    "output_tokens": c.output_tokens,
                    "cost": c.cost,
                    "usage_missing": c.usage_missing,
                }
                for c in model_costs(ctx.ledger)
            ],
            "total_cost": m.costs.total_cost,
            "successes": m.costs.successes,
            "cost_per_success": m.costs.cost_per_success,
            "judge_share": m.costs.judge_share,
            "prices": {
                mod: {"input_per_m": i, "output_per_m": o} for mod, (i, o) in sorted(_prices(ctx).items())
            },
        },
        "usage_missing_calls": sorted({x.call_id for x in ctx.ledger if x.usage_missing}),
        "cases": {"expected": expected, "recorded": recorded, "missing": expected - recorded},
        "missing_case_ids": missing,
        "tasks": {"total": _n_tasks(ctx), "judged": m.n_tasks, "categories": _categories(ctx)},
        "pairs": {pid: info.to_json() for pid, info in m.pairs.items()},
        "lrs_close_minus_distant_p_value": m.p_value,
        "flipped": [f.label() for f in m.flipped],
        "sat_but_failed_examples": [
            {"task_id": t, "agent": a, "sample": s} for t, a, s in m.sat_but_failed_examples
        ],
        "verbosity": m.verbosity.to_json(),
        "recommendations": [
            {
                "rule": r.rule.key,
                "text": r.rule.text(),
                "threshold": r.rule.threshold,
                "value": r.value,
                "fired": r.fired,
            }
            for r in recommendations(m)
        ],
        "close_threshold": m.close_threshold,
        "seed": m.seed,
        "bootstrap_rounds": m.rounds,
    }
    return json.dumps(_canon(doc), sort_keys=True, indent=2, ensure_ascii=False) + "\n"


# --------------------------------------------------------------------------------------------------
# Entry points


def render_reports(ctx: ReportContext) -> dict[str, str]:
    """Every report file of one suite, filename → text (see :data:`REPORT_FILES`); pure and deterministic."""
    return {
        "pairwise_table.md": render_pairwise_table(ctx),
        "token_cost.md": render_token_cost(ctx),
        "conclusion.md": render_conclusion(ctx),
        "metrics.json": render_metrics_json(ctx),
    }


_SUMMARY_METRICS: tuple[str, ...] = (
    "lrs",
    "lrs_close",
    "lrs_distant",
    "flip_rate",
    "position_bias",
    "judge_error_rate",
    "sat_but_failed_rate",
    "success_rate",
)


def render_summary(ctx: ReportContext) -> str:
    """A compact plain-text table for the terminal and GITHUB_STEP_SUMMARY (about 25 lines)."""
    m = ctx.metrics
    expected, recorded, missing = _cases(ctx)
    lines = [
        f"suite {_suite(ctx)}: {recorded}/{expected} cases recorded"
        + (f" ({len(missing)} missing)" if missing else "")
        + f", {_n_tasks(ctx)} tasks, {len(_declared_pairs(ctx))} pairs"
        + f", orders {ctx.meta.get('orders', 'both')}"
    ]
    rows: list[list[str]] = [["metric", "value", "95% interval", "n"]]
    for name in _SUMMARY_METRICS:
        e = m.metrics.get(name)
        rows.append([name, *_reorder(_estimate_cells(e))])
    d = m.lrs_close_minus_distant
    p = "" if m.p_value is None else f"  p={_rate(m.p_value)}"
    rows.append(["lrs_close - distant", _rate(d.value), _ci(d.low, d.high) + p, str(d.n)])
    lines += _text_table(rows, "lrlr")
    if ctx.gates:
        counts = Counter(g.status.upper() for g in ctx.gates)
        lines.append(
            "gates: "
            + ", ".join(f"{counts[s]} {s}" for s in ("PASS", "FAIL", "INCONCLUSIVE", "SKIPPED") if counts[s])
        )
        grows = [
            [g.status.upper(), g.gate.canonical(), _num(g.value), _ci(g.low, g.high, _num), f"n={g.n}"]
            for g in ctx.gates[:_MAX_SUMMARY_GATES]
        ]
        lines += ["  " + ln for ln in _text_table(grows, "llrlr")]
        if len(ctx.gates) > _MAX_SUMMARY_GATES:
            lines.append(f"  … and {len(ctx.gates) - _MAX_SUMMARY_GATES} more (see conclusion.md)")
    else:
        lines.append("gates: none declared")
    crow: list[list[str]] = [["role", "calls", "attempts", "input tok", "output tok", "cost"]]
    for role in ROLES:
        rc = m.costs.per_role.get(role)
        if rc is not None:
            crow.append(
                [
                    role,
                    _int(rc.calls),
                    _int(rc.attempts),
                    _int(rc.input_tokens),
                    _int(rc.output_tokens),
                    _usd(rc.cost),
                ]
            )
    crow.append(["total", "", "", "", "", _usd(m.costs.total_cost)])
    lines += _text_table(crow, "lrrrrr")
    spend = spent_this_run(ctx.ledger)
    lines.append(
        f"cost per success {_usd(m.costs.cost_per_success)} ({m.costs.successes} successes), "
        f"judge share {_pct(m.costs.judge_share)}"
    )
    lines.append(
        f"spent this run {_usd(spend.spent_usd)} ({spend.live_calls} live, {spend.cached_calls} cached calls)"
    )
    fired = [r for r in recommendations(m) if r.fired]
    lines.append(
        f"recommendations: {len(fired)} fired (see reports/conclusion.md)"
        if fired
        else "recommendations: none fired"
    )
    return "\n".join(lines) + "\n"


def _reorder(cells: list[str]) -> list[str]:
    """(value, n, interval) → (value, interval, n) for the summary's column order."""
    return [cells[0], cells[2], cells[1]]
