"""The one way every module writes a file another process or a later command reads, and the one way JSON
and JSONL files are read back: written whole or not at all (a reader never sees half a file), read with
errors naming the file and the line."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = [
    "FileFormatError",
    "read_json_object",
    "read_jsonl",
    "read_jsonl_lines",
    "temp_name",
    "write_atomic",
]


class FileFormatError(ValueError):
    """A file that cannot be read as what its reader expects; the message names the file (and line)."""


def temp_name(path: Path) -> Path:
    """Where ``path`` is written before its rename: hidden, beside it (same filesystem), with the pid
    (two processes writing one file never share a temporary), ending in ``.tmp`` (``cache prune``
    removes stale ones)."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def write_atomic(path: Path, text: str, *, mkdir: bool = True) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically: a temporary file beside it, then a rename, so a
    reader sees the old file or the new one, never part of one. ``mkdir``: create missing folders."""
    if mkdir:
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_name(path)
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def read_jsonl(
    path: Path, *, missing_ok: bool = False, error: type[Exception] = FileFormatError
) -> list[dict[str, Any]]:
    """Every JSON line of ``path`` (blank lines skipped); ``[]`` for a missing file when ``missing_ok``.
    A line that is not UTF-8 or not a JSON object raises ``error`` naming ``path:line``."""
    return [row for _, row in read_jsonl_lines(path, missing_ok=missing_ok, error=error)]


def read_jsonl_lines(
    path: Path, *, missing_ok: bool = False, error: type[Exception] = FileFormatError
) -> list[tuple[int, dict[str, Any]]]:
    """:func:`read_jsonl` with each row's 1-based line number, for errors about a row's content."""
    rows: list[tuple[int, dict[str, Any]]] = []
    try:
        fh = path.open("rb")
    except FileNotFoundError:
        if missing_ok:
            return rows
        raise error(f"{path}: missing") from None
    except OSError as exc:
        raise error(f"{path}: cannot be read ({exc})") from None
    with fh:
        for number, raw in enumerate(fh, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise error(f"{path}:{number}: not UTF-8 text (byte {exc.start + 1} of the line)") from None
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise error(f"{path}:{number}: not valid JSON ({exc.msg})") from None
            if not isinstance(row, dict):
                raise error(f"{path}:{number}: not a JSON object")
            rows.append((number, row))
    return rows


def read_json_object(
    path: Path, *, missing_ok: bool = False, error: type[Exception] = FileFormatError
) -> dict[str, Any]:
    """The JSON object in ``path``; ``{}`` for a missing file when ``missing_ok``. A file that cannot be
    read, is not JSON or holds something else than an object raises ``error`` naming the file (and line)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        if missing_ok:
            return {}
        raise error(f"{path}: missing") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"{path}: cannot be read ({exc})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict):
        raise error(f"{path}: not a JSON object")
    return data
