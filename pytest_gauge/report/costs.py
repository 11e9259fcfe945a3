"""Token and cost accounting: per-model ledger totals, unpriced-model warnings, what this run spent, and
``token_cost.md``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..analysis.metrics import COST_INCLUDES_RETRIES
from ..gateway.ledger import ledger_totals
from ..gateway.prices import Price
from ..records import ROLES, LedgerRecord
from .common import ReportContext, price_basis, prices_of, suite_name
from .format import DASH, fmt_int, fmt_pct, fmt_per_success, fmt_task_ci, fmt_usd, md_table, usd_at_least

__all__ = ["ModelCost", "Spend", "model_costs", "render_token_cost", "spent_this_run", "unpriced_warnings"]


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
    order: dict[str, int] = {r: i for i, r in enumerate(ROLES)}
    out = []
    for (role, model), recs in sorted(groups.items(), key=lambda kv: (order.get(kv[0][0], 99), kv[0])):
        totals = ledger_totals(recs)
        nominal = totals.nominal
        out.append(
            ModelCost(
                role=role,
                model=model,
                calls=totals.calls,
                attempts=nominal.records,
                failed=totals.failed,
                input_tokens=nominal.input_tokens,
                output_tokens=nominal.output_tokens,
                cost=nominal.cost,
                priced_cost=nominal.priced_cost,
                unpriced_attempts=nominal.unpriced,
                usage_missing=totals.usage_missing,
                cached_attempts=totals.cached.records,
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
        "set prices per million tokens with the gauge_prices ini key (MODEL INPUT_PER_M OUTPUT_PER_M "
        "[CACHED_INPUT_PER_M]), --gauge-prices FILE, --gauge-prices genai-prices or GAUGE_PRICES",
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
    totals = ledger_totals(x for x in ledger if role is None or x.role == role)
    return Spend(
        live_calls=totals.live.records,
        cached_calls=totals.cached.records,
        live_tokens=totals.live.total_tokens,
        cached_tokens=totals.cached.total_tokens,
        spent_usd=totals.live.cost,
        possibly_billed=totals.possibly_billed,
    )


# --------------------------------------------------------------------------------------------------
# token_cost.md


def _role_price_basis(costs: list[ModelCost], role: str, prices: dict[str, Price]) -> str:
    models = [c.model for c in costs if c.role == role]
    if not models:
        return DASH
    if len(models) == 1:
        return price_basis(prices, models[0])
    return "; ".join(f"{m}: {price_basis(prices, m)}" for m in models)


_INTRO = (
    "Every gateway attempt in the ledger counts: retries and failed requests are included in the calls, "
    "attempts, tokens and cost"
    + ("" if COST_INCLUDES_RETRIES else " (not: this build excludes them)")
    + ". Costs are nominal: cached answers count at what they cost when they were made "
    "(what this run actually spent is under “Spent this run”). Token counts come from each response's "
    "`usage`; a call without usage is flagged `usage_missing`, listed below, and never estimated into "
    "the cost. A model without a configured price has cost `unknown`, never $0."
)


def _by_role(ctx: ReportContext, per_model: list[ModelCost], prices: dict[str, Price]) -> list[str]:
    """The per-role table with its total row, then cost per success and the judge's share."""
    costs = ctx.metrics.costs
    rows = []
    tot_calls = tot_attempts = tot_in = tot_out = tot_missing = 0
    for role in ROLES:
        rc = costs.per_role.get(role)
        if rc is None:
            continue
        rows.append(
            [
                role,
                fmt_int(rc.calls),
                fmt_int(rc.attempts),
                fmt_int(rc.retries),
                fmt_int(rc.input_tokens),
                fmt_int(rc.output_tokens),
                _role_price_basis(per_model, role, prices),
                fmt_usd(rc.cost),
                fmt_int(rc.usage_missing),
            ]
        )
        tot_calls += rc.calls
        tot_attempts += rc.attempts
        tot_in += rc.input_tokens
        tot_out += rc.output_tokens
        tot_missing += rc.usage_missing
    total_text = usd_at_least(costs.total_cost, tot_missing)
    if costs.total_cost is None and ctx.ledger:
        known = math.fsum(c.priced_cost for c in per_model)
        total_text = f"unknown (priced part {fmt_usd(known)})"
    rows.append(
        [
            "**total**",
            fmt_int(tot_calls),
            fmt_int(tot_attempts),
            fmt_int(tot_attempts - tot_calls),
            fmt_int(tot_in),
            fmt_int(tot_out),
            "",
            total_text,
            fmt_int(tot_missing),
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
    lines = ["", "## By role", "", *md_table(header, rows, "lrrrrrlrr")]
    lines += [
        "",
        f"- Cost per success: {fmt_per_success(costs.cost_per_success, costs.successes, costs.total_cost)}"
        f"{fmt_task_ci(ctx.metrics.metrics.get('cost_per_success'), fmt_usd)} "
        f"(total cost / {costs.successes} successful transcripts; 95% interval resampling tasks)",
        f"- Judge share of cost: {fmt_pct(costs.judge_share)}"
        f"{fmt_task_ci(ctx.metrics.metrics.get('judge_cost_share'), fmt_pct)}",
        "- Total and per-role costs are exact accounting figures of this run (no interval).",
    ]
    if not ctx.ledger:
        lines.append("- No ledger records: costs are unknown.")
    return lines


def _by_model(per_model: list[ModelCost], prices: dict[str, Price]) -> list[str]:
    """The per-(role, model) table and a line per unpriced model; nothing without ledger records."""
    if not per_model:
        return []
    lines = ["", "## By model", ""]
    mrows = [
        [
            c.role,
            c.model,
            fmt_int(c.calls),
            fmt_int(c.attempts),
            fmt_int(c.failed),
            fmt_int(c.input_tokens),
            fmt_int(c.output_tokens),
            price_basis(prices, c.model),
            fmt_usd(c.cost),
        ]
        for c in per_model
    ]
    lines += md_table(
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
    return lines


def _spend_row(label: str, s: Spend) -> list[str]:
    return [
        label,
        fmt_int(s.live_calls),
        fmt_int(s.cached_calls),
        fmt_int(s.live_tokens),
        fmt_int(s.cached_tokens),
        fmt_usd(s.spent_usd),
    ]


def _spent(ledger: Sequence[LedgerRecord]) -> list[str]:
    """Live versus cached calls per role and what this run actually spent."""
    lines = ["", "## Spent this run", ""]
    lines.append(
        "Live calls reached the gateway in this run; cached calls were answered from the response cache "
        "and spent nothing."
    )
    lines.append("")
    total = spent_this_run(ledger)
    srows = [
        *(_spend_row(role, spent_this_run(ledger, role)) for role in ROLES),
        _spend_row("**total**", total),
    ]
    lines += md_table(
        ["role", "live calls", "cached calls", "live tokens", "cached tokens", "spent"], srows, "lrrrrr"
    )
    lines.append("")
    if total.live_calls == 0 and total.cached_calls > 0:
        lines.append("Fully cached run: nothing was spent ($0).")
    else:
        live_missing = sum(1 for x in ledger if x.usage_missing and not x.cache_hit)
        spent = usd_at_least(total.spent_usd, live_missing)
        lines.append(f"Spent this run (an exact accounting figure): {spent}.")
    if total.possibly_billed:
        lines.append(
            f"{total.possibly_billed} live attempts (timeouts, bad responses, attempts interrupted in flight)"
            " may have been billed without reporting usage: possibly spent, not in the spent total."
        )
    return lines


def _without_usage(ledger: Sequence[LedgerRecord]) -> list[str]:
    """The first 20 attempts whose response reported no usage."""
    missing = sorted((x for x in ledger if x.usage_missing), key=LedgerRecord.sort_key)
    lines = ["", f"## Calls without usage ({len(missing)})", ""]
    if missing:
        lines.append(
            "These responses reported no `usage`: their tokens are not counted and they add nothing to the "
            "cost (never estimated)."
        )
        lines.append("")
        lines += md_table(
            ["call_id", "attempt", "role", "model", "status"],
            [[x.call_id, str(x.attempt), x.role, x.model, x.status] for x in missing[:20]],
            "lrlll",
        )
        if len(missing) > 20:
            lines.append(f"\n… and {len(missing) - 20} more (see agent_runs.jsonl).")
    else:
        lines.append("Every response reported its usage.")
    return lines


def render_token_cost(ctx: ReportContext) -> str:
    """Role × calls × tokens × price basis × cost, totals, cost per success, judge share, spent this run."""
    prices = prices_of(ctx)
    per_model = model_costs(ctx.ledger)
    lines = [f"# Token and cost accounting: {suite_name(ctx)}", "", _INTRO]
    lines += _by_role(ctx, per_model, prices)
    lines += _by_model(per_model, prices)
    lines += _spent(ctx.ledger)
    lines += _without_usage(ctx.ledger)
    return "\n".join(lines) + "\n"
