"""The ledger's one usage convention (records.Usage), Chat's mapping into it, the cost formula with cache
reads and writes, and reading ledger lines of format version 1 (docs/protocol.md#usage)."""

from __future__ import annotations

import json

import pytest

from pytest_gauge._internal.gateway.wire.chat import CHAT, chat_usage
from pytest_gauge._internal.records import LEDGER_FORMAT_VERSION, LedgerRecord, Usage
from pytest_gauge._internal.records.prices import Price, PriceTable

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


def test_price_with_cache_reads_and_writes_by_hand() -> None:
    price = Price(3.0, 15.0, cached_input=0.3, cache_write=3.75, cache_write_1h=6.0)
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
