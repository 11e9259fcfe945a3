"""A plugin that never breaks someone else's pytest: where the platform lacks what pytest-gauge needs
(POSIX file locks, ``fcntl``: Windows), installing it leaves an unrelated test run green, with one
warning saying why the plugin is disabled."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.helpers import ROOT

NO_FCNTL = "import sys; sys.modules['fcntl'] = None; import pytest; sys.exit(pytest.main(sys.argv[1:]))"


def test_without_fcntl_an_unrelated_test_passes_with_one_warning(tmp_path: Path) -> None:
    (tmp_path / "test_plain.py").write_text("def test_one():\n    assert 1 + 1 == 2\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST_", "PYTEST_ADDOPTS"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    done = subprocess.run(
        [sys.executable, "-c", NO_FCNTL, "-p", "no:cacheprovider", "-p", "no:randomly", "test_plain.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "1 passed" in out
    assert out.count("pytest-gauge is disabled: it needs native file locks") == 1
    assert "Error while loading plugin" not in out
