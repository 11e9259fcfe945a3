"""The batch wire formats (docs/protocol.md#batched-judging) and the batch price: OpenAI's input file,
upload and result files, Message Batches' request and results, and a batched call priced at its model's
batch share (half unless configured), carried to the workers in the option rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_gauge.gateway.prices import load_prices, parse_price_lines
from pytest_gauge.gateway.wire import batch_anthropic, batch_openai
from pytest_gauge.records import Usage
from pytest_gauge.records.prices import BATCH_SHARE, Price, PriceTable


def test_the_openai_input_file_names_each_request_and_its_endpoint() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "é"}]}
    lines = batch_openai.input_file("responses", [("a", body), ("b", body)]).decode().splitlines()
    parsed = [json.loads(line) for line in lines]
    assert [p["custom_id"] for p in parsed] == ["a", "b"]
    assert {p["url"] for p in parsed} == {"/v1/responses"} and parsed[0]["body"] == body
    assert batch_openai.create_body("file-1", "chat")["endpoint"] == "/v1/chat/completions"
    with pytest.raises(ValueError, match="anthropic"):
        batch_openai.endpoint_of("anthropic")
    content, kind = batch_openai.multipart(b"DATA", "f.jsonl", "XyZ")
    assert kind == "multipart/form-data; boundary=XyZ"
    assert b'name="purpose"\r\n\r\nbatch\r\n' in content and content.endswith(b"--XyZ--\r\n")
    assert b'filename="f.jsonl"\r\nContent-Type: application/jsonl\r\n\r\nDATA\r\n' in content


def test_openai_results_give_each_answer_or_what_went_wrong() -> None:
    ok = {"custom_id": "a", "response": {"status_code": 200, "body": {"id": "x"}}, "error": None}
    failed = {
        "custom_id": "b",
        "response": {"status_code": 500, "body": {"error": {"message": "boom"}}},
        "error": None,
    }
    expired = {"custom_id": "c", "response": None, "error": {"code": "batch_expired", "message": "late"}}
    text = "\n".join(json.dumps(x) for x in (ok, failed, expired)) + "\nnot json\n{}\n"
    found = batch_openai.read_results(text.encode())
    assert found["a"].response == {"id": "x"} and found["a"].problem is None
    assert found["b"].response is None and found["b"].problem == "status 500: boom"
    assert found["c"].problem == "batch_expired: late" and set(found) == {"a", "b", "c"}
    view = batch_openai.batch_view(
        {"id": "b1", "status": "expired", "output_file_id": "f", "error_file_id": 3}
    )
    assert view.ended and view.output == "f" and view.errors is None
    assert not batch_openai.batch_view({"id": "b1", "status": "finalizing"}).ended
    with pytest.raises(ValueError):
        batch_openai.batch_view({"status": "completed"})


def test_message_batches_requests_and_results() -> None:
    assert batch_anthropic.batches_path("/v1/messages") == "/v1/messages/batches"
    body = batch_anthropic.create_body([("a", {"model": "m", "max_tokens": 5})])
    assert body == {"requests": [{"custom_id": "a", "params": {"model": "m", "max_tokens": 5}}]}
    assert not batch_anthropic.batch_view({"id": "m1", "processing_status": "canceling"}).ended
    assert batch_anthropic.batch_view({"id": "m1", "processing_status": "ended"}).ended
    lines = [
        {"custom_id": "a", "result": {"type": "succeeded", "message": {"id": "msg"}}},
        {"custom_id": "b", "result": {"type": "errored", "error": {"error": {"message": "overloaded"}}}},
        {"custom_id": "c", "result": {"type": "expired"}},
    ]
    found = batch_anthropic.read_results("\n".join(json.dumps(x) for x in lines).encode())
    assert found["a"].response == {"id": "msg"}
    assert found["b"].problem == "errored: overloaded" and found["c"].problem == "expired"


def test_a_batched_call_costs_its_models_batch_share(tmp_path: Path) -> None:
    (tmp_path / "p.json").write_text(
        '{"cheap": {"input": 2, "output": 8, "batch": 0.4}, "plain": {"input": 2, "output": 8}}',
        encoding="utf-8",
    )
    table = load_prices(ini_lines=[], file="p.json", environ={}, base=tmp_path)
    carried = PriceTable.from_rows(tuple(table.rows()))  # what options hand to xdist workers
    usage = Usage(1_000_000, 100_000)
    for prices in (table, carried):
        assert prices.usage_cost("plain", usage) == pytest.approx(2.8)
        assert prices.batch_cost("plain", usage) == pytest.approx(2.8 * BATCH_SHARE)
        assert prices.batch_cost("cheap", usage) == pytest.approx(2.8 * 0.4)
        assert prices.batch_cost("unknown", usage) is None
    assert Price(1.0, 1.0).batch_share == 0.5
    (tmp_path / "bad.json").write_text('{"m": {"input": 1, "output": 1, "batch": 2}}', encoding="utf-8")
    with pytest.raises(pytest.UsageError, match="batch of 'm' must be a share"):
        load_prices(ini_lines=[], file="bad.json", environ={}, base=tmp_path)


def test_an_ini_price_line_takes_a_batch_share() -> None:
    rows = parse_price_lines(["m 2 8 batch=0.25", "n 2 8 1 context=1000"])
    table = PriceTable.from_rows(tuple(rows))
    assert table.batch_cost("m", Usage(1_000_000, 0)) == pytest.approx(0.5)
    assert table.batch_cost("n", Usage(1_000_000, 0)) == pytest.approx(1.0)
    assert PriceTable.from_rows(tuple(table.rows())).batch_cost("m", Usage(0, 1_000_000)) == pytest.approx(
        2.0
    )
    with pytest.raises(pytest.UsageError, match="batch= must be a share"):
        parse_price_lines(["m 2 8 batch=3"])
