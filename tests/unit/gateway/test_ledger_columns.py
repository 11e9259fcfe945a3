"""The merged ledger held as columns gives back records equal to those put in, field for field and type
for type, in order; the streaming merge orders and attributes lines exactly as the record-level rules."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import fields, replace
from pathlib import Path

import pytest

from pytest_gauge._internal.gateway.ledger import (
    SENT,
    Ledger,
    attribute_shared_calls,
    merge_ledgers,
    one_history_per_call,
    read_ledger_file,
)
from pytest_gauge._internal.records import LedgerRecord, Usage, dumps
from pytest_gauge._internal.records.ledger_columns import LedgerColumns, per_ledger
from pytest_gauge._internal.records.totals import ledger_totals, role_totals, totals_by_role


def _line(i: int, **changes: object) -> LedgerRecord:
    work = f"judge/t{i % 7}-a-vs-b-AB/0/{i % 3}"
    record = LedgerRecord(
        run_id="r1", call_id=f"{work}#{i % 4 + 1}", attempt=i % 3 + 1, status="ok", suite="s",
        task_id=f"t{i % 7}", role="judge", model="m", strategy="single", work=work,
        usage=Usage(100 + i % 5, 20, raw={"prompt_tokens": 100 + i % 5, "completion_tokens": 20}),
        usage_missing=False, latency_s=0.001 * i, finish_reason="stop", cache_hit=bool(i % 2),
        cost=0.5 * i, http_status=200, worker=f"gw{i % 2}", ts=1000.0 + i, request=None,
    )  # fmt: skip
    return replace(record, **changes)  # type: ignore[arg-type]


ODD_LINES = [
    _line(1, cost=None, usage=None, usage_missing=True, finish_reason=None),
    _line(2, cost=0, latency_s=-0.0, ts=0.0),  # an int cost and a negative zero keep their JSON
    _line(3, call_id="other#1"),  # a call id that is not its work's
    _line(4, call_id="judge/t4-a-vs-b-AB/0/1#01"),  # a call number Python would not write so
    _line(5, status="http_503", http_status=503, error="boom", possibly_billed=True, gateway_retries=2),
    _line(6, retry_after=1, gateway_cost=0.25, served_model="m2", key_variable="KEY", batched=True),
    _line(7, retry_after=1.0, batched=False, api="anthropic", request="k" * 64, format_version=1),
    _line(8, usage=Usage(5, 6, 7, 8, 9, 10)),
    _line(9, attempt=True),  # equal to 1 in Python, not in JSON
]


def _same(got: list[LedgerRecord], want: list[LedgerRecord]) -> None:
    """Equal records, each field of the same type, and the same JSON lines."""
    assert got == want
    for a, b in zip(got, want, strict=True):
        for f in fields(LedgerRecord):
            assert type(getattr(a, f.name)) is type(getattr(b, f.name)), f.name
        assert dumps(a.to_json()) == dumps(b.to_json())


def test_every_field_comes_back_as_it_went_in() -> None:
    records = [*ODD_LINES, *(_line(i) for i in range(300))]
    columns = LedgerColumns(records).done()
    assert len(columns) == len(records)
    _same(list(columns), records)
    _same([columns[i] for i in range(len(records))], records)
    assert columns[-1] == records[-1]
    _same(list(columns[3:7]), records[3:7])
    with pytest.raises(IndexError):
        columns[len(records)]


def test_order_is_kept_across_blocks_and_wide_codes() -> None:
    """More lines than one block, more distinct values than a byte (and two bytes) of codes holds."""
    records = [_line(i, error=f"e{i}", ts=float(i)) for i in range(70_000)]
    columns = LedgerColumns(records).done()
    assert [r.error for r in columns] == [r.error for r in records]
    assert columns[69_999] == records[69_999] and columns[4096] == records[4096]


def test_an_empty_ledger() -> None:
    columns = LedgerColumns().done()
    assert len(columns) == 0 and list(columns) == [] and list(columns.of_suite("s")) == []
    assert list(columns[0:3]) == []


def test_a_suites_lines_in_order() -> None:
    records = [_line(i, suite="a" if i % 3 else "b") for i in range(50)]
    columns = LedgerColumns(records).done()
    assert list(columns.of_suite("b")) == [r for r in records if r.suite == "b"]
    only_a = LedgerColumns(r for r in records if r.suite == "a")
    assert only_a.of_suite("a") is only_a and list(only_a.of_suite("c")) == []


def test_a_table_is_made_once_per_ledger_until_a_line_is_appended() -> None:
    passes: list[str] = []

    @per_ledger
    def attempts(ledger: Sequence[LedgerRecord], role: str) -> int:
        passes.append(role)
        return sum(1 for x in ledger if x.role == role)

    records = [_line(i, role="judge" if i % 3 else "agent") for i in range(40)]
    columns = LedgerColumns(records)
    counted = [attempts(columns, "judge"), attempts(columns, "judge"), attempts(columns, "agent")]
    assert counted == [26, 26, 14]
    assert passes == ["judge", "agent"]  # once per argument
    columns.append(_line(40, role="judge"))
    assert attempts(columns, "judge") == 27 and passes == ["judge", "agent", "judge"]  # forgotten on append
    assert attempts(records, "judge") == 26 and len(passes) == 4  # another sequence: computed each time


def test_totals_by_role_are_each_roles_totals() -> None:
    records = [*ODD_LINES, *(_line(i, role=("judge", "agent", "user_sim")[i % 3]) for i in range(60))]
    columns = LedgerColumns(records).done()
    by_role = totals_by_role(columns)
    assert list(by_role) == ["judge", "agent", "user_sim"]  # first seen first
    for role, totals in by_role.items():
        assert totals == ledger_totals(r for r in records if r.role == role)
        assert role_totals(columns, role) == totals
    assert role_totals(columns, "user_audit") == ledger_totals(()) and ledger_totals(()).calls == 0


def _history(rng: random.Random, n: int) -> list[LedgerRecord]:
    """Lines as crashed and racing workers leave them: calls redone in another file, requests shared."""
    out = []
    for i in range(n):
        work = f"transcript/t{rng.randrange(20)}/agent_{rng.choice('xyz')}/0"
        out.append(
            _line(
                i, work=work, call_id=f"{work}#{rng.randint(1, 2)}", attempt=rng.randint(1, 2),
                cache_hit=rng.random() < 0.3, worker=rng.choice(["gw0", "gw1", "gw2"]),
                request=rng.choice([None, "k1", "k2", "k3"]), ts=rng.random(),
                status=rng.choice(["ok", "ok", "http_503"]), task_id="t",
            )
        )  # fmt: skip
    return out


@pytest.mark.parametrize("seed", range(30))
def test_the_streaming_merge_is_the_record_merge(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    by_worker: dict[str, Ledger] = {}
    for record in _history(rng, 120):
        if record.worker not in by_worker:
            by_worker[record.worker] = Ledger(tmp_path, record.worker)
        ledger = by_worker[record.worker]
        pick = rng.random()
        if pick < 0.4:  # its write-ahead line first; with no outcome after it: an interrupted attempt
            ledger.begin(replace(record, status=SENT, usage=None, cost=None))
        if pick > 0.1:
            ledger.append(record)
    for ledger in by_worker.values():
        ledger.close()
    files = sorted(tmp_path.glob("ledger-*.jsonl"))
    read = [r for path in files for r in read_ledger_file(path)]
    _same(list(merge_ledgers(files)), attribute_shared_calls(one_history_per_call(read)))
