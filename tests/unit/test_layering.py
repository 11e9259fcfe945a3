"""The package's import direction (docs/architecture.md#layers): every import statement of every module
counts, at module level, under ``if TYPE_CHECKING:`` (annotation-only: a design dependency all the same)
or deferred inside a function, and each reaches only a layer its own layer may use (``MAY_IMPORT``, a
table, not only an order). A deferred import says why on its line (``# deferred: <why>``: a heavy
dependency kept off a path that does not need it, or a cycle it breaks). No chain of imports that run
leads back to where it started. Left out: imports under ``if __name__ == "__main__":`` (they run only
when the file is the program)."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.helpers import parsed

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "pytest_gauge"

_BASE = frozenset({"records", "version"})
_ENTRY = ("testing", "plugin", "cli", "__init__", "__main__")
# Which layers each layer may import (besides its own). Keep in step with docs/architecture.md#layers.
MAY_IMPORT: dict[str, frozenset[str]] = {
    "records": frozenset({"version"}),
    "version": frozenset(),
    "files": _BASE,
    "suite": _BASE | {"files"},
    "gateway": _BASE | {"files"},  # plain values: never a suite, the simulator or the options
    "run": _BASE | {"files", "suite", "gateway"},
    "sim": _BASE | {"suite", "gateway", "run"},
    "analysis": _BASE | {"run"},  # pure: no file, no gateway
    "report": _BASE | {"run", "analysis"},  # pure rendering from values
    "options": _BASE | {"files", "suite", "gateway", "analysis"},  # parses gates and prices
    "process": _BASE | {"files", "suite", "gateway", "run", "sim", "analysis", "report", "options"},
}
MAY_IMPORT["fixtures"] = MAY_IMPORT["process"] | {"process"}  # a test's client runs on the process's engine
MAY_IMPORT["finish"] = MAY_IMPORT["fixtures"] | {"fixtures"}
for _entry in _ENTRY:  # the entry points, where the wiring happens, may use every layer
    MAY_IMPORT[_entry] = frozenset(MAY_IMPORT) | frozenset(_ENTRY)

KNOWN: dict[tuple[str, str], str] = {}
"""Imports against the table, each with why it stays for now (the test fails when one is gone)."""

DEFERRED = "# deferred:"


@dataclass(frozen=True)
class Import:
    """One import of a package module by another: where it is written, the module it reaches and how
    (``module``: at import time, ``annotation``: under ``if TYPE_CHECKING:``, ``deferred``: in a function)."""

    source: str  # dotted module name of the importing file
    path: str  # the importing file, relative to the repository
    line: int
    target: str  # dotted name of the deepest package module the import names
    kind: str = "module"

    def where(self) -> str:
        how = "" if self.kind == "module" else f" ({self.kind})"
        return f"{self.path}:{self.line} imports {self.target}{how}"


@dataclass(frozen=True)
class Statement:
    """An import statement of the package and how it runs (``module``, ``annotation`` or ``deferred``)."""

    node: ast.Import | ast.ImportFrom
    kind: str


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking(test: ast.expr) -> bool:
    """``if TYPE_CHECKING:`` or ``if typing.TYPE_CHECKING:``."""
    if isinstance(test, ast.Name | ast.Attribute):
        return (test.id if isinstance(test, ast.Name) else test.attr) == "TYPE_CHECKING"
    return False


def _main_only(test: ast.expr) -> bool:
    """``if __name__ == "__main__":``."""
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and len(test.comparators) == 1
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    )


def _statements(node: ast.AST, kind: str = "module") -> Iterator[Statement]:
    """Every import statement below ``node`` at any depth with how it runs, except in the body of an
    ``if __name__ == "__main__":`` block (its ``else:`` counts)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and (_main_only(child.test) or _type_checking(child.test)):
            if _type_checking(child.test):
                for stmt in child.body:
                    yield from _statements(ast.Module(body=[stmt], type_ignores=[]), "annotation")
            for other in child.orelse:
                yield from _statements(ast.Module(body=[other], type_ignores=[]), kind)
            continue
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield Statement(child, kind)
        inner = "deferred" if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) else kind
        yield from _statements(child, inner if kind != "annotation" else kind)


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
    """Every import of the package, read once per test process (the tests check the same graph)."""
    return list(_package_imports())


