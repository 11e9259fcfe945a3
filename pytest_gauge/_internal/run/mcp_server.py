"""The MCP server of a suite's tools, run in the plugin's own process (docs/protocol.md#mcp): one
session per connection of the transcript's Unix socket, each a program's turn reaching it through the
stdio relay the program starts (:mod:`.mcp_relay`). Every ``tools/call`` runs through the transcript's
:class:`~pytest_gauge._internal.suite.tools.ToolExecutor` (the same schema validation, timeouts, return codes
and result limits as a model agent's calls) and is recorded here, in memory, by the process that writes the
transcript: nothing a program can write decides what its tool rules score. Uses the ``mcp`` package's
low-level :class:`mcp.server.Server` over the connection's streams.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from ..records import ToolCall
from ..suite.tools import ToolExecutor
from ..version import __version__

__all__ = ["CallLog", "serve_connection"]

MCP_SERVER_NAME = "gauge"


class CallLog:
    """The calls one transcript's server ran, in the order they finished; ids ``mcp-<n>`` numbered across
    the transcript's turns (one connection each)."""

    def __init__(self) -> None:
        self.calls: list[ToolCall] = []
        self._issued = 0

    def next_id(self) -> str:
        self._issued += 1
        return f"mcp-{self._issued}"

    def append(self, call: ToolCall) -> None:
        self.calls.append(call)


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
        log.append(call)
        text = types.TextContent(type="text", text=call.result)
        return types.CallToolResult(content=[text], is_error=call.return_code != 0)

    return Server(MCP_SERVER_NAME, version=__version__, on_list_tools=list_tools, on_call_tool=call_tool)


class _Lines:
    """A connection's incoming bytes as the text lines the ``mcp`` package's stdio transport reads."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        line = await self.reader.readline()
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", "replace")


class _Writes:
    """A connection's outgoing side as the text file the stdio transport writes."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer

    async def write(self, text: str) -> None:
        self.writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self.writer.drain()


async def serve_connection(
    executor: ToolExecutor, log: CallLog, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    """One MCP session on one connection (a program's turn), until the relay closes its side."""
    from mcp.server.stdio import stdio_server  # deferred: keeps mcp off the import of run.mcp_server

    server = _server(executor, log)
    try:
        lines: Any = _Lines(reader)
        out: Any = _Writes(writer)
        async with stdio_server(stdin=lines, stdout=out) as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
    except (ConnectionError, OSError):
        pass  # the program's turn ended mid-session: its calls so far are recorded
    finally:
        writer.close()
