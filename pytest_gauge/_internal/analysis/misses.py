"""What a ``--gauge-cache replay-then-live`` run sent live
(docs/protocol.md#record-once-replay-on-pull-requests): the calls no recording answered, counted and
priced apart from those replayed. Pure: ledger records in."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from ..records import LedgerRecord
from ..records.totals import TokenCost, token_cost

__all__ = ["LiveMisses", "live_misses"]


@dataclass(frozen=True)
class LiveMisses:
    """The calls sent live (misses: distinct call ids with an attempt sent) and those replayed (answered
    from the cache or cassettes only); ``spent`` is the misses' attempts' tokens and cost (the ledger's one
    rule), ``by_role`` the misses per role, ``works`` the work each miss belongs to (sorted, unique)."""

    calls: int
    replayed: int
    spent: TokenCost
    by_role: tuple[tuple[str, int], ...]
    works: tuple[str, ...]


def live_misses(ledger: Sequence[LedgerRecord]) -> LiveMisses:
    """The misses of a run's (or a suite's) ledger records."""
    sent = [r for r in ledger if not r.cache_hit]
    missed = {r.call_id: r for r in sent}
    replayed = {r.call_id for r in ledger if r.cache_hit} - set(missed)
    roles = Counter(r.role for r in missed.values())
    return LiveMisses(
        calls=len(missed),
        replayed=len(replayed),
        spent=token_cost(sent),
        by_role=tuple(sorted(roles.items())),
        works=tuple(sorted({r.work for r in missed.values()})),
    )
