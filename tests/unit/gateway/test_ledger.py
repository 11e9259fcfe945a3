"""Merging worker ledgers (calls that share a request are attributed independently of timing) and the
one rule for ledger totals."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from pytest_gauge._internal.fixtures import Spent, spent_of
from pytest_gauge._internal.gateway.ledger import (
    Ledger,
    attribute_shared_calls,
    merge_ledgers,
    one_history_per_call,
    read_ledger_file,
)
from pytest_gauge._internal.records import LedgerRecord, Role, Usage
from pytest_gauge._internal.records.totals import LedgerTotals, TokenCost, ledger_totals
from pytest_gauge._internal.report.costs import Spend, model_costs, spent_this_run

USAGE = Usage(100, 20)


def _rec(
    work: str,
    attempt: int,
    *,
    hit: bool,
    status: str = "ok",
    ts: float,
    request: str | None = "k1",
    worker: str = "gw0",
    role: Role = "user_sim",
) -> LedgerRecord:
    return LedgerRecord(
        run_id="r", call_id=f"{work}#1", attempt=attempt, status=status, suite="s",
        task_id=work.split("/")[1], role=role, model="m", strategy="single", work=work,
        usage=USAGE if status == "ok" else None, usage_missing=False, latency_s=0.05,
        finish_reason="stop" if status == "ok" else None, cache_hit=hit,
        cost=0.001 if status == "ok" else None, http_status=200 if status == "ok" else 503, worker=worker,
        ts=ts, request=request,
    )  # fmt: skip


def _summary(records: Sequence[LedgerRecord]) -> list[tuple[str, int, str, bool]]:
    return [(r.call_id, r.attempt, r.status, r.cache_hit) for r in records]


def test_the_live_history_goes_to_the_first_call_in_merge_order() -> None:
    """As -n 4 may leave it: agent_y's transcript sent the shared request (after one 503), agent_x's
    read the cache. Canonically the call first in merge order (agent_x's) holds the live history."""
    x, y = "transcript/t1/agent_x/0", "transcript/t1/agent_y/0"
    raced = [
        _rec(y, 1, hit=False, status="http_503", ts=10.0, worker="gw1"),
        _rec(y, 2, hit=False, ts=11.0, worker="gw1"),
        _rec(x, 1, hit=True, ts=11.5, worker="gw0"),
        _rec("judge/c1/0/0", 1, hit=False, ts=12.0, request=None, role="judge"),
    ]
    merged = attribute_shared_calls(raced)
    assert _summary(merged) == [
        ("judge/c1/0/0#1", 1, "ok", False),
        (f"{x}#1", 1, "http_503", False),
        (f"{x}#1", 2, "ok", False),
        (f"{y}#1", 1, "ok", True),
    ]
    assert all(r.work == r.call_id.split("#")[0] and r.task_id == "t1" for r in merged[1:])
    assert [r.worker for r in merged[1:]] == ["gw1", "gw1", "gw0"]  # who did it travels with the history
    # as -n 0 leaves it (agent_x first): unchanged, and the same summary as the raced run
    in_order = [
        _rec(x, 1, hit=False, status="http_503", ts=1.0),
        _rec(x, 2, hit=False, ts=2.0),
        _rec(y, 1, hit=True, ts=3.0),
        _rec("judge/c1/0/0", 1, hit=False, ts=4.0, request=None, role="judge"),
    ]
    assert _summary(attribute_shared_calls(in_order)) == _summary(merged)


def test_a_call_redone_after_a_crash_is_one_history() -> None:
    """gw0 answered the call live and crashed before storing its unit; gw1 redid it
    and read the answer back from the cache: one live line. A call gw0 only sent (interrupted) and gw1
    sent again keeps both real requests, numbered 1 and 2."""
    answered = [
        _rec("transcript/t1/a/0", 1, hit=False, ts=1.0, worker="gw0"),
        _rec("transcript/t1/a/0", 1, hit=True, ts=2.0, worker="gw1"),
    ]
    resent = [
        _rec("transcript/t2/a/0", 1, hit=False, status="interrupted", ts=1.0, worker="gw0", request="k2"),
        _rec("transcript/t2/a/0", 1, hit=False, ts=3.0, worker="gw1", request="k2"),
    ]
    merged = one_history_per_call([*answered, *resent])
    assert _summary(merged) == [
        ("transcript/t1/a/0#1", 1, "ok", False),
        ("transcript/t2/a/0#1", 1, "interrupted", False),
        ("transcript/t2/a/0#1", 2, "ok", False),
    ]
    assert one_history_per_call(answered[:1]) == answered[:1]  # one history: unchanged


def test_nothing_is_lost_or_doubled_and_totals_are_unchanged() -> None:
    records = [
        _rec("transcript/t1/agent_z/0", 1, hit=True, ts=5.0, request="k2"),
        _rec("transcript/t1/agent_x/0", 1, hit=False, ts=4.0, request="k2"),
        _rec("transcript/t2/agent_x/0", 1, hit=True, ts=1.0, request="k3"),  # an earlier run's entry
        _rec("transcript/t2/agent_y/0", 1, hit=True, ts=2.0, request="k3"),
    ]
    merged = attribute_shared_calls(records)
    assert len(merged) == len(records)
    assert sorted((r.call_id, r.attempt) for r in merged) == sorted((r.call_id, r.attempt) for r in records)
    assert sum(not r.cache_hit for r in merged) == 1
    assert sum(r.cost or 0 for r in merged) == sum(r.cost or 0 for r in records)


def test_merge_ledgers_reads_every_worker_file_and_attributes(tmp_path: Path) -> None:
    x, y = "transcript/t1/agent_x/0", "transcript/t1/agent_y/0"
    for worker, record in (("gw0", _rec(x, 1, hit=True, ts=2.0)), ("gw1", _rec(y, 1, hit=False, ts=1.0))):
        ledger = Ledger(tmp_path, worker)
        ledger.append(record)
        ledger.close()
    merged = merge_ledgers(sorted(tmp_path.glob("ledger-*.jsonl")))
    assert _summary(merged) == [(f"{x}#1", 1, "ok", False), (f"{y}#1", 1, "ok", True)]
    line = json.loads((tmp_path / "ledger-gw1.jsonl").read_text())
    assert line["request"] == "k1" and line["worker"] == "gw1"


def _totals_case() -> list[LedgerRecord]:
    """A call retried after a 503 (possibly billed), a cache hit and a call of a model without a price."""
    x, y, z = "transcript/t1/agent_x/0", "transcript/t2/agent_x/0", "transcript/t3/agent_x/0"
    failed = replace(_rec(x, 1, hit=False, status="http_503", ts=1.0), possibly_billed=True)
    unpriced = replace(_rec(z, 1, hit=False, ts=4.0, request="k3"), cost=None, usage=Usage(7, 3))
    return [failed, _rec(x, 2, hit=False, ts=2.0), _rec(y, 1, hit=True, ts=3.0, request="k2"), unpriced]


def test_ledger_totals_by_hand() -> None:
    """Hand-summed: 3 calls; live = the 503, its retry and the unpriced call; cached = the hit."""
    totals = ledger_totals(_totals_case())
    assert totals == LedgerTotals(
        calls=3,
        live=TokenCost(records=3, input_tokens=107, output_tokens=23, total_tokens=130, cost=None,
                       priced_cost=0.001, unpriced=1),
        cached=TokenCost(records=1, input_tokens=100, output_tokens=20, total_tokens=120, cost=0.001,
                         priced_cost=0.001, unpriced=0),
        nominal=TokenCost(records=4, input_tokens=207, output_tokens=43, total_tokens=250, cost=None,
                          priced_cost=0.002, unpriced=1),
        failed=1,
        possibly_billed=1,
        usage_missing=0,
    )  # fmt: skip
    priced = ledger_totals(_totals_case()[:3])
    assert (priced.live.cost, priced.nominal.cost) == (0.001, 0.002)


def test_every_spend_figure_is_the_ledger_totals_rule() -> None:
    """gauge_ledger.spent(), metrics.json's spent_this_run and the cost report's rows give the same
    figures as ledger_totals on the same records (one rule, not copies that could drift)."""
    for records in (_totals_case(), _totals_case()[:3]):
        t = ledger_totals(records)
        assert spent_of(records) == Spent(
            t.calls, t.live.records, t.cached.records, t.live.input_tokens, t.live.output_tokens, t.live.cost
        )
        assert spent_this_run(records) == Spend(
            t.live.records, t.cached.records, t.live.total_tokens, t.cached.total_tokens, t.live.cost, 1
        )
        (row,) = model_costs(records)
        assert (row.calls, row.attempts, row.failed, row.cost, row.cached_attempts) == (
            t.calls, t.nominal.records, t.failed, t.nominal.cost, t.cached.records
        )  # fmt: skip


def test_a_sent_line_waiting_for_its_outcome_keeps_its_text_not_its_parsed_json(tmp_path: Path) -> None:
    """Half a file's lines are write-ahead ``sent`` lines: each kept as parsed JSON until its outcome
    came was most of the peak of reading a run's ledger back; kept as text, it is read only if unanswered."""
    from pytest_gauge._internal.gateway.ledger import _SentLine  # deferred: a private class, tested here

    line = Ledger(tmp_path, "gw0")
    sent = replace(
        _rec("transcript/t1/agent_x/0", 1, hit=False, ts=1.0), status="sent", usage=None, cost=None
    )
    line.begin(sent)
    line.close()
    text = (tmp_path / "ledger-gw0.jsonl").read_text(encoding="utf-8").strip()
    waiting = _SentLine(text, json.loads(text))
    assert not any(isinstance(getattr(waiting, s), dict) for s in _SentLine.__slots__)
    (row,) = read_ledger_file(tmp_path / "ledger-gw0.jsonl")
    assert row.status == "interrupted" and row.possibly_billed and row.call_id == sent.call_id
    assert row.work == sent.work and row.request == sent.request
