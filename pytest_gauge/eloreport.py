"""The Elo side of a suite's reports (SPEC §9): judged cases to Bradley-Terry comparisons, ledger tokens per
task, Elo per token by compute tier, and ``elo.md`` / ``elo.json`` / ``elo.svg`` plus a gate source.

Tokens per task are nominal (every attempt with usage, cache hits included) and averaged over the agent's
tasks. "All roles" charges an agent its transcripts (agent and simulated-user calls, plus any other call
filed under its transcript work) and half of the judge tokens of every case it was judged in.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import pairwise
from types import MappingProxyType
from typing import Any
from xml.sax.saxutils import escape

import numpy as np

from .elo import Comparison, EloResult, bootstrap_difference, fit_elo, tier_table
from .gates import Term
from .metrics import Estimate, SuiteMetrics
from .records import CaseRecord, LedgerRecord

__all__ = [
    "ELO_FORMAT_VERSION",
    "ELO_METRICS",
    "EloReport",
    "GateSource",
    "TokenStats",
    "build_elo_report",
    "comparisons_from_records",
    "elo_json",
    "render_elo_md",
    "render_elo_svg",
    "token_stats",
]

ELO_FORMAT_VERSION = 1
ELO_METRICS: tuple[str, ...] = ("elo", "delta_elo", "elo_per_1k_tokens")
"""Gate metric names served from the Elo fit; each takes one agent, e.g. ``elo(agent_x@bo4)``."""

NO_ELO = "elo needs at least two agents with judged cases"
DASH = "–"
_NO_FAMILIES: Mapping[str, Sequence[tuple[str, str]]] = MappingProxyType({})
_MEASURABLE = ("improves", "diminishing returns")


# --------------------------------------------------------------------------------------------------
# Inputs: comparisons and tokens


def comparisons_from_records(records: Sequence[CaseRecord]) -> list[Comparison]:
    """One comparison per non-error judged case (both blind orders count): a = declared left agent,
    ``score_a`` 1 if the judge preferred it, 0 if it preferred the right agent, 0.5 on a tie."""
    out: list[Comparison] = []
    for r in records:
        if r.judge_choice == "error" or r.agent_left == r.agent_right:
            continue
        preferred = r.preferred_agent
        score = 0.5 if preferred is None else (1.0 if preferred == r.agent_left else 0.0)
        out.append(Comparison(r.task_id, r.agent_left, r.agent_right, score))
    return out


@dataclass(frozen=True)
class TokenStats:
    """Nominal tokens per task of one agent, averaged over its ``tasks`` (all roles, and its own calls)."""

    tokens_per_task: float
    agent_tokens_per_task: float
    tasks: int


def _transcript_key(x: LedgerRecord) -> tuple[str, str] | None:
    """(task, agent) of a ``transcript/<task>/<agent>/<sample>`` work, or None."""
    prefix = f"transcript/{x.task_id}/"
    if x.work.startswith(prefix):
        agent, sep, _sample = x.work[len(prefix) :].rpartition("/")
        return (x.task_id, agent) if sep and agent else None
    parts = x.work.split("/")
    if len(parts) >= 4 and parts[0] == "transcript":
        return "/".join(parts[1:-2]), parts[-2]
    return None


def token_stats(ledger: Sequence[LedgerRecord], records: Sequence[CaseRecord]) -> dict[str, TokenStats]:
    """Per agent: mean over its tasks of its transcripts' tokens plus half the judge tokens of its cases
    (``tokens_per_task``) and of its own agent-role tokens (``agent_tokens_per_task``).

    An agent's tasks are those it has transcript calls or case records in. Judge calls of a case without a
    record cannot be attributed and are left out.
    """
    cases = {r.case_id: (r.task_id, r.agent_left, r.agent_right) for r in records}
    tasks: dict[str, set[str]] = {}
    total: dict[str, float] = {}
    own: dict[str, float] = {}
    for r in records:
        tasks.setdefault(r.agent_left, set()).add(r.task_id)
        tasks.setdefault(r.agent_right, set()).add(r.task_id)
    for x in ledger:
        key = _transcript_key(x) if x.work.startswith("transcript/") else None
        if key is not None:
            task, agent = key
            tasks.setdefault(agent, set()).add(task)
            if x.usage is None:
                continue
            total[agent] = total.get(agent, 0.0) + x.usage.total_tokens
            if x.role == "agent":
                own[agent] = own.get(agent, 0.0) + x.usage.total_tokens
        elif x.work.startswith("judge/") and x.usage is not None:
            case = cases.get(x.work[len("judge/") :].rsplit("/", 2)[0])
            if case is None:
                continue
            _task, left, right = case
            for agent in {left, right}:
                total[agent] = total.get(agent, 0.0) + x.usage.total_tokens / 2.0
    out: dict[str, TokenStats] = {}
    for agent in sorted(tasks):
        n = len(tasks[agent])
        out[agent] = TokenStats(total.get(agent, 0.0) / n, own.get(agent, 0.0) / n, n)
    return out


# --------------------------------------------------------------------------------------------------
# The report


@dataclass
class EloReport:
    """Everything ``elo.md``/``elo.json``/``elo.svg`` and Elo gates need.

    ``tiers`` are :func:`elo.tier_table` rows (tokens per task = all roles, None without token data);
    ``families`` keep only tiers
    whose agent has comparisons (dropped ones are listed in ``notes``); ``judged_tasks`` counts, per agent,
    the tasks with at least one non-error comparison of it.
    """

    result: EloResult
    tokens: dict[str, TokenStats]
    families: dict[str, list[tuple[str, str]]]
    tiers: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)
    judged_tasks: dict[str, int] = field(default_factory=dict)
    seed: int = 0
    suite: str = ""


def build_elo_report(
    records: Sequence[CaseRecord],
    ledger: Sequence[LedgerRecord],
    *,
    families: Mapping[str, Sequence[tuple[str, str]]] = _NO_FAMILIES,
    seed: int = 0,
    rounds: int = 1000,
    anchor: float = 1000.0,
) -> EloReport | None:
    """Fit Elo on the judged cases, join tokens per task, and tabulate compute tiers; None when fewer
    than two agents have non-error comparisons."""
    comparisons = comparisons_from_records(records)
    agents = {c.a for c in comparisons} | {c.b for c in comparisons}
    if len(agents) < 2:
        return None
    result = fit_elo(comparisons, anchor=anchor, rounds=rounds, seed=seed)
    tokens = token_stats(ledger, records)
    notes: list[str] = []
    kept: dict[str, list[tuple[str, str]]] = {}
    for family, tiers in families.items():
        rows = [(str(t), str(a)) for t, a in tiers]
        missing = [f"{t} ({a})" for t, a in rows if a not in result.elo]
        if missing:
            notes.append(
                f"family {family!r}: tier(s) {', '.join(missing)} have no judged comparisons and are left out"
            )
        rows = [(t, a) for t, a in rows if a in result.elo]
        if rows:
            kept[family] = rows
    per_task_tokens = {a: s.tokens_per_task for a, s in tokens.items() if s.tokens_per_task > 0}
    judged: dict[str, set[str]] = {}
    for c in comparisons:
        judged.setdefault(c.a, set()).add(c.task_id)
        judged.setdefault(c.b, set()).add(c.task_id)
    return EloReport(
        result=result,
        tokens=tokens,
        families=kept,
        tiers=tier_table(kept, result, per_task_tokens),
        notes=notes,
        judged_tasks={a: len(judged[a]) for a in sorted(judged)},
        seed=seed,
        suite=records[0].suite if records else "",
    )


def _agent_tokens(report: EloReport, agent: str) -> TokenStats | None:
    return report.tokens.get(agent)


def _ordered_agents(report: EloReport) -> list[str]:
    """Agents by Elo, best first (name breaks ties)."""
    return sorted(report.result.agents, key=lambda a: (-report.result.elo[a], a))


def _prev_rows(report: EloReport) -> dict[str, tuple[dict[str, Any], dict[str, Any] | None]]:
    """Each tier agent's row and the previous tier's row of its family (first family wins)."""
    out: dict[str, tuple[dict[str, Any], dict[str, Any] | None]] = {}
    prev: dict[str, Any] | None = None
    family: str | None = None
    for row in report.tiers:
        if row["family"] != family:
            family, prev = row["family"], None
        out.setdefault(row["agent"], (row, prev))
        prev = row
    return out


# --------------------------------------------------------------------------------------------------
# Number formatting


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def _unsign_zero(text: str) -> str:
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def _elo(x: float | None) -> str:
    return _unsign_zero(f"{x:.1f}") if x is not None and _finite(x) else DASH


def _signed(x: float | None) -> str:
    if x is None or not _finite(x):
        return DASH
    text = f"{x:+.1f}"
    return text[1:] if float(text) == 0 else text


def _per_1k(x: float | None) -> str:
    return _unsign_zero(f"{x:.2f}") if x is not None and _finite(x) else DASH


def _tokens(x: float | None) -> str:
    return f"{x:,.0f}" if x is not None and _finite(x) else DASH


def _ci(low: float | None, high: float | None, fmt: Any = _elo) -> str:
    if low is None or high is None or not (_finite(low) and _finite(high)):
        return DASH
    return f"[{fmt(low)}, {fmt(high)}]"


def _with_ci(value: str, low: float | None, high: float | None, fmt: Any) -> str:
    """``value [low, high]``, or the value alone without an interval."""
    ci = _ci(low, high, fmt)
    return value if ci == DASH or value == DASH else f"{value} {ci}"


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], align: str) -> list[str]:
    marks = ["---:" if a == "r" else "---" for a in align]
    out = ["| " + " | ".join(_cell(h) for h in header) + " |", "| " + " | ".join(marks) + " |"]
    out.extend("| " + " | ".join(_cell(c) for c in row) + " |" for row in rows)
    return out


# --------------------------------------------------------------------------------------------------
# elo.md


def _reading(rows: Sequence[dict[str, Any]]) -> str:
    """One paragraph on a family's tiers, chosen by rules from the numbers (see ``render_elo_md``)."""
    if len(rows) < 2:
        return f"Only one tier ({rows[0]['tier']}): nothing to compare." if rows else ""
    first, last = rows[0], rows[-1]
    if last["elo"] > first["elo"]:
        move = "rises"
    elif last["elo"] < first["elo"]:
        move = "falls"
    else:
        move = "stays level"
    head = f"Elo {move} from {_elo(first['elo'])} ({first['tier']}) to {_elo(last['elo'])} ({last['tier']})"
    rates = [
        (r["tier"], r["delta_elo_per_1k_tokens"])
        for r in rows[1:]
        if r["delta_elo_per_1k_tokens"] is not None
    ]
    if len(rates) >= 2:
        (ta, a), (tb, b) = rates[0], rates[-1]
        way = "falls" if b < a else ("rises" if b > a else "stays level")
        link = " while" if way == "falls" else ", and"
        head += f"{link} ΔElo per 1k tokens {way} from {_per_1k(a)} ({ta}) to {_per_1k(b)} ({tb})"
    elif len(rates) == 1:
        head += f"; ΔElo per 1k tokens is {_per_1k(rates[0][1])} ({rates[0][0]})"
    verdicts = [r["verdict"] for r in rows[1:]]
    if "diminishing returns" in verdicts:
        head += f": diminishing returns from tier {rows[1 + verdicts.index('diminishing returns')]['tier']}"
    elif all(v == "improves" for v in verdicts):
        head += ": every tier buys a measurable gain, at a rate that does not fall"
    sentences = [head + "."]
    for prev, row in pairwise(rows):
        tok, ptok = row["tokens_per_task"], prev["tokens_per_task"]
        if tok is None or ptok is None:
            sentences.append(
                f"Tier {row['tier'] if tok is None else prev['tier']} has no token data, so "
                f"{row['tier']}'s ΔElo per 1k tokens is undefined."
            )
        elif tok <= ptok:
            sentences.append(
                f"Tier {row['tier']} does not use more tokens per task than {prev['tier']} "
                f"({_tokens(tok)} vs {_tokens(ptok)}), so its ΔElo per 1k tokens is undefined."
            )
        if row["verdict"] != "no measurable gain":
            continue
        lo, hi = row["delta_low"], row["delta_high"]
        extra = f" for {tok - ptok:+,.0f} tokens per task" if tok is not None and ptok is not None else ""
        if lo is None or hi is None:
            sentences.append(
                f"Tier {row['tier']} has no ΔElo interval, so its gain over {prev['tier']} is unmeasured."
            )
        elif hi < 0:
            sentences.append(
                f"Tier {row['tier']} is measurably worse than {prev['tier']} "
                f"(ΔElo {_signed(row['delta_elo'])} {_ci(lo, hi, _signed)})."
            )
        elif lo <= 0 <= hi:
            sentences.append(
                f"Tier {row['tier']}'s ΔElo interval {_ci(lo, hi, _signed)} includes 0: over {prev['tier']} "
                f"it buys nothing measurable{extra}."
            )
        else:
            sentences.append(f"Tier {row['tier']} shows no measurable gain over {prev['tier']}.")
    last_gain = max((i for i, r in enumerate(rows) if r["verdict"] in _MEASURABLE), default=0)
    after = rows[last_gain + 1 :]
    if after and all(r["verdict"] == "no measurable gain" and r["delta_low"] is not None for r in after):
        stop = rows[last_gain]["tier"]
        sentences.append(
            f"No tier above {stop} adds measurable Elo over the tier below it, so {stop} is where the tokens "
            "stop paying here."
        )
    return " ".join(sentences)


