"""Per-model prices as values (docs/protocol.md#costs): what a model costs per million tokens and where
the price came from. Reading them from ini lines, a file or ``GAUGE_PRICES`` is
:mod:`pytest_gauge.gateway.prices`'s; every stage that prices a call or a report reads these values.

A model without a price has cost ``None`` ("unknown"), never 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from . import Usage

__all__ = [
    "BATCH_SHARE",
    "WRITE_1H_MULTIPLIER",
    "WRITE_MULTIPLIER",
    "Price",
    "PriceRow",
    "PriceTable",
    "cost_of",
]

PriceRow = (
    tuple[str, float, float]
    | tuple[str, float, float, float | None, str]
    | tuple[str, float, float, float | None, str, int | None]
    | tuple[str, float, float, float | None, str, int | None, float | None, float | None]
    | tuple[str, float, float, float | None, str, int | None, float | None, float | None, float | None]
)
"""``(model, input, output)``, ``(model, input, output, cached_input, source)`` or the same with the model's
context window in tokens (``context_tokens``, what a judge's prompt is shortened to fit), then the cache
write prices (``cache_write``, ``cache_write_1h``) when the model has one, USD per million tokens, then
the batch price as a share of the ordinary one (``batch``) when configured: the form options carry
(hashable, picklable to xdist workers)."""


WRITE_MULTIPLIER = 1.25
"""A cache write's price as a multiple of the input price when the model has no ``cache_write`` price
(Anthropic's five-minute cache writes; the only wire format that reports writes is Messages)."""
BATCH_SHARE = 0.5
"""A batched call's price as a share of the ordinary one when the model has no ``batch`` price
(OpenAI's Batch API and Anthropic's Message Batches both bill half)."""
WRITE_1H_MULTIPLIER = 2.0
"""The same for writes to the one-hour cache when the model has no ``cache_write_1h`` price."""


@dataclass(frozen=True)
class Price:
    """One model's prices in USD per million tokens, and where they came from (named in cost reports).

    ``cached_input`` prices the input read from the prompt cache (``usage.cached_input_tokens``); None
    bills it as ordinary input. ``cache_write`` prices the input written to the cache
    (``usage.cache_write_tokens``), ``cache_write_1h`` the part of those written to a one-hour cache;
    None bills them at :data:`WRITE_MULTIPLIER` (:data:`WRITE_1H_MULTIPLIER`) times the input price."""

    input: float
    output: float
    cached_input: float | None = None
    source: str = "configured"
    context_tokens: int | None = None  # the model's context window, when the table knows it
    cache_write: float | None = None
    cache_write_1h: float | None = None
    batch: float | None = None  # a batched call's price as a share of this one (None: BATCH_SHARE)

    @property
    def batch_share(self) -> float:
        """What a batched call costs as a share of the same call sent alone: ``batch``, else 0.5."""
        return self.batch if self.batch is not None else BATCH_SHARE

    def cost(self, usage: Usage) -> float:
        """The cost of one call's usage (docs/protocol.md#costs): uncached input at the input price, cache
        reads at the cached-input price (else the input price), cache writes at the write prices,
        output at the output price."""
        reads = usage.cached_input_tokens or 0
        at_input = usage.input_tokens + (reads if self.cached_input is None else 0)
        total = cost_of(at_input, usage.output_tokens, self.input, self.output)
        if self.cached_input is not None:
            total += reads / 1e6 * self.cached_input
        writes = usage.cache_write_tokens or 0
        if writes:
            hour = min(usage.cache_write_1h_tokens or 0, writes)
            total += (writes - hour) / 1e6 * self.write_price + hour / 1e6 * self.write_1h_price
        return total

    @property
    def write_price(self) -> float:
        """The price of a (five-minute) cache write: ``cache_write``, else 1.25 × input."""
        return self.cache_write if self.cache_write is not None else WRITE_MULTIPLIER * self.input

    @property
    def write_1h_price(self) -> float:
        """The price of a one-hour cache write: ``cache_write_1h``, else 2 × input."""
        return self.cache_write_1h if self.cache_write_1h is not None else WRITE_1H_MULTIPLIER * self.input


@dataclass(frozen=True)
class PriceTable:
    """Prices by model name (a plain ``(input, output)`` pair is read as a configured price)."""

    prices: Mapping[str, Price | tuple[float, float]]

    def price(self, model: str) -> Price | None:
        found = self.prices.get(model)
        if found is None or isinstance(found, Price):
            return found
        return Price(float(found[0]), float(found[1]))

    def rows(self) -> list[PriceRow]:
        out: list[PriceRow] = []
        for model in self.prices:
            p = self.price(model)
            assert p is not None
            if p.batch is not None:
                writes = (p.cache_write, p.cache_write_1h)
                row = (model, p.input, p.output, p.cached_input, p.source, p.context_tokens, *writes, p.batch)
                out.append(row)
            elif p.cache_write is not None or p.cache_write_1h is not None:
                writes = (p.cache_write, p.cache_write_1h)
                out.append((model, p.input, p.output, p.cached_input, p.source, p.context_tokens, *writes))
            elif p.context_tokens is None:
                out.append((model, p.input, p.output, p.cached_input, p.source))
            else:
                out.append((model, p.input, p.output, p.cached_input, p.source, p.context_tokens))
        return out

    @classmethod
    def from_rows(cls, rows: tuple[PriceRow, ...]) -> PriceTable:
        table: dict[str, Price | tuple[float, float]] = {}
        for row in rows:
            if len(row) == 3:
                table[row[0]] = Price(row[1], row[2])
            elif len(row) == 5:
                table[row[0]] = Price(row[1], row[2], row[3], row[4])
            elif len(row) == 6:
                table[row[0]] = Price(row[1], row[2], row[3], row[4], row[5])
            elif len(row) == 8:
                table[row[0]] = Price(row[1], row[2], row[3], row[4], row[5], row[6], row[7])
            else:
                table[row[0]] = Price(row[1], row[2], row[3], row[4], row[5], row[6], row[7], row[8])
        return cls(table)

    def context_tokens(self, model: str) -> int | None:
        """The model's context window from the table (a ``context_tokens`` column, or genai-prices' data);
        None when not known."""
        price = self.price(model)
        return None if price is None else price.context_tokens

    def cost(self, model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
        """est_cost (docs/protocol.md#costs) of plain token counts; None when the model has no price."""
        return self.usage_cost(model, Usage(input_tokens=prompt_tokens, output_tokens=completion_tokens))

    def usage_cost(self, model: str, usage: Usage) -> float | None:
        """The cost of a call's usage (cached input at its own price); None when the model has no price."""
        price = self.price(model)
        return None if price is None else price.cost(usage)

    def batch_cost(self, model: str, usage: Usage) -> float | None:
        """The cost of a batched call's usage: the ordinary cost times the model's batch share."""
        price = self.price(model)
        return None if price is None else price.cost(usage) * price.batch_share

    def has(self, model: str) -> bool:
        return model in self.prices


def cost_of(input_tokens: int, output_tokens: int, input_per_m: float, output_per_m: float) -> float:
    """``input/1e6 * input_price + output/1e6 * output_price``."""
    return input_tokens / 1e6 * input_per_m + output_tokens / 1e6 * output_per_m
