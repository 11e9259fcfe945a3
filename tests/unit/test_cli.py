"""python -m pytest_gauge's own argument parsing: the help lists every command."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

from pytest_gauge._internal.cli import main

ROOT = Path(__file__).resolve().parents[2]


def run_cli(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m pytest_gauge ARGS`` in a child process without any gateway variables of this machine."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TAOTOKEN_", "ANTHROPIC_", "GAUGE_"))}
    base["PYTHONPATH"] = str(ROOT) + (os.pathsep + base["PYTHONPATH"] if base.get("PYTHONPATH") else "")
    base.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "pytest_gauge", *args],
        capture_output=True,
        text=True,
        env=base,
        cwd=cwd or ROOT,
        timeout=60,
    )


def test_help_lists_the_commands() -> None:
    done = run_cli("--help")
    assert done.returncode == 0
    for command in ("doctor", "cassettes", "cache"):
        assert f"\n    {command}" in done.stdout
    out = io.StringIO()
    assert main([], environ={}, out=out) == 2 and "doctor" in out.getvalue()
