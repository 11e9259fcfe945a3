"""``baseline.md`` and the baseline/repeat lines of the other reports: what changed against the baseline
(regressions first), per-agent paired deltas, the judge and cost deltas, Elo deltas, the minimum detectable
regression, the run-to-run noise floor and pass@k / pass^k / flaky tasks. Pure rendering."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..analysis.baseline import AgentComparison, BaselineComparison, TaskFlip
from ..analysis.gates import GateResult, is_count
from ..analysis.metrics import Estimate
from ..analysis.repeats import RepeatCounts, flaky_tasks, noise_floor_of, pass_at_k, pass_hat_k
from ..records.json_types import JSONObject
from .format import DASH, fmt_ci, fmt_num, fmt_rate, md_code, md_table

__all__ = [
    "baseline_lead",
    "baseline_summary",
    "gate_ci",
    "gate_value",
    "needed_lines",
    "render_baseline_md",
    "repeats_json",
    "repeats_lines",
]

_MAX_LISTED = 20


def _delta_cells(e: Estimate) -> list[str]:
    return [_signed(e.value), fmt_ci(e.low, e.high, _signed), str(e.n)]


def _signed(x: float | None) -> str:
    text = fmt_num(x)
    return text if x is None or text == DASH or x <= 0 or text.startswith("-") else f"+{text}"


def _verdict(a: AgentComparison) -> str:
    d = a.success_delta
    if d.high is not None and d.high < 0:
        return "worse"
    if d.low is not None and d.low > 0:
        return "better"
    return "no clear change"


def _flip_line(f: TaskFlip) -> str:
    links = " · ".join(
        f"[{side}]({link})" for side, link in (("before", f.link_before), ("now", f.link_now)) if link
    )
    return f"- {md_code(f.label())}: reward {fmt_rate(f.reward_before)} → {fmt_rate(f.reward_now)}" + (
        f" ({links})" if links else ""
    )


def _verdicts(comp: BaselineComparison) -> list[str]:
    """Regressions first, then the per-agent verdict table and the minimum detectable regressions."""
    lines = []
    regressed = [(a, f) for a in comp.agents.values() for f in a.regressions]
    if regressed:
        lines.append(f"**{len(regressed)} regressions** (passed before, fail now):")
        lines += [f"- {a.agent}: {md_code(f.label())}" for a, f in regressed[:_MAX_LISTED]]
        if len(regressed) > _MAX_LISTED:
            lines.append(f"- … and {len(regressed) - _MAX_LISTED} more (see baseline.md)")
    else:
        lines.append("No regressions: no task that passed in the baseline fails now.")
    lines.append("")
    rows = [
        [
            a.agent,
            fmt_rate(a.success_before),
            fmt_rate(a.success_now),
            *_delta_cells(a.success_delta),
            f"{len(a.regressions)} / {len(a.fixes)}",
            fmt_rate(a.mcnemar_p),
            _verdict(a),
        ]
        for a in comp.agents.values()
    ]
    header = ["agent", "success before", "now", "delta", "95% interval", "tasks"]
    header += ["regressed / fixed", "McNemar p", "verdict"]
    lines += md_table(header, rows, "lrrrlrrrl")
    return [*lines, "", *_mdr_lines(comp)]


def baseline_lead(comp: BaselineComparison | None, note: str = "") -> list[str]:
    """The conclusion's first section when a baseline is given (``note`` says why there is none)."""
    if comp is None:
        return ["## Against the baseline", "", note] if note else []
    return ["## Against the baseline", "", *_verdicts(comp), "", "Details: [baseline.md](baseline.md)."]


def _mdr_lines(comp: BaselineComparison) -> list[str]:
    out = []
    for a in comp.agents.values():
        if a.min_detectable is None:
            out.append(
                f"- {a.agent}: no task flipped between the runs, so the run-to-run spread is unknown here "
                "(identical outcomes, e.g. the same seed or the cache); no minimum detectable regression."
            )
        else:
            out.append(
                f"- {a.agent}: at {a.success_delta.n} tasks the smallest success-rate drop caught with 80% "
                f"power is {fmt_rate(a.min_detectable)} (minimum detectable regression); differences under "
                f"{fmt_rate(a.noise_floor)} are run-to-run noise."
            )
    return out


def _changes(comp: BaselineComparison) -> list[str]:
    lines = [
        f"- {len(comp.shared_tasks)} tasks in both runs (deltas use only these)",
        f"- tasks added: {', '.join(comp.added_tasks) or 'none'}",
        f"- tasks removed: {', '.join(comp.removed_tasks) or 'none'}",
        f"- agents added: {', '.join(comp.added_agents) or 'none'}",
        f"- agents removed: {', '.join(comp.removed_agents) or 'none'}",
    ]
    changed = [f"{a.agent} ({'; '.join(a.changed)})" for a in comp.agents.values() if a.changed]
    lines.append(f"- agents whose model or prompt changed: {', '.join(changed) or 'none'}")
    setup = "; ".join(comp.setup_changes) or "none"
    lines.append(f"- judge and user simulator changes (model, prompt, settings): {setup}")
    if comp.judge_changes:
        lines.append(
            "- the judge changed: deltas of its metrics (flip rate, LRS, position bias) compare two judges"
        )
    return lines


