"""The engine's runner of workspace commands (``command_succeeds``, docs/protocol.md#programs-and-sandboxing):
each command in the sandbox (:mod:`.sandbox`: the workspace at ``/workspace``, no network, no host
secret in its environment, nothing of the host writable but the workspace), its output read bounded
and passed through the one redactor before it is recorded."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..gateway.redact import redact_output
from ..suite.file_checks import CommandOutcome, spawn_bounded
from . import sandbox

__all__ = ["SandboxedCommands"]


@dataclass(frozen=True)
class SandboxedCommands:
    """A :data:`~pytest_gauge._internal.suite.file_checks.CommandRunner`: the command in the sandbox (or, with
    ``unsandboxed`` (``--gauge-unsandboxed``), as a plain process with the same allowlisted
    environment); with no sandbox and no opt-out the command does not run and the rule fails with
    the one line naming the fix."""

    unsandboxed: bool = False

    async def __call__(self, argv: Sequence[str], workspace: Path, timeout: float) -> CommandOutcome:
        outcome = await self._run(argv, workspace, timeout)
        return CommandOutcome(outcome.code, redact_output(outcome.output))

    async def _run(self, argv: Sequence[str], workspace: Path, timeout: float) -> CommandOutcome:
        options = {
            "stdin": subprocess.DEVNULL,
            "stdout": subprocess.PIPE,
            "stderr": subprocess.STDOUT,
            "start_new_session": True,
        }
        python_bin = os.path.dirname(sys.executable)
        path = os.pathsep.join([python_bin, os.environ.get("PATH", os.defpath)])
        if self.unsandboxed:
            env = {**sandbox.allowed_environment({"PATH": path}), "HOME": str(workspace), "TMPDIR": "/tmp"}
            return await spawn_bounded(argv, timeout, cwd=workspace, env=env, **options)
        problem = await asyncio.to_thread(sandbox.sandbox_problem)
        if problem is not None:
            return CommandOutcome(127, sandbox.unavailable_line(problem))
        spec = sandbox.SandboxSpec(
            workspace.resolve(),
            sandbox.allowed_environment({"PATH": path}),
            read_only=sandbox.python_paths(),
        )
        wrapped = sandbox.bwrap_argv(spec, argv)
        return await spawn_bounded(wrapped, timeout, env={"PATH": path}, **options)
