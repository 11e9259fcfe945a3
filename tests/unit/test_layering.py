"""The package's import direction (docs/architecture.md#layers): every import statement of every module,
deferred ones inside functions included, points to a module of the same layer or of a layer below, and
no chain of imports leads back to where it started. Left out: imports under ``if TYPE_CHECKING:``
(annotations only) and under ``if __name__ == "__main__":`` (they run only when the file is the
program, never when it is imported), the two blocks whose code never runs on import."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.helpers import parsed

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "pytest_gauge"

# Bottom first; a module may import its own layer and the layers before it, never one after it.
# Keep in step with docs/architecture.md#layers.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("records", "version"),
    ("files",),
    ("suite",),
    ("gateway",),
    ("run",),
    ("sim",),
    ("analysis",),
    ("report",),
    ("options",),
    ("process",),
    ("fixtures",),
    ("finish",),
    ("testing", "plugin", "cli", "__init__", "__main__"),
)
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}
APART: frozenset[tuple[str, str]] = frozenset({("gateway", "suite")})
"""Pairs kept apart although the first is above the second: the gateway takes plain values (models,
prices, where a model name came from), never a suite."""


@dataclass(frozen=True)
class Import:
    """One import of a package module by another: where it is written and the module it reaches."""

    source: str  # dotted module name of the importing file
    path: str  # the importing file, relative to the repository
    line: int
    target: str  # dotted name of the deepest package module the import names

    def where(self) -> str:
        return f"{self.path}:{self.line} imports {self.target}"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _never_on_import(test: ast.expr) -> bool:
    """``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``) and ``if __name__ == "__main__":``."""
    if isinstance(test, ast.Name | ast.Attribute):
        return (test.id if isinstance(test, ast.Name) else test.attr) == "TYPE_CHECKING"
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and len(test.comparators) == 1
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    )


def _statements(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement below ``node`` at any depth, except in the body of a block that never runs
    on import (its ``else:`` counts)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _never_on_import(child.test):
            for other in child.orelse:
                yield from _statements(ast.Module(body=[other], type_ignores=[]))
            continue
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child
        yield from _statements(child)


def _named(stmt: ast.Import | ast.ImportFrom, source: str, is_package: bool) -> Iterator[str]:
    """The dotted names an import statement names (``from a import b`` names ``a.b``: a module or not)."""
    if isinstance(stmt, ast.Import):
        yield from (alias.name for alias in stmt.names)
        return
    base = stmt.module or ""
    if stmt.level:
        parts = source.split(".") if is_package else source.split(".")[:-1]
        parts = parts[: len(parts) - stmt.level + 1]
        base = ".".join([*parts, *([stmt.module] if stmt.module else [])])
    for alias in stmt.names:
        yield base if alias.name == "*" else f"{base}.{alias.name}"


def package_imports() -> list[Import]:
    """Every import of the package, read once per test process (three tests check the same graph)."""
    return list(_package_imports())


@functools.cache
def _package_imports() -> tuple[Import, ...]:
    files = sorted(PACKAGE.rglob("*.py"))
    modules = {_module_name(p) for p in files}
    found: dict[Import, None] = {}  # one per statement and module reached, in file order
    for path in files:
        source = _module_name(path)
        for stmt in _statements(parsed(path)):
            for name in _named(stmt, source, path.name == "__init__.py"):
                while name not in modules and "." in name:
                    name = name.rsplit(".", 1)[0]
                if name in modules and name != source and name.startswith("pytest_gauge"):
                    found[Import(source, str(path.relative_to(ROOT)), stmt.lineno, name)] = None
    return tuple(found)


def layer_of(module: str) -> str:
    """``pytest_gauge.run.engine`` → ``run``; the package root's own module is ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def upward(imports: list[Import]) -> list[str]:
    """Every import that points to a later layer than its own (or across a pair kept apart), as
    ``file:line imports module (why)``."""
    bad = []
    for imp in imports:
        src, dst = layer_of(imp.source), layer_of(imp.target)
        if RANK[dst] > RANK[src]:
            bad.append(f"{imp.where()} (layer {src} must not import {dst}, a later layer)")
        elif (src, dst) in APART:
            bad.append(f"{imp.where()} (layer {src} must not import {dst}: they are kept apart)")
    return bad


def cycles(imports: list[Import]) -> list[str]:
    """One line per import that closes a cycle of modules, with the chain it closes."""
    graph: dict[str, list[Import]] = {}
    for imp in imports:
        graph.setdefault(imp.source, []).append(imp)
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[Import] = []
    found = []

    def visit(module: str) -> None:
        state[module] = 1
        for imp in graph.get(module, []):
            if state.get(imp.target) == 1:
                start = next(i for i, p in enumerate(path) if p.source == imp.target)
                found.append(" → ".join([p.where() for p in path[start:]] + [imp.where()]) + " (a cycle)")
            elif imp.target not in state:
                path.append(imp)
                visit(imp.target)
                path.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)
    return found


def test_every_package_module_has_a_layer() -> None:
    unknown = sorted({layer_of(i.source) for i in package_imports()} - set(RANK))
    assert not unknown, f"add these to LAYERS (and docs/architecture.md#layers): {unknown}"


def test_imports_point_down_the_layers() -> None:
    bad = upward(package_imports())
    assert not bad, "imports against the layering (docs/architecture.md#layers):\n" + "\n".join(bad)


def test_no_import_cycle() -> None:
    bad = cycles(package_imports())
    assert not bad, "import cycles (docs/architecture.md#layers):\n" + "\n".join(bad)


def test_the_checker_sees_deferred_imports_and_skips_type_checking_ones(tmp_path: Path) -> None:
    """The checker's own parsing, on a made-up module: a function-level import counts, one under
    ``if TYPE_CHECKING:`` or ``if __name__ == "__main__":`` does not, and a relative import resolves
    against the module's package."""
    code = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from ..report import common\n"
        "def f():\n    from ..analysis import gates\n"
        "if __name__ == '__main__':\n    from .. import cli\n"
    )
    stmts = list(_statements(ast.parse(code)))
    names = [n for s in stmts for n in _named(s, "pytest_gauge.gateway.x", is_package=False)]
    assert names == ["typing.TYPE_CHECKING", "pytest_gauge.analysis.gates"]
    up = Import("pytest_gauge.gateway.x", "pytest_gauge/gateway/x.py", 5, "pytest_gauge.analysis.gates")
    assert upward([up]) == [
        "pytest_gauge/gateway/x.py:5 imports pytest_gauge.analysis.gates (layer gateway must not import"
        " analysis, a later layer)"
    ]
    back = Import(
        "pytest_gauge.analysis.gates", "pytest_gauge/analysis/gates.py", 9, "pytest_gauge.gateway.x"
    )
    assert cycles([up, back]) == [
        "pytest_gauge/analysis/gates.py:9 imports pytest_gauge.gateway.x → pytest_gauge/gateway/x.py:5"
        " imports pytest_gauge.analysis.gates (a cycle)"
    ]
