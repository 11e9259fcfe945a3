"""Fixtures for every tier of the plugin's own tests, and the tier markers applied by folder.

The tiers (CONTRIBUTING.md#test-tiers): ``tests/unit/`` (pure tests, mirroring the package's
subpackages), ``tests/e2e/`` (pytester runs of the plugin and tests against the loopback server, marked
``e2e``) and ``tests/acceptance/`` (runs of the shipped ``eval_suites``, marked ``acceptance``). Shared
helpers are in ``tests/helpers.py``; the heavy session setup that in-process plugin runs need is in the
e2e and acceptance conftests only.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.helpers import DATA, MINI_INI, UNUSED_PLUGINS, SharedRuns, normalised, read_jsonl
from tests.sdks import ANTHROPIC_INSTALL, require_sdk

# Machine images often set PYTHONDONTWRITEBYTECODE=1 (this project's do): then each of the run's
# hundreds of Python processes (xdist workers, pytester subprocess runs, servers) compiles the package
# again, and each worker rewrites every test module's asserts again (half of a worker's 11 s of
# collection CPU). The test run writes its bytecode caches (__pycache__/, git-ignored) instead.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

# A run started in the background of a script or under nohup has SIGINT ignored, and every process it
# starts inherits that: the tests that press Ctrl-C on an inner run (e2e/test_interrupt.py,
# e2e/test_worker_kill_and_signals.py) could not. Their children get Python's own handler back instead.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# tests/data holds suites that the tests copy into pytester folders; they are not tests of this project.
collect_ignore = ["data"]

if UNUSED_PLUGINS not in os.environ.get("PYTEST_ADDOPTS", ""):
    os.environ["PYTEST_ADDOPTS"] = f"{os.environ.get('PYTEST_ADDOPTS', '')} {UNUSED_PLUGINS}".strip()

TIERS = ("unit", "e2e", "acceptance")
HERE = Path(__file__).parent

ONE_WORKER: dict[str, str] = {
    "tests/e2e/test_loopback_messages.py": "anthropic",
    "tests/e2e/test_proxy.py": "anthropic",
    "tests/unit/sim/test_sim_messages.py": "anthropic",
    "tests/unit/analysis/test_baseline_stats.py": "scipy",
    "tests/unit/analysis/test_elo.py": "scipy",
    "tests/unit/analysis/test_reproducibility.py": "scipy",
    "tests/unit/analysis/test_sequential.py": "scipy",
    "tests/unit/report/test_eloreport.py": "scipy",
    "tests/unit/test_code_quality.py": "package-source",
    "tests/unit/test_layering.py": "package-source",
}
"""Test files whose tests share a setup each xdist worker would otherwise pay again, run on one worker
under ``-m "not slow"``: the ``anthropic`` SDK's import (about 3 s), ``scipy``'s (about 1 s: these files
import it inside the tests that use it, never at collection) and the package's parsed source
(``tests.helpers.parsed``)."""


def pytest_configure(config: pytest.Config) -> None:
    """Under xdist the controller rewrites the test modules' asserts once before the workers start."""
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        _rewrite_test_modules_once(config)


def _rewrite_test_modules_once(config: pytest.Config) -> None:
    """Write pytest's cached rewritten bytecode of every test module and conftest (when missing or out of
    date), so that the workers read it instead of each rewriting all of them: on a clean clone that is
    about 9 s of CPU per worker. A cache only: on any failure the workers rewrite as they would anyway."""
    try:
        from _pytest.assertion import rewrite

        state = config.stash[rewrite.assertstate_key]
        for source in sorted([*HERE.rglob("test_*.py"), *HERE.rglob("conftest.py")]):
            if "data" in source.relative_to(HERE).parts:
                continue
            cache_dir = rewrite.get_cache_dir(source)
            pyc = cache_dir / (source.name[:-3] + rewrite.PYC_TAIL)
            if rewrite._read_pyc(source, pyc, state.trace) is None and rewrite.try_makedirs(cache_dir):
                source_stat, code = rewrite._rewrite_test(source, config)
                rewrite._write_pyc(state, code, source_stat, pyc)
    except Exception:  # a cache only: the workers rewrite what is missing themselves
        return


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``-n`` with ``-m "not slow"`` (and xdist's default ``--dist load``), the tests go out by
    file: one file's module and session fixtures (a loopback server, a parsed package, a shared run) are
    set up on one worker, not on both, and the files of ``ONE_WORKER`` share a worker. The heaviest go
    first (those groups, then the end-to-end files, the unit files last), so the workers finish together.
    The full run goes test by test in :func:`_run_order`'s order (a file of slow tests as one unit would
    end the run alone), with work stealing: a worker that runs out takes half of the longest queue left,
    instead of idling while one worker works through its share of slow tests. Another ``--dist`` is kept."""
    if config.getoption("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling, WorkStealingScheduling  # type: ignore[import-untyped]

    if "not slow" not in (config.option.markexpr or ""):
        return WorkStealingScheduling(config, log)

    class ByFile(LoadScopeScheduling):  # type: ignore[misc]
        ordered = False
        workqueue: OrderedDict[str, dict[str, bool]]

        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return ONE_WORKER.get(path, path)

        def _assign_work_unit(self, node: Any) -> None:
            if not self.ordered:  # the first call, right after the queue of files is made
                self.ordered = True
                units = sorted(self.workqueue.items(), key=lambda unit: _heaviest_first(*unit))
                self.workqueue = OrderedDict(units)
            super()._assign_work_unit(node)

    return ByFile(config, log)


def _heaviest_first(scope: str, tests: dict[str, bool]) -> tuple[int, int]:
    """The groups first, then the end-to-end and acceptance files, then the unit files; more tests first."""
    tier = 0 if scope in ONE_WORKER.values() else 2 if scope.startswith("tests/unit/") else 1
    return tier, -len(tests)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each test gets the marker of its tier's folder (``-m unit``, ``-m e2e``, ``-m acceptance``), and
    the long tests go first (:func:`_run_order`)."""
    for item in items:
        parts = item.path.relative_to(HERE).parts if item.path.is_relative_to(HERE) else ()
        if parts and parts[0] in TIERS:
            item.add_marker(parts[0])
    items.sort(key=_run_order)  # stable: the collection order within each group


