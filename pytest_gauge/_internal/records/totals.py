"""The one rule every sum over ledger records follows (docs/protocol.md#ledger): tokens and cost of some
records, and the totals of a ledger (logical calls, attempts sent, cache hits). The ledger's files are
:mod:`pytest_gauge._internal.gateway.ledger`'s; every figure of what calls cost is summed here."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from . import LedgerRecord
from .ledger_columns import per_ledger

__all__ = [
    "LedgerTotals",
    "TokenCost",
    "TokenCostBuilder",
    "TotalsBuilder",
    "ledger_totals",
    "role_totals",
    "token_cost",
    "totals_by_role",
]


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


def token_cost(records: Iterable[LedgerRecord]) -> TokenCost:
    """The tokens and cost of ``records`` (see :class:`TokenCost`), in one pass: the report sums every
    (role, model) group of a ledger several times, so this is on the end of every run's path."""
    builder = TokenCostBuilder()
    for r in records:
        builder.add(r)
    return builder.build()


class TokenCostBuilder:
    """:func:`token_cost` summed a record at a time, so a caller grouping a ledger keeps sums, not lists
    of its records (made anew from the ledger's columns, they would all be alive at once)."""

    __slots__ = ("costs", "input_tokens", "output_tokens", "records", "unpriced")

    def __init__(self) -> None:
        self.records = self.input_tokens = self.output_tokens = self.unpriced = 0
        self.costs: list[float] = []

    def add(self, r: LedgerRecord) -> None:
        self.records += 1
        usage = r.usage
        if usage is not None:
            self.input_tokens += usage.prompt_tokens
            self.output_tokens += usage.output_tokens
        if r.cost is not None:
            self.costs.append(r.cost)
        elif usage is not None:
            self.unpriced += 1

    def build(self) -> TokenCost:
        priced = math.fsum(self.costs)  # exact: the same figure whatever the records' order
        return TokenCost(
            records=self.records,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            total_tokens=self.input_tokens + self.output_tokens,
            cost=None if self.unpriced else priced,
            priced_cost=priced,
            unpriced=self.unpriced,
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
    builder = TotalsBuilder()
    for r in records:
        builder.add(r)
    return builder.build()


@per_ledger
def totals_by_role(ledger: Sequence[LedgerRecord]) -> Mapping[str, LedgerTotals]:
    """:func:`ledger_totals` of each role's records (the roles that have any), in one pass."""
    builders: dict[str, TotalsBuilder] = {}
    for r in ledger:
        builder = builders.get(r.role)
        if builder is None:
            builder = builders[r.role] = TotalsBuilder()
        builder.add(r)
    return {role: builder.build() for role, builder in builders.items()}


def role_totals(ledger: Sequence[LedgerRecord], role: str) -> LedgerTotals:
    """:func:`ledger_totals` of ``role``'s records (all zero when it made no call), from
    :func:`totals_by_role`."""
    return totals_by_role(ledger).get(role) or ledger_totals(())


class TotalsBuilder:
    """:func:`ledger_totals` summed a record at a time, in one pass (see :class:`TokenCostBuilder`)."""

    __slots__ = ("cached", "call_ids", "failed", "live", "nominal", "possibly_billed", "usage_missing")

    def __init__(self) -> None:
        self.call_ids: set[str] = set()
        self.live, self.cached, self.nominal = TokenCostBuilder(), TokenCostBuilder(), TokenCostBuilder()
        self.failed = self.possibly_billed = self.usage_missing = 0

    def add(self, r: LedgerRecord) -> None:
        self.call_ids.add(r.call_id)
        self.nominal.add(r)
        if r.cache_hit:
            self.cached.add(r)
        else:
            self.live.add(r)
            # failed attempts that may have been billed, and retries a proxy made upstream within one
            self.possibly_billed += (1 if r.possibly_billed else 0) + (r.gateway_retries or 0)
        self.failed += 1 if r.status != "ok" else 0
        self.usage_missing += 1 if r.usage_missing else 0

    def build(self) -> LedgerTotals:
        return LedgerTotals(
            calls=len(self.call_ids),
            live=self.live.build(),
            cached=self.cached.build(),
            nominal=self.nominal.build(),
            failed=self.failed,
            possibly_billed=self.possibly_billed,
            usage_missing=self.usage_missing,
        )
