"""Token and cost accounting: per-model ledger totals, unpriced-model warnings, what this run spent, and
``token_cost.md``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..analysis.metrics import COST_INCLUDES_RETRIES
from ..records import ROLES, LedgerRecord, roles_in
from ..records.json_types import JSONObject
from ..records.ledger_columns import per_ledger
from ..records.prices import Price
from ..records.totals import TotalsBuilder, ledger_totals, role_totals
from .common import ReportContext, price_basis, prices_of, suite_name
from .format import (
    DASH,
    VOLATILE_BEGIN,
    VOLATILE_END,
    fmt_int,
    fmt_pct,
    fmt_per_success,
    fmt_price,
    fmt_task_ci,
    fmt_usd,
    md_table,
    task_ci_basis,
    usd_at_least,
)

__all__ = [
    "KeyCost",
    "Latency",
    "ModelCost",
    "Spend",
    "Watch",
    "key_variable_costs",
    "latency_figures",
    "model_costs",
    "render_token_cost",
    "served_warnings",
    "spent_this_run",
    "unpriced_warnings",
    "watch_figures",
]


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


@dataclass(frozen=True)
class Watch:
    """What the method asks to watch per (role, model) when scaling test-time compute: nominal tokens per
    task, the share of attempts that were retries, and the rate limits met (429 attempts and the waits
    the gateway asked for, in seconds). Latencies are volatile: :class:`Latency`, in the reports' volatile
    parts."""

    role: str
    model: str
    tokens_per_task: float
    retry_rate: float
    rate_limited: int
    asked_wait_s: float


@per_ledger
def watch_figures(ledger: Sequence[LedgerRecord]) -> tuple[Watch, ...]:
    """One :class:`Watch` per (role, model), in :func:`model_costs`' order."""
    tasks: dict[tuple[str, str], set[str]] = {}
    waits: dict[tuple[str, str], tuple[int, float]] = {}
    for x in ledger:
        key: tuple[str, str] = (str(x.role), x.model)
        tasks.setdefault(key, set()).add(x.task_id)
        limited, asked = waits.get(key, (0, 0.0))
        if x.http_status == 429:
            waits[key] = (limited + 1, asked + (x.retry_after or 0.0))
    out = []
    for c in model_costs(ledger):
        limited, asked = waits.get((c.role, c.model), (0, 0.0))
        out.append(
            Watch(
                role=c.role,
                model=c.model,
                tokens_per_task=(c.input_tokens + c.output_tokens)
                / max(1, len(tasks.get((c.role, c.model), ()))),
                retry_rate=(c.attempts - c.calls) / c.attempts if c.attempts else 0.0,
                rate_limited=limited,
                asked_wait_s=round(asked, 3),
            )
        )
    return tuple(out)


def _watch(ledger: Sequence[LedgerRecord]) -> list[str]:
    """token_cost.md's per-(role, model) figures to watch when scaling (tokens per task, retries, waits)."""
    rows = [
        [w.role, w.model, f"{w.tokens_per_task:.1f}", f"{w.retry_rate:.3f}", fmt_int(w.rate_limited),
         f"{w.asked_wait_s:g}"]
        for w in watch_figures(ledger)
    ]  # fmt: skip
    if not rows:
        return []
    lines = ["", "## What to watch per role and model", ""]
    lines.append(
        "Tokens per task (nominal, every attempt), the share of attempts that were retries, and the rate"
        " limits met: 429 answers and the seconds the gateway asked to wait (`retry_after`). Latencies"
        " vary from run to run: they end this file, in its volatile section."
    )
    lines.append("")
    lines += md_table(
        ["role", "model", "tokens per task", "retry rate", "429s", "asked wait (s)"], rows, "llrrrr"
    )
    return lines


@dataclass(frozen=True)
class Latency:
    """Seconds from sending to the last byte of the successful live attempts of one (role, model): how
    many, the median and the 95th percentile (nearest rank). Volatile: they vary from run to run."""

    role: str
    model: str
    attempts: int
    p50: float
    p95: float

    def to_json(self) -> JSONObject:
        return {
            "role": self.role,
            "model": self.model,
            "attempts": self.attempts,
            "p50": self.p50,
            "p95": self.p95,
        }