@functools.cache
def _package_imports() -> tuple[Import, ...]:
    files = sorted(PACKAGE.rglob("*.py"))
    modules = {_module_name(p) for p in files}
    found: dict[Import, None] = {}  # one per statement and module reached, in file order
    for path in files:
        source = _module_name(path)
        for stmt in _statements(parsed(path)):
            for name in _named(stmt.node, source, path.name == "__init__.py"):
                while name not in modules and "." in name:
                    name = name.rsplit(".", 1)[0]
                if name in modules and name != source and name.startswith("pytest_gauge"):
                    where = str(path.relative_to(ROOT))
                    found[Import(source, where, stmt.node.lineno, name, stmt.kind)] = None
    return tuple(found)


def layer_of(module: str) -> str:
    """``pytest_gauge._internal.run.engine`` → ``run``; the package root's own module is ``__init__``."""
    parts = module.split(".")
    if len(parts) > 2 and parts[1] == "_internal":  # the machinery: its stage is the layer
        return parts[2]
    return parts[1] if len(parts) > 1 and parts[1] != "_internal" else "__init__"


def upward(imports: list[Import], known: dict[tuple[str, str], str] | None = None) -> list[str]:
    """Every import its layer may not make (``MAY_IMPORT``), as ``file:line imports module (why)``;
    the pairs in ``known`` (default :data:`KNOWN`) are left out."""
    known = KNOWN if known is None else known
    bad = []
    for imp in imports:
        src, dst = layer_of(imp.source), layer_of(imp.target)
        if src != dst and dst not in MAY_IMPORT[src] and (imp.source, imp.target) not in known:
            allowed = ", ".join(sorted(MAY_IMPORT[src])) or "nothing"
            bad.append(f"{imp.where()}: layer {src} may import {allowed}; not {dst}")
    return bad


def cycles(imports: list[Import]) -> list[str]:
    """One line per import that closes a cycle of modules, with the chain it closes (imports that run:
    an annotation-only one cannot close a cycle at import time)."""
    graph: dict[str, list[Import]] = {}
    for imp in imports:
        if imp.kind != "annotation":
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


def unexplained_deferred(path: Path, tree: ast.Module, lines: list[str]) -> list[str]:
    """The deferred imports (package or not) of one file whose first line lacks ``# deferred: <why>``."""
    bad = []
    for stmt in _statements(tree):
        if stmt.kind == "deferred":
            line = lines[stmt.node.lineno - 1]
            why = line.partition(DEFERRED)[2].strip()
            if not why:
                bad.append(f"{path}:{stmt.node.lineno}: {line.strip()}")
    return bad


def test_every_package_module_has_a_layer() -> None:
    unknown = sorted({layer_of(i.source) for i in package_imports()} - set(MAY_IMPORT))
    assert not unknown, f"add these to MAY_IMPORT (and docs/architecture.md#layers): {unknown}"


def test_the_table_is_an_order() -> None:
    """No two layers may use each other, directly or through others (else the table is no layering)."""

    def reach(layer: str, seen: frozenset[str] = frozenset()) -> frozenset[str]:
        out = set(MAY_IMPORT[layer]) - seen - {layer}
        for other in list(out):
            if other not in _ENTRY:
                out |= reach(other, seen | {layer})
        return frozenset(out)

    loops = [layer for layer in MAY_IMPORT if layer not in _ENTRY and layer in reach(layer)]
    assert not loops, f"layers that reach themselves through MAY_IMPORT: {loops}"


def test_imports_point_down_the_layers() -> None:
    bad = upward(package_imports())
    assert not bad, "imports against the layering (docs/architecture.md#layers):\n" + "\n".join(bad)


