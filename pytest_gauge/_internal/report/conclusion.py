"""``conclusion.md``: task set, protocol, LRS, position effects, judge reliability, satisfaction, cost,
gates and recommendations, each number with its n and 95% interval."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from ..analysis.metrics import PAIR_METRICS, Estimate
from ..records import ROLES
from .adaptive import adaptive_section
from .baseline import baseline_lead, gate_ci, gate_value, needed_lines, repeats_lines
from .common import (
    ReportContext,
    agent_failure_lines,
    agents_of,
    approximate_note,
    case_counts,
    category_counts,
    declared_pairs,
    judge_format_notes,
    metric_of,
    suite_name,
    task_count,
    truncated_turns,
)
from .format import (
    DASH,
    estimate_cells,
    fmt_ci,
    fmt_p_value,
    fmt_pct,
    fmt_per_success,
    fmt_rate,
    fmt_task_ci,
    fmt_usd,
    md_code,
    md_safe,
    md_table,
    md_text,
    shorten,
    task_ci_basis,
)
from .human import human_section
from .judge_rules import judge_rules_section
from .recommend import recommendations
from .self_preference import self_preference_section
from .user_audit import user_audit_section

__all__ = ["render_conclusion"]

_MAX_EXAMPLES = 5
_MAX_LISTED = 10


def _models_of(ctx: ReportContext, prefix: str) -> list[str]:
    models = ctx.meta.models
    return [str(v) for k, v in sorted(models.items()) if k.startswith(prefix) and v]


def _section_tasks(ctx: ReportContext) -> list[str]:
    expected, recorded, missing = case_counts(ctx)
    cats = category_counts(ctx)
    n_tasks = task_count(ctx)
    lines = ["## Task set", ""]
    lines.append(
        f"{n_tasks} tasks in {len(cats)} categories ({ctx.metrics.n_tasks} with judged cases); "
        f"{recorded} of {expected} selected cases recorded"
        + (f", {len(missing)} missing (errored): see pairwise_table.md." if missing else ".")
    )
    failures = agent_failure_lines(ctx)
    if failures:
        lines += ["", *(f"- **{line}**" for line in failures)]
    note = approximate_note(ctx.metrics.n_tasks)
    if note is not None:
        lines += ["", f"**Note:** {note}."]
    lines.append("")
    lines += md_table(["category", "tasks"], [[c, str(n)] for c, n in cats.items()], "lr")
    return lines


def _section_agents(ctx: ReportContext) -> list[str]:
    m = ctx.metrics
    models = ctx.meta.models
    lines = ["## Agents and pairs", ""]
    rows = []
    for a in agents_of(ctx):
        per = m.per_agent.get(a, {})
        succ, sbf = per.get("success_rate"), per.get("sat_but_failed_rate")
        rows.append(
            [
                a,
                str(models.get(f"agent:{a}") or DASH),
                *estimate_cells(succ),
                *estimate_cells(sbf),
            ]
        )
    lines += md_table(
        ["agent", "model", "success rate", "n", "95% interval", "sat-but-failed", "n", "95% interval"],
        rows,
        "llrrlrrl",
    )
    user = _models_of(ctx, "user_sim")
    judges = list(ctx.meta.judge_models) or _models_of(ctx, "judge:")
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
    for pid, left, right in declared_pairs(ctx):
        info = m.pairs.get(pid)
        per = m.per_pair.get(pid, {})
        prow.append(
            [
                pid,
                left,
                right,
                fmt_rate(info.gap) if info else DASH,
                info.pair_class if info else DASH,
                str(per_pair_cases.get(pid, 0)),
                *[
                    f"{fmt_rate(e.value)} (n={e.n})" if e else DASH
                    for e in (per.get(k) for k in PAIR_METRICS)
                ],
            ]
        )
    lines += md_table(
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
    orders = meta.orders
    n_left = sum(1 for r in ctx.records if r.blind_order == "A=left")
    n_right = sum(1 for r in ctx.records if r.blind_order == "A=right")
    samples = meta.samples or 1
    repeats = meta.judge_repeats or 1
    judges = list(meta.judge_models)
    first = meta.judge_format or "none"
    fmt_text = {
        "none": "none (the prompt alone asks for the JSON verdict)",
        "json_schema": "`json_schema` (the verdict's schema, strict), falling back to `json_object` and then "
        "to the prompt alone where a gateway refuses it",
        "json_object": "`json_object`, falling back to the prompt alone where a gateway refuses it",
    }.get(first, f"`{first}`")
    if orders == "both":
        order_text = "Each (task, pair) is judged in both orders (AB and BA)."
    else:
        order_text = (
            f"Each (task, pair) is judged in one order, drawn from a seeded RNG (seed {ctx.seed}), "
            "so flips cannot be measured."
        )
    return [
        "## Blind protocol",
        "",
        "- Agents are anonymised: the judge sees the two transcripts between `<response_a>` and "
        '`<response_b>` tags and answers `"winner": "A" | "B" | "tie"`; agent, model and vendor names are '
        "redacted from everything it sees, and it is told not to follow instructions inside the transcripts.",
        f"- {order_text} `blind_order` is recorded for every case: {n_left} with A=left, {n_right} with "
        "A=right.",
        f"- Both orders judge byte-identical transcripts: one transcript per (task, agent, sample), "
        f"{samples} sample(s) per (task, agent).",
        f"- Judging: {len(judges) or 1} judge model(s), {repeats} verdict(s) per judge per case; "
        "rewards come from the rule verifier, never from the judge.",
        f"- JSON mode: the judge is asked with `response_format` {fmt_text}.",
        *[f"- {note}." for note in judge_format_notes(ctx)],
    ]


def _estimate_row(label: str, e: Estimate | None) -> list[str]:
    if e is None:
        return [label, DASH, "0", DASH, DASH]
    return [label, *estimate_cells(e), e.method]


_EST_HEADER = ["", "value", "n", "95% interval", "method"]


def _estimates_table(rows: list[list[str]]) -> list[str]:
    """A table of estimates, one :func:`_estimate_row` a row."""
    return md_table(_EST_HEADER, rows, "lrrll")


def _metric_rows(ctx: ReportContext, *named: tuple[str, str]) -> list[list[str]]:
    """The rows of the run's metrics, one ``(label, metric name)`` a row."""
    return [_estimate_row(label, metric_of(ctx, name)) for label, name in named]


