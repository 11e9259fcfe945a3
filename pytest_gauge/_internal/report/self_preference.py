"""The judge's self-preference where it shares its model with a contestant: conclusion.md's section and
the terminal summary's line (measured by :mod:`..analysis.self_preference`)."""

from __future__ import annotations

from ..analysis.estimates import Estimate
from ..analysis.self_preference import SelfPreference, self_preference
from .common import ReportContext
from .format import fmt_ci, fmt_rate, md_code

__all__ = ["self_preference_json", "self_preference_line", "self_preference_section"]


def _measure(ctx: ReportContext) -> SelfPreference | None:
    judges = ctx.meta.judge_models
    return self_preference(ctx.records, ctx.meta.models, judges[0]) if judges else None


def _rate(label: str, e: Estimate) -> str:
    return f"{label} {fmt_rate(e.value)} {fmt_ci(e.low, e.high)} (n={e.n})".strip()


def self_preference_json(ctx: ReportContext) -> dict[str, dict[str, object]]:
    """metrics.json's ``self_preference`` block (the HTML page draws it), or nothing."""
    sp = _measure(ctx)
    if sp is None:
        return {}
    return {
        "self_preference": {
            "judge_model": sp.judge_model,
            "agents": list(sp.own_agents),
            "own": sp.own.to_json(),
            "others": sp.others.to_json(),
            "difference": sp.difference.to_json(),
        }
    }


def self_preference_line(ctx: ReportContext) -> list[str]:
    """One terminal line, only where the judge's model is also an agent's."""
    sp = _measure(ctx)
    if sp is None:
        return []
    return [
        f"self-preference: judge {sp.judge_model} is also {', '.join(sp.own_agents)}'s model;"
        f" picks the lower-reward transcript: {_rate('own', sp.own)}, {_rate('others', sp.others)},"
        f" difference {fmt_rate(sp.difference.value)} {fmt_ci(sp.difference.low, sp.difference.high)}"
    ]


def self_preference_section(ctx: ReportContext) -> list[str]:
    """conclusion.md's "Self-preference" section, only where the judge's model is also an agent's."""
    sp = _measure(ctx)
    if sp is None:
        return []
    agents = ", ".join(md_code(a) for a in sp.own_agents)
    d = sp.difference
    return [
        "## Self-preference",
        "",
        f"The judge model {md_code(sp.judge_model)} is also the model of {agents}: a judge may prefer its own"
        " model's answers. Measured against the rules, on judged cases whose two rule rewards differ:",
        "",
        f"- picks its own model's transcript when it has the lower rule reward: {_rate('', sp.own)}",
        f"- picks another agent's transcript when it has the lower rule reward: {_rate('', sp.others)}",
        f"- difference (own − others): {fmt_rate(d.value)} {fmt_ci(d.low, d.high)} (Newcombe's 95% interval)",
        "",
        "An interval above 0 is self-preference; use a judge model no agent uses to remove it.",
    ]
