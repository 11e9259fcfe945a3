"""No module of the package over :data:`LIMIT` lines: new logic goes into new modules, and a module is split
by what it holds before it grows past the limit. The modules still over it are listed in
:data:`KNOWN` with why they stay for now; the test fails when one of them shrinks under the limit, so the
table only ever gets shorter."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "pytest_gauge"

LIMIT = 800
"""The most lines a module of the package may have."""

KNOWN: dict[str, str] = {}
"""Modules over :data:`LIMIT` for now, each with why (the test fails when one is no longer over it)."""


def line_count(path: Path) -> int:
    """The module's lines, as ``wc -l`` counts them for a file ending in a newline."""
    return len(path.read_text(encoding="utf-8").splitlines())


def module_sizes() -> dict[str, int]:
    """Every module of the package (relative path, ``/``-separated) with its line count."""
    return {p.relative_to(ROOT).as_posix(): line_count(p) for p in sorted(PACKAGE.rglob("*.py"))}


def too_long(sizes: Mapping[str, int], known: Mapping[str, str], limit: int = LIMIT) -> list[str]:
    """The modules over ``limit`` that ``known`` does not list, one line each with its size."""
    return [f"{m}: {n} lines" for m, n in sorted(sizes.items()) if n > limit and m not in known]


def no_longer_long(sizes: Mapping[str, int], known: Mapping[str, str], limit: int = LIMIT) -> list[str]:
    """The modules ``known`` lists that are gone or now within ``limit``, one line each."""
    out = []
    for module in sorted(known):
        size = sizes.get(module)
        if size is None:
            out.append(f"{module}: no such module")
        elif size <= limit:
            out.append(f"{module}: {size} lines")
    return out


def test_no_package_module_is_over_the_limit() -> None:
    bad = too_long(module_sizes(), KNOWN)
    assert not bad, (
        f"modules over {LIMIT} lines: move a cohesive part into a module of its own (docs/architecture.md"
        " lists the modules):\n" + "\n".join(bad)
    )


def test_every_known_long_module_is_still_long() -> None:
    gone = no_longer_long(module_sizes(), KNOWN)
    assert not gone, f"remove these from KNOWN, they are within {LIMIT} lines now:\n" + "\n".join(gone)


def test_the_checker_names_new_long_modules_and_shrunk_known_ones(tmp_path: Path) -> None:
    """The checker on made-up sizes: a module over the limit is named unless known; one at the limit is
    within it; a known module within the limit, or gone, is named by the other check."""
    module = tmp_path / "m.py"
    module.write_text("x = 1\n" * 801, encoding="utf-8")
    assert line_count(module) == 801
    sizes = {"a.py": 801, "b.py": 800, "c.py": 900, "d.py": 10}
    assert too_long(sizes, {"c.py": "why"}) == ["a.py: 801 lines"]
    assert too_long(sizes, {}, limit=900) == []
    assert no_longer_long(sizes, {"c.py": "why", "d.py": "why", "e.py": "why"}) == [
        "d.py: 10 lines",
        "e.py: no such module",
    ]
    assert no_longer_long(sizes, {"a.py": "why"}) == []
