"""What an xdist worker keeps does not grow with the suite: finished units' results beyond the most
recent (their entries stay in the work store) and the test reports it has sent."""

from __future__ import annotations

import asyncio
import gc
import weakref
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from pytest_gauge._internal.files.work_store import WorkStore
from pytest_gauge._internal.gateway.store import content_key
from pytest_gauge._internal.process.worker_reports import ReportDropping
from pytest_gauge._internal.run import engine as engine_module
from pytest_gauge._internal.run.engine import Engine, _TranscriptUnit


class _Result:
    """A unit's result that can be weakly referenced (to see whether the engine still holds it)."""


def _held(tmp_path: Path, worker_count: int, units: int) -> tuple[Engine, list[str], list[Any]]:
    """An engine holding ``units`` finished results and one failed unit; the keys and weak references."""
    engine = Engine({}, [], WorkStore(tmp_path / "work", "gw0"), lookahead=1, worker_count=worker_count)
    keys, refs = [], []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for i in range(units):
            unit = _TranscriptUnit(content_key(["transcript", "s", f"t{i}", "a", 0]), "s", f"t{i}", "a", 0)
            future: asyncio.Future[Any] = loop.create_future()
            engine._hold(unit, future)
            result = _Result()
            refs.append(weakref.ref(result))
            future.set_result(result)
            keys.append(unit.key)
            del result, future
        failed = _TranscriptUnit(content_key(["transcript", "s", "bad", "a", 0]), "s", "bad", "a", 0)
        broken: asyncio.Future[Any] = loop.create_future()
        engine._hold(failed, broken)
        broken.set_exception(RuntimeError("an error inside the plugin"))
        broken.exception()
        keys.append(failed.key)
        await asyncio.sleep(0)  # the done callbacks run

    asyncio.run(main())
    engine.loop.close()  # never started
    gc.collect()
    return engine, keys, refs


def test_a_worker_forgets_all_but_its_most_recent_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine_module, "DONE_KEPT", 5)
    engine, keys, refs = _held(tmp_path, worker_count=2, units=10)
    assert set(engine._futures) == {*keys[5:10], keys[10]}  # the failure is kept: its cases' outcome
    assert [r() is None for r in refs] == [True] * 5 + [False] * 5  # the older results are gone


def test_a_process_alone_in_its_run_keeps_every_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Alone, its results are nowhere else (its work store keeps them in memory): none is forgotten."""
    monkeypatch.setattr(engine_module, "DONE_KEPT", 5)
    engine, keys, refs = _held(tmp_path, worker_count=1, units=10)
    assert set(engine._futures) == set(keys)
    assert all(r() is not None for r in refs)


def test_a_workers_sent_reports_are_not_kept_by_its_terminal_reporter() -> None:
    kept = object()
    report = object()
    reporter = SimpleNamespace(stats={"passed": [kept, report], "": []})
    config = SimpleNamespace(pluginmanager=SimpleNamespace(get_plugin=lambda name: reporter))
    ReportDropping(cast(pytest.Config, config)).pytest_runtest_logreport(cast(pytest.TestReport, report))
    assert reporter.stats == {"passed": [kept], "": []}  # only that report, nothing else
