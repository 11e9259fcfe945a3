"""Helpers shared by the plugin's own tests (import them as ``tests.helpers``): where the test data
lives, reading and normalising the JSON-lines files a run writes, syrupy extensions for text snapshots,
and the ways a test starts a pytest run of the plugin (in process, in a subprocess, once per session).
Fixtures live in the conftest files: ``tests/conftest.py`` for every tier, ``tests/e2e/conftest.py`` and
``tests/acceptance/conftest.py`` for what only plugin runs need."""

from __future__ import annotations

import ast
import functools
import importlib
import json
import os
import pkgutil
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import filelock
import pytest
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

__all__ = [
    "DATA",
    "MINI_INI",
    "ROOT",
    "UNUSED_PLUGINS",
    "VOLATILE",
    "HTMLSnapshot",
    "JSONTextSnapshot",
    "MarkdownSnapshot",
    "SVGSnapshot",
    "SharedRun",
    "SharedRuns",
    "import_everything_runs_use",
    "normalised",
    "numbered_task",
    "read_jsonl",
    "run_inprocess",
    "run_pytest_subprocess",
]

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).resolve().parents[1]
MINI_INI = "[pytest]\ngauge_backend = sim\ngauge_seed = 7\n"

# The pytest runs the tests start (in this process or as subprocesses) do not load third-party plugins
# that machines here have installed and these tests never use: importing them costs about 0.4 s per
# started pytest process (hypothesis, pytest-benchmark), over a hundred such processes per test session.
# anyio's plugin imports trio when it loads (its backend list: about 0.7 s CPU per process); the one
# run with an anyio test asks for it back with ``-p anyio``.
UNUSED_PLUGINS = "-p no:hypothesispytest -p no:benchmark -p no:anyio"

# Fields that may legitimately differ between runs of the same seed (docs/protocol.md#ledger: only latencies,
# timestamps, run and worker ids).
VOLATILE = {"latency_s", "ts", "run_id", "worker", "finished_at", "volatile"}  # metrics.json's "volatile"


@functools.cache
def _tree(path: Path, mtime_ns: int) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def parsed(path: Path) -> ast.Module:
    """``path`` parsed, once per test process and version of the file: the code-quality checks and the
    layering test walk the same package (tests/conftest.py runs their files on one worker)."""
    return _tree(path, path.stat().st_mtime_ns)


def stable_report(path: Path) -> str:
    """A report file without what varies from run to run (latencies: docs/protocol.md#volatile-fields),
    what runs of one suite and seed must agree on byte for byte."""
    from pytest_gauge.report.format import without_volatile

    return without_volatile(path.read_text(encoding="utf-8"), json_doc=path.suffix == ".json")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def normalised(rows: list[dict[str, Any]]) -> list[str]:
    """Rows without volatile fields (recursively), as sorted canonical JSON strings."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in VOLATILE}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return sorted(json.dumps(strip(r), sort_keys=True) for r in rows)


class MarkdownSnapshot(SingleFileSnapshotExtension):
    """One reviewable .md file per snapshot, stored as text."""

    file_extension = "md"
    _write_mode = WriteMode.TEXT


class JSONTextSnapshot(SingleFileSnapshotExtension):
    """Rendered JSON text (metrics.json, elo.json), stored verbatim."""

    file_extension = "json"
    _write_mode = WriteMode.TEXT


class SVGSnapshot(SingleFileSnapshotExtension):
    """A rendered SVG, stored verbatim (opens in a browser for review)."""

    file_extension = "svg"
    _write_mode = WriteMode.TEXT


class HTMLSnapshot(SingleFileSnapshotExtension):
    """A rendered HTML page, stored verbatim (opens in a browser for review)."""

    file_extension = "html"
    _write_mode = WriteMode.TEXT


@dataclass(frozen=True)
class SharedRun:
    """A finished ``pytest`` run in its own folder: exit code, terminal output, and where its files are."""

    ret: int
    stdout: str
    path: Path


class SharedRuns:
    """End-to-end runs made once per test session and read by every test that needs the same run.

    A plugin run of a real suite costs seconds; several tests asserting different things about one run
    share it instead of repeating it. Under xdist every worker has its own fixtures, so the run is made
    by the first worker that needs it, under a file lock in the session's common temporary folder (the
    pattern xdist documents for session fixtures); the others wait and read its result.
    """

    def __init__(self, base: Path) -> None:
        self.base = base

    def get(
        self,
        name: str,
        setup: Callable[[Path], None],
        *args: str,
        env: dict[str, str] | None = None,
        pytester: pytest.Pytester | None = None,
        after: Callable[[Path], None] | None = None,
    ) -> SharedRun:
        """Run ``pytest *args`` in a fresh folder prepared by ``setup`` (once per session and name): in a
        subprocess, or in this process when the calling test gives its ``pytester`` (seconds cheaper:
        no interpreter start, no imports; with ``-n 2`` the controller runs here and only its workers are
        processes). ``after(folder)`` runs
        once the run is done, before any other test reads it (to save what a server the caller started
        saw, say)."""
        folder = self.base / name
        done = self.base / f"{name}.result.json"
        with filelock.FileLock(self.base / f"{name}.lock"):
            if not done.exists():
                shutil.rmtree(folder, ignore_errors=True)
                folder.mkdir(parents=True)
                setup(folder)
                if pytester is None:
                    ret, out = run_pytest_subprocess(folder, *args, env=env)
                else:
                    with pytest.MonkeyPatch.context() as mp:
                        for key, value in (env or {}).items():
                            mp.setenv(key, value)
                        result = run_inprocess(pytester, *args, folder=folder)
                    ret, out = int(result.ret), f"{result.stdout.str()}\n{result.stderr.str()}"
                if after is not None:
                    after(folder)
                done.write_text(json.dumps({"ret": ret, "stdout": out}), encoding="utf-8")
        result_ = json.loads(done.read_text(encoding="utf-8"))
        return SharedRun(result_["ret"], result_["stdout"], folder)


def run_pytest_subprocess(
    folder: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 900.0
) -> tuple[int, str]:
    """``python -m pytest *args`` in ``folder``, like ``pytester.runpytest_subprocess`` but usable from a
    session fixture; the outer run's xdist and pytest settings are not inherited."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST_", "PYTEST_ADDOPTS"))}
    clean.pop("PYTEST_CURRENT_TEST", None)
    clean.pop("CI", None)  # a local run unless ``env`` says otherwise (under CI a skipped gate fails)
    clean["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", *args],
        cwd=folder,
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr


