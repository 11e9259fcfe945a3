"""Where the platform lacks what Linux offers, the package degrades instead of crashing: without
process groups (``os.killpg``: Windows) a command past its timeout and a program agent's process are
still ended; the file locks are ``filelock``'s, and the package itself never imports ``fcntl``."""

from __future__ import annotations

import ast
import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_gauge.run import programs
from pytest_gauge.suite.file_checks import run_command_async
from tests.helpers import ROOT


def test_a_command_past_its_timeout_ends_without_process_groups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delattr(os, "killpg")
    started = time.monotonic()
    outcome = asyncio.run(
        run_command_async([sys.executable, "-c", "import time; time.sleep(60)"], tmp_path, 0.5)
    )
    assert outcome.code is None
    assert time.monotonic() - started < 30


def test_a_program_agents_process_is_killed_without_process_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        monkeypatch.delattr(os, "killpg")
        programs._kill_group(proc.pid)
        assert proc.wait(timeout=30) != 0
    finally:
        proc.kill()
        proc.wait()


def test_the_package_never_imports_fcntl() -> None:
    """Every lock goes through ``pytest_gauge.files.locks``, which uses ``filelock``: no module of the
    package imports ``fcntl`` (Windows has none)."""
    importers = []
    for path in sorted((ROOT / "pytest_gauge").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            if "fcntl" in names or (isinstance(node, ast.Constant) and node.value == "fcntl"):
                importers.append(str(path.relative_to(ROOT)))
    assert importers == []
