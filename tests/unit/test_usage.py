"""The ledger's one usage convention (records.Usage), Chat's mapping into it, the cost formula with cache
reads and writes, and reading ledger lines of format version 1 (docs/protocol.md#usage)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_gauge.gateway.prices import genai_price_rows, load_prices
from pytest_gauge.gateway.wire.chat import CHAT, chat_usage
from pytest_gauge.options import parse_price_lines
from pytest_gauge.records import LEDGER_FORMAT_VERSION, LedgerRecord, Usage
from pytest_gauge.records.prices import Price, PriceTable
from pytest_gauge.report.common import price_basis
from pytest_gauge.report.costs import _by_model, model_costs

V1_LINE = {
    "attempt": 1, "cache_hit": False, "call_id": "judge/c/j/0#1", "cost": 0.001165, "error": None,
    "finish_reason": "stop", "format_version": 1, "http_status": 200, "latency_s": 0.002, "model": "m",
    "possibly_billed": False, "request": None, "role": "judge", "run_id": "r", "status": "ok",
    "strategy": "single", "suite": "s", "task_id": "t", "ts": 1.0, "usage_missing": False,
    "usage": {"cached_tokens": 100, "completion_tokens": 29, "prompt_tokens": 350, "reasoning_tokens": 5,
              "total_tokens": 379},
    "work": "judge/c/j/0", "worker": "main",
}  # fmt: skip


def test_derived_counts_add_every_input_token() -> None:
    u = Usage(input_tokens=10, output_tokens=7, cached_input_tokens=20, cache_write_tokens=30)
    assert (u.prompt_tokens, u.completion_tokens, u.total_tokens) == (60, 7, 67)
    assert u.cached_tokens == 20
    both = u + Usage(1, 1, cache_write_tokens=4, cache_write_1h_tokens=4)
    assert (both.input_tokens, both.cache_write_tokens, both.cache_write_1h_tokens) == (11, 34, 4)
    assert both.cached_input_tokens == 20 and both.reasoning_tokens is None


def test_chat_prompt_tokens_include_the_cached_ones() -> None:
    raw = {
        "prompt_tokens": 1000,
        "completion_tokens": 200,
        "total_tokens": 1200,
        "prompt_tokens_details": {"cached_tokens": 600},
        "completion_tokens_details": {"reasoning_tokens": 50},
    }
    u = chat_usage(raw)
    assert (u.input_tokens, u.cached_input_tokens, u.cache_write_tokens) == (400, 600, None)
    assert (u.output_tokens, u.reasoning_tokens, u.prompt_tokens) == (200, 50, 1000)
    assert u.raw == raw and u.to_json()["raw"] == raw
    assert CHAT.usage({"usage": {"prompt_tokens": 0, "completion_tokens": 3}}) is None  # no prompt: missing
    assert CHAT.usage({}) is None


PRICE = Price(3.0, 15.0, cached_input=0.3, cache_write=3.75, cache_write_1h=6.0)


def test_price_with_cache_reads_and_writes_by_hand() -> None:
    price = PRICE
    u = Usage(
        input_tokens=100,
        output_tokens=50,
        cached_input_tokens=2000,
        cache_write_tokens=1000,
        cache_write_1h_tokens=400,
    )
    by_hand = (100 * 3.0 + 2000 * 0.3 + 600 * 3.75 + 400 * 6.0 + 50 * 15.0) / 1e6
    assert price.cost(u) == pytest.approx(by_hand, rel=1e-12)


def test_without_cache_prices_reads_are_input_and_writes_a_multiple_of_it() -> None:
    price = Price(2.0, 8.0)
    u = Usage(input_tokens=10, output_tokens=5, cached_input_tokens=90, cache_write_tokens=100)
    u1h = Usage(input_tokens=10, output_tokens=5, cache_write_tokens=100, cache_write_1h_tokens=100)
    assert price.cost(u) == pytest.approx((100 * 2.0 + 100 * 2.5 + 5 * 8.0) / 1e6)
    assert price.cost(u1h) == pytest.approx((10 * 2.0 + 100 * 4.0 + 5 * 8.0) / 1e6)


def test_chat_costs_keep_their_arithmetic() -> None:
    """The same float as before the convention (prompt at input, cached at cached_input)."""
    u = chat_usage(
        {"prompt_tokens": 1000, "completion_tokens": 7, "prompt_tokens_details": {"cached_tokens": 600}}
    )
    assert Price(2.0, 8.0).cost(u) == 1000 / 1e6 * 2.0 + 7 / 1e6 * 8.0
    assert Price(2.0, 8.0, 0.5).cost(u) == 400 / 1e6 * 2.0 + 7 / 1e6 * 8.0 + 600 / 1e6 * 0.5
    assert PriceTable({"m": (2.0, 8.0)}).cost("m", 1000, 7) == 1000 / 1e6 * 2.0 + 7 / 1e6 * 8.0


def test_a_version_1_ledger_line_is_read_into_the_convention() -> None:
    record = LedgerRecord.from_json(json.loads(json.dumps(V1_LINE)))
    assert record.usage == Usage(250, 29, cached_input_tokens=100, reasoning_tokens=5)
    assert (record.usage.prompt_tokens, record.usage.total_tokens) == (350, 379)
    assert record.api == "chat" and record.format_version == LEDGER_FORMAT_VERSION == 2
    again = LedgerRecord.from_json(json.loads(json.dumps(record.to_json())))
    assert again == record and again.to_json()["usage"]["input_tokens"] == 250
    assert again.to_json()["api"] == "chat"


def test_cache_write_prices_from_every_source(tmp_path: Path) -> None:
    (row,) = parse_price_lines(["claude-x 3 15 0.3 cache_write=3.75 cache_write_1h=6 context=200000"])
    assert row == ("claude-x", 3.0, 15.0, 0.3, "ini gauge_prices", 200000, 3.75, 6.0)
    assert parse_price_lines(["m 1 2"]) == [("m", 1.0, 2.0, None, "ini gauge_prices")]  # unchanged form
    for bad in ("m 1 2 cache_write=x", "m 1 2 cache_write=-1", "m 1 2 write=1", "m 1 2 context=9 context=9"):
        with pytest.raises(pytest.UsageError):
            parse_price_lines([bad])
    (tmp_path / "p.toml").write_text("[prices.f]\ninput = 1\noutput = 2\ncache_write = 1.5\n")
    env = {"GAUGE_PRICES": json.dumps({"g": {"input": 1, "output": 2, "cache_write_1h": 3}})}
    table = load_prices(ini_lines=[row], file="p.toml", environ=env, base=tmp_path)
    assert (table.price("f").cache_write, table.price("f").cache_write_1h) == (1.5, None)  # type: ignore[union-attr]
    assert (table.price("g").cache_write, table.price("g").write_price) == (None, 1.25)  # type: ignore[union-attr]
    assert PriceTable.from_rows(tuple(table.rows())).rows() == table.rows()
    with pytest.raises(pytest.UsageError, match="non-negative"):
        load_prices(
            ini_lines=[],
            file=None,
            environ={"GAUGE_PRICES": '{"h": {"input": 1, "output": 2, "cache_write": -1}}'},
            base=tmp_path,
        )


def test_genai_prices_give_first_tier_rates_with_cache_writes() -> None:
    pytest.importorskip("genai_prices")
    (row,) = genai_price_rows(["claude-sonnet-4-5"])
    assert row[1:4] == (3.0, 15.0, 0.3) and row[6:] == (3.75, 6.0)  # not the long-context tier's 6 / 22.5
    (plain,) = genai_price_rows(["gpt-4o"])
    assert len(plain) == 6 and plain[1:4] == (2.5, 10.0, 1.25)  # no write rates: the short form


def _line(model: str, usage: Usage, cost: float) -> LedgerRecord:
    return LedgerRecord(
        run_id="r", call_id=f"judge/c/{model}/0#1", attempt=1, status="ok", suite="s", task_id="t",
        role="judge", model=model, strategy="single", work=f"judge/c/{model}/0", usage=usage,
        usage_missing=False, latency_s=0.1, finish_reason="stop", cache_hit=False, cost=cost,
    )  # fmt: skip


def test_the_cost_table_shows_cache_reads_and_writes_only_when_a_call_had_them() -> None:
    prices = {"claude-x": PRICE, "m": Price(1.0, 2.0)}
    plain = [_line("m", Usage(100, 10), 0.5)]
    cached = [*plain, _line("claude-x", Usage(10, 5, cached_input_tokens=200, cache_write_tokens=70), 0.25)]
    before = "\n".join(_by_model(model_costs(plain), prices))
    assert "cache reads" not in before and "| 100 | 10 |" in before.replace("  ", " ")
    table = _by_model(model_costs(cached), prices)
    header = next(line for line in table if line.startswith("| role"))
    assert [c.strip() for c in header.strip("|").split("|")][5:8] == [
        "input tokens",
        "cache reads",
        "cache writes",
    ]
    row = next(line for line in table if "claude-x" in line)
    assert [c.strip() for c in row.strip("|").split("|")][5:8] == ["280", "200", "70"]
    basis = price_basis(prices, "claude-x")
    assert "$0.3 cached in / $3.75 cache write / $6 1h cache write per M" in basis