def run_inprocess(
    pytester: pytest.Pytester, *args: str, plugins: Sequence[object] = (), folder: Path | None = None
) -> pytest.RunResult:
    """A plugin run inside this process (no interpreter start, no imports: seconds cheaper than a
    subprocess). ``--import-mode=importlib`` because earlier runs may have imported a suite module of the
    same name; xdist's worker variables are hidden so the run is the plain single-process run it is.
    ``plugins``: objects registered as plugins of the run (to look inside it from a hook); ``folder``:
    where the run starts (its ``pytest.ini``, its suites), ``pytester.path`` unless given."""
    with pytest.MonkeyPatch.context() as mp:
        for key in [k for k in os.environ if k.startswith("PYTEST_XDIST_")]:
            mp.delenv(key)
        if folder is None:
            folder = pytester.path
        else:
            mp.chdir(folder)
        # The folder's own packages (a copied ``eval_suites``, say) come first on sys.path, and none of the
        # same name imported earlier (the repository's) is reused: a test may have edited its copy.
        mp.syspath_prepend(str(folder))
        tops = {p.name for p in folder.iterdir() if p.is_dir()}
        tops |= {p.parent.name for p in folder.glob("*/*/__init__.py")}  # eval_suites/example: example
        for name in [m for m in sys.modules if m.split(".")[0] in tops]:
            mp.delitem(sys.modules, name)
        return pytester.runpytest_inprocess(
            "-p", "no:cacheprovider", "-p", "no:randomly", "--import-mode=importlib", *args, plugins=plugins
        )


def numbered_task(i: int) -> dict[str, object]:
    """A small generated task: odd ones a word-limited summary, even ones a retrieval of three names."""
    if i % 2:
        return {
            "task_id": f"t{i:02d}",
            "category": "constraint",
            "task_prompt": f"Summarise refund policy number {i} in at most 40 words, mentioning 30 days.",
            "success_criteria": [{"type": "contains_all", "phrases": ["30 days"]}],
            "hard_constraints": [{"type": "max_words", "limit": 40}],
        }
    return {
        "task_id": f"t{i:02d}",
        "category": "information_retrieval",
        "task_prompt": f"Name the three plan tiers of product {i}: basic, pro and enterprise.",
        "success_criteria": [{"type": "contains_all", "phrases": ["basic", "pro", "enterprise"]}],
    }


def import_everything_runs_use() -> None:
    """Import every module of pytest_gauge (and so its compiled dependencies, numpy first of all) and the
    HTTP stack, so that every ``pytester`` snapshot of ``sys.modules`` holds them.

    ``pytester`` removes the modules imported during a test when the test ends; an in-process run in a
    later test would import numpy again, which numpy refuses in one process. Only the tiers that start
    plugin runs in process call this (their conftest's session fixture): a pure unit test does not pay it.
    """
    import pytest_gauge

    for info in pkgutil.walk_packages(pytest_gauge.__path__, "pytest_gauge."):
        if not info.name.endswith("__main__"):
            importlib.import_module(info.name)
    _one_request_each_way()


def _one_request_each_way() -> None:
    """One request with the sync and the async ``openai`` client: the HTTP stack (httpcore2, h11, anyio's
    backends) is imported on first use; if that first use were inside an in-process run, a later test
    would import it again and its exception classes would no longer be the ones the client maps."""
    import asyncio

    import openai

    from pytest_gauge.gateway.transport import tls_context
    from pytest_gauge.testing import LoopbackServer

    messages: Any = [{"role": "user", "content": "warm up"}]
    kw: Any = {"api_key": "sk-warm-up", "max_retries": 0}
    with LoopbackServer() as server:
        sync_http = openai.DefaultHttpxClient(verify=tls_context())  # the process's one TLS context
        with openai.OpenAI(base_url=server.base_url, http_client=sync_http, **kw) as sync_client:
            sync_client.chat.completions.create(model="m", messages=messages)

        async def call() -> None:
            async_http = openai.DefaultAsyncHttpxClient(verify=tls_context())
            async with openai.AsyncOpenAI(base_url=server.base_url, http_client=async_http, **kw) as c:
                await c.chat.completions.create(model="m", messages=messages)

        asyncio.run(call())


KILL_TIMEOUTS = (0.3, 1.0, 3.0, 10.0)
"""Timeouts for the process-group kill tests, shortest first: one that ends a program before it has
started its child proves nothing, so the next is longer (the pass condition does not depend on the
machine's speed)."""


def process_ended(pid: int, wait: float = 5.0) -> bool:
    """Whether ``pid`` ends within ``wait`` seconds: gone, or a zombie (dead, its exit status not yet read
    by the init process that inherited it, which in a container may take a second or more)."""
    end = time.monotonic() + wait
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return True
        except OSError:  # no /proc (macOS), or reaped meanwhile: the next look tells
            pass
        if time.monotonic() > end:
            return False
        time.sleep(0.02)
