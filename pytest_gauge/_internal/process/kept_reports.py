"""The test reports the process that ends the run keeps for pytest's terminal summary, made lean: the
terminal reporter keeps every report of every phase to the end of the session (three per case, with
their keywords, captured sections and user properties), about half of the controller's memory when the
cases of a 30,000-case run are done. Its summary needs much less of most of them: a passed setup or
teardown only by ``--durations``, a passed call only by the count on the last line, its node id (``-rp``)
and its captured sections (``-rP``, ``-rA``). The other plugins (junitxml, pytest-html, Allure,
``--lf``) get every report whole in their own hooks; only the terminal reporter's copy is swapped."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import pytest

__all__ = ["KeptReports", "lean_report"]

_NO_KEYWORDS: Mapping[str, Any] = MappingProxyType({})
"""Shared by every lean report, read-only: no one reads a kept passed report's keywords."""


def lean_report(report: pytest.TestReport) -> pytest.TestReport:
    """A passed report reduced to what the terminal summary reads of it: node id, location, phase,
    outcome and times (no keywords, captured sections, user properties or xdist's worker fields)."""
    return pytest.TestReport(
        report.nodeid,
        report.location,
        _NO_KEYWORDS,
        report.outcome,
        None,
        report.when,
        (),
        report.duration,
        report.start,
        report.stop,
    )


class KeptReports:
    """Registered on the process that ends the run: after every other hook has seen a report (trylast),
    the terminal reporter's kept copy of a passed report is dropped (a setup or teardown; kept lean under
    ``--durations``) or made lean (a call; kept whole when ``-rP`` or ``-rA`` prints its sections)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        reporter: Any = config.pluginmanager.get_plugin("terminalreporter")
        self.reporter = reporter
        self.durations = config.getoption("durations", None) is not None
        self.whole = "P" in str(getattr(reporter, "reportchars", ""))  # -rP, -rA: the passes' output

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        stats = getattr(self.reporter, "stats", None)
        if not isinstance(stats, dict) or not report.passed:
            return
        for category in ("", "passed"):
            kept = stats.get(category)
            if not (isinstance(kept, list) and kept and kept[-1] is report):
                continue
            if category == "" and not self.durations:
                kept.pop()  # setup/teardown passed: counted nowhere, shown only by --durations
            elif category == "" or not self.whole:
                kept[-1] = lean_report(report)
            return
