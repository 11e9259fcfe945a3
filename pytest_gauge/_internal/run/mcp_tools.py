"""The suite's tools offered to a program agent over MCP (docs/protocol.md#mcp): one transcript's tool
server, served by the plugin's own process on a Unix socket, the configuration that names its relay to
Claude Code (``--mcp-config``) and Codex (``[mcp_servers.<name>]``), and the calls it recorded.

The program starts the relay (:mod:`.mcp_relay`, a byte pipe between its stdio and the socket) as its
MCP server; the real server (:mod:`.mcp_server`) runs here, on the engine's loop, and records every call
in memory as it runs it. Nothing is read back from a file the program could write.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from ..files.folders import OutFolder
from ..files.readwrite import write_atomic
from ..records import ToolCall
from ..records.json_types import JSONObject
from ..suite.tools import ToolExecutor
from .mcp_server import MCP_SERVER_NAME, CallLog, serve_connection
from .programs import ProgramFailed

__all__ = ["MCP_SERVER_NAME", "SOCKET_NAME", "McpServerError", "McpTools", "merge_calls", "server_env"]

SOCKET_NAME = "tools.sock"
_STARTUP_TIMEOUT_S = 30  # Codex's default (10 s) is short for an interpreter starting the relay
_SUN_PATH = 100  # AF_UNIX paths longer than about 107 bytes cannot be bound by name


class McpServerError(ProgramFailed):
    """The tool server could not be served (its socket could not be made): cause and fix; the program
    agent's transcript ends with it, as with any failed turn."""


def server_env() -> dict[str, str]:
    """What the relay needs in its environment to start (agent programs start it with a minimal one):
    ``PYTHONPATH`` naming this package, never a key."""
    package_root = str(Path(__file__).resolve().parents[3])  # the folder holding pytest_gauge/
    return {"PYTHONPATH": package_root}


