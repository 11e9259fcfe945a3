"""The self-contained HTML report (issue 17): ``<suite>/reports/index.html`` and ``gauge-out/index.html``.

:mod:`.load` reads a suite's written outputs into typed values, :mod:`.payload` turns them into the page's
JSON document, :mod:`.render` inlines it with ``page.html``, ``app.css`` and ``app.js`` (package data),
and :mod:`.write` is the I/O edge the end of a run and ``python -m pytest_gauge report`` call.
"""

from __future__ import annotations

from .load import ReportInputError, SuiteOutputs, load_suite
from .payload import build_payload
from .render import SuiteLink, embed_json, render_index_html, render_suite_html
from .write import INDEX_FILE, suite_folders, write_html_reports

__all__ = [
    "INDEX_FILE",
    "ReportInputError",
    "SuiteLink",
    "SuiteOutputs",
    "build_payload",
    "embed_json",
    "load_suite",
    "render_index_html",
    "render_suite_html",
    "suite_folders",
    "write_html_reports",
]