def _agent_section(a: AgentComparison) -> list[str]:
    lines = [f"### {a.agent}", ""]
    lines += md_table(
        ["metric", "delta", "95% interval (paired, tasks resampled)", "n"],
        [["success rate", *_delta_cells(a.success_delta)], ["mean reward", *_delta_cells(a.reward_delta)]],
        "lrlr",
    )
    lines += ["", f"McNemar exact test on the flipped tasks: p = {fmt_rate(a.mcnemar_p)}.", ""]
    for title, flips in (("Passed before, fails now", a.regressions), ("Failed before, passes now", a.fixes)):
        lines.append(f"{title} ({len(flips)}):")
        lines += [_flip_line(f) for f in flips] or ["- none"]
        lines.append("")
    return lines


def render_baseline_md(comp: BaselineComparison, baseline_dir: str) -> str:
    """``baseline.md``: the whole comparison with links to both transcripts of every flipped task."""
    lines = [
        f"# Against the baseline: {comp.suite}",
        "",
        f"Baseline: `{baseline_dir}`",
        "",
        "## What changed",
        "",
    ]
    lines += _changes(comp)
    lines += ["", "## Verdicts", "", *_verdicts(comp), "", "## Per agent", ""]
    for a in comp.agents.values():
        lines += _agent_section(a)
    lines += ["## Judge and cost", ""]
    rows = [[f"delta({k})", *_delta_cells(v)] for k, v in comp.judge.items()]
    rows.append(["delta(cost_per_success)", *_delta_cells(comp.cost_per_success)])
    lines += md_table(["metric", "delta", "95% interval", "n"], rows, "lrlr")
    lines += ["", "## Elo", ""]
    if comp.elo_reference is None or not comp.elo:
        lines.append("No Elo delta: the runs share no agent whose model and prompt are unchanged.")
    else:
        lines.append(
            f"Each agent's Elo relative to {comp.elo_reference} (unchanged in both runs), now minus before; "
            "both fits on the shared tasks, resampling the same tasks (paired)."
        )
        lines.append("")
        lines += md_table(
            ["agent", "delta", "95% interval", "n"],
            [[a, *_delta_cells(e)] for a, e in comp.elo.items()],
            "lrlr",
        )
    return "\n".join(lines) + "\n"


def baseline_summary(comp: BaselineComparison | None, note: str = "") -> list[str]:
    """The terminal's baseline lines: per agent the success-rate delta and the regressed tasks."""
    if comp is None:
        return [f"baseline: {note}"] if note else []
    lines = [f"baseline: {len(comp.shared_tasks)} shared tasks (see reports/baseline.md)"]
    if comp.setup_changes:
        lines.append(f"  changed since the baseline: {'; '.join(comp.setup_changes)}")
    for a in comp.agents.values():
        d = a.success_delta
        names = ", ".join(f.label() for f in a.regressions[:5]) + (" …" if len(a.regressions) > 5 else "")
        lines.append(
            f"  {a.agent}: success {_signed(d.value)} {fmt_ci(d.low, d.high, _signed)}, {_verdict(a)}; "
            f"{len(a.regressions)} regressed" + (f" ({names})" if names else "") + f", {len(a.fixes)} fixed"
        )
    return lines


def gate_ci(g: GateResult) -> str:
    """A gate's interval cell: ``[low, high]``, or "count" for an exact count (no sampling interval)."""
    return "count" if is_count(g.gate) and g.value is not None else fmt_ci(g.low, g.high, fmt_num)


def gate_value(g: GateResult) -> str:
    """A gate's value cell: three decimals, or a whole number for an exact count."""
    return f"{g.value:.0f}" if is_count(g.gate) and g.value is not None else fmt_num(g.value)


def needed_lines(gates: Sequence[GateResult]) -> list[str]:
    """One line per gate a larger suite could decide (``needed_n``), for the terminal and the conclusion."""
    return [g.needed for g in gates if g.needed]


def repeats_lines(repeats: Mapping[str, RepeatCounts]) -> list[str]:
    """The conclusion's noise-floor statement and, with repeated samples, flaky tasks per agent."""
    if not repeats:
        return []
    lines = ["## Run-to-run noise", ""]
    floors = {a: noise_floor_of(c) for a, c in repeats.items()}
    multi = any(int(c.samples.min()) >= 2 for c in repeats.values() if c.samples.size)
    how = "from the repeated samples" if multi else "one sample per task: bounded by the pooled rate's p(1-p)"
    shown = ", ".join(f"{a} {fmt_rate(f)}" for a, f in floors.items())
    lines.append(
        f"Noise floor: between two runs of this suite, a success-rate difference smaller than this is "
        f"within run-to-run noise (95%; {how}): {shown}."
    )
    for a, c in repeats.items():
        est, ids = flaky_tasks(c)
        if est.n:
            lines.append(f"- {a}: {len(ids)} of {est.n} tasks flaky (some but not all samples succeed)")
    return lines


def repeats_json(repeats: Mapping[str, RepeatCounts], rounds: int, seed: int) -> JSONObject:
    """The ``"repeats"`` section of ``metrics.json``: per agent the noise floor, flaky tasks, and pass@k /
    pass^k for every k up to the samples per task."""
    out: JSONObject = {}
    for a, c in repeats.items():
        most = int(c.samples.min()) if c.samples.size else 0
        est, ids = flaky_tasks(c)
        out[a] = {
            "noise_floor": noise_floor_of(c),
            "samples_per_task": most,
            "flaky_tasks": {**est.to_json(), "task_ids": list(ids)},
            **{f"pass_at_k({a}, {k})": pass_at_k(c, k, rounds, seed).to_json() for k in range(2, most + 1)},
            **{f"pass_hat_k({a}, {k})": pass_hat_k(c, k, rounds, seed).to_json() for k in range(2, most + 1)},
        }
    return out
