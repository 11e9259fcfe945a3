"""Pure rendering of one suite's reports (docs/protocol.md#outputs): the pair table, the token/cost table,
the conclusion, ``metrics.json`` and the compact terminal summary.

No I/O, no clock, no run id: the same :class:`ReportContext` always renders to the same bytes, so reports
can be snapshot-tested and diffed between runs. One module per report: :mod:`.pairwise`, :mod:`.costs`
(``token_cost.md``), :mod:`.conclusion`, :mod:`.metrics_json` and :mod:`.summary`; :mod:`.recommend` holds
the recommendation rules and :mod:`.common` the shared context, formatting and suite facts.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from .common import ReportContext
from .conclusion import render_conclusion
from .costs import ModelCost, Spend, model_costs, render_token_cost, spent_this_run, unpriced_warnings
from .metrics_json import METRICS_FORMAT_VERSION, render_metrics_json
from .pairwise import render_pairwise_table
from .recommend import RULES, Recommendation, Rule, recommendations
from .summary import render_summary

__all__ = [
    "METRICS_FORMAT_VERSION",
    "REPORTS",
    "REPORT_FILES",
    "RULES",
    "SNAPSHOT_REPORTS",
    "ModelCost",
    "Recommendation",
    "ReportContext",
    "ReportFile",
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


@dataclass(frozen=True)
class ReportFile:
    """One file of ``<out>/<suite>/reports/``: its name, its rendering from the context (None: not written
    for this run), whether every run writes it and whether ``--gauge-snapshot-reports`` compares it."""

    name: str
    render: Callable[[ReportContext], str | None]
    always: bool = True
    snapshot: bool = False


def _baseline_md(ctx: ReportContext) -> str | None:
    from .baseline import render_baseline_md  # deferred: report.baseline imports this package (a cycle)

    return render_baseline_md(ctx.baseline, ctx.baseline_link) if ctx.baseline is not None else None


def _elo_md(ctx: ReportContext) -> str:
    from .elo import (  # deferred: report.elo imports this package (a cycle)
        no_elo_reason,
        render_elo_md,
        render_no_elo,
    )

    if ctx.elo_report is not None:
        return render_elo_md(ctx.elo_report)
    return render_no_elo(ctx.meta.name, no_elo_reason(ctx.records))[0]


def _elo_json(ctx: ReportContext) -> str:
    from .elo import (  # deferred: report.elo imports this package (a cycle)
        elo_json,
        no_elo_reason,
        render_no_elo,
    )

    if ctx.elo_report is not None:
        return json.dumps(elo_json(ctx.elo_report), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    return render_no_elo(ctx.meta.name, no_elo_reason(ctx.records))[1]


def _elo_svg(ctx: ReportContext) -> str:
    from .elo import no_elo_reason  # deferred: report.elo imports this package (a cycle)
    from .elo_svg import (  # deferred: report.elo_svg imports this package (a cycle)
        render_elo_svg,
        render_no_elo_svg,
    )

    if ctx.elo_report is not None:
        return render_elo_svg(ctx.elo_report)
    return render_no_elo_svg(ctx.meta.name, no_elo_reason(ctx.records))


REPORTS: tuple[ReportFile, ...] = (
    ReportFile("pairwise_table.md", render_pairwise_table, snapshot=True),
    ReportFile("token_cost.md", render_token_cost),
    ReportFile("conclusion.md", render_conclusion, snapshot=True),
    ReportFile("metrics.json", render_metrics_json),
    ReportFile("baseline.md", _baseline_md, always=False),
    ReportFile("elo.md", _elo_md, snapshot=True),
    ReportFile("elo.json", _elo_json),
    ReportFile("elo.svg", _elo_svg),
)
"""The one registry of a suite's report files, in the order they are rendered and written."""

REPORT_FILES: tuple[str, ...] = tuple(r.name for r in REPORTS if r.always)
"""The files every run writes (``baseline.md`` only with a baseline)."""

SNAPSHOT_REPORTS: tuple[str, ...] = tuple(r.name for r in REPORTS if r.snapshot)
"""The reports ``--gauge-snapshot-reports`` compares with the suite's stored snapshots."""


def render_reports(ctx: ReportContext) -> dict[str, str]:
    """Every report file of one suite, filename → text, in :data:`REPORTS`' order; pure and deterministic."""
    out: dict[str, str] = {}
    for report in REPORTS:
        text = report.render(ctx)
        if text is not None:
            out[report.name] = text
    return out
