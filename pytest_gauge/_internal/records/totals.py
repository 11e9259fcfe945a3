"""The one rule every sum over ledger records follows (docs/protocol.md#ledger): tokens and cost of some
records, and the totals of a ledger (logical calls, attempts sent, cache hits). The ledger's files are
:mod:`pytest_gauge._internal.gateway.ledger`'s; every figure of what calls cost is summed here."""

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
    """The tokens and cost of ``records`` (see :class:`TokenCost`), in one pass: the report sums every
    (role, model) group of a ledger several times, so this is on the end of every run's path."""
    input_tokens = output_tokens = total_tokens = unpriced = 0
    costs: list[float] = []
    for r in records:
        usage = r.usage
        if usage is not None:
            prompt = usage.prompt_tokens
            input_tokens += prompt
            output_tokens += usage.output_tokens
            total_tokens += prompt + usage.output_tokens
        if r.cost is not None:
            costs.append(r.cost)
        elif usage is not None:
            unpriced += 1
    priced = math.fsum(costs)  # exact: the same figure whatever the records' order
    return TokenCost(
        records=len(records),
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        total_tokens=total_tokens,
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
    live: list[LedgerRecord] = []
    cached: list[LedgerRecord] = []
    failed = possibly_billed = usage_missing = 0
    for r in everything:
        if r.cache_hit:
            cached.append(r)
        else:
            live.append(r)
            # failed attempts that may have been billed, and retries a proxy made upstream within one
            possibly_billed += (1 if r.possibly_billed else 0) + (r.gateway_retries or 0)
        failed += 1 if r.status != "ok" else 0
        usage_missing += 1 if r.usage_missing else 0
    return LedgerTotals(
        calls=len({r.call_id for r in everything}),
        live=token_cost(live),
        cached=token_cost(cached),
        nominal=token_cost(everything),
        failed=failed,
        possibly_billed=possibly_billed,
        usage_missing=usage_missing,
    )
