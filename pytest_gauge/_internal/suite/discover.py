"""Finding suites outside a pytest run (``python -m pytest_gauge doctor PATHS``): import the test modules
under some paths and keep their module-level :class:`~.declare.Suite` objects, as collection would."""

from __future__ import annotations

import configparser
import importlib.util
import re
import sys
import tomllib
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType

from .declare import Suite

__all__ = ["configured_testpaths", "find_suites", "load_suite"]

_DECLARES = re.compile(r"^[A-Za-z_]\w*\s*=\s*(?:\w+\.)?Suite\(", re.MULTILINE)


def _package_module(module_path: Path) -> tuple[Path, str] | None:
    """For a module in a package folder (one with ``__init__.py``, so it may import its siblings as
    ``from .tools import TOOLS``): the first folder up that is no package, and the dotted module name,
    as pytest's default import mode computes them. None for a plain folder."""
    parts = [module_path.stem]
    folder = module_path.parent
    while (folder / "__init__.py").is_file():
        parts.insert(0, folder.name)
        folder = folder.parent
    return None if len(parts) == 1 else (folder, ".".join(parts))


def _import(module_path: Path) -> ModuleType:
    """The test module at ``module_path``: by its package name (its folder's parent on ``sys.path``, as
    pytest does) when it is in a package, else under a private name so that two suites' modules of
    the same file name never collide."""
    package = _package_module(module_path.resolve())
    if package is not None:
        return _import_package_module(module_path, *package)
    name = f"_gauge_suite_{abs(hash(str(module_path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, module_path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _import_package_module(module_path: Path, base: Path, name: str) -> ModuleType:
    """Import a package's test module by its dotted name with its package's folder on ``sys.path``, then
    take both back out: the process keeps the module object, but not the name, so a later import of
    another copy of the suite (a pytest run in this process, another test) is not given this one."""
    top = name.split(".")[0]
    before = {k for k in sys.modules if k.split(".")[0] == top}
    added = str(base) not in sys.path
    if added:
        sys.path.insert(0, str(base))
    try:
        module = importlib.import_module(name)
    finally:
        for key in [k for k in sys.modules if k.split(".")[0] == top and k not in before]:
            del sys.modules[key]
        if added:
            sys.path.remove(str(base))
    loaded = Path(module.__file__ or "").resolve()
    if loaded != module_path.resolve():
        raise ImportError(
            f"{module_path}: the module name {name!r} is already taken by {loaded}; rename the suite folder"
        )
    return module


def _module_suites(module_path: Path) -> list[Suite]:
    return [v for v in vars(_import(module_path)).values() if isinstance(v, Suite)]


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
                found.append((suite.name or module_path.resolve().parent.name, suite))  # `doctor .`
    return found


def configured_testpaths(root: Path) -> list[str]:
    """``testpaths`` of the pytest configuration in ``root`` (pytest.ini, pyproject.toml), else []."""
    ini = root / "pytest.ini"
    if ini.is_file():
        parser = configparser.ConfigParser()
        parser.read(ini, encoding="utf-8")
        return parser.get("pytest", "testpaths", fallback="").split()
    try:
        data = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return []
    paths = data.get("tool", {}).get("pytest", {}).get("ini_options", {}).get("testpaths", [])
    return [paths] if isinstance(paths, str) else [str(p) for p in paths]