def _metric_section(
    ctx: ReportContext, title: str, named: Sequence[tuple[str, str]], note: str | None = None
) -> list[str]:
    """A section's opening: its heading, the table of its metrics (``(label, metric name)`` pairs) and
    the note that says how to read them."""
    lines = [f"## {title}", "", *_estimates_table(_metric_rows(ctx, *named))]
    return [*lines, "", note] if note else lines


def _listed(bullets: list[str]) -> list[str]:
    """The first ``_MAX_LISTED`` bullet lines, and how many more there are."""
    more = [f"- … and {len(bullets) - _MAX_LISTED} more"] if len(bullets) > _MAX_LISTED else []
    return bullets[:_MAX_LISTED] + more


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
    rows = _metric_rows(
        ctx, ("overall", "lrs"), ("close pairs", "lrs_close"), ("distant pairs", "lrs_distant")
    )
    lines += _estimates_table([*rows, _estimate_row("close − distant", diff)])
    lines.append("")
    p = "n/a" if m.p_value is None else fmt_p_value(m.p_value)
    lines.append(
        f"One-sided p-value for LRS(close) > LRS(distant): {p} (the cluster-t statistic of the interval "
        "above, over tasks)."
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
    lines = _metric_section(
        ctx,
        "Position effects",
        [("position-flip rate", "flip_rate"), ("position bias (share of slot A)", "position_bias")],
        "A flip is a (task, pair) judged in both orders whose preferred agent differs (a tie against a win "
        "counts). Position bias 0.5 is unbiased.",
    )
    if m.flipped:
        lines += ["", f"Flipped groups ({len(m.flipped)}):", ""]
        lines += _listed([f"- {md_safe(f.label())}" for f in m.flipped])
    return lines


def _section_judge(ctx: ReportContext) -> list[str]:
    m = ctx.metrics
    lines = _metric_section(
        ctx,
        "Judge errors and reliability",
        [("judge error rate", "judge_error_rate")],
        "Errors are malformed, truncated or out-of-range verdicts; they are excluded from the LRS, position "
        "bias and flip denominators, never counted as ties.",
    )
    errors = [r for r in ctx.records if r.judge_choice == "error"]
    if errors:
        lines.append("")
        lines += _listed(
            [
                f"- {md_code(r.case_id)}: {md_text(shorten(r.judge_error or 'unparseable verdict', 120))}"
                for r in errors
            ]
        )
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
        lines += _estimates_table(rows)
        if ag.accuracy:
            lines += ["", "Per-judge accuracy (chose the higher rule reward; 1 − LRS):", ""]
            arows = []
            for judge, by_cls in sorted(ag.accuracy.items()):
                for cls in ("all", "close", "distant"):
                    if cls in by_cls:
                        arows.append(_estimate_row(f"{judge} ({cls})", by_cls[cls]))
            lines += _estimates_table(arows)
    else:
        lines.append(
            "Judge reliability was not measured: every case has a single verdict. Set `Judge(repeats=2)` "
            "or a second judge model to record agreement and Cohen's kappa."
        )
    return lines


def _section_verbosity(ctx: ReportContext) -> list[str]:
    v = ctx.metrics.verbosity
    lines = _metric_section(
        ctx,
        "Verbosity signal",
        [
            ("reasons with length/style words", "verbosity_word_rate"),
            ("longer response wins (equal rewards)", "longer_wins_rate"),
        ],
    )
    used = sorted(((w, n) for w, n in v.word_counts.items() if n), key=lambda x: (-x[1], x[0]))
    if used:
        lines += ["", "Words used: " + ", ".join(f"“{w}” × {n}" for w, n in used) + "."]
    return lines


def _section_satisfaction(ctx: ReportContext) -> list[str]:
    m = ctx.metrics
    lines = _metric_section(
        ctx,
        "User satisfaction vs task success",
        [("satisfied-but-failed rate", "sat_but_failed_rate"), ("task success rate", "success_rate")],
        "Per transcript (task, agent, sample): the simulated user said it was satisfied but the rule "
        "verifier found the task failed. Satisfaction never feeds the reward.",
    )
    ex = m.sat_but_failed_examples
    if ex:
        lines += ["", f"Examples ({min(len(ex), _MAX_EXAMPLES)} of {len(ex)}):", ""]
        for task_id, agent, sample in ex[:_MAX_EXAMPLES]:
            lines.append(
                f"- task {md_code(task_id)}, agent {md_code(agent)}"
                + (f", sample {sample}" if sample else "")
            )
    return lines


def _section_cost(ctx: ReportContext) -> list[str]:
    # Nominal figures only: conclusion.md must be byte-identical when a re-run is answered from the cache,
    # so what this run spent (live vs cached) lives in token_cost.md and metrics.json alone.
    c = ctx.metrics.costs
    roles = [c.per_role[r] for r in ROLES if r in c.per_role]
    by_role = ", ".join(
        f"{rc.role} {'at least ' if rc.usage_missing and rc.cost is not None else ''}{fmt_usd(rc.cost)}"
        for rc in roles
    )
    missing = sum(rc.usage_missing for rc in roles)
    total = fmt_usd(c.total_cost)
    if missing and c.total_cost is not None:
        calls = "call" if missing == 1 else "calls"
        total, by_role = f"at least {total}", f"{missing} {calls} without usage; {by_role}"
    return [
        "## Cost",
        "",
        f"- Total cost: {total} ({by_role}); an exact accounting figure of this run: nominal, retries "
        "and failed requests included.",
        f"- Cost per success: {fmt_per_success(c.cost_per_success, c.successes, c.total_cost)}"
        f"{fmt_task_ci(metric_of(ctx, 'cost_per_success'), fmt_usd)} ({c.successes} successful transcripts; "
        f"{task_ci_basis(metric_of(ctx, 'cost_per_success'))}; another task set costs differently).",
        f"- Judge share of cost: {fmt_pct(c.judge_share)}"
        f"{fmt_task_ci(metric_of(ctx, 'judge_cost_share'), fmt_pct)}.",
        "",
        "Details, and what this run spent (live vs cached calls), in [token_cost.md](token_cost.md).",
    ]


def _section_truncation(ctx: ReportContext) -> list[str]:
    cut = truncated_turns(ctx.ledger)
    if not cut:
        return []
    parts = ", ".join(f"{n} {'agent' if r == 'agent' else 'user-simulator'}" for r, n in cut.items())
    return [
        "## Truncation",
        "",
        f'- Turns cut by `max_tokens` (`finish_reason: "length"`): {parts}; marked `truncated` in the'
        " transcripts. Raise the role's `max_tokens` if replies end mid-sentence.",
    ]


def _section_empty_turns(ctx: ReportContext) -> list[str]:
    """Transcripts with a turn that says nothing (``"empty": true`` in the transcripts), per agent."""
    seen: dict[tuple[str, str, int], int] = {}
    for r in ctx.records:
        seen.setdefault((r.task_id, r.agent_left, r.sample), r.empty_turns_left)
        seen.setdefault((r.task_id, r.agent_right, r.sample), r.empty_turns_right)
    per_agent: dict[str, list[int]] = {}
    for (_task, agent, _sample), count in sorted(seen.items()):
        if count:
            per_agent.setdefault(agent, []).append(count)
    if not per_agent:
        return []
    parts = ", ".join(f"{a}: {sum(c)} in {len(c)} transcripts" for a, c in per_agent.items())
    return [
        "## Empty turns",
        "",
        f"- Turns with nothing said (blank text, no tool call; any role): {parts}; marked `empty` in the"
        ' transcripts. A small model may answer `""`: the verdicts on such transcripts say little.'
        " Gate with `empty_turn_rate` or `empty_turn_rate(agent)`.",
    ]


def _section_interrupted(ctx: ReportContext) -> list[str]:
    if ctx.interrupted is None:
        return []
    return [
        f"**{ctx.interrupted[0].upper()}{ctx.interrupted[1:]}** finished: the run was stopped (Ctrl-C or"
        " SIGTERM). Every number below covers the finished cases only; re-run to complete it from the"
        " cache."
    ]


def _section_gates(ctx: ReportContext) -> list[str]:
    lines = ["## Gates", ""]
    if ctx.interrupted is not None and not ctx.gates:
        return [*lines, f"Not evaluated: {ctx.interrupted} (`--gauge-gates-on-partial` evaluates them)."]
    if not ctx.gates:
        return [*lines, "No gates were declared for this suite."]
    rows = [[g.gate.canonical(), g.status.upper(), gate_value(g), gate_ci(g), str(g.n)] for g in ctx.gates]
    lines += md_table(["gate", "status", "value", "95% interval", "n"], rows, "llrlr")
    lines.append("")
    for g in ctx.gates:
        expr = g.gate.canonical()
        text = g.message if g.gate.expression() in g.message else f"{g.status.upper()} {expr}: {g.message}"
        lines.append(f"- {md_safe(shorten(text, 400))}")
    needed = needed_lines(ctx.gates)
    if needed:
        lines += ["", "Tasks that would decide them (80% power at 95%, if the observed effect holds):", ""]
        lines += [f"- {line}" for line in needed]
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
    lines += md_table(
        ["rule", "value", "fired"],
        [[r.rule.text(), r.value_text(), "yes" if r.fired else "no"] for r in recs],
        "lrl",
    )
    return lines


def _section_elo(ctx: ReportContext) -> list[str]:
    elo = ctx.elo
    if elo is None:
        return []
    lines = ["## Test-time compute (Elo)", ""]
    if elo.agents:
        rows = [
            [
                a,
                f"{elo.elo[a]:.1f}",
                fmt_ci(elo.low.get(a), elo.high.get(a), lambda x: DASH if x is None else f"{x:.1f}"),
                str(elo.rank.get(a, DASH)),
            ]
            for a in elo.agents
            if a in elo.elo
        ]
        lines += md_table(["agent", "Elo", "95% interval", "rank"], rows, "lrlr")
        lines.append("")
    lines.append("Full table and tiers: [elo.md](elo.md). ![Elo by strategy](elo.svg)")
    return lines


def render_conclusion(ctx: ReportContext) -> str:
    """The conclusion: task set, protocol, LRS close vs distant, flips, judge, satisfaction, cost, gates and
    rule-based recommendations, each number with its n and 95% interval."""
    sections = [
        [f"# Conclusion: {suite_name(ctx)}"],
        _section_interrupted(ctx),
        baseline_lead(ctx.baseline, ctx.baseline_note),
        _section_tasks(ctx),
        _section_agents(ctx),
        _section_protocol(ctx),
        _section_lrs(ctx),
        _section_position(ctx),
        _section_judge(ctx),
        self_preference_section(ctx),
        judge_rules_section(ctx),
        human_section(ctx),
        _section_verbosity(ctx),
        _section_satisfaction(ctx),
        user_audit_section(ctx),
        _section_cost(ctx),
        _section_truncation(ctx),
        _section_empty_turns(ctx),
        _section_gates(ctx),
        adaptive_section(ctx.adaptive),
        repeats_lines(ctx.repeats),
        _section_recommendations(ctx),
        _section_elo(ctx),
        [
            "## Files",
            "",
            "- [pairwise_table.md](pairwise_table.md): every judged case",
            "- [token_cost.md](token_cost.md): tokens and cost by role and model",
            "- [metrics.json](metrics.json): every number above, machine-readable",
            *(["- [baseline.md](baseline.md): the comparison with the baseline"] if ctx.baseline else []),
            "- ../pairs/pair_results.jsonl, ../agent_runs.jsonl (the ledger), "
            "../agents/*.jsonl (transcripts)",
        ],
    ]
    return "\n\n".join("\n".join(s) for s in sections if s) + "\n"
