"""Per-model prices as configuration (docs/protocol.md#costs): ini lines, a TOML/JSON file, or
``GAUGE_PRICES`` JSON.

Never constants in code. A model without a price has cost ``None`` ("unknown"), never 0.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from ..records import Usage

__all__ = [
    "GENAI_PRICES",
    "Price",
    "PriceRow",
    "PriceTable",
    "check_genai_prices",
    "cost_of",
    "genai_price_rows",
    "load_prices",
    "with_genai_prices",
]

GENAI_PRICES = "genai-prices"
"""``--gauge-prices genai-prices``: prices of models not configured otherwise from the ``genai-prices``
package (the optional extra ``pytest-gauge[prices]``)."""

PriceRow = tuple[str, float, float] | tuple[str, float, float, float | None, str]
"""``(model, input, output)`` or ``(model, input, output, cached_input, source)``, USD per million tokens:
the form options carry (hashable, picklable to xdist workers)."""


@dataclass(frozen=True)
class Price:
    """One model's prices in USD per million tokens, and where they came from (named in cost reports).

    ``cached_input`` prices the cached part of the prompt (``usage.cached_tokens``); None bills it as
    ordinary input."""

    input: float
    output: float
    cached_input: float | None = None
    source: str = "configured"

    def cost(self, usage: Usage) -> float:
        """The cost of one call's usage: cached prompt tokens at the cached-input price when there is one."""
        cached = min(usage.cached_tokens or 0, usage.prompt_tokens) if self.cached_input is not None else 0
        fresh = cost_of(usage.prompt_tokens - cached, usage.completion_tokens, self.input, self.output)
        return fresh + cached / 1e6 * (self.cached_input or 0.0)


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
            out.append((model, p.input, p.output, p.cached_input, p.source))
        return out

    @classmethod
    def from_rows(cls, rows: tuple[PriceRow, ...]) -> PriceTable:
        table: dict[str, Price | tuple[float, float]] = {}
        for row in rows:
            if len(row) == 3:
                table[row[0]] = Price(row[1], row[2])
            else:
                table[row[0]] = Price(row[1], row[2], row[3], row[4])
        return cls(table)

    def cost(self, model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
        """est_cost (docs/protocol.md#costs) of plain token counts; None when the model has no price."""
        return self.usage_cost(model, Usage(prompt_tokens, completion_tokens))

    def usage_cost(self, model: str, usage: Usage) -> float | None:
        """The cost of a call's usage (cached input at its own price); None when the model has no price."""
        price = self.price(model)
        return None if price is None else price.cost(usage)

    def has(self, model: str) -> bool:
        return model in self.prices


def cost_of(input_tokens: int, output_tokens: int, input_per_m: float, output_per_m: float) -> float:
    """``input/1e6 * input_price + output/1e6 * output_price``."""
    return input_tokens / 1e6 * input_per_m + output_tokens / 1e6 * output_per_m


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= 0


def _from_mapping(data: object, where: str) -> dict[str, Price]:
    """``{model: {input, output[, cached_input]}}`` or ``{model: [input, output[, cached_input]]}``."""
    if not isinstance(data, dict):
        raise pytest.UsageError(f"{where}: expected a table of models")
    table = data.get("prices", data)
    out: dict[str, Price] = {}
    for model, entry in table.items():
        if isinstance(entry, dict) and "input" in entry and "output" in entry:
            values = [entry["input"], entry["output"], entry.get("cached_input")]
        elif isinstance(entry, list | tuple) and len(entry) in (2, 3):
            values = [*entry, None][:3]
        else:
            raise pytest.UsageError(
                f"{where}: model {model!r} needs input and output prices per million tokens"
                " (and optionally a cached-input price)"
            )
        if not all(_number(p) for p in values[:2]) or not (values[2] is None or _number(values[2])):
            raise pytest.UsageError(f"{where}: prices of {model!r} must be non-negative numbers")
        cached = None if values[2] is None else float(values[2])
        out[str(model)] = Price(float(values[0]), float(values[1]), cached, where)
    return out


def load_prices(
    *,
    ini_lines: list[PriceRow],
    file: str | None,
    environ: Mapping[str, str],
    base: Path,
) -> PriceTable:
    """Merge prices: ini lines, then the file, then ``GAUGE_PRICES`` (later sources win per model)."""
    prices: dict[str, Price | tuple[float, float]] = {
        row[0]: p for row in ini_lines if (p := PriceTable.from_rows((row,)).price(row[0])) is not None
    }
    if file:
        path = (base / file) if not Path(file).is_absolute() else Path(file)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise pytest.UsageError(f"prices file {path}: {exc.strerror}") from None
        try:
            data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
        except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
            raise pytest.UsageError(f"prices file {path}: {exc}") from None
        prices.update(_from_mapping(data, f"prices file {file}"))
    env = environ.get("GAUGE_PRICES")
    if env:
        try:
            prices.update(_from_mapping(json.loads(env), "GAUGE_PRICES"))
        except json.JSONDecodeError as exc:
            raise pytest.UsageError(f"GAUGE_PRICES is not valid JSON: {exc}") from None
    return PriceTable(prices)


def check_genai_prices() -> None:
    """Fail with the fix when ``--gauge-prices genai-prices`` is asked for but the package is missing."""
    try:
        import genai_prices  # noqa: F401
    except ImportError:
        raise pytest.UsageError(
            "--gauge-prices genai-prices needs the genai-prices package: pip install 'pytest-gauge[prices]'"
        ) from None


def genai_price_rows(models: Iterable[str]) -> list[PriceRow]:
    """Prices per million tokens (input, output, cached input) of each model genai-prices knows, with the
    source naming the package version and the matched provider/model; unknown models are left out
    (their cost stays unknown, never 0)."""
    import genai_prices

    rows: list[PriceRow] = []
    for model in sorted(set(models)):
        try:
            base = genai_prices.calc_price(genai_prices.Usage(input_tokens=10**6, output_tokens=10**6), model)
            cached = genai_prices.calc_price(
                genai_prices.Usage(input_tokens=10**6, cache_read_tokens=10**6), model
            )
        except LookupError:
            continue
        source = f"genai-prices {genai_prices.__version__}: {base.provider.id}/{base.model.id}"
        rows.append(
            (model, float(base.input_price), float(base.output_price), float(cached.input_price), source)
        )
    return rows


def with_genai_prices(rows: tuple[PriceRow, ...], models: Iterable[str]) -> tuple[PriceRow, ...]:
    """``rows`` plus genai-prices rows for the models they do not price (configured prices win)."""
    priced = {row[0] for row in rows}
    extra = genai_price_rows(m for m in models if m not in priced)
    return tuple(sorted([*rows, *extra], key=lambda row: row[0]))