def test_every_known_exception_is_still_there() -> None:
    made = {(i.source, i.target) for i in package_imports()}
    gone = [f"{s} -> {t}" for s, t in KNOWN if (s, t) not in made]
    assert not gone, f"remove these from KNOWN, the import is gone: {gone}"


def test_no_import_cycle() -> None:
    bad = cycles(package_imports())
    assert not bad, "import cycles (docs/architecture.md#layers):\n" + "\n".join(bad)


def test_every_deferred_import_says_why() -> None:
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        bad += unexplained_deferred(path.relative_to(ROOT), parsed(path), lines)
    assert not bad, (
        "deferred imports without '# deferred: <why>' on their line (move them to the top of the module,"
        " or say which heavy dependency or cycle they keep off):\n" + "\n".join(bad)
    )


MADE_UP = (
    "from typing import TYPE_CHECKING\n"
    "if TYPE_CHECKING:\n    from ..report import common\n"
    "def f():\n    from ..analysis import gates\n"
    "def g():\n    import json  # deferred: a reason\n"
    "if __name__ == '__main__':\n    from .. import cli\n"
)


def test_the_checker_counts_annotation_only_and_deferred_imports() -> None:
    """The checker's own parsing, on a made-up module: an import under ``if TYPE_CHECKING:`` counts as
    annotation-only, a function-level one as deferred, one under ``if __name__ == "__main__":`` not
    at all, and a relative import resolves against the module's package."""
    stmts = list(_statements(ast.parse(MADE_UP)))
    named = [
        (n, s.kind)
        for s in stmts
        for n in _named(s.node, "pytest_gauge._internal.gateway.x", is_package=False)
    ]
    assert named == [
        ("typing.TYPE_CHECKING", "module"),
        ("pytest_gauge._internal.report.common", "annotation"),
        ("pytest_gauge._internal.analysis.gates", "deferred"),
        ("json", "deferred"),
    ]
    assert unexplained_deferred(Path("x.py"), ast.parse(MADE_UP), MADE_UP.splitlines()) == [
        "x.py:5: from ..analysis import gates"
    ]


def test_the_checker_names_an_upward_import_of_any_kind_and_a_cycle() -> None:
    where = "pytest_gauge/_internal/gateway/x.py"
    up = Import(
        "pytest_gauge._internal.gateway.x", where, 3, "pytest_gauge._internal.report.common", "annotation"
    )
    deferred = Import(
        "pytest_gauge._internal.gateway.x", where, 5, "pytest_gauge._internal.analysis.gates", "deferred"
    )
    side = Import(
        "pytest_gauge._internal.analysis.gates",
        "pytest_gauge/_internal/analysis/gates.py",
        9,
        "pytest_gauge._internal.files.x",
    )
    assert upward([up, deferred, side], known={}) == [
        f"{where}:3 imports pytest_gauge._internal.report.common (annotation): layer gateway may import"
        " files, records, version; not report",
        f"{where}:5 imports pytest_gauge._internal.analysis.gates (deferred): layer gateway may import"
        " files, records, version; not analysis",
        "pytest_gauge/_internal/analysis/gates.py:9 imports pytest_gauge._internal.files.x: layer analysis"
        " may import records, run, version; not files",
    ]
    gates = "pytest_gauge/_internal/analysis/gates.py"
    back = Import("pytest_gauge._internal.analysis.gates", gates, 9, "pytest_gauge._internal.gateway.x")
    assert cycles([deferred, back]) == [
        "pytest_gauge/_internal/analysis/gates.py:9 imports pytest_gauge._internal.gateway.x →"
        " pytest_gauge/_internal/gateway/x.py:5 imports pytest_gauge._internal.analysis.gates (deferred)"
        " (a cycle)"
    ]
    assert (
        cycles(
            [
                up,
                Import("pytest_gauge._internal.report.common", "r.py", 1, "pytest_gauge._internal.gateway.x"),
            ]
        )
        == []
    )
