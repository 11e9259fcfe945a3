"""``elo.md`` and ``elo.json`` (docs/protocol.md#elo): the Elo table with intervals, tiers and Elo per
token, as text."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from itertools import pairwise
from typing import Any

from ..analysis.elo_report import EloReport, agent_tokens, finite, ordered_agents
from ..records import CaseRecord
from ..records.json_types import JSONObject
from .format import DASH, md_table, unsign_zero

__all__ = [
    "ELO_FORMAT_VERSION",
    "ci_text",
    "elo_json",
    "elo_text",
    "no_elo_reason",
    "render_elo_md",
    "render_no_elo",
    "tokens_text",
]

ELO_FORMAT_VERSION = 1
_MEASURABLE = ("improves", "diminishing returns")


# --------------------------------------------------------------------------------------------------
# Number formatting


def elo_text(x: float | None) -> str:
    return unsign_zero(f"{x:.1f}") if x is not None and finite(x) else DASH


def _signed(x: float | None) -> str:
    if x is None or not finite(x):
        return DASH
    text = f"{x:+.1f}"
    return text[1:] if float(text) == 0 else text


def _per_1k(x: float | None) -> str:
    return unsign_zero(f"{x:.2f}") if x is not None and finite(x) else DASH


def tokens_text(x: float | None) -> str:
    return f"{x:,.0f}" if x is not None and finite(x) else DASH


def ci_text(low: float | None, high: float | None, fmt: Any = elo_text) -> str:
    if low is None or high is None or not (finite(low) and finite(high)):
        return DASH
    return f"[{fmt(low)}, {fmt(high)}]"


def _with_ci(value: str, low: float | None, high: float | None, fmt: Any) -> str:
    """``value [low, high]``, or the value alone without an interval."""
    ci = ci_text(low, high, fmt)
    return value if ci == DASH or value == DASH else f"{value} {ci}"


# --------------------------------------------------------------------------------------------------
# elo.md


def _reading(rows: Sequence[JSONObject]) -> str:
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
    head = (
        f"Elo {move} from {elo_text(first['elo'])} ({first['tier']}) "
        f"to {elo_text(last['elo'])} ({last['tier']})"
    )
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
                f"({tokens_text(tok)} vs {tokens_text(ptok)}), so its ΔElo per 1k tokens is undefined."
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
                f"(ΔElo {_signed(row['delta_elo'])} {ci_text(lo, hi, _signed)})."
            )
        elif lo <= 0 <= hi:
            sentences.append(
                f"Tier {row['tier']}'s ΔElo interval {ci_text(lo, hi, _signed)} includes 0: "
                f"over {prev['tier']} it buys nothing measurable{extra}."
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


def _agents_table(report: EloReport) -> list[str]:
    """One row per agent: Elo, interval, rank, judged tasks and tokens per task."""
    res = report.result
    rows = []
    for a in ordered_agents(report):
        ts = agent_tokens(report, a)
        rows.append(
            [
                a,
                elo_text(res.elo[a]),
                ci_text(res.low[a], res.high[a]),
                str(res.rank[a]),
                str(report.judged_tasks.get(a, 0)),
                tokens_text(ts.tokens_per_task if ts else None),
                tokens_text(ts.agent_tokens_per_task if ts else None),
            ]
        )
    return md_table(
        ["agent", "Elo", "95% CI", "rank", "judged tasks", "tokens/task (all roles)", "tokens/task (agent)"],
        rows,
        "lrlrrrr",
    )


def _problems(report: EloReport) -> list[str]:
    """The fit's problems (or why there are none) and the notes."""
    res = report.result
    lines = ["", "## Problems and notes", ""]
    if res.problems:
        lines += [f"- Problem: {p}" for p in res.problems]
    else:
        lines.append(
            "- None with the fit: the comparison graph is connected and every agent both won and lost, "
            "so the maximum-likelihood estimate exists."
        )
    check = res.fit_check
    if check is not None and check.misfits:
        lines += [f"- Poor fit: {m.text()}." for m in check.misfits]
        who = ", ".join(check.poorly_fitted)
        lines.append(
            f"- One strength per agent cannot reproduce these results (intransitive or inconsistent "
            f"preferences): read the Elo of {who} with care; Elo gates on them are inconclusive."
        )
    return lines + [f"- Note: {n}" for n in [*res.notes, *report.notes]]


def _tiers(report: EloReport) -> list[str]:
    """Per compute family: a table of its tiers with Elo gains per token, and the rule-based reading."""
    lines = ["", "## Elo per token by compute tier", "", "![Elo vs tokens](elo.svg)", ""]
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
                tokens_text(r["tokens_per_task"]),
                _with_ci(elo_text(r["elo"]), r["low"], r["high"], elo_text),
                _with_ci(_signed(r["delta_elo"]), r["delta_low"], r["delta_high"], _signed),
                _per_1k(r["delta_elo_per_1k_tokens"]),
                r["verdict"],
            ]
            for r in fam_rows
        ]
        lines += md_table(
            ["tier", "agent", "tokens/task", "Elo [95% CI]", "ΔElo [95% CI]", "ΔElo/1k tokens", "verdict"],
            table,
            "llrrrrl",
        )
        lines += ["", _reading(fam_rows), ""]
    return lines


