"""Which waiting call gets a freed request slot first: the one with the longest chain of calls still to
come behind it (critical path first), so the dialogues that take the most turns start early and the
run does not end on a long chain while the other slots sit idle. Among equal chains, first come first
served.

The engine says how long a unit's chain is (:func:`set_call_chain`, a context variable its tasks
inherit); a call nobody ranked (a user's own test calling ``gauge_client``, a test item's demand)
comes first, since a test waits on it now.
"""

from __future__ import annotations

import bisect
import contextvars
import itertools
from collections.abc import Iterator
from typing import Generic, TypeVar

__all__ = ["UNRANKED", "WaitLine", "call_chain", "reset_call_chain", "set_call_chain"]

UNRANKED = 1 << 30
"""The chain of a call outside the engine's look-ahead: ahead of every ranked one."""

_CHAIN: contextvars.ContextVar[int] = contextvars.ContextVar("gauge_call_chain", default=UNRANKED)


def set_call_chain(calls: int) -> contextvars.Token[int]:
    """Say that the current task (and the tasks it starts) has ``calls`` calls on its longest chain,
    this one included: its calls wait for a slot ahead of shorter chains'."""
    return _CHAIN.set(calls)


def reset_call_chain(token: contextvars.Token[int]) -> None:
    """Undo :func:`set_call_chain`."""
    _CHAIN.reset(token)


def call_chain() -> int:
    """The current task's chain length (:data:`UNRANKED` when nobody ranked it)."""
    return _CHAIN.get()


T = TypeVar("T")


class WaitLine(Generic[T]):
    """Waiters ordered by their chain, longest first, then by arrival: what a deque of waiters was,
    with the head being the most urgent one rather than the oldest."""

    def __init__(self) -> None:
        self._keys: list[tuple[int, int]] = []  # (-chain, arrival), sorted
        self._items: list[T] = []
        self._arrivals = itertools.count()

    def append(self, item: T, chain: int | None = None) -> None:
        """Queue ``item`` behind every waiter of a longer or equal chain (``chain``: the caller's)."""
        key = (-(call_chain() if chain is None else chain), next(self._arrivals))
        at = bisect.bisect(self._keys, key)
        self._keys.insert(at, key)
        self._items.insert(at, item)

    def __getitem__(self, index: int) -> T:
        return self._items[index]

    def popleft(self) -> T:
        del self._keys[0]
        return self._items.pop(0)

    def remove(self, item: T) -> None:
        """Take ``item`` out of the line; ValueError when it is not in it."""
        for at, waiting in enumerate(self._items):
            if waiting is item:
                del self._keys[at]
                del self._items[at]
                return
        raise ValueError("not waiting")

    def __len__(self) -> int:
        return len(self._items)

    def __bool__(self) -> bool:
        return bool(self._items)

    def __iter__(self) -> Iterator[T]:
        return iter(list(self._items))
