"""The one way every module writes a file another process or a later command reads, and the one way JSON
and JSONL files are read back: written whole or not at all (a reader never sees half a file), read with
errors naming the file and the line."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ..records.json_types import JSONObject

__all__ = [
    "MAX_DEPTH",
    "MAX_FILE_BYTES",
    "MAX_LINE_BYTES",
    "FileFormatError",
    "JsonBoundError",
    "iter_jsonl_lines",
    "jsonl_row",
    "loads_bounded",
    "read_json_object",
    "read_jsonl",
    "read_jsonl_lines",
    "temp_name",
    "write_atomic",
    "write_lines_atomic",
]


MAX_DEPTH = 64
"""Deepest nesting of JSON values read from any file (a task, a label, a cache entry is a few levels; 64
leaves room for tool schemas, and stays far from the parser's recursion limit)."""
MAX_LINE_BYTES = 16 * 2**20
"""Longest JSONL line read: a line is read whole before it is parsed, so this bounds a line's memory."""
MAX_FILE_BYTES = 256 * 2**20
"""Largest JSON file (or JSONL file, unless its reader says less) read: parsed values take some ten times
their text, so a larger one would cost gigabytes before it could be refused."""


class FileFormatError(ValueError):
    """A file that cannot be read as what its reader expects; the message names the file (and line)."""


class JsonBoundError(ValueError):
    """JSON text that parses but is not accepted: nested past :data:`MAX_DEPTH` or with a key twice."""


def _object(pairs: list[tuple[str, Any]]) -> JSONObject:
    """A JSON object whose keys are all different (``json.loads`` would keep the last of a repeated key
    silently: ``{"task_id": "a", "task_id": "b"}`` is task ``b``)."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise JsonBoundError(f"the key {key!r} appears twice in one object")
            seen.add(key)
    return obj


def _too_deep(value: Any, limit: int) -> bool:
    """Whether ``value`` nests more than ``limit`` objects or arrays deep."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values() if isinstance(v, dict | list))
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item if isinstance(v, dict | list))
    return False


