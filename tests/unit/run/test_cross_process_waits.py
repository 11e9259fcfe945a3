"""The engine's wait for a unit another process produces: woken by the work store's growth."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pytest_gauge._internal.files.work_store import WorkStore
from pytest_gauge._internal.gateway.store import content_key
from pytest_gauge._internal.records import WorkFailure
from pytest_gauge._internal.run.engine import Engine

KEY = content_key(["transcript", "s", "t1", "a", 0])


def test_a_unit_waiting_for_another_process_wakes_when_its_entry_is_written(tmp_path: Path) -> None:
    """The engine's wait for another worker's unit ends when the store gains an entry, well before its
    own timeout (one watcher reads the logs for every waiter), and gives up at the timeout otherwise."""
    store = WorkStore(tmp_path / "work", "gw0")
    engine = Engine({}, [], store, lookahead=1, worker_count=2)

    async def main() -> tuple[float, float]:
        loop = asyncio.get_running_loop()
        other_log = tmp_path / "work" / "gw5-99.log"  # as another worker writes it
        loop.call_later(0.05, other_log.write_bytes, f'{KEY} {{"by": "gw5"}}\n'.encode())
        t0 = loop.time()
        await asyncio.gather(*(engine._store_grows(30.0) for _ in range(3)))
        woken = loop.time() - t0
        t0 = loop.time()
        await engine._store_grows(0.05)  # nothing more is written: the timeout ends it
        return woken, loop.time() - t0

    (tmp_path / "work").mkdir(exist_ok=True)
    woken, timed_out = asyncio.run(main())
    engine.loop.close()  # never started: its own loop is not needed
    assert woken < 10.0 and timed_out >= 0.05
    assert store.get(KEY) == {"by": "gw5"}


def test_other_entries_do_not_make_a_waiter_retry_the_claim_but_a_freed_claim_is_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While another process holds a unit's claim and keeps writing other units' entries (one every
    5 ms), the waiter wakes at each but tries the claim only every few tens of ms; once the claim is
    given back without an entry (its process died), the waiter takes it and produces the unit."""
    from pytest_gauge._internal.run import engine as engine_module

    store = WorkStore(tmp_path / "work", "gw0")
    holder = WorkStore(tmp_path / "work", "gw0")  # its claim stands for another process's
    engine = Engine({}, [], store, lookahead=1, worker_count=2)
    tries: list[float] = []
    real_lock = engine._lock

    def counted(key: str) -> int | None:
        tries.append(asyncio.get_running_loop().time())
        return real_lock(key)

    monkeypatch.setattr(engine, "_lock", counted)

    async def produced(unit: object) -> WorkFailure:
        return WorkFailure("made here", False, "Test")

    monkeypatch.setattr(engine, "_produce_and_store", produced)
    unit = engine_module._TranscriptUnit(KEY, "s", "t1", "a", 0)

    async def main() -> tuple[object, int]:
        loop = asyncio.get_running_loop()
        token = holder.try_lock(KEY)
        assert token is not None
        other_log = tmp_path / "work" / "gw5-99.log"

        async def writer() -> None:
            for i in range(60):  # 0.3 s of other units' entries
                with other_log.open("ab") as fh:
                    fh.write(f'{content_key(["other", i])} {{"i": {i}}}\n'.encode())
                await asyncio.sleep(0.005)
            holder.unlock(token)  # given back without an entry

        task = asyncio.ensure_future(writer())
        result = await engine._claim_or_wait(unit)
        await task
        return result, len([t for t in tries if t < loop.time()])

    (tmp_path / "work").mkdir(exist_ok=True)
    result, attempts = asyncio.run(main())
    engine.loop.close()
    assert isinstance(result, WorkFailure) and result.error == "made here"
    assert attempts < 30  # not one per entry written (60), yet the freed claim was found
