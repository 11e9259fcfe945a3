"""The MCP server over stdio that offers a suite's tools to a program agent
(``python -m pytest_gauge.run.mcp_server <spec.json>``, docs/protocol.md#mcp): it imports the suite's
test module, keeps the tools the task names, and runs every call through the plugin's own
:class:`~pytest_gauge.suite.tools.ToolExecutor` (the same schema validation, timeouts, return codes and
result limits as a model agent's calls), appending each call's record to the transcript's
``calls.jsonl`` for the engine to read after the turn (:mod:`.mcp_tools`). Uses the ``mcp`` package's
low-level :class:`mcp.server.Server`.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..records import ToolCall
from ..suite.discover import load_suite
from ..suite.tools import ToolExecutor
from ..version import __version__
from .mcp_tools import MCP_SERVER_NAME, SPEC_FORMAT

__all__ = ["CallLog", "ServerSpec", "build_executor", "main", "read_spec"]


@dataclass(frozen=True)
class ServerSpec:
    """What one transcript's server serves (``spec.json``, written by ``McpTools.create``)."""

    module: Path
    tools: tuple[str, ...]
    timeout: float
    workspace: Path | None
    calls: Path


def read_spec(path: Path) -> ServerSpec:
    """The specification at ``path``; a bad one is a ValueError naming the file and the field."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or data.get("format") != SPEC_FORMAT:
        raise ValueError(f"{path}: not an MCP server specification of format {SPEC_FORMAT}")
    try:
        workspace = data["workspace"]
        return ServerSpec(
            module=Path(data["module"]),
            tools=tuple(str(t) for t in data["tools"]),
            timeout=float(data["timeout"]),
            workspace=None if workspace is None else Path(workspace),
            calls=Path(data["calls"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{path}: field {exc} missing or malformed") from None


def build_executor(spec: ServerSpec) -> ToolExecutor:
    """The task's tools from the suite module, in the executor a model agent's calls go through. The
    module's folder is put first on ``sys.path`` (pytest's default import mode does the same); what it
    prints while importing goes to stderr, never into the protocol's stdout."""
    sys.path.insert(0, str(spec.module.parent))
    with contextlib.redirect_stdout(sys.stderr):
        suite = load_suite(spec.module)
    known = {t.name: t for t in suite.tools}
    missing = [name for name in spec.tools if name not in known]
    if missing:
        raise ValueError(
            f"{spec.module}: the suite has no tool {missing[0]!r} (its tools: {', '.join(known)})"
        )
    return ToolExecutor([known[n] for n in spec.tools], spec.timeout, spec.workspace)


class CallLog:
    """``calls.jsonl``: one line per finished call, appended whole (one write of one line) under a lock;
    call ids ``mcp-<n>`` continue the transcript's numbering across turns (each turn's agent process
    starts its own server)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.count = len(path.read_bytes().splitlines()) if path.exists() else 0

    def next_id(self) -> str:
        with self.lock:
            self.count += 1
            return f"mcp-{self.count}"

    def append(self, row: dict[str, Any]) -> None:
        line = (json.dumps(row, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")
        with self.lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)


def _server(executor: ToolExecutor, log: CallLog) -> Any:
    """The low-level MCP server: ``tools/list`` from the tools' schemas, ``tools/call`` through the
    executor (a non-zero return code is an error result carrying the same text the model would see)."""
    import mcp_types as types  # deferred: mcp's types, with the mcp package (extra agents)
    from mcp.server import Server  # deferred: keeps mcp off the import of run.mcp_server

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        listed = [
            types.Tool(name=t.name, description=t.description, input_schema=dict(t.parameters))
            for t in executor.tools.values()
        ]
        return types.ListToolsResult(tools=listed)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        raw = json.dumps(params.arguments or {}, ensure_ascii=False)
        call: ToolCall = await executor.run(log.next_id(), params.name, raw)
        log.append(dict(vars(call)))
        text = types.TextContent(type="text", text=call.result)
        return types.CallToolResult(content=[text], is_error=call.return_code != 0)

    return Server(MCP_SERVER_NAME, version=__version__, on_list_tools=list_tools, on_call_tool=call_tool)


async def _serve(executor: ToolExecutor, log: CallLog) -> None:
    from mcp.server.stdio import stdio_server  # deferred: keeps mcp off the import of run.mcp_server

    server = _server(executor, log)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def main(argv: list[str] | None = None) -> int:
    """Serve until the agent closes stdin. A specification or suite that cannot serve is reported on
    stderr and as a ``server_error`` line the engine raises after the turn (exit status 2)."""
    import anyio  # deferred: keeps anyio off the import of run.mcp_server

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m pytest_gauge.run.mcp_server SPEC.json", file=sys.stderr)
        return 2
    spec_path = Path(args[0])
    try:
        spec = read_spec(spec_path)
    except (OSError, ValueError) as exc:
        print(f"pytest-gauge MCP server: {exc}", file=sys.stderr)
        return 2
    log = CallLog(spec.calls)
    try:
        executor = build_executor(spec)
    except Exception as exc:  # the suite module's own import error, a tool it lacks
        message = f"the MCP server cannot load the suite's tools: {type(exc).__name__}: {exc}"
        log.append({"server_error": message + "; fix the suite module (pytest collects it the same way)"})
        print(f"pytest-gauge MCP server: {message}", file=sys.stderr)
        return 2
    anyio.run(_serve, executor, log)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
