"""The xdist controller's scheduler under ``--dist loadscope``, ``loadfile`` and ``loadgroup``: xdist's
own, with every check item (gate, report snapshot) in one work unit of its own handed out last.

A gate item waits until every other test of the run is done (the run's end evaluates the gates, where
all the data is). Those schedulers hand out whole files (or classes, or groups) at a time, so a suite
module's gates would share its unit: the worker running them would wait there with other files still
queued behind them, and the run would never end. In a unit of their own, handed out once every other
unit is out, the gates wait on a worker that has nothing else left to run."""

from __future__ import annotations

from typing import Any

import pytest

from ..records.checks import is_check_nodeid

__all__ = ["CHECKS_SCOPE", "checks_last_scheduler"]

CHECKS_SCOPE = "pytest-gauge checks"
"""The work unit of every check item (no test file or group has this name: it has no ``.py``)."""

_SCOPED = ("loadscope", "loadfile", "loadgroup")


def checks_last_scheduler(config: pytest.Config, log: Any) -> Any | None:
    """xdist's scheduler of the run's ``--dist`` mode with the check items in a last unit of their own,
    or None for the other modes (``load`` and ``worksteal`` hand out tests in collection order, where
    the checks come last already; xdist then makes its own)."""
    dist = str(config.getoption("dist", "no"))
    if dist not in _SCOPED:
        return None
    from xdist import scheduler  # type: ignore[import-untyped]  # deferred: only an xdist controller schedules

    base = {
        "loadscope": scheduler.LoadScopeScheduling,
        "loadfile": scheduler.LoadFileScheduling,
        "loadgroup": scheduler.LoadGroupScheduling,
    }[dist]

    class ChecksLast(base):  # type: ignore[misc, valid-type]  # xdist's classes are untyped here
        """The mode's scheduler; check items form :data:`CHECKS_SCOPE`, popped after every other unit."""

        def _split_scope(self, nodeid: str) -> str:
            if is_check_nodeid(nodeid):
                return CHECKS_SCOPE
            return str(super()._split_scope(nodeid))

        def _assign_work_unit(self, node: Any) -> None:
            if CHECKS_SCOPE in self.workqueue and len(self.workqueue) > 1:
                self.workqueue.move_to_end(CHECKS_SCOPE)
            super()._assign_work_unit(node)

    return ChecksLast(config, log)
