"""An xdist worker's test reports, not kept after they are sent: the worker's terminal reporter keeps
every report of every phase to the end of its session (for a summary no one sees: a worker's terminal
output is not shown), three per case, which made a worker's memory grow with the suite."""

from __future__ import annotations

from typing import Any

import pytest

__all__ = ["ReportDropping"]


class ReportDropping:
    """Registered on an xdist worker: after every other hook has seen a report (xdist has sent it to the
    controller, the terminal reporter has counted it), the terminal reporter's kept copy is dropped."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        reporter: Any = self.config.pluginmanager.get_plugin("terminalreporter")
        stats = getattr(reporter, "stats", None)
        if not isinstance(stats, dict):
            return
        for kept in stats.values():
            if isinstance(kept, list) and kept and kept[-1] is report:
                kept.pop()
                return
