"""Finding suites outside a pytest run (``python -m pytest_gauge doctor PATHS``): import the test modules
under some paths and keep their module-level :class:`~.declare.Suite` objects, as collection would."""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Iterable
from pathlib import Path

from .declare import Suite

__all__ = ["find_suites", "load_suite"]

_DECLARES = re.compile(r"^[A-Za-z_]\w*\s*=\s*(?:\w+\.)?Suite\(", re.MULTILINE)


def _module_suites(module_path: Path) -> list[Suite]:
    name = f"_gauge_suite_{abs(hash(str(module_path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, module_path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return [v for v in vars(module).values() if isinstance(v, Suite)]


def load_suite(module_path: Path) -> Suite:
    """Import a suite's test module from its path and return its one module-level :class:`Suite`."""
    suites = _module_suites(module_path)
    if len(suites) != 1:
        raise ValueError(f"{module_path}: expected one module-level Suite, found {len(suites)}")
    return suites[0]


def find_suites(paths: Iterable[str | Path]) -> list[tuple[str, Suite]]:
    """(suite name, suite) for every ``test_*.py`` / ``*_test.py`` module under ``paths`` (files or
    folders) that declares a module-level Suite; the name is ``Suite(name=...)`` or the folder's."""
    found: list[tuple[str, Suite]] = []
    for raw in paths:
        path = Path(raw)
        files = [path] if path.is_file() else sorted([*path.rglob("test_*.py"), *path.rglob("*_test.py")])
        for module_path in files:
            if not _DECLARES.search(module_path.read_text(encoding="utf-8", errors="replace")):
                continue  # no module-level `name = Suite(`: not a suite module, do not import (run) it
            for suite in _module_suites(module_path):
                found.append((suite.name or module_path.parent.name, suite))
    return found
