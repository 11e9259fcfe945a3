"""The self-contained HTML report: ``<suite>/reports/index.html`` and ``gauge-out/index.html``.

Pure: :mod:`.model` holds a suite's outputs as typed values, :mod:`.payload` turns them into the page's
JSON document, :mod:`.render` inlines it with ``page.html``, ``app.css`` and ``app.js`` (package data).
Reading the output folder and writing the pages is :mod:`pytest_gauge._internal.files.html`.
"""

from __future__ import annotations

from ...records.html import (
    GateRow,
    LatencyRow,
    MetricRow,
    RoleCost,
    RuleRow,
    SuiteOutputs,
    TaskRow,
    TranscriptRow,
    WatchRow,
    redaction_names,
)
from .payload import PAYLOAD_VERSION, build_payload, driver_cases
from .render import (
    SuiteLink,
    embed_json,
    render_index_html,
    render_suite_html,
    suite_html_pieces,
    suite_link,
)

__all__ = [
    "PAYLOAD_VERSION",
    "GateRow",
    "LatencyRow",
    "MetricRow",
    "RoleCost",
    "RuleRow",
    "SuiteLink",
    "SuiteOutputs",
    "TaskRow",
    "TranscriptRow",
    "WatchRow",
    "build_payload",
    "driver_cases",
    "embed_json",
    "redaction_names",
    "render_index_html",
    "render_suite_html",
    "suite_html_pieces",
    "suite_link",
]