def render_elo_md(report: EloReport) -> str:
    """``elo.md``: agents with Elo, interval, rank and tokens per task; fit problems; Elo per token by compute
    tier with a rule-based reading per family; per-task strengths; link to ``elo.svg``."""
    res = report.result
    title = f"# Elo and test-time compute: {report.suite}" if report.suite else "# Elo and test-time compute"
    lines = [
        title,
        "",
        f"Bradley-Terry strengths on an Elo scale (anchor {_elo(res.anchor)} = mean strength), pooled "
        f"over {res.n_tasks} tasks and {res.n_comparisons} judged comparisons (both blind orders count, "
        "a tie counts half each way, judge errors are left out). 95% intervals: 2.5/97.5 percentiles of "
        f"{res.rounds} bootstrap resamples of tasks (seed {report.seed}). Rank = 1 + the number of "
        "agents whose interval lies entirely above this agent's. Tokens per task are nominal (every "
        "attempt, cache hits included), averaged over the agent's tasks: *all roles* = its agent and "
        "simulated-user calls plus half of the judge tokens of every case it was judged in; *agent* = "
        "its own calls only.",
        "",
        "## Agents",
        "",
    ]
    rows = []
    for a in _ordered_agents(report):
        ts = _agent_tokens(report, a)
        rows.append(
            [
                a,
                _elo(res.elo[a]),
                _ci(res.low[a], res.high[a]),
                str(res.rank[a]),
                str(report.judged_tasks.get(a, 0)),
                _tokens(ts.tokens_per_task if ts else None),
                _tokens(ts.agent_tokens_per_task if ts else None),
            ]
        )
    lines += _table(
        ["agent", "Elo", "95% CI", "rank", "judged tasks", "tokens/task (all roles)", "tokens/task (agent)"],
        rows,
        "lrlrrrr",
    )
    lines += ["", "## Problems and notes", ""]
    if res.problems:
        lines += [f"- Problem: {p}" for p in res.problems]
    else:
        lines.append(
            "- None with the fit: the comparison graph is connected and every agent both won and lost, "
            "so the maximum-likelihood estimate exists."
        )
    lines += [f"- Note: {n}" for n in [*res.notes, *report.notes]]
    lines += ["", "## Elo per token by compute tier", "", "![Elo vs tokens](elo.svg)", ""]
    if not report.families:
        lines.append(
            "No compute tiers declared (agents built with `best_of` or `reflection`); nothing to compare."
        )
    for family in report.families:
        fam_rows = [r for r in report.tiers if r["family"] == family]
        lines += [f"### Family `{family}`", ""]
        table = [
            [
                r["tier"],
                r["agent"],
                _tokens(r["tokens_per_task"]),
                _with_ci(_elo(r["elo"]), r["low"], r["high"], _elo),
                _with_ci(_signed(r["delta_elo"]), r["delta_low"], r["delta_high"], _signed),
                _per_1k(r["delta_elo_per_1k_tokens"]),
                r["verdict"],
            ]
            for r in fam_rows
        ]
        lines += _table(
            ["tier", "agent", "tokens/task", "Elo [95% CI]", "ΔElo [95% CI]", "ΔElo/1k tokens", "verdict"],
            table,
            "llrrrrl",
        )
        lines += ["", _reading(fam_rows), ""]
    lines += ["## Per-task strengths", ""]
    fitted = sorted(res.per_task)
    lines.append(
        f"Elo fitted within each task alone (no interval). {len(fitted)} of {res.n_tasks} tasks allow a fit; "
        "tasks where an agent won or lost every comparison, or with fewer than two agents, are left out."
    )
    if fitted:
        agents = _ordered_agents(report)
        lines.append("")
        lines += _table(
            ["task", *agents],
            [[t, *(_elo(res.per_task[t].get(a)) for a in agents)] for t in fitted],
            "l" + "r" * len(agents),
        )
    return "\n".join(lines).rstrip() + "\n"


