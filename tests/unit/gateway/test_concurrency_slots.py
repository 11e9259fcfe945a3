"""The run-wide in-flight cap over lock files (:class:`~pytest_gauge.gateway.limits.ConcurrencySlots`):
local waiters queue first in, first out, one poll serves them all, a released slot goes to the oldest
waiter, other processes' slots are found, a cancelled waiter leaves nothing held, and two processes
share the slots without going over ``n`` or starving one another. Two slot sets over one folder stand
for two processes where that is enough (``flock`` belongs to the open file); the share test forks."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import time
from pathlib import Path

import pytest

from pytest_gauge.files import locks
from pytest_gauge.gateway import limits
from pytest_gauge.gateway.limits import ConcurrencySlots


def _take_all(slots: ConcurrencySlots, n: int) -> list[int]:
    """Every slot of the folder, taken by ``slots`` without waiting (its process holds them all)."""
    taken = [slots._try_any() for _ in range(n)]
    assert None not in taken
    return [i for i in taken if i is not None]


def _all_taken_by_another(folder: Path, n: int) -> tuple[ConcurrencySlots, ConcurrencySlots, list[int]]:
    """Two instances over one folder of ``n`` slots (as two processes see it): the other holds them all."""
    other, mine = ConcurrencySlots(folder, n), ConcurrencySlots(folder, n)
    return other, mine, _take_all(other, n)


def _free(slots: ConcurrencySlots, taken: list[int]) -> None:
    for i in taken:
        slots._release(i)


def test_local_waiters_enter_in_the_order_they_came(tmp_path: Path) -> None:
    slots = ConcurrencySlots(tmp_path, 1)

    async def main() -> list[int]:
        order: list[int] = []

        async def one(k: int) -> None:
            async with slots.slot():
                order.append(k)
                await asyncio.sleep(0.001)

        tasks = []
        for k in range(6):
            tasks.append(asyncio.ensure_future(one(k)))
            await asyncio.sleep(0)  # each queues before the next starts
        await asyncio.gather(*tasks)
        assert slots.waits == 5  # every one but the first had to wait, once
        return order

    assert asyncio.run(main()) == list(range(6))


def test_a_slot_another_process_frees_is_found_within_the_poll_time(tmp_path: Path) -> None:
    folder = tmp_path
    other, mine, taken = _all_taken_by_another(folder, 2)

    async def main() -> float:
        async def free_later() -> float:
            await asyncio.sleep(0.1)  # the poll is at its slowest (20 ms) by then
            _free(other, taken[:1])
            return time.monotonic()

        freer = asyncio.ensure_future(free_later())
        async with mine.slot():
            found = time.monotonic()
        return found - await freer

    assert asyncio.run(main()) < 0.06
    assert mine.waits == 1


def test_a_cancelled_polling_head_hands_the_poll_on_and_holds_nothing(tmp_path: Path) -> None:
    folder = tmp_path
    other, mine, taken = _all_taken_by_another(folder, 1)

    async def main() -> None:
        async def hold() -> None:
            async with mine.slot():
                pass

        head, second = asyncio.ensure_future(hold()), asyncio.ensure_future(hold())
        await asyncio.sleep(0.03)  # both queued, the head polled for
        head.cancel()
        await asyncio.sleep(0.03)
        _free(other, taken)
        await asyncio.wait_for(second, 0.5)  # the second became the one polled for
        assert head.cancelled()

    asyncio.run(main())
    assert not mine._held and not mine._queue and mine._timer is None
    assert len(_take_all(other, 1)) == 1  # nothing left held


def test_a_waiter_cancelled_after_a_slot_was_handed_to_it_passes_the_slot_on(tmp_path: Path) -> None:
    slots = ConcurrencySlots(tmp_path, 1)

    async def main() -> None:
        waiting: list[asyncio.Task[None]] = []

        async def holder() -> None:
            async with slots.slot():
                await asyncio.sleep(0.01)
            waiting[0].cancel()  # its slot was just handed over; it has not run since

        async def hold() -> None:
            async with slots.slot():
                pass

        first = asyncio.ensure_future(holder())
        await asyncio.sleep(0)
        waiting.extend(asyncio.ensure_future(hold()) for _ in range(2))
        await first
        await asyncio.wait_for(waiting[1], 0.5)
        assert waiting[0].cancelled()

    asyncio.run(main())
    assert not slots._held and not slots._queue


def test_waiting_polls_once_for_all_the_waiters(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """32 waiters blocked for 0.2 s: one poll every 1 to 20 ms tries the 32 files, about 15 polls
    (a poll each would be 32 times as many lock attempts)."""
    folder = tmp_path
    other, mine, taken = _all_taken_by_another(folder, 32)
    calls = 0
    lock_file = locks.lock_file

    def counting(fd: int, *, block: bool) -> bool:
        nonlocal calls
        calls += 1
        return lock_file(fd, block=block)

    async def main() -> None:
        async def hold() -> None:
            async with mine.slot():
                await asyncio.sleep(0.001)

        waiters = [asyncio.ensure_future(hold()) for _ in range(32)]
        await asyncio.sleep(0.2)
        monkeypatch.setattr(limits, "lock_file", lock_file)
        _free(other, taken)
        await asyncio.wait_for(asyncio.gather(*waiters), 2)

    monkeypatch.setattr(limits, "lock_file", counting)  # the module calls its lock_file by name
    asyncio.run(main())
    assert mine.waits == 32
    assert 32 <= calls < 32 * 40  # one poller; 32 of them would make about 15,000


def test_past_its_share_a_process_takes_every_slot_while_no_other_waits(tmp_path: Path) -> None:
    """The share (here 2 of 4) binds only while another process waits: alone, one takes all 4."""
    slots = ConcurrencySlots(tmp_path, 4, processes=2)
    inside = peak = 0

    async def hold() -> None:
        nonlocal inside, peak
        async with slots.slot():
            inside += 1
            peak = max(peak, inside)
            await asyncio.sleep(0.01)
            inside -= 1

    async def main() -> None:
        await asyncio.gather(*(hold() for _ in range(4)))

    asyncio.run(main())
    assert (peak, slots.waits) == (4, 0)


def _share_worker(folder: str, name: str, out: str) -> None:
    """One process of the share test: 12 tasks each hold a slot 5 times for 20 ms (demand well over
    its share), once both processes are ready; writes when each hold began and ended."""
    slots = ConcurrencySlots(Path(folder), 4, processes=2)
    spans: list[tuple[float, float]] = []

    async def one() -> None:
        for _ in range(5):
            async with slots.slot():
                began = time.monotonic()
                await asyncio.sleep(0.02)
                spans.append((began, time.monotonic()))

    async def main() -> None:
        Path(out, f"{name}.ready").touch()
        while len(list(Path(out).glob("*.ready"))) < 2:
            await asyncio.sleep(0.002)
        await asyncio.gather(*(one() for _ in range(12)))

    asyncio.run(main())
    Path(out, f"{name}.json").write_text(json.dumps({"spans": spans, "waits": slots.waits}))


def test_two_processes_never_hold_more_than_n_and_share_them(tmp_path: Path) -> None:
    """Two processes, 4 slots, 12 tasks each: never more than 4 holds at once, and neither process waits
    for the other to finish (each keeps its fair share, 2, while the other waits)."""
    context = multiprocessing.get_context("fork")
    procs = [
        context.Process(target=_share_worker, args=(str(tmp_path / "slots"), name, str(tmp_path)))
        for name in ("a", "b")
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=20)
        assert p.exitcode == 0
    runs = [json.loads((tmp_path / f"{name}.json").read_text()) for name in ("a", "b")]
    events = sorted(
        (t, d) for run in runs for began, ended in run["spans"] for t, d in ((began, 1), (ended, -1))
    )
    inside = peak = 0
    for _, d in events:
        inside += d
        peak = max(peak, inside)
    assert peak <= 4
    assert all(len(run["spans"]) == 60 and run["waits"] > 0 for run in runs)
    first_done = min(max(ended for _, ended in run["spans"]) for run in runs)
    for run in runs:  # by the time one process is done, the other has had about half of its holds
        assert sum(ended <= first_done for _, ended in run["spans"]) >= 20