def _rank(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q`` quantile of sorted ``values`` (a value that occurred, never interpolated)."""
    return values[max(0, math.ceil(q * len(values)) - 1)]


@per_ledger
def latency_figures(ledger: Sequence[LedgerRecord]) -> tuple[Latency, ...]:
    """p50 and p95 latency of the successful live attempts (cache hits left out) per (role, model), in
    :func:`model_costs`' order; a (role, model) with none has no row."""
    seen: dict[tuple[str, str], list[float]] = {}
    for x in ledger:
        if x.status == "ok" and not x.cache_hit and x.latency_s is not None:
            seen.setdefault((str(x.role), x.model), []).append(float(x.latency_s))
    out = []
    for c in model_costs(ledger):
        values = sorted(seen.get((c.role, c.model), ()))
        if values:
            out.append(
                Latency(
                    c.role, c.model, len(values), round(_rank(values, 0.5), 3), round(_rank(values, 0.95), 3)
                )
            )
    return tuple(out)


@dataclass(frozen=True)
class KeyCost:
    """This run's live attempts sent with one key variable's key (its name; ``key_variable`` on the
    ledger line): calls, attempts, tokens and cost, what that key's bill at the gateway should show."""

    key_variable: str
    roles: tuple[str, ...]
    calls: int
    attempts: int
    tokens: int
    cost: float | None
    usage_missing: int

    def to_json(self) -> JSONObject:
        return {
            "roles": list(self.roles),
            "calls": self.calls,
            "attempts": self.attempts,
            "tokens": self.tokens,
            "cost": self.cost,
            "usage_missing": self.usage_missing,
        }


@per_ledger
def key_variable_costs(ledger: Sequence[LedgerRecord]) -> tuple[KeyCost, ...]:
    """This run's live attempts (cache hits cost the key nothing) totalled per key variable, by name;
    attempts without one (the simulator, a replay) are left out, so a run without keys has none."""
    groups: dict[str, tuple[TotalsBuilder, set[str]]] = {}
    for x in ledger:
        if x.key_variable and not x.cache_hit:
            builder, seen = groups.setdefault(x.key_variable, (TotalsBuilder(), set()))
            builder.add(x)
            seen.add(str(x.role))
    out = []
    order: dict[str, int] = {r: i for i, r in enumerate(ROLES)}
    for name, (builder, seen) in sorted(groups.items(), key=lambda kv: kv[0]):
        totals = builder.build()
        roles = tuple(sorted(seen, key=lambda r: (order.get(r, 99), r)))
        nominal = totals.nominal
        tokens = nominal.input_tokens + nominal.output_tokens
        out.append(
            KeyCost(name, roles, totals.calls, nominal.records, tokens, nominal.cost, totals.usage_missing)
        )
    return tuple(out)


@per_ledger
def model_costs(ledger: Sequence[LedgerRecord]) -> tuple[ModelCost, ...]:
    """Per (role, model) totals over every attempt (retries and failed requests included), roles in order
    agent, user_sim, judge. Cost is unknown if any attempt reported usage without a price."""
    groups: dict[tuple[str, str], TotalsBuilder] = {}
    for rec in ledger:
        groups.setdefault((rec.role, rec.model), TotalsBuilder()).add(rec)
    order: dict[str, int] = {r: i for i, r in enumerate(ROLES)}
    out = []
    for (role, model), builder in sorted(groups.items(), key=lambda kv: (order.get(kv[0][0], 99), kv[0])):
        totals = builder.build()
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
    return tuple(out)


@per_ledger
def served_warnings(ledger: Sequence[LedgerRecord]) -> tuple[str, ...]:
    """One warning line per (requested, served) pair: the gateway answered with another model (a proxy's
    fallback), recorded as ``served_model`` and priced as what was served."""
    pairs: dict[tuple[str, str, str], int] = {}
    for x in ledger:
        if x.served_model:
            key = (x.model, x.served_model, x.role)
            pairs[key] = pairs.get(key, 0) + 1
    return tuple(
        f"warning: the gateway answered {role} calls for {model!r} with the model {served!r} ({n} attempts):"
        " recorded as served_model and priced as what was served"
        for (model, served, role), n in sorted(pairs.items())
    )


def unpriced_warnings(ledger: Sequence[LedgerRecord]) -> list[str]:
    """One warning line per model that reported usage without a configured price (its cost is unknown,
    never $0), then where prices are configured; empty when every model used is priced. The served-model
    warnings (:func:`served_warnings`) come first."""
    served = served_warnings(ledger)
    roles: dict[str, list[str]] = {}
    attempts: dict[str, int] = {}
    for c in model_costs(ledger):
        if c.unpriced_attempts:
            roles.setdefault(c.model, []).append(c.role)
            attempts[c.model] = attempts.get(c.model, 0) + c.unpriced_attempts
    if not roles:
        return list(served)
    return [
        *served,
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

    def to_json(self) -> JSONObject:
        """Plain JSON form (``metrics.json``'s ``spent_this_run``)."""
        return {
            "live_calls": self.live_calls,
            "cached_calls": self.cached_calls,
            "live_tokens": self.live_tokens,
            "cached_tokens": self.cached_tokens,
            "spent_usd": self.spent_usd,
            "possibly_billed": self.possibly_billed,
        }


@per_ledger
def spent_this_run(ledger: Sequence[LedgerRecord], role: str | None = None) -> Spend:
    """Live vs cached attempts, tokens and cost actually spent this run (cache hits spend 0)."""
    totals = ledger_totals(ledger) if role is None else role_totals(ledger, role)
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


def _role_price_basis(costs: Sequence[ModelCost], role: str, prices: dict[str, Price]) -> str:
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


def _by_role(ctx: ReportContext, per_model: Sequence[ModelCost], prices: dict[str, Price]) -> list[str]:
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
        f"(total cost / {costs.successes} successful transcripts; "
        f"{task_ci_basis(ctx.metrics.metrics.get('cost_per_success'))})",
        f"- Judge share of cost: {fmt_pct(costs.judge_share)}"
        f"{fmt_task_ci(ctx.metrics.metrics.get('judge_cost_share'), fmt_pct)}",
        "- Total and per-role costs are exact accounting figures of this run (no interval).",
    ]
    if not ctx.ledger:
        lines.append("- No ledger records: costs are unknown.")
    return lines


def _by_model(per_model: Sequence[ModelCost], prices: dict[str, Price]) -> list[str]:
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
        *(_spend_row(role, spent_this_run(ledger, role)) for role in roles_in(ledger)),
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
            "These responses reported no `usage` (or zero prompt tokens for a prompt that was not empty, what"
            " a proxy passes on when its upstream sent none): their tokens are not counted and they add"
            " nothing to the cost (never estimated): every cost they touch is a lower bound (at least)."
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
    lines += _prompt_cache(ctx.ledger, prices)
    lines += _watch(ctx.ledger)
    lines += _spent(ctx.ledger)
    lines += _by_key_variable(ctx.ledger)
    lines += _without_usage(ctx.ledger)
    lines += _gateway_reports(ctx.ledger)
    lines += _latency(ctx.ledger)
    return "\n".join(lines) + "\n"


def _prompt_cache(ledger: Sequence[LedgerRecord], prices: dict[str, Price]) -> list[str]:
    """The provider's prompt cache per (role, model): input tokens read from it and written to it (of
    which to a one-hour cache) and the prices they were costed at; only when a response reported any."""
    totals: dict[tuple[str, str], list[int]] = {}
    for x in ledger:
        u = x.usage
        if u is None or not ((u.cached_input_tokens or 0) or (u.cache_write_tokens or 0)):
            continue
        row = totals.setdefault((x.role, x.model), [0, 0, 0])
        row[0] += u.cached_input_tokens or 0
        row[1] += u.cache_write_tokens or 0
        row[2] += min(u.cache_write_1h_tokens or 0, u.cache_write_tokens or 0)
    if not totals:
        return []
    rows = []
    for (role, model), (reads, writes, hour) in sorted(totals.items()):
        p = prices.get(model)
        read_at = DASH if p is None else fmt_price(p.cached_input if p.cached_input is not None else p.input)
        write_at = DASH if p is None else f"{fmt_price(p.write_price)} (1 h: {fmt_price(p.write_1h_price)})"
        rows.append([role, model, fmt_int(reads), fmt_int(writes), fmt_int(hour), read_at, write_at])
    lines = ["", "## Prompt cache", ""]
    lines.append(
        "Input tokens the provider read from its prompt cache and wrote to it (as its responses reported"
        " them), with the prices per million tokens they are costed at: reads at the `cached_input` price"
        " (else the input price), writes at `cache_write` (else 1.25 × input), one-hour writes at"
        " `cache_write_1h` (else 2 × input). They are part of the input tokens above."
    )
    lines.append("")
    header = ["role", "model", "cache reads", "cache writes", "of which 1 h", "read price", "write price"]
    return lines + md_table(header, rows, "llrrrll")


def _by_key_variable(ledger: Sequence[LedgerRecord]) -> list[str]:
    """Costs grouped by the key variable each attempt's key came from (only when any was recorded)."""
    keys = key_variable_costs(ledger)
    if not keys:
        return []
    lines = ["", "## Spent this run by key variable", ""]
    lines.append(
        "Each attempt's ledger line names the environment variable whose key it sent (`key_variable`, never"
        " the key); this run's live attempts per variable (cache hits cost nothing): with a key per role,"
        " each row is what that key's bill at the gateway should show for this run."
    )
    lines.append("")
    rows = [
        [k.key_variable, ", ".join(k.roles), fmt_int(k.calls), fmt_int(k.attempts), fmt_int(k.tokens),
         usd_at_least(k.cost, k.usage_missing)]
        for k in keys
    ]  # fmt: skip
    lines += md_table(["key variable", "roles", "calls", "attempts", "tokens", "cost"], rows, "llrrrr")
    return lines


def _latency(ledger: Sequence[LedgerRecord]) -> list[str]:
    """The volatile section that ends token_cost.md: p50/p95 latency of successful attempts."""
    figures = latency_figures(ledger)
    lines = ["", VOLATILE_BEGIN, "## Latency of successful attempts (varies from run to run)", ""]
    lines.append(
        "Seconds from sending to the last byte of each successful live attempt (cache hits left out), per"
        " role and model: the median (p50) and the 95th percentile (p95, nearest rank). They differ from run"
        " to run, so they sit between the `gauge:volatile` markers, which comparisons of runs ignore"
        " (docs/protocol.md#volatile-fields)."
    )
    lines.append("")
    if figures:
        rows = [[x.role, x.model, fmt_int(x.attempts), f"{x.p50:.3f}", f"{x.p95:.3f}"] for x in figures]
        lines += md_table(["role", "model", "attempts", "p50 (s)", "p95 (s)"], rows, "llrrr")
    else:
        lines.append("No successful live attempt in this run (every answer came from the cache).")
    lines.append(VOLATILE_END)
    return lines


def _gateway_reports(ledger: Sequence[LedgerRecord]) -> list[str]:
    """What the gateway said that the plugin could not verify: another model served, retries a proxy
    made upstream, the cost it reported beside the plugin's own (only when any of them happened)."""
    served = served_warnings(ledger)
    retried, reported = [], []
    for x in ledger:  # one pass: each pass over the ledger's columns makes every record again
        if not x.cache_hit:
            if x.gateway_retries:
                retried.append(x)
            if x.gateway_cost is not None:
                reported.append(x)
    if not (served or retried or reported):
        return []
    lines = ["", "## What the gateway reported (not verified)", ""]
    lines += [f"- {w.removeprefix('warning: ')}" for w in served]
    if retried:
        n = sum(x.gateway_retries or 0 for x in retried)
        lines.append(
            f"- the gateway retried upstream {n} times within {len(retried)} attempts"
            " (`x-litellm-attempted-retries`): counted as possibly billed"
        )
    if reported:
        theirs = sum(x.gateway_cost or 0.0 for x in reported)
        ours = [x.cost for x in reported]
        mine = fmt_usd(None if any(c is None for c in ours) else sum(c or 0.0 for c in ours))
        lines.append(
            f"- the gateway reported a cost of {fmt_usd(theirs)} for {len(reported)} live attempts"
            f" (`x-litellm-response-cost`); the plugin's own cost of the same attempts is {mine}"
        )
    return lines
