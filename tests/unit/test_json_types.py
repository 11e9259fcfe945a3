"""JSON bodies are typed at the package's seams (pytest_gauge/_internal/records/json_types.py): a closed shape
is a TypedDict, an open one says so as ``JSONObject``; a bare ``dict[str, Any]`` outside the wire formats
(whose servers' bodies are checked at run time) stays under a ceiling that only goes down."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "pytest_gauge" / "_internal"
CEILING = 76
"""The bare ``dict[str, Any]`` left outside ``gateway/wire/`` (lower it when you type one more)."""


def bare_dicts(root: Path) -> dict[str, int]:
    """How often each file below ``root`` outside ``gateway/wire/`` spells ``dict[str, Any]``."""
    found: dict[str, int] = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("gateway/wire/"):
            continue
        n = sum("dict[str, Any]" in line for line in path.read_text(encoding="utf-8").splitlines())
        if n:
            found[rel] = n
    return found


def test_bare_json_dicts_stay_under_the_ceiling() -> None:
    found = bare_dicts(PACKAGE)
    total = sum(found.values())
    worst = sorted(found.items(), key=lambda kv: -kv[1])[:5]
    assert total <= CEILING, (
        f"{total} dict[str, Any] outside gateway/wire/ (ceiling {CEILING}): type a closed shape as a "
        f"TypedDict, an open one as records.json_types.JSONObject; most in {worst}"
    )


def test_the_count_sees_lines_outside_the_wire_package_only(tmp_path: Path) -> None:
    (tmp_path / "gateway" / "wire").mkdir(parents=True)
    (tmp_path / "gateway" / "wire" / "chat.py").write_text("x: dict[str, Any] = {}\n", encoding="utf-8")
    (tmp_path / "a.py").write_text("x: dict[str, Any] = {}\ny: JSONObject = {}\n", encoding="utf-8")
    assert bare_dicts(tmp_path) == {"a.py": 1}
