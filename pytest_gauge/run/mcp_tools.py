"""The suite's tools offered to a program agent over MCP (docs/protocol.md#mcp): one transcript's
server specification, the configuration that names the server to Claude Code (``--mcp-config``) and
Codex (``[mcp_servers.<name>]``), and the tool calls the server recorded, read back after each turn.

The server (:mod:`.mcp_server`) is another process, started by the agent program itself, so it cannot
write the transcript: it appends one JSON line per call (the :class:`~pytest_gauge.records.ToolCall`
record the executor made: arguments, result, return code, latency) to ``calls.jsonl`` in the
transcript's MCP folder, and :meth:`McpTools.take_calls` reads the lines added since the last turn.
This module never imports the ``mcp`` package (only the server process needs it).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..files.folders import OutFolder
from ..files.readwrite import write_atomic
from ..records import ToolCall
from .programs import ProgramFailed

__all__ = ["MCP_SERVER_NAME", "SPEC_FORMAT", "McpServerError", "McpTools", "merge_calls", "server_env"]

MCP_SERVER_NAME = "gauge"
"""The server's name in the agents' configuration: Claude Code calls its tools ``mcp__gauge__<tool>``."""
SPEC_FORMAT = 1
_STARTUP_TIMEOUT_S = 30  # Codex's default (10 s) is short for an interpreter importing a suite module


class McpServerError(ProgramFailed):
    """The MCP server could not serve (its specification, the suite module, a tool name): cause and
    fix; the program agent's transcript ends with it, as with any failed turn."""


def server_env(module_folder: Path) -> dict[str, str]:
    """What the server process needs in its environment to import this package and the suite module
    (agent programs start it with a minimal environment): ``PYTHONPATH`` only, never a key."""
    package_root = str(Path(__file__).resolve().parents[2])
    paths = [package_root, str(module_folder)]
    paths += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p not in paths]
    return {"PYTHONPATH": os.pathsep.join(paths)}


@dataclass
class McpTools:
    """One transcript's MCP server: where its files are, how to start it, what it has recorded."""

    folder: Path
    module: Path
    tools: tuple[str, ...]
    _read: int = field(default=0, repr=False)  # bytes of calls.jsonl already taken

    @classmethod
    def create(
        cls,
        out_dir: Path | str,
        suite: str,
        task_id: str,
        agent: str,
        sample: int,
        *,
        module: Path,
        tools: Sequence[str],
        timeout: float,
        workspace: Path | None,
        candidate: int = 0,
    ) -> McpTools:
        """A fresh MCP folder for (task, agent, sample), at the same path in every run (so the agents'
        configurations naming it are the same bytes): ``spec.json`` written, no call recorded yet."""
        folder = OutFolder(Path(out_dir).absolute()).suite(suite).mcp(task_id, agent, sample, candidate)
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        made = cls(folder, module.resolve(), tuple(tools))
        spec = {
            "format": SPEC_FORMAT,
            "module": str(made.module),
            "tools": list(made.tools),
            "timeout": timeout,
            "workspace": None if workspace is None else str(workspace),
            "calls": str(made.calls),
        }
        write_atomic(made.spec, json.dumps(spec, indent=2, sort_keys=True) + "\n")
        write_atomic(made.claude_config_file, json.dumps(made.claude_config(), indent=2) + "\n")
        return made

    @property
    def spec(self) -> Path:
        return self.folder / "spec.json"

    @property
    def calls(self) -> Path:
        return self.folder / "calls.jsonl"

    @property
    def claude_config_file(self) -> Path:
        """:meth:`claude_config` as a file, for ``claude --mcp-config <file>``."""
        return self.folder / "claude-mcp.json"

    def argv(self) -> list[str]:
        """The server's command line: this interpreter, ``-m pytest_gauge.run.mcp_server <spec>``."""
        return [sys.executable, "-m", "pytest_gauge.run.mcp_server", str(self.spec)]

    def claude_config(self) -> dict[str, Any]:
        """Claude Code's ``--mcp-config`` JSON (use with ``--strict-mcp-config``); each server entry is
        also what a Codex ``[mcp_servers.<name>]`` table holds (a stdio server: no ``type`` key)."""
        command, *args = self.argv()
        server = {"command": command, "args": args, "env": server_env(self.module.parent)}
        return {"mcpServers": {MCP_SERVER_NAME: server}}

    def claude_tool_names(self) -> list[str]:
        """The tools as Claude Code names them, for ``--allowedTools``."""
        return [f"mcp__{MCP_SERVER_NAME}__{name}" for name in self.tools]

    def codex_toml(self) -> str:
        """The ``[mcp_servers.gauge]`` block of a Codex ``config.toml`` (JSON strings are TOML strings)."""
        command, *args = self.argv()
        env = ", ".join(f"{k} = {json.dumps(v)}" for k, v in server_env(self.module.parent).items())
        return (
            f"[mcp_servers.{MCP_SERVER_NAME}]\n"
            f"command = {json.dumps(command)}\n"
            f"args = [{', '.join(json.dumps(a) for a in args)}]\n"
            f"env = {{ {env} }}\n"
            f"startup_timeout_sec = {_STARTUP_TIMEOUT_S}\n"
        )

    def take_calls(self) -> list[ToolCall]:
        """The calls the server recorded since the last take (in the order they finished); a line the
        server wrote about its own failure raises :class:`McpServerError` with its cause and fix."""
        try:
            with self.calls.open("rb") as fh:
                fh.seek(self._read)
                data = fh.read()
        except FileNotFoundError:
            return []
        complete = data[: data.rfind(b"\n") + 1]  # a line still being written is taken next time
        self._read += len(complete)
        found: list[ToolCall] = []
        for line in complete.decode("utf-8").splitlines():
            row = json.loads(line)
            if "server_error" in row:
                raise McpServerError(str(row["server_error"]))
            found.append(ToolCall(**row))
        return found


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
