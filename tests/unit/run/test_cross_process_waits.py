"""The engine's wait for a unit another process produces: woken by the work store's growth."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pytest_gauge._internal.files.work_store import WorkStore
from pytest_gauge._internal.gateway.store import content_key
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
