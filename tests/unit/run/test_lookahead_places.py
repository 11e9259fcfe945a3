"""The look-ahead's places and a model's own waits: a unit waiting for its model's limit (a 429's wait,
its bucket, its adaptive slot) lends its place to other work, so one rate-limited model cannot fill the
look-ahead with waiting units and hold every other model back."""

from __future__ import annotations

import asyncio

from pytest_gauge._internal.gateway.limits import (
    ModelPacer,
    model_wait,
    reset_model_wait_hook,
    set_model_wait_hook,
)
from pytest_gauge._internal.run.engine import _Place


def test_units_waiting_for_their_models_limit_lend_their_places() -> None:
    order: list[str] = []

    async def unit(gate: asyncio.Semaphore, name: str, wait: bool) -> None:
        await gate.acquire()
        place = _Place(gate)
        token = set_model_wait_hook(place.lent)
        try:
            if wait:
                async with model_wait():  # e.g. a 429's wait
                    await asyncio.sleep(0.2)
            order.append(name)
        finally:
            reset_model_wait_hook(token)
            place.close()

    async def main() -> int:
        gate = asyncio.Semaphore(2)  # two places
        limited = [asyncio.ensure_future(unit(gate, f"limited{i}", True)) for i in range(2)]
        await asyncio.sleep(0.01)
        free = [asyncio.ensure_future(unit(gate, f"free{i}", False)) for i in range(4)]
        await asyncio.gather(*limited, *free)
        return gate._value

    assert asyncio.run(main()) == 2  # every place given back at the end, none leaked or doubled
    assert order[:4] == ["free0", "free1", "free2", "free3"]  # they went while the limited ones waited


def test_a_place_lent_by_a_wait_that_outlives_its_unit_is_not_kept() -> None:
    async def main() -> int:
        gate = asyncio.Semaphore(1)
        await gate.acquire()
        place = _Place(gate)
        wait = place.lent()
        await wait.__aenter__()  # lent: the place is free
        assert gate._value == 1
        place.close()  # the unit ended while a task it started still waits
        await wait.__aexit__(None, None, None)
        return gate._value

    assert asyncio.run(main()) == 1


def test_the_pacers_waiters_lend_their_places_and_are_woken_without_polling() -> None:
    pacer = ModelPacer(4)
    for _ in range(3):
        pacer.slowed("a")  # one request in flight for "a"
    lent = 0

    class Lend:
        async def __aenter__(self) -> None:
            nonlocal lent
            lent += 1

        async def __aexit__(self, *exc: object) -> None:
            return None

    async def main() -> int:
        set_model_wait_hook(Lend)
        most = 0

        async def one() -> None:
            nonlocal most
            async with pacer.slot("a"):
                most = max(most, pacer.active["a"])
                await asyncio.sleep(0.01)

        await asyncio.gather(*(one() for _ in range(3)))
        return most

    assert asyncio.run(main()) == 1
    assert lent >= 2  # the two that found the model full waited inside model_wait()


def test_a_unit_back_from_its_models_wait_never_waits_for_a_place() -> None:
    """The hang of a live ``-n 2`` run under 429s: a judgment holding the judge's format lock came back
    from a 429's lent wait and waited for a place, while both places were held by judgments waiting
    for that lock. Back from a wait, a unit takes a place only if one is free, else goes on without."""

    async def main() -> tuple[list[str], int]:
        gate = asyncio.Semaphore(2)
        lock = asyncio.Lock()  # e.g. the judge's format lock (run/judge_format.py)
        done: list[str] = []

        async def unit(name: str, wait_first: bool) -> None:
            await gate.acquire()
            place = _Place(gate)
            token = set_model_wait_hook(place.lent)
            try:
                async with lock:
                    if wait_first:
                        async with model_wait():  # a 429's wait: the place goes to the others
                            await asyncio.sleep(0.05)
                    done.append(name)
            finally:
                reset_model_wait_hook(token)
                place.close()

        first = asyncio.ensure_future(unit("first", True))
        await asyncio.sleep(0.01)
        others = [asyncio.ensure_future(unit(f"other{i}", False)) for i in range(2)]  # take both places
        await asyncio.wait_for(asyncio.gather(first, *others), 5.0)  # deadlocked before: timed out
        return done, gate._value

    done, free = asyncio.run(main())
    assert done == ["first", "other0", "other1"]
    assert free == 2  # every place given back, none leaked or doubled


def test_take_if_free_takes_a_free_place_and_never_suspends() -> None:
    async def main() -> tuple[bool, bool, int]:
        gate = asyncio.Semaphore(1)
        await gate.acquire()
        place = _Place(gate)
        place.give_back()
        await place.take_if_free()
        taken = place.held
        place.give_back()
        await gate.acquire()  # someone else has it now
        await asyncio.wait_for(place.take_if_free(), 0.5)
        return taken, place.held, gate._value

    assert asyncio.run(main()) == (True, False, 0)