# --------------------------------------------------------------------------------------------------
# elo.json


def _round(x: Any) -> Any:
    if isinstance(x, float):
        if not math.isfinite(x):
            return None
        value = round(x, 6)
        return 0.0 if value == 0 else value
    if isinstance(x, dict):
        return {k: _round(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_round(v) for v in x]
    return x


def elo_json(report: EloReport) -> dict[str, Any]:
    """``elo.json``: agents (Elo, interval, rank, tokens), tier rows, per-task strengths, problems and notes;
    floats rounded to 6 decimals, non-finite numbers as null."""
    res = report.result
    agents: dict[str, Any] = {}
    for a in res.agents:
        ts = _agent_tokens(report, a)
        agents[a] = {
            "elo": res.elo[a],
            "low": res.low[a],
            "high": res.high[a],
            "rank": res.rank[a],
            "judged_tasks": report.judged_tasks.get(a, 0),
            "tokens_per_task": ts.tokens_per_task if ts else None,
            "agent_tokens_per_task": ts.agent_tokens_per_task if ts else None,
            "token_tasks": ts.tasks if ts else 0,
        }
    keys = (
        "family", "tier", "agent", "tokens_per_task", "elo", "low", "high",
        "delta_elo", "delta_low", "delta_high", "delta_elo_per_1k_tokens", "verdict",
    )  # fmt: skip
    out = {
        "format_version": ELO_FORMAT_VERSION,
        "suite": report.suite,
        "anchor": res.anchor,
        "rounds": res.rounds,
        "seed": report.seed,
        "n_tasks": res.n_tasks,
        "n_comparisons": res.n_comparisons,
        "l2": res.l2,
        "agents": agents,
        "families": {f: [list(t) for t in tiers] for f, tiers in report.families.items()},
        "tiers": [{k: row[k] for k in keys} for row in report.tiers],
        "per_task": {t: dict(sorted(v.items())) for t, v in sorted(res.per_task.items())},
        "problems": list(res.problems),
        "notes": [*res.notes, *report.notes],
    }
    rounded: dict[str, Any] = _round(out)
    return rounded


# --------------------------------------------------------------------------------------------------
# elo.svg

_W, _H = 760, 480
_X0, _X1, _Y0, _Y1 = 72.0, 548.0, 52.0, 412.0  # plot area: left, right, top, bottom
_PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
_PLAIN = "#555555"


def _esc(text: str) -> str:
    return escape(text, {'"': "&quot;"})


def _f(x: float) -> str:
    return _unsign_zero(f"{x:.1f}")


def _nice_step(span: float, target: int = 6) -> float:
    raw = span / target
    mag = 10.0 ** math.floor(math.log10(raw))
    for m in (1.0, 2.0, 2.5, 5.0, 10.0):
        if m * mag >= raw:
            return m * mag
    return 10.0 * mag


def _linear_ticks(lo: float, hi: float) -> list[float]:
    step = _nice_step(hi - lo)
    start = math.ceil(lo / step - 1e-9)
    ticks = []
    i = start
    while i * step <= hi + 1e-9 * step:
        ticks.append(i * step)
        i += 1
    return ticks


def _tick_text(v: float, step: float) -> str:
    decimals = max(0, -math.floor(math.log10(step))) if step < 1 else 0
    return _unsign_zero(f"{v:.{decimals}f}")


def _tok_text(v: float) -> str:
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if v >= scale:
            return f"{v / scale:.3g}{suffix}"
    return f"{v:.3g}"


def _log_ticks(lo: float, hi: float) -> list[float]:
    """Ticks for a log axis over [lo, hi] (values): 1-2-5 per decade, decades only when dense, or linear
    ticks for a narrow range."""
    d0, d1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    cands = [m * 10.0**d for d in range(d0, d1 + 1) for m in (1.0, 2.0, 5.0)]
    ticks = [v for v in cands if lo <= v <= hi]
    if len(ticks) > 8:
        ticks = [v for v in ticks if math.log10(v).is_integer()]
    if len(ticks) < 2:
        ticks = [v for v in _linear_ticks(lo, hi) if v > 0]
    return ticks


def render_elo_svg(report: EloReport) -> str:
    """``elo.svg``: Elo (y) against tokens per task, all roles (x, log scale), with 95% interval bars; one
    line per compute family joining its tiers in order, other agents as grey points. Self-contained and
    deterministic (fixed number formatting)."""
    res = report.result
    tokens = {a: s.tokens_per_task for a, s in report.tokens.items() if s.tokens_per_task > 0}
    in_family = {a for tiers in report.families.values() for _t, a in tiers}
    plain = [a for a in sorted(res.agents) if a not in in_family]
    shown = [a for a in res.agents if a in tokens]
    hidden = sorted(a for a in res.agents if a not in tokens)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" viewBox="0 0 {_W} {_H}" '
        'font-family="sans-serif" font-size="12">',
        f'<rect x="0" y="0" width="{_W}" height="{_H}" fill="#ffffff"/>',
    ]
    title = "Elo vs tokens per task" + (f": {report.suite}" if report.suite else "")
    out.append(f'<text x="{_W / 2:.1f}" y="28.0" text-anchor="middle" font-size="16">{_esc(title)}</text>')

    if not shown:
        out.append(
            f'<text x="{(_X0 + _X1) / 2:.1f}" y="{(_Y0 + _Y1) / 2:.1f}" text-anchor="middle">'
            "no token data: nothing to plot</text>"
        )
        out.append("</svg>")
        return "\n".join(out) + "\n"

    def elo_bounds(a: str) -> tuple[float, float]:
        lo, hi = res.low[a], res.high[a]
        return (lo, hi) if _finite(lo) and _finite(hi) else (res.elo[a], res.elo[a])

    lx = [math.log10(tokens[a]) for a in shown]
    x_lo, x_hi = min(lx), max(lx)
    if x_hi - x_lo < math.log10(2.0):
        mid = (x_lo + x_hi) / 2
        x_lo, x_hi = mid - math.log10(2.0) / 2, mid + math.log10(2.0) / 2
    pad = 0.06 * (x_hi - x_lo)
    x_lo, x_hi = x_lo - pad, x_hi + pad
    ys = [v for a in shown for v in (*elo_bounds(a), res.elo[a])]
    y_lo, y_hi = min(ys), max(ys)
    if y_hi - y_lo < 20.0:
        mid = (y_lo + y_hi) / 2
        y_lo, y_hi = mid - 10.0, mid + 10.0
    pad = 0.08 * (y_hi - y_lo)
    y_lo, y_hi = y_lo - pad, y_hi + pad

    def px(tok: float) -> float:
        return _X0 + (math.log10(tok) - x_lo) / (x_hi - x_lo) * (_X1 - _X0)

    def py(elo: float) -> float:
        return _Y1 - (elo - y_lo) / (y_hi - y_lo) * (_Y1 - _Y0)

    # grid, ticks and axes
    out.append('<g class="axes" stroke="#e5e5e5">')
    y_ticks = _linear_ticks(y_lo, y_hi)
    y_step = y_ticks[1] - y_ticks[0] if len(y_ticks) > 1 else 1.0
    for v in y_ticks:
        out.append(f'<line x1="{_f(_X0)}" y1="{_f(py(v))}" x2="{_f(_X1)}" y2="{_f(py(v))}"/>')
    x_ticks = _log_ticks(10.0**x_lo, 10.0**x_hi)
    for v in x_ticks:
        out.append(f'<line x1="{_f(px(v))}" y1="{_f(_Y0)}" x2="{_f(px(v))}" y2="{_f(_Y1)}"/>')
    out.append("</g>")
    out.append(
        f'<rect x="{_f(_X0)}" y="{_f(_Y0)}" width="{_f(_X1 - _X0)}" height="{_f(_Y1 - _Y0)}" '
        'fill="none" stroke="#333333"/>'
    )
    for v in y_ticks:
        out.append(
            f'<text x="{_f(_X0 - 6)}" y="{_f(py(v) + 4)}" text-anchor="end">{_tick_text(v, y_step)}</text>'
        )
    for v in x_ticks:
        out.append(f'<text x="{_f(px(v))}" y="{_f(_Y1 + 18)}" text-anchor="middle">{_tok_text(v)}</text>')
    out.append(
        f'<text x="{_f((_X0 + _X1) / 2)}" y="{_f(_Y1 + 40)}" text-anchor="middle">'
        "tokens per task, all roles (log scale)</text>"
    )
    out.append(
        f'<text x="18.0" y="{_f((_Y0 + _Y1) / 2)}" text-anchor="middle" '
        f'transform="rotate(-90 18.0 {_f((_Y0 + _Y1) / 2)})">Elo (95% bootstrap interval)</text>'
    )

    def point(a: str, color: str, label: str) -> list[str]:
        x, y = px(tokens[a]), py(res.elo[a])
        lo, hi = elo_bounds(a)
        tip = f"{a}: Elo {_elo(res.elo[a])} {_ci(res.low[a], res.high[a])}, {_tokens(tokens[a])} tokens/task"
        return [
            f'<line class="ci" x1="{_f(x)}" y1="{_f(py(lo))}" x2="{_f(x)}" y2="{_f(py(hi))}" '
            f'stroke="{color}"/>',
            f'<line x1="{_f(x - 4)}" y1="{_f(py(lo))}" x2="{_f(x + 4)}" y2="{_f(py(lo))}" stroke="{color}"/>',
            f'<line x1="{_f(x - 4)}" y1="{_f(py(hi))}" x2="{_f(x + 4)}" y2="{_f(py(hi))}" stroke="{color}"/>',
            f'<circle cx="{_f(x)}" cy="{_f(y)}" r="4" fill="{color}"><title>{_esc(tip)}</title></circle>',
            f'<text x="{_f(x + 7)}" y="{_f(y - 6)}" fill="{color}" font-size="11">{_esc(label)}</text>',
        ]

    legend: list[tuple[str, str]] = []
    for i, (family, tiers) in enumerate(report.families.items()):
        color = _PALETTE[i % len(_PALETTE)]
        pts = [(t, a) for t, a in tiers if a in tokens]
        d = " ".join(
            f"{'M' if j == 0 else 'L'} {_f(px(tokens[a]))} {_f(py(res.elo[a]))}"
            for j, (_t, a) in enumerate(pts)
        )
        out.append(f'<g class="family" data-family="{_esc(family)}">')
        if pts:
            out.append(
                f'<path class="series" data-family="{_esc(family)}" d="{d}" fill="none" stroke="{color}" '
                'stroke-width="2"/>'
            )
        for t, a in pts:
            out += point(a, color, t)
        out.append("</g>")
        legend.append((color, f"{family}: {' → '.join(t for t, _a in tiers)}"))
    plain_shown = [a for a in plain if a in tokens]
    if plain_shown:
        out.append('<g class="agents">')
        for a in plain_shown:
            out += point(a, _PLAIN, a)
        out.append("</g>")
        legend.append((_PLAIN, "other agents"))

    ly = _Y0 + 8
    for color, text in legend:
        out.append(f'<rect x="{_f(_X1 + 20)}" y="{_f(ly - 9)}" width="12" height="12" fill="{color}"/>')
        out.append(f'<text x="{_f(_X1 + 38)}" y="{_f(ly + 1)}">{_esc(text)}</text>')
        ly += 20
    if hidden:
        out.append(
            f'<text x="{_f(_X1 + 20)}" y="{_f(ly + 1)}" fill="#888888">not shown (no token data): '
            f"{_esc(', '.join(hidden))}</text>"
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------------------
# Gates


def _elo_help() -> str:
    return "Elo metrics: elo(agent), delta_elo(agent), elo_per_1k_tokens(agent)"


class GateSource:
    """A gate ``MetricSource`` over the suite metrics and the Elo report: ``elo``, ``delta_elo`` and
    ``elo_per_1k_tokens`` (one agent each) come from the Elo fit, every other name from the metrics."""

    def __init__(self, metrics: SuiteMetrics, elo: EloReport | None) -> None:
        self.metrics = metrics
        self.elo = elo
        self._tiers = _prev_rows(elo) if elo is not None else {}

    # -- Elo terms --------------------------------------------------------------------------------

    def _report(self) -> EloReport:
        if self.elo is None:
            raise KeyError(NO_ELO)
        return self.elo

    def _agent(self, name: str, args: tuple[str, ...]) -> str:
        report = self._report()
        if len(args) != 1:
            raise KeyError(f"{name} takes one agent, e.g. {name}(agent_x); got {len(args)} arguments")
        agent = args[0].strip()
        if agent not in report.result.elo:
            known = ", ".join(sorted(report.result.agents))
            raise KeyError(f"{name}({agent}): unknown agent {agent!r}; agents: {known}")
        if name != "elo" and agent not in self._tiers:
            tiers = ", ".join(sorted(self._tiers)) or "none"
            raise KeyError(
                f"{name}({agent}): unknown tier, {agent!r} is in no compute family; tiers: {tiers}"
            )
        return agent

    def _tasks(self, *agents: str) -> int:
        report = self._report()
        return min(report.judged_tasks.get(a, 0) for a in agents)

    def _elo_term(self, name: str, args: tuple[str, ...]) -> tuple[Estimate, np.ndarray]:
        """The estimate of an Elo term and its per-resample values (empty without bootstrap)."""
        report = self._report()
        res = report.result
        agent = self._agent(name, tuple(args))
        i = res.agents.index(agent)
        has = res.samples.shape[0] > 0
        if name == "elo":
            low, high = res.low[agent], res.high[agent]
            ok = _finite(low) and _finite(high)
            est = Estimate(
                res.elo[agent],
                self._tasks(agent),
                low if ok else None,
                high if ok else None,
                "bootstrap-tasks" if ok else "none",
            )
            return est, res.samples[:, i] if has else np.zeros(0)
        row, prev = self._tiers[agent]
        if prev is None:
            return Estimate(None, self._tasks(agent), None, None, "none"), np.zeros(0)
        n = self._tasks(agent, prev["agent"])
        j = res.agents.index(prev["agent"])
        delta = res.samples[:, i] - res.samples[:, j] if has else np.zeros(0)
        if name == "delta_elo":
            ok = row["delta_low"] is not None and row["delta_high"] is not None
            method = "bootstrap-tasks" if ok else "none"
            return Estimate(row["delta_elo"], n, row["delta_low"], row["delta_high"], method), delta
        rate = row["delta_elo_per_1k_tokens"]
        if rate is None:
            return Estimate(None, n, None, None, "none"), np.zeros(0)
        per_1k = (row["tokens_per_task"] - prev["tokens_per_task"]) / 1000.0
        low, high = row["delta_low"], row["delta_high"]
        if low is None or high is None:
            return Estimate(rate, n, None, None, "none"), delta / per_1k
        return Estimate(rate, n, low / per_1k, high / per_1k, "bootstrap-tasks"), delta / per_1k

    # -- MetricSource -----------------------------------------------------------------------------

    def lookup(self, name: str, args: tuple[str, ...] = ()) -> Estimate:
        """An Elo term or, for any other name, the suite metric; KeyError names the known agents/metrics."""
        if name in ELO_METRICS:
            return self._elo_term(name, tuple(args))[0]
        try:
            return self.metrics.lookup(name, tuple(args))
        except KeyError as err:
            reason = err.args[0] if err.args and isinstance(err.args[0], str) else str(err)
            if "unknown metric" in reason:
                raise KeyError(f"{reason}; {_elo_help()}") from None
            raise

    def difference(self, left: Term, right: Term) -> Estimate:
        """``left - right``: two Elo terms from the same bootstrap resamples, two suite metrics from theirs;
        an Elo term minus a suite metric is a KeyError."""
        l_elo, r_elo = left.name in ELO_METRICS, right.name in ELO_METRICS
        if not l_elo and not r_elo:
            return self.metrics.difference(left, right)
        if l_elo != r_elo:
            raise KeyError(
                f"cannot subtract {right} from {left}: one comes from the Elo fit, the other from the case "
                "metrics (no shared resamples)"
            )
        report = self._report()
        if left.name == right.name == "elo":
            a = self._agent("elo", tuple(left.args))
            b = self._agent("elo", tuple(right.args))
            return replace(bootstrap_difference(report.result, a, b), n=self._tasks(a, b))
        ea, sa = self._elo_term(left.name, tuple(left.args))
        eb, sb = self._elo_term(right.name, tuple(right.args))
        n = min(ea.n, eb.n)
        if ea.value is None or eb.value is None:
            return Estimate(None, n, None, None, "none")
        value = ea.value - eb.value
        if sa.size == 0 or sb.size == 0:
            return Estimate(value, n, None, None, "none")
        low, high = np.percentile(sa - sb, [2.5, 97.5])
        return Estimate(value, n, float(low), float(high), "bootstrap-tasks")

    def drivers(self, name: str, args: tuple[str, ...] = ()) -> list[str]:
        """What drove a suite metric (see ``SuiteMetrics.drivers``); none for Elo terms."""
        if name in ELO_METRICS:
            return []
        return self.metrics.drivers(name, tuple(args))
