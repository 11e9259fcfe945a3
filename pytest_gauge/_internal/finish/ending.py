"""The end of the run that ``plugin.py`` hands the process's role
(:class:`~pytest_gauge._internal.process.roles. RunEnding`): the outputs, gates and reports, and the terminal
summary with your own tests' cost."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from ..fixtures import tests_summary
from .outputs import finish_run, write_summary

if TYPE_CHECKING:
    from ..process.state import GaugeState
    from ..records.checks import CheckEntry

__all__ = ["EndOfRun"]


class EndOfRun:
    """What the process that ends the run does at its end (the end of the run's modules are imported
    when it comes: a worker never needs them)."""

    def prepare(self) -> None:
        """Import the end of the run's modules now (numpy, the analysis, the reports: about 0.3 s): before
        the cases run (while xdist's workers start), so no Ctrl-C can cut an import short."""
        from .. import report  # deferred: keeps numpy off pytest's start-up  # noqa: F401
        from . import html, outputs  # deferred: keeps numpy off pytest's start-up  # noqa: F401

    def write(self, session: pytest.Session, state: GaugeState, *, interrupted: bool) -> list[CheckEntry]:

        return finish_run(session, state, interrupted=interrupted)

    def emit(self, session: pytest.Session, entry: CheckEntry) -> None:
        from .outputs import emit_entry  # deferred: keeps finish.outputs off pytest's start-up

        emit_entry(session, entry)

    def tests_summary(self, reporter: Any, config: pytest.Config) -> None:
        tests_summary(reporter, config)

    def summary(self, reporter: Any, state: GaugeState) -> None:

        write_summary(reporter, state)
