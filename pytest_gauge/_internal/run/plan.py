"""The order the look-ahead walks a process's work in: collection order, with the long chains pulled
ahead. A transcript is a chain of calls (the agent's and the user's, turn after turn) that its cases'
verdicts wait behind, a verdict a single call; walking them side by side, the last transcripts start
so late that the run ends on their dialogues and verdicts while the other slots sit idle. Starting each
transcript a window's worth of units early keeps the end of the run made of short, independent calls.
The order changes when work starts, never what it produces (results are a function of the requests).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

__all__ = ["long_chains_first"]

T = TypeVar("T")


def long_chains_first(units: Sequence[T], is_long: Callable[[T], bool], window: int) -> list[T]:
    """``units`` with every long unit moved up to ``window`` places earlier: a long unit at place ``j``
    comes before every short unit at a place below ``j - window``. Long units keep their order among
    themselves, short ones theirs, and a long unit only moves earlier (a transcript stays before the
    verdicts that need it)."""
    longs = [i for i, unit in enumerate(units) if is_long(unit)]
    out: list[T] = []
    j = 0
    for i, unit in enumerate(units):
        while j < len(longs) and longs[j] <= i + window:
            out.append(units[longs[j]])
            j += 1
        if not is_long(unit):
            out.append(unit)
    return out
