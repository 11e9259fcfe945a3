"""Tasks (docs/protocol.md#tasks-and-rules): the :class:`Task` value and loading a suite's ``tasks.jsonl``
with located errors."""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..files.readwrite import MAX_DEPTH as READ_MAX_DEPTH
from ..files.readwrite import MAX_FILE_BYTES, JsonBoundError, loads_bounded
from ..records.json_types import JSONObject
from .rules import Rule, RuleResult, RuleSpecError, parse_rules, tools_named

__all__ = ["CATEGORIES", "TASKS_FORMAT_VERSION", "Task", "TaskFileError", "load_tasks"]

TASKS_FORMAT_VERSION = 1

CATEGORIES = (
    "information_retrieval",
    "multi_step",
    "tool_call",
    "constraint",
    "clarification",
    "refusal",
)


@dataclass(frozen=True)
class Task:
    """One task of a suite. ``source``/``line`` locate it for error messages."""

    task_id: str
    category: str
    task_prompt: str
    success_criteria: tuple[Rule, ...]
    hard_constraints: tuple[Rule, ...] = ()
    hidden_facts: tuple[str, ...] = ()
    persona: str | None = None
    tools: tuple[str, ...] = ()
    max_turns: int | None = None
    source: str = ""
    line: int = 0
    raw: dict[str, object] = field(default_factory=dict, compare=False, hash=False)


class TaskFileError(ValueError):
    """A malformed ``tasks.jsonl``: the message names the file, the line and the field."""

    def __init__(self, path: Path | str, line: int, field_name: str, message: str) -> None:
        self.path, self.line, self.field, self.reason = str(path), line, field_name, message
        where = f"{path}:{line}"
        super().__init__(f"{where}: {field_name}: {message}" if field_name else f"{where}: {message}")


_TASK_FIELDS = {
    "task_id": str,
    "category": str,
    "task_prompt": str,
    "success_criteria": list,
    "hard_constraints": list,
    "hidden_facts": list,
    "persona": str,
    "tools": list,
    "max_turns": int,
    "notes": str,
}
_REQUIRED = ("task_id", "category", "task_prompt", "success_criteria")


MAX_LINE_CHARS = 1_000_000
"""Longest ``tasks.jsonl`` line read (a task is a prompt and its rules, not a data set)."""
MAX_DEPTH = READ_MAX_DEPTH
"""Deepest nesting of JSON values accepted in a task line (every JSON file's bound)."""


def _read_lines(path: Path) -> list[str]:
    """The file's lines, each UTF-8 (an invalid byte is reported at its own line and byte)."""
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:  # a task file is prompts and rules: this is some other file
            raise TaskFileError(
                path, 0, "", f"{size / 2**20:,.0f} MiB, more than the {MAX_FILE_BYTES // 2**20} MiB accepted"
            )
        raw = path.read_bytes()
    except OSError as exc:
        raise TaskFileError(path, 0, "", f"cannot read: {exc.strerror}") from None
    lines = []
    for number, chunk in enumerate(raw.split(b"\n"), start=1):
        try:
            lines.append(chunk.decode("utf-8").rstrip("\r"))
        except UnicodeDecodeError as exc:
            raise TaskFileError(
                path, number, "", f"not UTF-8 text at byte {exc.start + 1} of the line ({exc.reason})"
            ) from None
    return lines


