"""Per-model prices as configuration (docs/protocol.md#costs): ini lines, a TOML/JSON file, or
``GAUGE_PRICES`` JSON, read into :mod:`pytest_gauge.records.prices`'s values.

Never constants in code. A model without a price has cost ``None`` ("unknown"), never 0.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

from ..files.readwrite import MAX_FILE_BYTES, loads_bounded
from ..records.prices import Price, PriceRow, PriceTable

__all__ = [
    "GENAI_PRICES",
    "check_genai_prices",
    "genai_price_rows",
    "load_prices",
    "parse_price_lines",
    "with_genai_prices",
]

GENAI_PRICES = "genai-prices"
"""``--gauge-prices genai-prices``: prices of models not configured otherwise from the ``genai-prices``
package (the optional extra ``pytest-gauge[prices]``)."""


MAX_PRICE_PER_M = 1_000_000.0
"""Highest price accepted, dollars per million tokens (the dearest models cost some hundreds): a cost summed
over a run stays finite, so a typo such as ``1e308`` is refused at the start, not an overflow at the end."""


def price_number(value: object) -> bool:
    """A price per million tokens this package can sum: a number from 0 to :data:`MAX_PRICE_PER_M`."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and 0 <= value <= MAX_PRICE_PER_M
    )


def _from_mapping(data: object, where: str) -> dict[str, Price]:
    """``{model: {input, output[, cached_input][, cache_write][, cache_write_1h][, context_tokens]
    [, batch]}}`` or ``{model: [input, output[, cached_input]]}``."""
    if not isinstance(data, dict):
        raise pytest.UsageError(f"{where}: expected a table of models")
    table = data.get("prices", data)
    if not isinstance(table, dict):
        raise pytest.UsageError(f"{where}: 'prices' must be a table of models, got {type(table).__name__}")
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
        if not all(price_number(p) for p in values[:2]) or not (values[2] is None or price_number(values[2])):
            raise pytest.UsageError(
                f"{where}: prices of {model!r} must be numbers from 0 to {MAX_PRICE_PER_M:,.0f} per"
                " million tokens"
            )
        cached = None if values[2] is None else float(values[2])
        window = entry.get("context_tokens") if isinstance(entry, dict) else None
        if window is not None and not (
            isinstance(window, int) and not isinstance(window, bool) and window > 0
        ):
            raise pytest.UsageError(f"{where}: context_tokens of {model!r} must be a positive whole number")
        writes = _write_prices(entry, model, where) if isinstance(entry, dict) else (None, None)
        share = entry.get("batch") if isinstance(entry, dict) else None
        if share is not None and not (price_number(share) and share <= 1):
            raise pytest.UsageError(
                f"{where}: batch of {model!r} must be a share of the ordinary price from 0 to 1 (0.5: half)"
            )
        batch = None if share is None else float(share)
        out[str(model)] = Price(float(values[0]), float(values[1]), cached, where, window, *writes, batch)
    return out


