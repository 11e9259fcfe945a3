"""Looks of an adaptive run (``--gauge-adaptive``): which tasks each look holds, and the gate
every process waits at before it starts work of a look the controller has not opened.

A suite's tasks are taken in a seeded random order, ``look_size`` tasks per look (every pair, order and
sample of a task in the same look). Look ``k`` of the run is look ``k`` of every suite. Work of look
``k + 1`` starts only once the controller has evaluated the gates on looks ``1..k`` and opened it, so
every process makes the same calls whatever ``-n`` is, and a run that stops sends nothing past its last
look (docs/protocol.md#adaptive-runs).
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["LookClosed", "LookGate", "LookPlan", "LookState", "plan_looks"]


class LookClosed(Exception):
    """The run stopped before this unit's look: the unit is not needed (nothing is stored)."""


@dataclass(frozen=True)
class LookPlan:
    """Per suite, the task ids of each look in order (look 1 first)."""

    looks: Mapping[str, tuple[tuple[str, ...], ...]]
    look_size: int

    @property
    def planned(self) -> int:
        """The number of looks of the run: the most any suite has."""
        return max((len(v) for v in self.looks.values()), default=0)

    def look_of(self, suite: str, task_id: str) -> int:
        """The 1-based look that holds the task (0 for a task outside the plan, which never waits)."""
        for index, tasks in enumerate(self.looks.get(suite, ()), start=1):
            if task_id in tasks:
                return index
        return 0

    def total_tasks(self, suite: str) -> int:
        return sum(len(t) for t in self.looks.get(suite, ()))

    def tasks_through(self, suite: str, look: int) -> int:
        """How many of the suite's tasks looks ``1..look`` hold."""
        return sum(len(t) for t in self.looks.get(suite, ())[: max(look, 0)])

    def fractions(self, suite: str) -> tuple[float, ...]:
        """The suite's planned information fractions: tasks through each look over all of its tasks."""
        total = self.total_tasks(suite)
        count = len(self.looks.get(suite, ()))
        return tuple(self.tasks_through(suite, k) / total for k in range(1, count + 1)) if total else ()


def _rank(seed: int, suite: str, task_id: str) -> str:
    return hashlib.sha256(f"{seed}\x1f{suite}\x1f{task_id}".encode()).hexdigest()


def plan_looks(tasks: Mapping[str, Sequence[str]], *, seed: int, look_size: int) -> LookPlan:
    """Each suite's distinct task ids in a seeded random order (the same in every process and on every
    re-run with the seed), cut into looks of ``look_size`` tasks."""
    looks: dict[str, tuple[tuple[str, ...], ...]] = {}
    for suite, ids in tasks.items():
        order = sorted(dict.fromkeys(ids), key=lambda t, s=suite: _rank(seed, s, t))  # type: ignore[misc]
        looks[suite] = tuple(tuple(order[i : i + look_size]) for i in range(0, len(order), look_size))
    return LookPlan(looks, look_size)


@dataclass(frozen=True)
class LookState:
    """The controller's word on the looks: work of looks ``1..opened`` may run; ``stopped_after`` set
    means the run needs nothing past that look (``reason`` says why, for the skipped cases)."""

    opened: int = 1
    stopped_after: int | None = None
    reason: str = ""

    def allows(self, look: int) -> bool | None:
        """True: the look's work may run; False: it never will (the run stopped before it); None: wait."""
        if self.stopped_after is not None and look > self.stopped_after:
            return False
        return True if look <= self.opened else None

    def to_json(self) -> dict[str, object]:
        return {"opened": self.opened, "stopped_after": self.stopped_after, "reason": self.reason}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> LookState:
        stopped = data.get("stopped_after")
        opened = data.get("opened", 1)
        return cls(
            opened=int(opened) if isinstance(opened, int) else 1,
            stopped_after=int(stopped) if isinstance(stopped, int) else None,
            reason=str(data.get("reason") or ""),
        )


class LookGate:
    """Where a process waits for a look to open: test items (a thread) and engine units (asyncio). The
    state is set by whoever hears the controller: the controller itself without xdist, a watcher thread
    on a worker."""

    def __init__(self, plan: LookPlan) -> None:
        self.plan = plan
        self._state = LookState()
        self._changed = threading.Condition()

    @property
    def state(self) -> LookState:
        return self._state

    def update(self, state: LookState) -> None:
        """The controller's new word; a stop is final (a late, older word does not undo it)."""
        with self._changed:
            if self._state.stopped_after is None:
                self._state = state
            self._changed.notify_all()

    def wait(self, look: int, poll: float = 0.25) -> bool:
        """Block until the look opens (True) or the run stops before it (False). Polls, so that Ctrl-C
        reaches the waiting thread."""
        with self._changed:
            while (allowed := self._state.allows(look)) is None:
                self._changed.wait(poll)
            return allowed

    async def opened(self, look: int, poll: float = 0.02) -> bool:
        """The engine's wait: True when the look's work may start, False when it is not needed."""
        while (allowed := self._state.allows(look)) is None:
            await asyncio.sleep(poll)
        return allowed