def _per_task(report: EloReport) -> list[str]:
    """Elo fitted within each task alone, for the tasks that allow a fit."""
    res = report.result
    fitted = sorted(res.per_task)
    lines = ["## Per-task strengths", ""]
    lines.append(
        f"Elo fitted within each task alone (no interval). {len(fitted)} of {res.n_tasks} tasks allow a fit; "
        "tasks where an agent won or lost every comparison, or with fewer than two agents, are left out."
    )
    if fitted:
        agents = ordered_agents(report)
        lines.append("")
        lines += md_table(
            ["task", *agents],
            [[t, *(elo_text(res.per_task[t].get(a)) for a in agents)] for t in fitted],
            "l" + "r" * len(agents),
        )
    return lines


def _interval_text(report: EloReport) -> str:
    """How the Elo intervals were made (docs/protocol.md#elo)."""
    res = report.result
    if res.method == "cluster-t":
        return (
            "cluster-robust (tasks as clusters) standard errors with a Student-t quantile on "
            f"{res.n_tasks - 1} degrees of freedom."
        )
    if res.method == "bootstrap-tasks":
        return (
            f"2.5/97.5 percentiles of {res.rounds} bootstrap resamples of tasks (seed {report.seed}), "
            "because the fit has no finite maximum."
        )
    return "none (fewer than two tasks)." if res.n_tasks < 2 else "none."


def render_elo_md(report: EloReport) -> str:
    """``elo.md``: agents with Elo, interval, rank and tokens per task; fit problems; Elo per token by compute
    tier with a rule-based reading per family; per-task strengths; link to ``elo.svg``."""
    res = report.result
    title = f"# Elo and test-time compute: {report.suite}" if report.suite else "# Elo and test-time compute"
    lines = [
        title,
        "",
        f"Bradley-Terry strengths on an Elo scale (anchor {elo_text(res.anchor)} = mean strength), pooled "
        f"over {res.n_tasks} tasks and {res.n_comparisons} judged comparisons (both blind orders count, "
        f"a tie counts half each way, judge errors are left out). 95% intervals: {_interval_text(report)} "
        "Rank = 1 + the number of "
        "agents whose interval lies entirely above this agent's. Tokens per task are nominal (every "
        "attempt, cache hits included), averaged over the agent's tasks: *all roles* = its agent and "
        "simulated-user calls plus half of the judge tokens of every case it was judged in; *agent* = "
        "its own calls only.",
        "",
        "## Agents",
        "",
    ]
    lines += _agents_table(report) + _problems(report) + _tiers(report) + _per_task(report)
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


def elo_json(report: EloReport) -> JSONObject:
    """``elo.json``: agents (Elo, interval, rank, tokens), how the intervals were made (``interval_method``:
    ``cluster-t``, ``bootstrap-tasks`` or ``none``), tier rows, per-task strengths, problems and notes;
    floats rounded to 6 decimals, non-finite numbers as null."""
    res = report.result
    agents: JSONObject = {}
    for a in res.agents:
        ts = agent_tokens(report, a)
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
        "interval_method": res.method,
        "agents": agents,
        "families": {f: [list(t) for t in tiers] for f, tiers in report.families.items()},
        "tiers": [{k: row[k] for k in keys} for row in report.tiers],
        "per_task": {t: dict(sorted(v.items())) for t, v in sorted(res.per_task.items())},
        "problems": list(res.problems),
        "notes": [*res.notes, *report.notes],
        "fit_check": None if res.fit_check is None else res.fit_check.to_json(),
    }
    rounded: JSONObject = _round(out)
    return rounded


# --------------------------------------------------------------------------------------------------
# When no scale can be fitted


def no_elo_reason(records: Sequence[CaseRecord]) -> str:
    """Why no Elo scale could be fitted on these case records (the fit needs two agents with a verdict)."""
    if not records:
        return "no case was judged in this run"
    errors = sum(1 for r in records if r.judge_choice == "error")
    if errors == len(records):
        return (
            f"every verdict is an error ({errors} of {len(records)} cases): there is no comparison to fit; "
            "see conclusion.md for the judge errors"
        )
    return "fewer than two agents have a judged (non-error) comparison"


def render_no_elo(suite: str, reason: str) -> tuple[str, str]:
    """``elo.md`` and ``elo.json`` when no scale could be fitted: written anyway, saying why."""
    md = f"# Elo and test-time compute: {suite}\n\nNo Elo scale could be fitted: {reason}.\n"
    doc = {
        "format_version": ELO_FORMAT_VERSION,
        "suite": suite,
        "fitted": False,
        "reason": reason,
        "agents": {},
    }
    return md, json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
