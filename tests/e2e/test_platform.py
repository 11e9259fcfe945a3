"""A plugin that never breaks someone else's pytest: where the platform lacks what pytest-gauge needs
(a native file lock: a POSIX system without ``fcntl``), installing it leaves an unrelated test run
green, with one warning saying why the plugin is disabled. Where ``filelock`` has its native lock and
nothing else may import ``fcntl`` (as on Windows, where ``filelock`` locks with ``msvcrt``), a suite
runs under xdist as anywhere."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import DATA, MINI_INI, ROOT, UNUSED_PLUGINS, read_jsonl

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


# sitecustomize of every process of the run (the workers too): filelock binds fcntl first, then nobody
# else can import it
ONLY_FILELOCK = "import sys\nimport filelock\nsys.modules['fcntl'] = None\n"


@pytest.mark.slow
def test_a_suite_runs_on_two_workers_when_only_filelock_has_fcntl(tmp_path: Path) -> None:
    shutil.copytree(DATA / "mini", tmp_path / "suites" / "mini")
    (tmp_path / "pytest.ini").write_text(MINI_INI)
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(ONLY_FILELOCK)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST_", "PYTEST_ADDOPTS"))}
    paths = (str(tmp_path / "site"), str(ROOT), os.environ.get("PYTHONPATH", ""))
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    probe = (
        "import sys; assert sys.modules['fcntl'] is None; import pytest; sys.exit(pytest.main(sys.argv[1:]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, "-p", "no:cacheprovider", "-p", "no:randomly", *UNUSED_PLUGINS.split(),
         "suites", "-n", "2", "--gauge-cache", "off"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    assert "30 passed" in out and "pytest-gauge is disabled" not in out
    assert len(read_jsonl(tmp_path / "gauge-out" / "mini" / "pairs" / "pair_results.jsonl")) == 30
