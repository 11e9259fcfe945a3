"""What changes from run to run in an agent program's requests and never decides its answer, taken out of
the cache material (docs/protocol.md#program-agents): the transcript's folders (a workspace under a
different output folder in a clean checkout, and Claude Code's slug of it), today's date in the two CLIs'
date lines, the machine's OS version line and Codex's time zone, Claude Code's own version
(``cc_version``), whether its folder is in a git checkout, that checkout's git status block and the slug of
its root in Claude Code's project folder (``<config>/projects/<slug>/``), Codex's
wall time and chunk id around each tool output, and the per-session ids of input items. Only the cache
material is quieted: what is sent is the program's request as it made it.

The folders are registered by the process that runs the program (:func:`register_folder`), before its
first request, under a placeholder; every format's ``cache_material`` passes its material through
:func:`quiet`. A request without such text is returned unchanged (the same key as before).
"""

from __future__ import annotations

import re
import threading
from typing import Any

__all__ = ["quiet", "quiet_material", "quiet_text", "register_folder", "register_suite", "registered_folders"]

_FOLDERS: dict[str, str] = {}
_SUITES: dict[str, tuple[re.Pattern[str], re.Pattern[str], str]] = {}
_LOCK = threading.Lock()
_PATTERN: list[re.Pattern[str] | None] = [None]

_DATES = (
    (re.compile(r"(Today's date is )\d{4}-\d{2}-\d{2}"), r"\1<date>"),
    (re.compile(r"(<current_date>)[^<]*(</current_date>)"), r"\1<date>\2"),
    (re.compile(r"(OS Version: )[^\n\\]*"), r"\1<os>"),
    # Codex wraps every tool output (its shell's and MCP tools') with these
    (re.compile(r"(Wall time: )[0-9.]+( seconds)"), r"\1<t>\2"),
    (re.compile(r"(Chunk ID: )[0-9a-f]+"), r"\1<id>"),
    # Codex's time zone line (the host's TZ), Claude Code's own version in its billing line
    (re.compile(r"(<timezone>)[^<]*(</timezone>)"), r"\1<tz>\2"),
    (re.compile(r"(cc_version=)[\w.+-]+"), r"\1<version>"),
    # Claude Code's view of the checkout around its working directory: whether it is one, and its
    # git status block (branch, status, user, recent commits), which changes with any new file
    (re.compile(r"(Is a git repository: )(?:true|false)"), r"\1<git>"),
    # Claude Code's project folder under its config dir: a slug of the git checkout's root (or of its
    # working directory outside one), so another clone's path
    (re.compile(r"(/projects/)-[A-Za-z0-9-]+(?=/)"), r"\1<project>"),
    (
        re.compile(
            r"This is the git status at the start of the conversation\..*?Recent commits:\n.*?(?=\n\n|\Z)",
            re.S,
        ),
        "<git status>",
    ),
)


def _slug(path: str) -> str:
    """Claude Code's name for a folder's project memory: every character but letters and digits as ``-``."""
    return re.sub(r"[^A-Za-z0-9]", "-", path)


def register_folder(path: str, placeholder: str) -> None:
    """From now on, ``path`` (and its slug) in a request's text reads as ``placeholder`` in its cache
    material. Only for a path that is the same in every run and checkout (a suite's output folders are
    not: :func:`register_suite` matches those by their shape, so that an entry stored by another checkout
    still hashes to its key)."""
    with _LOCK:
        _FOLDERS[path] = placeholder
        _FOLDERS[_slug(path)] = _slug(placeholder)
        _compile()


def register_suite(suite: str) -> None:
    """From now on, any absolute path into suite ``suite``'s output folders (``.../<suite>/work/...``,
    ``.../<suite>/mcp/...``, where a program agent's workspace, private folder and MCP server live)
    reads as ``<gauge-out>/<suite>/...`` in the cache material, whatever the output folder and checkout
    (and likewise Claude Code's slug of such a path)."""
    name, slug = re.escape(suite), re.escape(_slug(suite))
    with _LOCK:
        _SUITES[suite] = (
            re.compile(rf"(?<![\w./-])(?:/[\w.+-]+)+?/{name}/(work|mcp)/"),
            re.compile(rf"(?<![\w-])-[\w-]*?-{slug}-(work|mcp)-"),
            suite,
        )


def _compile() -> None:
    names = sorted(_FOLDERS, key=len, reverse=True)  # the longest first: a folder's own subfolders
    _PATTERN[0] = re.compile("|".join(re.escape(n) for n in names)) if names else None


def registered_folders() -> dict[str, str]:
    """The folders registered so far and their placeholders (for tests and the miss message)."""
    with _LOCK:
        return dict(_FOLDERS)


def quiet_text(text: str) -> str:
    """One text without the run-to-run noise (see :func:`quiet`)."""
    for path, slug, suite in list(_SUITES.values()):
        plain, dashed = suite.replace("\\", "\\\\"), _slug(suite)
        if f"/{suite}/" in text:
            text = path.sub(rf"<gauge-out>/{plain}/\1/", text)
        if f"-{dashed}-" in text:
            text = slug.sub(rf"-gauge-out--{dashed}-\1-", text)
    pattern = _PATTERN[0]
    if pattern is not None and pattern.search(text):
        folders = _FOLDERS
        text = pattern.sub(lambda m: folders[m.group(0)], text)
    for regex, replacement in _DATES:
        if regex.search(text):
            text = regex.sub(replacement, text)
    return text


def quiet(value: Any) -> Any:
    """``value`` (a request's cache material) with the run-to-run noise replaced: registered folders,
    the date, OS, time zone, version and git lines; in lists of input items, each item's ``id``
    (Codex's per-session message ids) is left out."""
    if isinstance(value, str):
        return quiet_text(value)
    if isinstance(value, list):
        return [quiet(v) for v in value]
    if isinstance(value, dict):
        kind = value.get("type")  # a JSON Schema may have a property named "type": not an item's type
        drop_id = isinstance(kind, str) and kind in _ITEM_TYPES and isinstance(value.get("id"), str)
        return {k: quiet(v) for k, v in value.items() if not (drop_id and k == "id")}
    return value


def quiet_material(material: dict[str, Any]) -> dict[str, Any]:
    """:func:`quiet` for a format's cache material (a JSON object in, a JSON object out)."""
    return {k: quiet(v) for k, v in material.items()}


_ITEM_TYPES = frozenset(
    {"message", "function_call", "function_call_output", "reasoning", "custom_tool_call", "local_shell_call"}
)
"""Responses input items whose ``id`` a client makes up per session (not the answer's business)."""
