"""The one rule every sum over ledger records follows (docs/protocol.md#ledger): tokens and cost of some
records, and the totals of a ledger (logical calls, attempts sent, cache hits). The ledger's files are
:mod:`pytest_gauge.gateway.ledger`'s; every figure of what calls cost is summed here."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from . import LedgerRecord

__all__ = ["LedgerTotals", "TokenCost", "ledger_totals", "token_cost"]


@dataclass(frozen=True)
class TokenCost:
    """Tokens and cost of some ledger records. Tokens come from each record's ``usage`` (a record without
    usage adds none); ``cost`` is the exact sum (``math.fsum``) of the records' costs, or None (unknown,
    never $0) when a record reported usage for a model without a price; ``priced_cost`` is the sum of the
    known costs either way, ``unpriced`` the number of records whose cost is unknown."""

    records: int
    input_tokens: int
    output_tokens: int
    total_tokens: int
    cost: float | None
    priced_cost: float
    unpriced: int


def token_cost(records: Sequence[LedgerRecord]) -> TokenCost:
    """The tokens and cost of ``records`` (see :class:`TokenCost`)."""
    unpriced = sum(1 for r in records if r.cost is None and r.usage is not None)
    priced = math.fsum(r.cost for r in records if r.cost is not None)
    return TokenCost(
        records=len(records),
        input_tokens=sum(r.usage.prompt_tokens for r in records if r.usage is not None),
        output_tokens=sum(r.usage.completion_tokens for r in records if r.usage is not None),
        total_tokens=sum(r.usage.total_tokens for r in records if r.usage is not None),
        cost=None if unpriced else priced,
        priced_cost=priced,
        unpriced=unpriced,
    )


@dataclass(frozen=True)
class LedgerTotals:
    """Totals of ledger records (one per attempt or cache hit), the one rule behind every figure of what
    calls cost: ``gauge_ledger.spent()`` and the tests' cost table, ``metrics.json``'s ``spent_this_run``
    and the cost report's per-model rows.

    ``calls`` counts logical calls (distinct ``call_id``: a retried call is one call). ``live`` are the
    attempts sent to the gateway this run (what the run spent), ``cached`` the answers taken from the
    response cache (they spent nothing now; their cost is what they cost when made), ``nominal`` all of
    them. ``failed`` counts records whose status is not ``ok``, ``possibly_billed`` live attempts that
    may have been billed without usage, ``usage_missing`` records whose response had no usage.
    """

    calls: int
    live: TokenCost
    cached: TokenCost
    nominal: TokenCost
    failed: int
    possibly_billed: int
    usage_missing: int


def ledger_totals(records: Iterable[LedgerRecord]) -> LedgerTotals:
    """Sum ``records`` (see :class:`LedgerTotals`)."""
    everything = list(records)
    live = [r for r in everything if not r.cache_hit]
    return LedgerTotals(
        calls=len({r.call_id for r in everything}),
        live=token_cost(live),
        cached=token_cost([r for r in everything if r.cache_hit]),
        nominal=token_cost(everything),
        failed=sum(1 for r in everything if r.status != "ok"),
        # failed attempts that may have been billed, and retries a proxy made upstream within an attempt
        possibly_billed=sum(1 for r in live if r.possibly_billed) + sum(r.gateway_retries or 0 for r in live),
        usage_missing=sum(1 for r in everything if r.usage_missing),
    )
