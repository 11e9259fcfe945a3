"""Pure rendering of one suite's reports (docs/protocol.md#outputs): the pair table, the token/cost table,
the conclusion, ``metrics.json`` and the compact terminal summary.

No I/O, no clock, no run id: the same :class:`ReportContext` always renders to the same bytes, so reports
can be snapshot-tested and diffed between runs. One module per report: :mod:`.pairwise`, :mod:`.costs`
(``token_cost.md``), :mod:`.conclusion`, :mod:`.metrics_json` and :mod:`.summary`; :mod:`.recommend` holds
the recommendation rules and :mod:`.common` the shared context, formatting and suite facts.
"""

from __future__ import annotations

from .common import ReportContext
from .conclusion import render_conclusion
from .costs import ModelCost, Spend, model_costs, render_token_cost, spent_this_run, unpriced_warnings
from .metrics_json import METRICS_FORMAT_VERSION, render_metrics_json
from .pairwise import render_pairwise_table
from .recommend import RULES, Recommendation, Rule, recommendations
from .summary import render_summary

__all__ = [
    "METRICS_FORMAT_VERSION",
    "REPORT_FILES",
    "RULES",
    "ModelCost",
    "Recommendation",
    "ReportContext",
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

REPORT_FILES: tuple[str, ...] = ("pairwise_table.md", "token_cost.md", "conclusion.md", "metrics.json")
"""The files :func:`render_reports` returns, in this order (written to ``<out>/<suite>/reports/``)."""


def render_reports(ctx: ReportContext) -> dict[str, str]:
    """Every report file of one suite, filename → text (see :data:`REPORT_FILES`); pure and deterministic."""
    return {
        "pairwise_table.md": render_pairwise_table(ctx),
        "token_cost.md": render_token_cost(ctx),
        "conclusion.md": render_conclusion(ctx),
        "metrics.json": render_metrics_json(ctx),
    }