def loads_bounded(text: str | bytes, *, max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads`` with this package's bounds: :class:`JsonBoundError` for a key repeated in one object
    or nesting past ``max_depth`` (checked only when the text has that many brackets, a C-speed count);
    ``json.JSONDecodeError`` for text that is not JSON."""
    try:
        value = json.loads(text, object_pairs_hook=_object)
    except RecursionError:
        raise JsonBoundError(f"nested more than {max_depth} levels deep") from None
    if isinstance(text, bytes):
        brackets = text.count(b"[") + text.count(b"{")
    else:
        brackets = text.count("[") + text.count("{")
    if brackets > max_depth and _too_deep(value, max_depth):
        raise JsonBoundError(f"nested more than {max_depth} levels deep")
    return value


def _size_problem(size: int, limit: int) -> str:
    return f"{size / 2**20:,.1f} MiB, more than the {limit / 2**20:,.0f} MiB accepted"


def temp_name(path: Path) -> Path:
    """Where ``path`` is written before its rename: hidden, beside it (same filesystem), with the pid
    (two processes writing one file never share a temporary), ending in ``.tmp`` (``cache prune``
    removes stale ones)."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def write_atomic(path: Path, text: str, *, mkdir: bool = True) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically: a temporary file beside it, then a rename, so a
    reader sees the old file or the new one, never part of one. ``mkdir``: create missing folders."""
    write_lines_atomic(path, (text,), mkdir=mkdir)


def write_lines_atomic(path: Path, lines: Iterable[str], *, mkdir: bool = True) -> None:
    """Write ``"".join(lines)`` atomically (see :func:`write_atomic`), piece by piece: a run's ledger and
    records go out without their whole text (and every line's JSON object) in memory at once."""
    if mkdir:
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_name(path)
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.writelines(lines)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def read_jsonl(
    path: Path,
    *,
    missing_ok: bool = False,
    error: type[Exception] = FileFormatError,
    max_bytes: int | None = None,
) -> list[JSONObject]:
    """Every JSON line of ``path`` (blank lines skipped); ``[]`` for a missing file when ``missing_ok``.
    A line that is not UTF-8 or not a JSON object raises ``error`` naming ``path:line``."""
    return [row for _, row in read_jsonl_lines(path, missing_ok=missing_ok, error=error, max_bytes=max_bytes)]


def read_jsonl_lines(
    path: Path,
    *,
    missing_ok: bool = False,
    error: type[Exception] = FileFormatError,
    max_bytes: int | None = None,
) -> list[tuple[int, JSONObject]]:
    """:func:`read_jsonl` with each row's 1-based line number, for errors about a row's content. A file
    larger than ``max_bytes`` (an input a person gives: labels, say), a line longer than
    :data:`MAX_LINE_BYTES`, nesting past :data:`MAX_DEPTH` or a key twice in an object raise ``error``."""
    return list(iter_jsonl_lines(path, missing_ok=missing_ok, error=error, max_bytes=max_bytes))


def iter_jsonl_lines(
    path: Path,
    *,
    missing_ok: bool = False,
    error: type[Exception] = FileFormatError,
    max_bytes: int | None = None,
) -> Iterator[tuple[int, JSONObject]]:
    """:func:`read_jsonl_lines` a row at a time (one row held, not the file's): errors are raised as the
    rows are read."""
    try:
        fh = path.open("rb")
    except FileNotFoundError:
        if missing_ok:
            return
        raise error(f"{path}: missing") from None
    except OSError as exc:
        raise error(f"{path}: cannot be read ({exc})") from None
    with fh:
        size = os.fstat(fh.fileno()).st_size
        if max_bytes is not None and size > max_bytes:
            raise error(f"{path}: {_size_problem(size, max_bytes)}")
        number = 0
        while raw := fh.readline(MAX_LINE_BYTES + 1):
            number += 1
            if len(raw) > MAX_LINE_BYTES:
                raise error(
                    f"{path}:{number}: the line is longer than the {MAX_LINE_BYTES // 2**20} MiB accepted"
                )
            row = jsonl_row(raw, f"{path}:{number}", error)
            if row is not None:
                yield number, row


def jsonl_row(raw: bytes, where: str, error: type[Exception]) -> JSONObject | None:
    """One JSONL line's object (None for a blank line), or ``error`` naming ``where`` (a line not UTF-8,
    not JSON, nested too deep or not an object)."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{where}: not UTF-8 text (byte {exc.start + 1} of the line)") from None
    if not line.strip():
        return None
    try:
        row = loads_bounded(line)
    except json.JSONDecodeError as exc:
        raise error(f"{where}: not valid JSON ({exc.msg})") from None
    except JsonBoundError as exc:
        raise error(f"{where}: {exc}") from None
    if not isinstance(row, dict):
        raise error(f"{where}: not a JSON object")
    return row


def read_json_object(
    path: Path,
    *,
    missing_ok: bool = False,
    error: type[Exception] = FileFormatError,
    max_bytes: int = MAX_FILE_BYTES,
) -> JSONObject:
    """The JSON object in ``path``; ``{}`` for a missing file when ``missing_ok``. A file that cannot be
    read, is larger than ``max_bytes``, is not JSON (or nests too deep, or repeats a key) or holds something
    else than an object raises ``error`` naming the file (and line)."""
    try:
        size = path.stat().st_size
        text = path.read_text(encoding="utf-8") if size <= max_bytes else ""
    except FileNotFoundError:
        if missing_ok:
            return {}
        raise error(f"{path}: missing") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"{path}: cannot be read ({exc})") from None
    if size > max_bytes:
        raise error(f"{path}: {_size_problem(size, max_bytes)}")
    try:
        data = loads_bounded(text)
    except json.JSONDecodeError as exc:
        raise error(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    except JsonBoundError as exc:
        raise error(f"{path}: {exc}") from None
    if not isinstance(data, dict):
        raise error(f"{path}: not a JSON object")
    return data
