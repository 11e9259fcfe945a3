"""Per-model prices as configuration (docs/protocol.md#costs): ini lines, a TOML/JSON file, or
``GAUGE_PRICES`` JSON.

Never constants in code. A model without a price has cost ``None`` ("unknown"), never 0.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = ["PriceTable", "cost_of", "load_prices"]


@dataclass(frozen=True)
class PriceTable:
    """Input and output USD per million tokens, by model name."""

    prices: Mapping[str, tuple[float, float]]

    def items_tuples(self) -> list[tuple[str, float, float]]:
        return [(m, p[0], p[1]) for m, p in self.prices.items()]

    @classmethod
    def from_tuples(cls, rows: tuple[tuple[str, float, float], ...]) -> PriceTable:
        return cls({m: (i, o) for m, i, o in rows})

    def cost(self, model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
        """est_cost (docs/protocol.md#costs); None when the model has no configured price."""
        price = self.prices.get(model)
        if price is None:
            return None
        return cost_of(prompt_tokens, completion_tokens, price[0], price[1])

    def has(self, model: str) -> bool:
        return model in self.prices


def cost_of(input_tokens: int, output_tokens: int, input_per_m: float, output_per_m: float) -> float:
    """``input/1e6 * input_price + output/1e6 * output_price``."""
    return input_tokens / 1e6 * input_per_m + output_tokens / 1e6 * output_per_m


def _from_mapping(data: object, where: str) -> dict[str, tuple[float, float]]:
    if not isinstance(data, dict):
        raise pytest.UsageError(f"{where}: expected a table of models")
    table = data.get("prices", data)
    out: dict[str, tuple[float, float]] = {}
    for model, entry in table.items():
        if isinstance(entry, dict) and "input" in entry and "output" in entry:
            pair = (entry["input"], entry["output"])
        elif isinstance(entry, list | tuple) and len(entry) == 2:
            pair = (entry[0], entry[1])
        else:
            raise pytest.UsageError(
                f"{where}: model {model!r} needs input and output prices per million tokens"
            )
        if not all(isinstance(p, int | float) and not isinstance(p, bool) and p >= 0 for p in pair):
            raise pytest.UsageError(f"{where}: prices of {model!r} must be non-negative numbers")
        out[str(model)] = (float(pair[0]), float(pair[1]))
    return out


def load_prices(
    *,
    ini_lines: list[tuple[str, float, float]],
    file: str | None,
    environ: Mapping[str, str],
    base: Path,
) -> PriceTable:
    """Merge prices: ini lines, then the file, then ``GAUGE_PRICES`` (later sources win per model)."""
    prices: dict[str, tuple[float, float]] = {m: (i, o) for m, i, o in ini_lines}
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
        prices.update(_from_mapping(data, str(path)))
    env = environ.get("GAUGE_PRICES")
    if env:
        try:
            prices.update(_from_mapping(json.loads(env), "GAUGE_PRICES"))
        except json.JSONDecodeError as exc:
            raise pytest.UsageError(f"GAUGE_PRICES is not valid JSON: {exc}") from None
    return PriceTable(prices)