@dataclass
class McpTools:
    """One transcript's tool server: its folder and socket, how a program starts its relay, what it ran."""

    folder: Path
    executor: ToolExecutor
    log: CallLog = field(default_factory=CallLog)
    _taken: int = field(default=0, repr=False)
    _server: asyncio.AbstractServer | None = field(default=None, repr=False)
    _sessions: set[asyncio.Task[None]] = field(default_factory=set, repr=False)

    @classmethod
    def create(
        cls,
        out_dir: Path | str,
        suite: str,
        task_id: str,
        agent: str,
        sample: int,
        *,
        executor: ToolExecutor,
        candidate: int = 0,
    ) -> McpTools:
        """A fresh MCP folder for (task, agent, sample), at the same path in every run (so the agents'
        configurations naming it are the same bytes), with ``claude-mcp.json``; serve it with
        ``async with``."""
        folder = OutFolder(Path(out_dir).absolute()).suite(suite).mcp(task_id, agent, sample, candidate)
        if folder.exists():
            for old in folder.iterdir():
                old.unlink()
        folder.mkdir(parents=True, exist_ok=True)
        made = cls(folder, executor)
        write_atomic(made.claude_config_file, json.dumps(made.claude_config(), indent=2) + "\n")
        return made

    @property
    def tools(self) -> tuple[str, ...]:
        return tuple(self.executor.tools)

    @property
    def socket(self) -> Path:
        return self.folder / SOCKET_NAME

    @property
    def claude_config_file(self) -> Path:
        """:meth:`claude_config` as a file, for ``claude --mcp-config <file>``."""
        return self.folder / "claude-mcp.json"

    async def __aenter__(self) -> McpTools:
        """Serve the socket on the running loop (each connection one MCP session)."""
        with contextlib.suppress(FileNotFoundError):
            self.socket.unlink()
        path = str(self.socket)
        if len(path.encode()) > _SUN_PATH:  # bound through the folder's descriptor (Linux): a short name
            dirfd = os.open(self.folder, os.O_RDONLY)
            path = f"/proc/self/fd/{dirfd}/{SOCKET_NAME}"
        else:
            dirfd = -1
        try:
            self._server = await asyncio.start_unix_server(self._connection, path=path)
        except OSError as exc:
            raise McpServerError(f"the MCP tool server cannot listen at {self.socket}: {exc}") from None
        finally:
            if dirfd >= 0:
                os.close(dirfd)
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """Stop serving: open sessions are cancelled (their programs have ended), the socket removed."""
        if self._server is not None:
            self._server.close()
        for task in list(self._sessions):
            task.cancel()
        if self._sessions:
            await asyncio.gather(*self._sessions, return_exceptions=True)
        with contextlib.suppress(FileNotFoundError):
            self.socket.unlink()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._sessions.add(task)
        try:
            await serve_connection(self.executor, self.log, reader, writer)
        finally:
            if task is not None:
                self._sessions.discard(task)

    def argv(self) -> list[str]:
        """The relay's command line: this interpreter, ``-m pytest_gauge._internal.run.mcp_relay
        <socket>``."""
        return [sys.executable, "-m", "pytest_gauge._internal.run.mcp_relay", str(self.socket)]

    def claude_config(self) -> JSONObject:
        """Claude Code's ``--mcp-config`` JSON (use with ``--strict-mcp-config``); each server entry is
        also what a Codex ``[mcp_servers.<name>]`` table holds (a stdio server: no ``type`` key)."""
        command, *args = self.argv()
        server = {"command": command, "args": args, "env": server_env()}
        return {"mcpServers": {MCP_SERVER_NAME: server}}

    def claude_tool_names(self) -> list[str]:
        """The tools as Claude Code names them, for ``--allowedTools``."""
        return [f"mcp__{MCP_SERVER_NAME}__{name}" for name in self.tools]

    def codex_toml(self) -> str:
        """The ``[mcp_servers.gauge]`` block of a Codex ``config.toml`` (JSON strings are TOML strings)."""
        command, *args = self.argv()
        env = ", ".join(f"{k} = {json.dumps(v)}" for k, v in server_env().items())
        return (
            f"[mcp_servers.{MCP_SERVER_NAME}]\n"
            f"command = {json.dumps(command)}\n"
            f"args = [{', '.join(json.dumps(a) for a in args)}]\n"
            f"env = {{ {env} }}\n"
            f"startup_timeout_sec = {_STARTUP_TIMEOUT_S}\n"
        )

    def take_calls(self) -> list[ToolCall]:
        """The calls the server ran since the last take, in the order they finished."""
        found = self.log.calls[self._taken :]
        self._taken = len(self.log.calls)
        return list(found)


def _served(call: ToolCall, tools: Sequence[str]) -> bool:
    """Whether a call a program's own output reports is one of the suite's tools through this server:
    Claude Code names them ``mcp__gauge__<tool>``, Codex's ``mcp_tool_call`` items the bare tool."""
    prefix = f"mcp__{MCP_SERVER_NAME}__"
    name = call.name[len(prefix) :] if call.name.startswith(prefix) else call.name
    return name in tools


def merge_calls(
    reported: Sequence[ToolCall], recorded: Sequence[ToolCall], tools: Sequence[str]
) -> list[ToolCall]:
    """A program turn's tool calls for the transcript: the calls of the suite's tools as the server
    recorded them (the executor's arguments, result, return code, latency: what the tool rules score),
    in place of the program's own view of them, the program's other calls (its shell, its own tools)
    kept where they were. With nothing recorded the program's view is kept whole (a server that never
    started is no reason to lose what the program said it did)."""
    if not recorded:
        return list(reported)
    merged: list[ToolCall] = []
    placed = False
    for call in reported:
        if not _served(call, tools):
            merged.append(call)
        elif not placed:
            merged.extend(recorded)
            placed = True
    return merged if placed else [*merged, *recorded]
