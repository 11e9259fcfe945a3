"""Critical path first at the request slots (:mod:`pytest_gauge._internal.gateway.call_priority`): a freed
slot goes to the waiting call with the longest chain of calls behind it, first come first served among
equal chains; an unranked call (a test waiting on it now) goes before every ranked one; and however the
line is ordered, no more than ``n`` requests hold a slot at once."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from pytest_gauge._internal.gateway.call_priority import (
    UNRANKED,
    WaitLine,
    call_chain,
    reset_call_chain,
    set_call_chain,
)
from pytest_gauge._internal.gateway.limits import ConcurrencySlots


def _entry_order(folder: Path, chains: list[int | None]) -> list[int]:
    """The order in which calls of ``chains`` (None: unranked) enter a single slot held meanwhile."""
    slots = ConcurrencySlots(folder, 1)

    async def main() -> list[int]:
        order: list[int] = []

        async def one(k: int, chain: int | None) -> None:
            if chain is not None:
                set_call_chain(chain)  # this task's own context
            async with slots.slot():
                order.append(k)
                await asyncio.sleep(0.001)

        async with slots.slot():  # the slot is busy while every call queues
            tasks = [asyncio.ensure_future(one(k, c)) for k, c in enumerate(chains)]
            await asyncio.sleep(0.01)
        await asyncio.gather(*tasks)
        return order

    return asyncio.run(main())


@pytest.mark.parametrize("seed", range(5))
def test_the_longest_chain_enters_first_then_the_oldest(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    chains: list[int | None] = [rng.choice([None, 1, 1, 3, 5, 7]) for _ in range(12)]
    order = _entry_order(tmp_path, chains)

    def rank(k: int) -> int:
        chain = chains[k]
        return UNRANKED if chain is None else chain

    expected = sorted(range(len(chains)), key=lambda k: (-rank(k), k))
    assert order == expected


def test_equal_chains_keep_first_come_first_served(tmp_path: Path) -> None:
    assert _entry_order(tmp_path, [2] * 6) == list(range(6))


def test_a_transcript_call_overtakes_judgments_that_queued_before_it(tmp_path: Path) -> None:
    # three verdicts (chain 1) queue, then a dialogue's turn (chain 3): the dialogue goes first
    assert _entry_order(tmp_path, [1, 1, 1, 3]) == [3, 0, 1, 2]


@pytest.mark.parametrize("seed", range(3))
def test_never_more_in_flight_than_allowed_whatever_the_order(tmp_path: Path, seed: int) -> None:
    n = 4
    slots = ConcurrencySlots(tmp_path, n)
    rng = random.Random(seed)

    async def main() -> int:
        inside = most = 0

        async def one(chain: int) -> None:
            nonlocal inside, most
            set_call_chain(chain)
            async with slots.slot():
                inside += 1
                most = max(most, inside)
                await asyncio.sleep(rng.uniform(0, 0.004))
                inside -= 1

        await asyncio.gather(*(one(rng.randint(1, 9)) for _ in range(60)))
        return most

    assert asyncio.run(main()) == n  # the cap was reached and never passed


def test_the_chain_is_set_for_a_task_and_undone() -> None:
    assert call_chain() == UNRANKED
    token = set_call_chain(5)
    assert call_chain() == 5
    reset_call_chain(token)
    assert call_chain() == UNRANKED


def test_the_line_removes_a_waiter_that_left() -> None:
    line: WaitLine[str] = WaitLine()
    line.append("a", 1)
    line.append("b", 3)
    line.append("c", 1)
    line.remove("b")
    assert [line.popleft(), line.popleft()] == ["a", "c"]
    with pytest.raises(ValueError):
        line.remove("b")
    assert not line
