"""conclusion.md's "The judge against the rules" section: accuracy against the rule rewards for the main
verdict, each judge model and the panel's majority (overall, close/distant, per category), the rank
correlation and calibration of the judges' rewards, and a cheaper panel model when one is as accurate."""

from __future__ import annotations

from ..analysis.judge_rules import NON_INFERIORITY, PANEL, PRIMARY
from ..analysis.metrics import Estimate, JudgeRules
from .common import ReportContext
from .format import DASH, estimate_cells, fmt_num, md_table

__all__ = ["judge_rules_section"]

_HEADER = ["verdicts of", "scope", "accuracy", "n", "95% interval"]


def _who(name: str, rules: JudgeRules) -> str:
    if name == PRIMARY:
        return f"main verdict ({rules.main})" if rules.main != PRIMARY else "main verdict"
    if name == PANEL:
        return "panel majority"
    return f"`{name}`"


def _accuracy_rows(rules: JudgeRules) -> list[list[str]]:
    order = [PRIMARY, *sorted(k for k in rules.accuracy if k not in (PRIMARY, PANEL)), PANEL]
    rows: list[list[str]] = []
    for who in order:
        by_scope = rules.accuracy.get(who, {})
        scopes = ["all", "close", "distant", *sorted(c for c in by_scope if c.startswith("category:"))]
        for scope in scopes:
            e: Estimate | None = by_scope.get(scope)
            if e is None or (scope != "all" and e.n == 0):
                continue
            rows.append([_who(who, rules), scope.removeprefix("category:"), *estimate_cells(e)])
    return rows


def _calibration_rows(rules: JudgeRules) -> list[list[str]]:
    rows: list[list[str]] = []
    for judge, bins in sorted(rules.calibration.items()):
        rho = rules.rank_corr.get(judge)
        cells = estimate_cells(rho, fmt_num) if rho is not None else [DASH, "0", DASH]
        means = [
            DASH if b.mean_rule_reward is None else f"{fmt_num(b.mean_rule_reward)} (n={b.n})" for b in bins
        ]
        rows.append([_who(judge, rules), f"{cells[0]} {cells[2]}", *means])
    return rows


def judge_rules_section(ctx: ReportContext) -> list[str]:
    """The section's lines (always present: a suite without judgments says so)."""
    rules = ctx.metrics.judge_rules
    lines = [
        "## The judge against the rules",
        "",
        "Accuracy: non-tie verdicts on cases whose rule rewards differ that chose the higher-reward side "
        "(1 − LRS for the main verdict); 95% intervals resample tasks. Gate on it with "
        "`judge_accuracy >= 0.8`, `judge_accuracy(close)`, `judge_accuracy(MODEL)` or "
        "`judge_accuracy(panel)`.",
        "",
    ]
    lines += md_table(_HEADER, _accuracy_rows(rules), "llrrl")
    calib = _calibration_rows(rules)
    if calib:
        bins = next(iter(rules.calibration.values()))
        heads = [f"{b.low:g}–{b.high:g}" for b in bins]
        lines += [
            "",
            "Do the judge's rewards track the rule rewards? Spearman's rho [95% interval] and, per bin of "
            "judge reward, the mean rule reward of those sides:",
            "",
        ]
        lines += md_table(["judge", "rank corr.", *heads], calib, "ll" + "r" * len(heads))
    cheaper = rules.cheaper
    if cheaper is not None:
        lines += [
            "",
            f"**A cheaper judge is as accurate:** `{cheaper.model}` costs {cheaper.cost_ratio:.0%} of "
            f"`{cheaper.main}` per call and its accuracy differs by {cheaper.difference:+.3f} (lower bound "
            f"{cheaper.difference_low:+.3f} ≥ −{NON_INFERIORITY:g}); consider making it the main judge.",
        ]
    return lines