LONGEST = ("tests/unit/test_code_quality.py::test_mypy_strict", "tests/e2e/test_litellm_proxy.py")
"""The longest by wall time: the type check (a minute of CPU from a clean clone) and LiteLLM's proxy
(a minute to start, then a clock minute of its rpm limit)."""


def _run_order(item: pytest.Item) -> int:
    """Longest first, so that xdist's workers end together instead of one finishing a long test alone:
    :data:`LONGEST`, then the ``slow`` tests, then the rest."""
    if any(item.nodeid.startswith(prefix) for prefix in LONGEST):
        return 0
    return 1 if item.get_closest_marker("slow") is not None else 2


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto`` for this project's tests: two workers per core (4 on 2 cores) when the slow tests run:
    many wait on processes they start (servers, a proxy, the CLIs, inner pytest runs with workers of
    their own, a clock minute of a rate limit), so fewer workers leave cores idle (on 2 cores, a clean
    clone's full run: 285 s with 3 workers, 238 s with 4). ``-m "not slow"`` is CPU-bound: a worker per
    core (each extra worker collects every test again). ``-n N`` still means N."""
    cores = os.cpu_count() or 1
    if "not slow" in (config.option.markexpr or ""):
        return cores
    return 2 * cores


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytest's own ``pytester`` (which clears ``PYTEST_ADDOPTS``), with the unused plugins kept out."""
    monkeypatch.setenv("PYTEST_ADDOPTS", UNUSED_PLUGINS)
    return pytester


@pytest.fixture(autouse=True)
def _no_ci_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    """The plugin's own runs are local runs unless a test sets ``CI`` itself: under ``CI`` a skipped
    gate fails the run, and this project's CI sets it."""
    monkeypatch.delenv("CI", raising=False)


@pytest.fixture
def mini_suite(pytester: pytest.Pytester) -> Path:
    """The ``tests/data/mini`` suite copied to ``suites/mini`` in a fresh pytester folder (sim backend)."""
    target = pytester.path / "suites" / "mini"
    shutil.copytree(DATA / "mini", target)
    pytester.makeini(MINI_INI)
    return target


@pytest.fixture
def read_outputs() -> Callable[[Path], dict[str, list[str]]]:
    def read(folder: Path) -> dict[str, list[str]]:
        return {
            name: normalised(read_jsonl(folder / name))
            for name in (
                "pairs/pair_results.jsonl",
                "agent_runs.jsonl",
                "agents/agent_x.jsonl",
                "agents/agent_y.jsonl",
            )
        }

    return read


@pytest.fixture(scope="session")
def anthropic_sdk() -> ModuleType:
    """The ``anthropic`` SDK, imported once per worker before a test's ``pytester`` snapshot of
    ``sys.modules`` (which would drop a module first imported during the test)."""
    return require_sdk("anthropic", ANTHROPIC_INSTALL)


@pytest.fixture(scope="session")
def shared_runs(tmp_path_factory: pytest.TempPathFactory) -> SharedRuns:
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # common to every worker of this session
    folder = base / "shared-runs"
    folder.mkdir(exist_ok=True)
    return SharedRuns(folder)
