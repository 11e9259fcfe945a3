"""The history section and the replay-then-live misses: what they count and say, from plain values."""

from __future__ import annotations

from pytest_gauge._internal.analysis.history import GateRecord, HistoryView, TaskFlake
from pytest_gauge._internal.analysis.misses import live_misses
from pytest_gauge._internal.records import LedgerRecord, Usage
from pytest_gauge._internal.report.history import history_lines, render_history_section
from pytest_gauge._internal.report.misses import misses_line, render_misses_section


def flake(task: str, runs: int, differing: int) -> TaskFlake:
    return TaskFlake(task, "k", runs, differing, 2 if differing else 1, differing / runs, 0.0, 0.5)


def test_the_section_lists_only_flaky_tasks_and_counts_the_rest() -> None:
    view = HistoryView(
        "mini",
        3,
        (flake("m01", 3, 1), flake("m02", 3, 0), flake("m03", 1, 0), flake("m04", 3, 2)),
        (GateRecord("flip_rate <= 0.5", ("pass", "fail", "pass")),),
        10,
    )
    text = render_history_section(view, "runs.db")
    assert "Flaky tasks: 2 of 4; stable over 2+ runs: 1; seen once: 1." in text
    rows = [line for line in text.splitlines() if line.startswith("| m")]
    assert [r.split(" | ")[0] for r in rows] == ["| m04", "| m01"]  # highest rate first
    assert "| `flip_rate <= 0.5` | 2/3 | pass fail pass |" in text
    assert history_lines(view) == [
        "history: 3 runs; flaky tasks 2 of 4: m04 (2/3), m01 (1/3)",
        "history: gate flip_rate <= 0.5: passed 2 of last 3",
    ]


def record(call: str, role: str, *, cached: bool, cost: float | None, attempt: int = 1) -> LedgerRecord:
    return LedgerRecord(
        run_id="r",
        call_id=call,
        attempt=attempt,
        status="ok",
        suite="mini",
        task_id="m01",
        role=role,  # type: ignore[arg-type]
        model="m",
        strategy="single",
        work=call.rpartition("#")[0],
        usage=Usage(input_tokens=10, output_tokens=5),
        usage_missing=False,
        latency_s=0.0,
        finish_reason="stop",
        cache_hit=cached,
        cost=cost,
    )


def test_misses_are_the_calls_sent_and_priced_apart_from_the_replayed() -> None:
    ledger = [
        record("transcript/m01/agent_y/0#1", "agent", cached=False, cost=0.25, attempt=1),
        record("transcript/m01/agent_y/0#1", "agent", cached=False, cost=0.25, attempt=2),  # a retry
        record("judge/c1/0/0#1", "judge", cached=False, cost=0.5),
        record("transcript/m01/agent_x/0#1", "agent", cached=True, cost=9.0),
        record("judge/c2/0/0#1", "judge", cached=True, cost=9.0),
    ]
    misses = live_misses(ledger)
    assert (misses.calls, misses.replayed) == (2, 2)
    assert misses.by_role == (("agent", 1), ("judge", 1))
    assert misses.works == ("judge/c1/0/0", "transcript/m01/agent_y/0")
    assert misses.spent.cost == 1.0 and misses.spent.records == 3 and misses.spent.input_tokens == 30
    text = render_misses_section(misses)
    assert "2 calls had no recorded answer" in text and "2 were replayed" in text
    assert "- `transcript/m01/agent_y/0`" in text and "agent_x" not in text
    assert misses_line(misses).startswith(
        "replay-then-live: 2 calls sent live (agent 1, judge 1), 2 replayed;"
    )


def test_an_unpriced_miss_makes_the_spend_a_lower_bound() -> None:
    misses = live_misses([record("judge/c1/0/0#1", "judge", cached=False, cost=None)])
    assert "at least" in misses_line(misses) and "1 attempts unpriced" in render_misses_section(misses)
