"""The GitHub-ready Markdown: the step summary (``$GITHUB_STEP_SUMMARY``) and ``gauge-out/pr-comment.md``
(the same compactly, behind a stable marker so a workflow updates one sticky comment). Pure: the
contexts and the report link in, Markdown out."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence

from ..analysis.gates import fails_run
from ..analysis.metrics import SUMMARY_METRICS
from ..records import ROLES
from .baseline import baseline_summary, gate_ci, gate_value
from .common import ReportContext, case_counts, suite_name
from .format import estimate_cells, fmt_int, fmt_usd, md_safe, md_table, shorten

__all__ = ["PR_COMMENT_MARKER", "render_pr_comment", "render_step_summary", "report_link", "verdict"]

PR_COMMENT_MARKER = "<!-- pytest-gauge -->"
"""The first line of ``pr-comment.md``: a workflow finds its earlier comment by it and edits it."""


def report_link(environ: Mapping[str, str]) -> str | None:
    """Where a reader finds the HTML report: ``GAUGE_REPORT_URL`` when the workflow knows its artifact's
    URL, else the GitHub Actions run page (its artifacts are listed there), else None."""
    given = environ.get("GAUGE_REPORT_URL", "").strip()
    if given:
        return given
    server, repo, run = (
        environ.get(k, "") for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID")
    )
    return f"{server}/{repo}/actions/runs/{run}" if server and repo and run else None


def verdict(ctx: ReportContext) -> str:
    """The suite's verdict from its gates: FAIL (a gate fails the run), PASS, or NO GATES."""
    if not ctx.gates:
        return "NO GATES"
    return "FAIL" if any(fails_run(g) for g in ctx.gates) else "PASS"


def _gate_table(ctx: ReportContext, *, failing_only: bool = False) -> list[str]:
    gates = [g for g in ctx.gates if fails_run(g) or g.status == "skipped"] if failing_only else ctx.gates
    rows = [[g.status.upper(), g.gate.canonical(), gate_value(g), gate_ci(g), str(g.n)] for g in gates]
    return md_table(["status", "gate", "value", "95% interval", "n"], rows, "llrlr") if rows else []


def _deciding_metrics(ctx: ReportContext) -> list[str]:
    """The metrics the gates name (the headline metrics when no gate names one), with intervals."""
    text = " ".join(g.gate.canonical() for g in ctx.gates)
    named = [n for n in ctx.metrics.metrics if re.search(rf"\b{re.escape(n)}\b", text)]
    rows = []
    for name in named or list(SUMMARY_METRICS):
        estimate = ctx.metrics.metrics.get(name)
        if estimate is not None:
            value, n, interval = estimate_cells(estimate)
            rows.append([name, value, interval, n])
    return md_table(["metric", "value", "95% interval", "n"], rows, "lrlr") if rows else []


def _bill(ctx: ReportContext) -> list[str]:
    costs = ctx.metrics.costs
    rows = [
        [role, fmt_int(rc.calls), fmt_int(rc.input_tokens), fmt_int(rc.output_tokens), fmt_usd(rc.cost)]
        for role in ROLES
        if (rc := costs.per_role.get(role)) is not None
    ]
    rows.append(["total", "", "", "", fmt_usd(costs.total_cost)])
    return md_table(["role", "calls", "input tokens", "output tokens", "cost"], rows, "lrrrr")


def _baseline(ctx: ReportContext) -> list[str]:
    lines = baseline_summary(ctx.baseline, ctx.baseline_note)
    return [f"- {md_safe(line.strip())}" for line in lines]


def render_step_summary(ctx: ReportContext, link: str | None) -> str:
    """One suite's part of the step summary: verdict, gates, the metrics that decided them, the bill,
    the baseline deltas and the report link."""
    expected, recorded, _missing = case_counts(ctx)
    lines = [f"## pytest-gauge: {md_safe(suite_name(ctx))}: {verdict(ctx)}", ""]
    lines += [
        f"{recorded}/{expected} cases recorded" + (f"; {ctx.interrupted}" if ctx.interrupted else ""),
        "",
    ]
    if ctx.gates:
        lines += ["### Gates", "", *_gate_table(ctx), ""]
        lines += [f"- {md_safe(shorten(g.message, 300))}" for g in ctx.gates if fails_run(g)]
        lines += [""] if any(fails_run(g) for g in ctx.gates) else []
    lines += ["### Metrics the gates use" if ctx.gates else "### Metrics", "", *_deciding_metrics(ctx), ""]
    lines += ["### Bill", "", *_bill(ctx), ""]
    baseline = _baseline(ctx)
    if baseline:
        lines += ["### Against the baseline", "", *baseline, ""]
    if link:
        lines += [f"[HTML report]({link}) (`gauge-out/index.html`)", ""]
    return "\n".join(lines)


def render_pr_comment(contexts: Sequence[ReportContext], link: str | None) -> str:
    """The sticky PR comment: the marker, one row per suite, then the gates that failed (or were
    skipped), the baseline deltas and the report link."""
    overall = "FAIL" if any(verdict(c) == "FAIL" for c in contexts) else "PASS"
    lines = [PR_COMMENT_MARKER, f"### pytest-gauge: {overall}", ""]
    rows = []
    for ctx in contexts:
        counts = Counter(g.status for g in ctx.gates)
        gates = ", ".join(
            f"{counts[s]} {s}" for s in ("pass", "fail", "inconclusive", "skipped") if counts[s]
        )
        rows.append([suite_name(ctx), verdict(ctx), gates or "none", fmt_usd(ctx.metrics.costs.total_cost)])
    lines += [*md_table(["suite", "verdict", "gates", "cost"], rows, "lllr"), ""]
    for ctx in contexts:
        table = _gate_table(ctx, failing_only=True)
        if table:
            lines += [f"**{md_safe(suite_name(ctx))}**: gates not passed", "", *table, ""]
        baseline = _baseline(ctx)
        if baseline:
            lines += [f"**{md_safe(suite_name(ctx))}** against the baseline", "", *baseline, ""]
    if link:
        lines += [f"[HTML report]({link})", ""]
    return "\n".join(lines)
