"""The one reserve/settle budget (:class:`~pytest_gauge._internal.gateway.limits.Budget`) over either state:
the run folder's file (every process) and this process's memory (a test's ``gauge_budget``)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from pytest_gauge._internal.gateway.errors import BudgetExhausted
from pytest_gauge._internal.gateway.limits import (
    Budget,
    FileLimits,
    LocalState,
    RateLimiter,
    SharedState,
    StateStore,
)


@pytest.mark.parametrize("where", ["file", "memory"])
def test_a_budget_reserves_worst_cases_and_settles_what_was_spent(tmp_path: Path, where: str) -> None:
    state: StateStore = SharedState(tmp_path / "budget.json") if where == "file" else LocalState()
    budget = Budget(state, usd=1.0, tokens=1000, task_usd=None)
    first = budget.reserve("t1", 0.6, 100)
    with pytest.raises(BudgetExhausted, match=r"run budget \$1\.0000: spent \$0\.0000 so far"):
        budget.reserve("t1", 0.5, 100)  # 0.6 reserved + 0.5 would pass $1
    budget.settle(first, 0.2, 50)  # the call spent less than its worst case: the rest is free again
    second = budget.reserve("t1", 0.5, 100)
    with pytest.raises(BudgetExhausted, match="run budget 1000 tokens: spent 50 tokens so far"):
        budget.reserve("t2", 0.0, 900)
    budget.settle(second, 0.5, 100)
    assert state.update(dict) == {
        "reserved_tokens": 0,
        "reserved_usd": 0.0,
        "spent_tokens": 150,
        "spent_usd": 0.7,
        "tasks": {"t1": 0.7},
    }


def test_a_task_budget_counts_only_that_task(tmp_path: Path) -> None:
    budget = FileLimits(tmp_path).budget(None, None, 0.5)
    budget.settle(budget.reserve("a", 0.4, 10), 0.4, 10)
    budget.reserve("b", 0.4, 10)
    with pytest.raises(BudgetExhausted, match=r"task a budget \$0\.5000: spent \$0\.4000 so far"):
        budget.reserve("a", 0.2, 10)
    assert budget.active and budget.describe() == ""
    assert Budget(LocalState(), 0.01, 5000, None).describe() == "$0.010000 and 5000 tokens"


def test_shared_rate_limit_spaces_requests(tmp_path: Path) -> None:
    state = SharedState(tmp_path / "rate.json")
    limiter = RateLimiter(state, rpm=600, tpm=None)  # 10 per second, bucket of 10

    async def take(n: int) -> float:
        start = time.perf_counter()
        for _ in range(n):
            await limiter.acquire(1)
        return time.perf_counter() - start

    elapsed = asyncio.run(take(15))
    assert elapsed >= 0.4  # 10 from the full bucket, then 5 more at 10/s
    assert limiter.waited_s > 0
    assert json.loads((tmp_path / "rate.json").read_text())["req_level"] < 1


def test_estimates_read_every_wire_formats_body() -> None:
    """What limits and budgets reserve for a request of each format (a chat body's as before)."""
    from pytest_gauge._internal.gateway.limits import output_tokens_cap, prompt_tokens_estimate

    text = "x" * 400
    chat = {
        "messages": [{"role": "system", "content": text}, {"role": "user", "content": text}],
        "max_tokens": 50,
    }
    messages = {"system": text, "messages": [{"role": "user", "content": text}], "max_tokens": 50}
    responses = {"instructions": text, "input": text, "max_output_tokens": 50}
    assert prompt_tokens_estimate(chat) == 201
    assert 200 <= prompt_tokens_estimate(messages) <= 205 and prompt_tokens_estimate(responses) == 201
    assert output_tokens_cap(chat) == output_tokens_cap(messages) == output_tokens_cap(responses) == 50
    assert output_tokens_cap({}) == 0 and output_tokens_cap({"max_tokens": True}) == 0
