"""Per-model prices as configuration (docs/protocol.md#costs): ini lines, a TOML/JSON file, or
``GAUGE_PRICES`` JSON, read into :mod:`pytest_gauge.records.prices`'s values.

Never constants in code. A model without a price has cost ``None`` ("unknown"), never 0.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterable, Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from ..records.prices import Price, PriceRow, PriceTable

__all__ = [
    "GENAI_PRICES",
    "check_genai_prices",
    "genai_price_rows",
    "load_prices",
    "with_genai_prices",
]

GENAI_PRICES = "genai-prices"
"""``--gauge-prices genai-prices``: prices of models not configured otherwise from the ``genai-prices``
package (the optional extra ``pytest-gauge[prices]``)."""


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= 0


_WRITE_KEYS = ("cache_write", "cache_write_1h")


def _from_mapping(data: object, where: str) -> dict[str, Price]:
    """``{model: {input, output[, cached_input][, cache_write][, cache_write_1h][, context_tokens]}}`` or
    ``{model: [input, output[, cached_input]]}``."""
    if not isinstance(data, dict):
        raise pytest.UsageError(f"{where}: expected a table of models")
    table = data.get("prices", data)
    out: dict[str, Price] = {}
    for model, entry in table.items():
        if isinstance(entry, dict) and "input" in entry and "output" in entry:
            values = [entry["input"], entry["output"], entry.get("cached_input")]
            writes = [entry.get(k) for k in _WRITE_KEYS]
        elif isinstance(entry, list | tuple) and len(entry) in (2, 3):
            values, writes = [*entry, None][:3], [None, None]
        else:
            raise pytest.UsageError(
                f"{where}: model {model!r} needs input and output prices per million tokens"
                " (and optionally cached_input, cache_write and cache_write_1h prices)"
            )
        optional = [values[2], *writes]
        if not all(_number(p) for p in values[:2]) or not all(p is None or _number(p) for p in optional):
            raise pytest.UsageError(f"{where}: prices of {model!r} must be non-negative numbers")
        cached, write, write_1h = (None if p is None else float(p) for p in optional)
        window = entry.get("context_tokens") if isinstance(entry, dict) else None
        if window is not None and not (
            isinstance(window, int) and not isinstance(window, bool) and window > 0
        ):
            raise pytest.UsageError(f"{where}: context_tokens of {model!r} must be a positive whole number")
        out[str(model)] = Price(float(values[0]), float(values[1]), cached, where, window, write, write_1h)
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


_PROBE = 1000
"""Tokens genai-prices is asked to price (its rates per million are this price × 1e6 / _PROBE): few
enough to stay in a tiered model's first tier (Anthropic's long-context rates start at 200k tokens)."""
_SCALE = 10**6 // _PROBE  # an integer: the Decimal prices scale exactly


def genai_price_rows(models: Iterable[str]) -> list[PriceRow]:
    """Prices per million tokens (input, output, cached input, cache writes and one-hour cache writes when
    the data has them) of each model genai-prices knows, with the source naming the package version and
    the matched provider/model, and its context window when the data has one (``context_window``: what a
    judge's prompt is shortened to fit); unknown models are left out (their cost stays unknown, never 0).
    Rates are those of the first tier (a prompt of :data:`_PROBE` tokens)."""
    import genai_prices

    def rate(**usage: int) -> tuple[float, Any]:
        price = genai_prices.calc_price(genai_prices.Usage(**usage), model)
        return float(price.input_price * _SCALE), price

    rows: list[PriceRow] = []
    for model in sorted(set(models)):
        try:
            base = genai_prices.calc_price(
                genai_prices.Usage(input_tokens=_PROBE, output_tokens=_PROBE), model
            )
            cached, _ = rate(input_tokens=_PROBE, cache_read_tokens=_PROBE)
        except LookupError:
            continue
        source = f"genai-prices {genai_prices.__version__}: {base.provider.id}/{base.model.id}"
        prices = (float(base.input_price * _SCALE), float(base.output_price * _SCALE), cached)
        window = getattr(base.model, "context_window", None)
        window = window if isinstance(window, int) and window > 0 else None  # when the data knows it
        write, write_1h = _write_rates(base.model, rate)
        if write is not None or write_1h is not None:
            rows.append((model, *prices, source, window, write, write_1h))
        elif window is not None:
            rows.append((model, *prices, source, window))
        else:
            rows.append((model, *prices, source))
    return rows


def _write_rates(model: Any, rate: Any) -> tuple[float | None, float | None]:
    """A genai-prices model's cache-write rates per million (five-minute, one-hour), None where its data
    has none (the 1.25× and 2× defaults of records/prices.py then apply)."""
    prices = getattr(model, "prices", None)
    write = getattr(prices, "cache_write_mtok", None)
    write_1h = getattr(prices, "cache_write_1h_mtok", None)
    five = rate(input_tokens=_PROBE, cache_write_tokens=_PROBE)[0] if write is not None else None
    hour = getattr(write_1h, "base", write_1h)  # a tiered price: its first tier
    return five, (float(hour) if isinstance(hour, int | float | Decimal) else None)


def with_genai_prices(rows: tuple[PriceRow, ...], models: Iterable[str]) -> tuple[PriceRow, ...]:
    """``rows`` plus genai-prices rows for the models they do not price (configured prices win)."""
    priced = {row[0] for row in rows}
    extra = genai_price_rows(m for m in models if m not in priced)
    return tuple(sorted([*rows, *extra], key=lambda row: row[0]))
