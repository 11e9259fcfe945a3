"""The package and its tests stay ruff- and mypy-clean (both come with the ``test`` extra; skipped where
absent)."""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import parsed

ROOT = Path(__file__).resolve().parents[2]
CHECKED = ["pytest_gauge", "tests", "benchmarks", "eval_suites", "conftest.py"]


def _run(*cmd: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, **env} if env else None
    return subprocess.run(
        cmd, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False, env=environ
    )


def test_ruff_lint_and_format() -> None:
    """The running interpreter's ruff (``python -m ruff``: a ``ruff`` on PATH may be another install's
    or none, where pip put its scripts outside PATH); without it a skip, under CI a failure."""
    if importlib.util.find_spec("ruff") is None:
        if os.environ.get("CI"):
            pytest.fail("ruff is missing in CI: pip install -e '.[test]'", pytrace=False)
        pytest.skip("ruff is not installed (pip install -e '.[test]')")
    lint = _run(sys.executable, "-m", "ruff", "check", *CHECKED)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    fmt = _run(sys.executable, "-m", "ruff", "format", "--check", *CHECKED)
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr


@pytest.mark.slow  # tens of seconds from a clean clone (no mypy cache): the full run only
def test_mypy_strict() -> None:
    """mypy --strict over the package and the tests, as configured in pyproject.toml, then over the
    benchmark scripts (each a program: they import each other as top-level modules, so ``benchmarks/``
    is their search path, and the package and its dependencies come from the same cache)."""
    pytest.importorskip("mypy", reason="mypy is not installed (pip install -e '.[test]')")
    cache = ("--cache-dir", str(ROOT / ".mypy_cache"))
    done = _run(sys.executable, "-m", "mypy", *cache)
    assert done.returncode == 0, done.stdout + done.stderr
    scripts = sorted(str(path.relative_to(ROOT)) for path in (ROOT / "benchmarks").glob("*.py"))
    done = _run(sys.executable, "-m", "mypy", *cache, *scripts, env={"MYPYPATH": "benchmarks"})
    assert done.returncode == 0, done.stdout + done.stderr


def test_no_function_is_longer_than_80_lines() -> None:
    """Functions short enough to read at once: none over 80 lines outside the shipped test
    helpers (``testing/``) and the simulator (``sim/``)."""
    long = []
    for path in sorted((ROOT / "pytest_gauge").rglob("*.py")):
        if {"testing", "sim"} & set(path.relative_to(ROOT / "pytest_gauge").parts):
            continue
        for node in ast.walk(parsed(path)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno is not None:
                lines = node.end_lineno - node.lineno + 1
                if lines > 80:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines} lines)")
    assert not long, "\n".join(long)


def private_imports(root: Path) -> list[str]:
    """``file:line`` of every ``from X import _name`` in the package under ``root``: a name another module
    keeps private, imported across modules (dunders and ``import public as _alias`` are fine)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(parsed(path)):
            if not isinstance(node, ast.ImportFrom):
                continue
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    module = "." * node.level + (node.module or "")
                    found.append(
                        f"{path.relative_to(root.parent)}:{node.lineno} from {module} import {alias.name}"
                    )
    return found


def test_no_private_name_is_imported_across_modules(tmp_path: Path) -> None:
    """What modules share is public (``__all__``): no ``from X import _name`` anywhere in the package. The
    check itself finds one when there is one."""
    assert not private_imports(ROOT / "pytest_gauge"), "\n".join(private_imports(ROOT / "pytest_gauge"))
    bad = tmp_path / "pkg"
    bad.mkdir()
    (bad / "a.py").write_text("x = 1\n\nfrom .b import _hidden, __version__, shown as _alias\n")
    assert private_imports(bad) == ["pkg/a.py:3 from .b import _hidden"]
