"""A wire format is one module behind one protocol (docs/architecture.md#adding-a-wire-format): outside
``gateway/wire/`` and the ``Api`` literal in ``records``, no code spells a format's name. The rest of the
package reaches a format through ``wire_format(api)`` and its attributes, or ``APIS`` and ``NEUTRAL_API``."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest

from pytest_gauge._internal.gateway.wire import APIS, NEUTRAL_API, wire_format
from tests.helpers import parsed

PACKAGE = Path(__file__).resolve().parents[3] / "pytest_gauge" / "_internal"
HOME = ("gateway/wire/", "records/__init__.py")  # the format modules, the registry, the Api literal

ALLOWED: dict[tuple[str, str], int] = {
    # Codex's own config vocabulary (its ``wire_api`` values), checked and written for the user
    ("gateway/program_doctor.py", "chat"): 1,
    # OpenTelemetry's GenAI vocabulary: the operation every model call is (gen_ai.operation.name)
    ("finish/otel.py", "chat"): 1,
    # the presets say which format the program's CLI speaks: Claude Code Messages, Codex Responses
    ("suite/programs.py", "anthropic"): 2,
    ("suite/programs.py", "responses"): 3,
}
"""Names spelled on purpose outside the home, by file and name, with why: a new one fails the test."""


def _path_segment(node: ast.Constant, parents: dict[ast.AST, ast.AST]) -> bool:
    """``x / "responses"``: a folder's name (the cache's store), not a format's."""
    parent = parents.get(node)
    return isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.Div) and parent.right is node


def spelled(root: Path) -> Counter[tuple[str, str]]:
    """Each (file below ``root``, format name) with how often a string constant equal to the name occurs
    (docstrings and longer strings that mention one do not count: only the bare name does)."""
    found: Counter[tuple[str, str]] = Counter()
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(HOME):
            continue
        tree = parsed(path)
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in APIS and not _path_segment(node, parents):
                found[(rel, node.value)] += 1
    return found


def test_no_format_name_is_spelled_outside_the_wire_package() -> None:
    found = spelled(PACKAGE)
    extra = {k: n for k, n in found.items() if n > ALLOWED.get(k, 0)}
    assert not extra, (
        f"format names spelled outside gateway/wire/ (use wire_format(api)'s attributes): {extra}"
    )
    stale = {k: n for k, n in ALLOWED.items() if found.get(k, 0) < n}
    assert not stale, f"ALLOWED counts more than the package spells (lower them): {stale}"


def test_the_scan_finds_a_name_where_one_is_spelled(tmp_path: Path) -> None:
    """The scan sees a bare name in code (a default, a comparison, a key) but not in a docstring, a
    longer string or a path segment."""
    (tmp_path / "leak.py").write_text(
        '"""Calls in ``"anthropic"``."""\n'
        'HEADERS = {"anthropic": {"anthropic-version": "x"}}\n'
        'def f(api: str = "chat", root: object = None) -> object:\n'
        '    return api == "responses", root / "responses"\n',
        encoding="utf-8",
    )
    assert spelled(tmp_path) == Counter(
        {("leak.py", "anthropic"): 1, ("leak.py", "chat"): 1, ("leak.py", "responses"): 1}
    )


@pytest.mark.parametrize("api", APIS)
def test_every_format_says_what_the_rest_of_the_package_asks_of_it(api: str) -> None:
    """The attributes that replaced the spelled names: headers, auth, the SDK's base, the stream's end."""
    fmt = wire_format(api)
    assert fmt.api == api
    root = "http://127.0.0.1:1/w/t"
    assert fmt.sdk_base_url(root) in (root, root + "/v1")
    assert fmt.request_path(fmt.sdk_base_url(root)).endswith(fmt.path)
    assert fmt.ping_tokens >= 1 and fmt.title and fmt.provider
    assert fmt.done_marker == (api == NEUTRAL_API)  # only Chat Completions' stream ends in [DONE]
    assert all(k == k.lower() for k in fmt.request_headers)


def test_the_messages_format_carries_its_version_header_and_its_own_auth() -> None:
    fmt = wire_format("anthropic")
    assert set(fmt.request_headers) == {"anthropic-version"} and fmt.own_auth
    assert fmt.sdk_base_url("http://h/w/t") == "http://h/w/t"  # the anthropic SDK adds /v1/messages
    assert not any(
        wire_format(a).own_auth or wire_format(a).request_headers for a in APIS if a != "anthropic"
    )
