"""Tools in a suite: declared once with an OpenAI function schema and a Python implementation, executed
locally with a per-call timeout. A failure never escapes: it becomes a result the agent sees and a
return code in the transcript (0 ok, 1 the tool raised, 2 malformed arguments: not a JSON object, or not
matching the tool's schema (Draft 2020-12, every keyword; the tool is not called), 124 timeout, 127
unknown).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..records import ToolCall
from ..records.json_types import JSONObject
from .schema import CompiledSchema, SchemaError, compile_schema

__all__ = ["Tool", "ToolError", "ToolExecutor", "ToolResult", "cut_text", "wants_workspace"]

RC_OK, RC_RAISED, RC_BAD_ARGS, RC_TIMEOUT, RC_UNKNOWN = 0, 1, 2, 124, 127


class ToolError(ValueError):
    """A tool declaration that cannot work (bad name or schema)."""


@dataclass(frozen=True)
class ToolResult:
    """What a tool may return to set its own return code (a plain value means success, code 0)."""

    content: Any
    return_code: int = 0


@dataclass(frozen=True)
class Tool:
    """A tool: name, description, JSON Schema of its arguments, and the function that runs it.

    ``parameters`` is checked against JSON Schema Draft 2020-12 when the tool is declared (so a bad
    schema fails the suite's collection, naming the tool) and compiled once into the validator every
    call's arguments go through (:mod:`pytest_gauge._internal.suite.schema`).
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    fn: Callable[..., Any] = field(compare=False)
    timeout: float | None = None
    max_result_chars: int = 20_000
    """Longest result or error text kept and sent back to the model; the rest is cut with a marker."""
    validator: CompiledSchema = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.name.replace("_", "").replace("-", "").isalnum():
            raise ToolError(f"tool name {self.name!r}: use letters, digits, '_' or '-'")
        where = f"tool {self.name}.parameters"
        try:
            compiled = compile_schema(self.parameters, where)
        except SchemaError as exc:
            raise ToolError(str(exc)) from None
        if self.parameters.get("type") != "object":
            raise ToolError(f"{where}: the top-level schema must have type 'object'")
        object.__setattr__(self, "validator", compiled)

    def schema(self) -> JSONObject:
        """The OpenAI ``tools`` entry."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters),
            },
        }


def _run_with_timeout(fn: Callable[..., Any], args: JSONObject, timeout: float) -> Any:
    """Run in a daemon thread so that a hung tool never blocks the run or the interpreter's exit."""
    box: JSONObject = {}

    def target() -> None:
        try:
            box["value"] = fn(**args)
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True, name="gauge-tool")
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise TimeoutError(f"tool did not finish within {timeout:g}s")
    if "error" in box:
        error = box["error"]
        if isinstance(error, SystemExit):  # a script-like tool that exits: its status is the return code
            code = error.code if isinstance(error.code, int) else (0 if error.code is None else 1)
            return ToolResult(f"exit status {code}" if code == 0 else f"error: exit status {code}", code)
        if not isinstance(error, Exception):  # e.g. KeyboardInterrupt raised by the tool itself
            raise _ToolAborted(f"{type(error).__name__}: {error}") from error
        raise error
    return box.get("value")


class _ToolAborted(Exception):
    """A tool raised a BaseException that is not an Exception; reported like any tool error."""


def cut_text(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters, with a marker saying how much was cut."""
    if limit <= 0 or len(text) <= limit:
        return text
    return f"{text[:limit]}\n[... {len(text) - limit:,} more characters cut: the limit is {limit:,}]"


def wants_workspace(fn: Callable[..., Any]) -> bool:
    """Whether a tool's function takes a ``workspace`` parameter (then it is given the transcript's
    workspace folder, docs/protocol.md#workspaces; the model never sees or sets it)."""
    try:
        return "workspace" in inspect.signature(fn).parameters
    except (TypeError, ValueError):  # a builtin without a signature
        return False


class ToolExecutor:
    """Runs the tools a task names; every call becomes a :class:`ToolCall` record. ``workspace``: the
    transcript's workspace, passed to the tools whose function takes a ``workspace`` parameter."""

    def __init__(
        self, tools: Sequence[Tool], default_timeout: float = 5.0, workspace: Path | None = None
    ) -> None:
        self.tools = {t.name: t for t in tools}
        self.schemas = [t.schema() for t in tools]
        self.default_timeout = default_timeout
        self.workspace = workspace
        self._given = {t.name for t in tools if workspace is not None and wants_workspace(t.fn)}

    async def run(self, call_id: str, name: str, raw_arguments: str) -> ToolCall:
        """Execute one call (``raw_arguments``: the model's JSON text); never raises for a tool's failure."""
        start = time.perf_counter()
        error: str | None
        try:
            parsed = json.loads(raw_arguments) if raw_arguments.strip() else {}
        except json.JSONDecodeError as exc:
            parsed = None
            error = f"malformed arguments: {exc.msg}"
        else:
            error = None if isinstance(parsed, dict) else "malformed arguments: not a JSON object"
            if error:
                parsed = None
        tool = self.tools.get(name)
        if tool is None:
            return ToolCall(
                call_id,
                name,
                raw_arguments,
                parsed,
                f"error: unknown tool {name!r}",
                RC_UNKNOWN,
                0.0,
                "unknown tool",
            )
        if parsed is None:
            return ToolCall(call_id, name, raw_arguments, None, f"error: {error}", RC_BAD_ARGS, 0.0, error)
        problems = tool.validator.errors(parsed)
        if problems:  # the tool is not called with arguments its schema rules out
            error = "arguments do not match the tool's schema: " + "; ".join(problems)
            return ToolCall(call_id, name, raw_arguments, parsed, f"error: {error}", RC_BAD_ARGS, 0.0, error)
        timeout = tool.timeout or self.default_timeout
        given = {**parsed, "workspace": self.workspace} if name in self._given else parsed
        try:
            value = await asyncio.to_thread(_run_with_timeout, tool.fn, given, timeout)
        except TimeoutError as exc:
            return self._done(
                call_id, name, raw_arguments, parsed, f"error: {exc}", RC_TIMEOUT, start, "timeout"
            )
        except Exception as exc:
            msg = str(exc) if isinstance(exc, _ToolAborted) else f"{type(exc).__name__}: {exc}"
            msg = cut_text(msg, tool.max_result_chars)
            return self._done(call_id, name, raw_arguments, parsed, f"error: {msg}", RC_RAISED, start, msg)
        code = RC_OK
        if isinstance(value, ToolResult):
            value, code = value.content, value.return_code
        try:
            content = (
                value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False)
            )
        except (TypeError, ValueError) as exc:  # the tool's bug, reported like a raise
            msg = f"the tool's result is not JSON: {exc}"
            return self._done(call_id, name, raw_arguments, parsed, f"error: {msg}", RC_RAISED, start, msg)
        content = cut_text(content, tool.max_result_chars)
        return self._done(call_id, name, raw_arguments, parsed, content, code, start, None)

    @staticmethod
    def _done(
        call_id: str,
        name: str,
        raw: str,
        parsed: JSONObject | None,
        result: str,
        code: int,
        start: float,
        error: str | None,
    ) -> ToolCall:
        # latency is kept out of determinism-sensitive outputs by rounding to milliseconds
        return ToolCall(
            call_id, name, raw, parsed, result, code, round(time.perf_counter() - start, 3), error
        )
