"""``cache_write`` / ``cache_write_1h`` prices in a prices file (docs/protocol.md#costs): read, carried to
the workers in the option rows, costed as documented, and shown in ``token_cost.md``'s price basis and
its prompt-cache table."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_gauge._internal.gateway.prices import load_prices
from pytest_gauge._internal.records import LedgerRecord, Usage
from pytest_gauge._internal.records.prices import PriceTable
from pytest_gauge._internal.report.common import price_basis
from pytest_gauge._internal.report.costs import _prompt_cache

PRICES = """
[prices.claude-x]
input = 3.0
output = 15.0
cached_input = 0.3
cache_write = 3.75
cache_write_1h = 6.0

[prices.plain]
input = 1.0
output = 2.0
"""


def _table(tmp_path: Path) -> PriceTable:
    (tmp_path / "prices.toml").write_text(PRICES, encoding="utf-8")
    return load_prices(ini_lines=[], file="prices.toml", environ={}, base=tmp_path)


def test_write_prices_are_read_carried_to_workers_and_costed(tmp_path: Path) -> None:
    table = _table(tmp_path)
    carried = PriceTable.from_rows(tuple(table.rows()))  # what options hand to xdist workers
    usage = Usage(1000, 100, cached_input_tokens=2000, cache_write_tokens=4000, cache_write_1h_tokens=1000)
    # 1000 x 3 + 2000 x 0.3 + 3000 x 3.75 + 1000 x 6 + 100 x 15, per million
    expected = (3000 + 600 + 11250 + 6000 + 1500) / 1e6
    for t in (table, carried):
        assert t.usage_cost("claude-x", usage) == pytest.approx(expected)
    plain = carried.price("plain")
    assert plain is not None and plain.cache_write is None and len(table.rows()[1]) == 5  # bytes kept
    prices = {m: p for m in ("claude-x", "plain") if (p := carried.price(m)) is not None}
    assert price_basis(prices, "claude-x").endswith(
        "cached in / $3.75 cache write / $6 1 h cache write per M (prices file prices.toml)"
    )


def test_a_bad_write_price_names_the_model(tmp_path: Path) -> None:
    (tmp_path / "p.toml").write_text('[prices.m]\ninput = 1\noutput = 2\ncache_write = "x"\n')
    with pytest.raises(pytest.UsageError, match="cache_write of 'm' must be a number from 0 to 1,000,000"):
        load_prices(ini_lines=[], file="p.toml", environ={}, base=tmp_path)


def _line(model: str, usage: Usage | None) -> LedgerRecord:
    return LedgerRecord(
        "run", "w#1", 1, "ok", "s", "t", "agent", model, "single", "w", usage, False, 0.0, "stop", False, None
    )


def test_token_cost_shows_cache_reads_and_writes(tmp_path: Path) -> None:
    table = _table(tmp_path)
    prices = {m: p for m in ("claude-x", "plain") if (p := table.price(m)) is not None}
    ledger = [
        _line(
            "claude-x",
            Usage(10, 5, cached_input_tokens=200, cache_write_tokens=300, cache_write_1h_tokens=100),
        ),
        _line("claude-x", Usage(10, 5, cached_input_tokens=50)),
        _line("plain", Usage(10, 5)),
    ]
    text = "\n".join(_prompt_cache(ledger, prices))
    assert "## Prompt cache" in text
    assert "| agent | claude-x | 250 | 300 | 100 | $0.3 | $3.75 (1 h: $6) |" in text
    assert "plain" not in text.split("|---", 1)[-1]  # no cache traffic: no row
    assert _prompt_cache([_line("plain", Usage(10, 5))], prices) == []  # nothing reported: no section