def _value_problem(value: Any) -> str | None:
    """What makes a parsed line unusable: nesting past :data:`MAX_DEPTH`, or a string holding a lone
    surrogate (``"\\ud800"``: valid JSON, but no UTF-8 text can carry it)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            return f"nested more than {MAX_DEPTH} levels deep"
        if isinstance(item, dict):
            stack.extend((k, depth) for k in item)
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
        elif isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as exc:
                code = ord(item[exc.start])
                return f"a lone surrogate (\\u{code:04x}) in a string: not valid text"
    return None


def _parse_line(path: Path, number: int, text: str) -> Any:
    """One line's JSON value, refused with the line's number when too long, malformed, too deep or
    not valid text."""
    if len(text) > MAX_LINE_CHARS:
        raise TaskFileError(
            path,
            number,
            "",
            f"the line is {len(text):,} characters, more than the {MAX_LINE_CHARS:,} accepted",
        )
    try:
        obj = loads_bounded(text)
    except json.JSONDecodeError as exc:
        raise TaskFileError(path, number, "", f"malformed JSON: {exc.msg} (column {exc.colno})") from None
    except JsonBoundError as exc:
        raise TaskFileError(path, number, "", str(exc)) from None
    problem = _value_problem(obj)
    if problem is not None:
        raise TaskFileError(path, number, "", problem)
    return obj


def load_tasks(
    path: Path,
    *,
    checks: Mapping[str, Callable[..., bool | RuleResult]] | None = None,
    tool_names: Sequence[str] = (),
) -> tuple[Task, ...]:
    """Read and validate a ``tasks.jsonl``: a ``{"format_version": 1}`` header, then one task per line."""
    lines = _read_lines(path)
    tasks: list[Task] = []
    seen: dict[str, int] = {}
    header_seen = False
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        obj = _parse_line(path, number, text)
        if not isinstance(obj, dict):
            raise TaskFileError(path, number, "", "each line must be a JSON object")
        if not header_seen:
            header_seen = True
            if set(obj) - {"format_version", "description"} or "format_version" not in obj:
                raise TaskFileError(
                    path,
                    number,
                    "format_version",
                    'the first line must be a header like {"format_version": 1}',
                )
            if obj["format_version"] != TASKS_FORMAT_VERSION:
                raise TaskFileError(
                    path,
                    number,
                    "format_version",
                    f"unsupported version {obj['format_version']!r} (this plugin reads 1)",
                )
            continue
        tasks.append(_parse_task(obj, path, number, seen, checks or {}, tool_names))
    if not header_seen:
        raise TaskFileError(
            path, 1, "format_version", 'empty file: expected a header like {"format_version": 1}'
        )
    if not tasks:
        raise TaskFileError(path, len(lines), "", "no tasks")
    return tuple(tasks)


def _parse_task(
    obj: JSONObject,
    path: Path,
    number: int,
    seen: dict[str, int],
    checks: Mapping[str, Callable[..., bool | RuleResult]],
    tool_names: Sequence[str],
) -> Task:
    unknown = sorted(set(obj) - set(_TASK_FIELDS))
    if unknown:
        raise TaskFileError(path, number, unknown[0], f"unknown field (allowed: {', '.join(_TASK_FIELDS)})")
    for name in _REQUIRED:
        if name not in obj:
            raise TaskFileError(path, number, name, "missing required field")
    for name, kind in _TASK_FIELDS.items():
        if name in obj and (not isinstance(obj[name], kind) or isinstance(obj[name], bool)):
            raise TaskFileError(
                path, number, name, f"must be a {kind.__name__}, got {type(obj[name]).__name__}"
            )
    task_id = obj["task_id"]
    if not task_id.strip() or any(ch.isspace() or ch in "[]/\\" for ch in task_id):
        raise TaskFileError(
            path, number, "task_id", f"{task_id!r}: use a non-empty id without spaces, '/' or brackets"
        )
    if task_id in seen:
        raise TaskFileError(path, number, "task_id", f"duplicate {task_id!r} (first on line {seen[task_id]})")
    seen[task_id] = number
    if obj["category"] not in CATEGORIES:
        raise TaskFileError(
            path, number, "category", f"{obj['category']!r} is not one of {', '.join(CATEGORIES)}"
        )
    if not obj["task_prompt"].strip():
        raise TaskFileError(path, number, "task_prompt", "must not be empty")
    for name in ("hidden_facts", "tools"):
        if not all(isinstance(v, str) for v in obj.get(name, [])):
            raise TaskFileError(path, number, name, "must be a list of strings")
    unknown_tools = [t for t in obj.get("tools", []) if t not in tool_names]
    if unknown_tools:
        known = ", ".join(tool_names) or "none declared"
        raise TaskFileError(
            path, number, "tools", f"unknown tool {unknown_tools[0]!r} (suite tools: {known})"
        )
    if "max_turns" in obj and obj["max_turns"] < 1:
        raise TaskFileError(path, number, "max_turns", "must be >= 1")
    try:
        criteria = parse_rules(obj["success_criteria"], field="success_criteria", custom=checks)
        constraints = parse_rules(obj.get("hard_constraints", []), field="hard_constraints", custom=checks)
    except RuleSpecError as exc:
        raise TaskFileError(path, number, exc.field, exc.message) from None
    _check_tool_names(
        path, number, {"success_criteria": criteria, "hard_constraints": constraints}, tool_names
    )
    return Task(
        task_id=task_id,
        category=obj["category"],
        task_prompt=obj["task_prompt"],
        success_criteria=criteria,
        hard_constraints=constraints,
        hidden_facts=tuple(obj.get("hidden_facts", ())),
        persona=obj.get("persona"),
        tools=tuple(obj.get("tools", ())),
        max_turns=obj.get("max_turns"),
        source=str(path),
        line=number,
        raw=obj,
    )


def _check_tool_names(
    path: Path, number: int, rules: Mapping[str, Sequence[Rule]], tool_names: Sequence[str]
) -> None:
    """A tool rule naming a tool the suite does not define is an error naming the nearest tool."""
    for where, parsed in rules.items():
        for i, rule in enumerate(parsed):
            for arg, name in tools_named(rule):
                if name in tool_names:
                    continue
                close = difflib.get_close_matches(name, list(tool_names), n=1, cutoff=0.5)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                known = ", ".join(tool_names) or "none declared"
                raise TaskFileError(
                    path,
                    number,
                    f"{where}[{i}].{arg}",
                    f"{rule.type} names the tool {name!r}, which the suite does not define{hint}"
                    f" (suite tools: {known})",
                )