def _write_prices(
    entry: Mapping[str, object], model: object, where: str
) -> tuple[float | None, float | None]:
    """A file entry's ``cache_write`` and ``cache_write_1h`` prices (None when not given)."""
    found: list[float | None] = []
    for key in ("cache_write", "cache_write_1h"):
        value = entry.get(key)
        if value is not None and not price_number(value):
            limit = f"from 0 to {MAX_PRICE_PER_M:,.0f} per million tokens"
            raise pytest.UsageError(f"{where}: {key} of {model!r} must be a number {limit}")
        found.append(None if value is None else float(value))  # type: ignore[arg-type]
    return found[0], found[1]


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
            if path.stat().st_size > MAX_FILE_BYTES:
                raise pytest.UsageError(f"prices file {path}: larger than {MAX_FILE_BYTES // 2**20} MiB")
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise pytest.UsageError(f"prices file {path}: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise pytest.UsageError(f"prices file {path}: not UTF-8 text") from None
        try:
            data = tomllib.loads(text) if path.suffix == ".toml" else loads_bounded(text)
        except (tomllib.TOMLDecodeError, ValueError, RecursionError) as exc:
            raise pytest.UsageError(f"prices file {path}: {exc}") from None
        prices.update(_from_mapping(data, f"prices file {file}"))
    env = environ.get("GAUGE_PRICES")
    if env:
        try:
            prices.update(_from_mapping(loads_bounded(env), "GAUGE_PRICES"))
        except ValueError as exc:
            raise pytest.UsageError(f"GAUGE_PRICES is not valid JSON: {exc}") from None
    return PriceTable(prices)


def check_genai_prices() -> None:
    """Fail with the fix when ``--gauge-prices genai-prices`` is asked for but the package is missing."""
    try:
        import genai_prices  # deferred: keeps genai_prices off the import of gateway.prices  # noqa: F401
    except ImportError:
        raise pytest.UsageError(
            "--gauge-prices genai-prices needs the genai-prices package: pip install 'pytest-gauge[prices]'"
        ) from None


def genai_price_rows(models: Iterable[str]) -> list[PriceRow]:
    """Prices per million tokens (input, output, cached input) of each model genai-prices knows, with the
    source naming the package version and the matched provider/model, and its context window when the
    data has one (``context_window``: what a judge's prompt is shortened to fit); unknown models are left out
    (their cost stays unknown, never 0)."""
    import genai_prices  # deferred: keeps genai_prices off the import of gateway.prices

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
        prices = (float(base.input_price), float(base.output_price), float(cached.input_price))
        window = getattr(base.model, "context_window", None)
        if isinstance(window, int) and window > 0:  # the model's window, when the data knows it
            rows.append((model, *prices, source, window))
        else:
            rows.append((model, *prices, source))
    return rows


def with_genai_prices(rows: tuple[PriceRow, ...], models: Iterable[str]) -> tuple[PriceRow, ...]:
    """``rows`` plus genai-prices rows for the models they do not price (configured prices win)."""
    priced = {row[0] for row in rows}
    extra = genai_price_rows(m for m in models if m not in priced)
    return tuple(sorted([*rows, *extra], key=lambda row: row[0]))


def parse_price_lines(lines: list[str]) -> list[PriceRow]:
    """``MODEL INPUT_PER_M OUTPUT_PER_M [CACHED_INPUT_PER_M] [context=TOKENS] [batch=SHARE]`` lines (ini
    ``gauge_prices``) as price rows (``context=`` is the model's context window, which a judge's prompt is
    shortened to fit; ``batch=`` a batched call's share of the ordinary price, 0.5 when not given)."""
    prices: list[PriceRow] = []
    usage = (
        "gauge_prices: expected 'MODEL INPUT_PER_M OUTPUT_PER_M [CACHED_INPUT_PER_M] [context=TOKENS]"
        " [batch=SHARE]'"
    )
    for line in lines:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split()
        window_parts = [p for p in parts[1:] if p.startswith("context=")]
        batch_parts = [p for p in parts[1:] if p.startswith("batch=")]
        parts = [p for p in parts if not p.startswith(("context=", "batch="))]
        if len(parts) not in (3, 4) or len(window_parts) > 1 or len(batch_parts) > 1:
            raise pytest.UsageError(f"{usage}, got {line!r}")
        try:
            numbers = [float(p) for p in parts[1:]]
            window = int(window_parts[0].split("=", 1)[1]) if window_parts else None
            batch = float(batch_parts[0].split("=", 1)[1]) if batch_parts else None
        except ValueError:
            raise pytest.UsageError(
                f"gauge_prices: prices and context= must be numbers in {line!r}"
            ) from None
        if not all(price_number(n) for n in numbers):
            raise pytest.UsageError(
                f"gauge_prices: prices must be numbers from 0 to {MAX_PRICE_PER_M:,.0f} per million tokens"
                f" in {line!r}"
            )
        if window is not None and window <= 0:
            raise pytest.UsageError(f"gauge_prices: context= must be a positive number of tokens in {line!r}")
        cached = numbers[2] if len(numbers) == 3 else None
        if batch is not None:
            if not 0 <= batch <= 1:
                raise pytest.UsageError(f"gauge_prices: batch= must be a share from 0 to 1 in {line!r}")
            prices.append(
                (parts[0], numbers[0], numbers[1], cached, "ini gauge_prices", window, None, None, batch)
            )
        elif window is None:
            prices.append((parts[0], numbers[0], numbers[1], cached, "ini gauge_prices"))
        else:
            prices.append((parts[0], numbers[0], numbers[1], cached, "ini gauge_prices", window))
    return prices
