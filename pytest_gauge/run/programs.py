"""Running a program agent (:class:`~pytest_gauge.suite.programs.CommandAgent`), one process per turn
(docs/protocol.md#program-agents).

A :class:`ProgramSession` is one transcript's program: its private folder and environment, built once
before the first turn (the preset's files written, the proxy route's variables set, never the gateway
key), and the session id carried from turn to turn. Each turn runs the argv in its own process group
in the transcript's working directory; past the agent's timeout the whole group is killed, and after
every turn whatever the program left running in its group is killed too.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..gateway.errors import GatewayError
from ..gateway.gateway import CallContext
from ..gateway.proxy import WorkCalls
from ..gateway.route_policy import RoutePolicy
from ..suite.programs import CommandAgent, ProgramEndpoint, ProgramSetup, fill, session_uuid
from .program_output import PARSERS, ProgramReply

__all__ = [
    "INSTALL",
    "ProgramFailed",
    "ProgramHost",
    "ProgramMissing",
    "ProgramSession",
    "build_environment",
    "program_home",
]

INSTALL = {
    "claude": "npm install -g @anthropic-ai/claude-code@2.1.328",
    "codex": "npm install -g @openai/codex@0.169.0",
}
"""The install command of each program a preset runs (what doctor and a missing binary print)."""

BASE_VARIABLES = ("PATH", "LANG", "LC_ALL", "TZ", "SYSTEMROOT")
"""The only variables a program inherits from the test process: where programs are, and the locale."""

OUTPUT_LIMIT = 16 * 1024 * 1024  # bytes of stdout kept per turn


class ProgramMissing(GatewayError):
    """The agent's program is not installed: no case of this agent can run (cause, then the install)."""

    fatal = True


class ProgramFailed(Exception):
    """A turn of the program failed (a timeout, a non-zero exit without a reply, an error it reported):
    the transcript ends with this error, an agent's failure like any other."""


class ProgramHost(Protocol):
    """What the plugin gives the engine for program agents (``process/`` builds it on the recording
    proxy): the proxy route of a transcript (its base URLs, the per-run proxy token, the client
    environment) and the MCP servers offering the task's tools."""

    def endpoint(
        self, ctx: CallContext, calls: WorkCalls, seed: int | None = None, policy: RoutePolicy | None = None
    ) -> ProgramEndpoint:
        """The transcript's proxy route, its requests numbered and sent by ``calls`` (the transcript's
        :class:`~.work.WorkCaller`: one numbering for all its calls, one spend), ``seed`` added to each
        request that carries none (each sample draws its own answers), held to ``policy``."""
        ...

    def mcp_servers(self, ctx: CallContext, tools: Any) -> Mapping[str, Mapping[str, Any]]: ...


def program_home(workdir: Path) -> Path:
    """The transcript's private folder for the program's own configuration: beside its workspace
    (``<workspace>.home``), so its path is as stable from run to run as the workspace's."""
    return workdir.with_name(workdir.name + ".home")


def build_environment(
    agent: CommandAgent, setup: ProgramSetup, inherited: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The program's whole environment: ``PATH`` and the locale from the test process, ``HOME`` the
    transcript's private folder, the proxy's client environment, then the preset's variables and the
    agent's own ``env`` (after ``drop_env``'s prefixes are removed from what came before). Nothing else
    of the test process reaches it: no gateway key, no inherited ``ANTHROPIC_*``."""
    source = os.environ if inherited is None else inherited
    env = {k: source[k] for k in BASE_VARIABLES if k in source}
    env.setdefault("LANG", "C.UTF-8")
    env.update(setup.endpoint.env)
    env["HOME"] = str(setup.home)
    env["TMPDIR"] = str(setup.home / "tmp")
    env = {k: v for k, v in env.items() if not k.startswith(agent.drop_env)} if agent.drop_env else env
    if agent.configure is not None:
        env.update(agent.configure(setup))
    values = _values(agent, setup, prompt="", session="")
    env.update({k: fill(v, values) for k, v in agent.env.items()})
    return env


def _values(agent: CommandAgent, setup: ProgramSetup, *, prompt: str, session: str) -> dict[str, str]:
    """The placeholders' values for one turn."""
    return {
        "prompt": prompt,
        "session": session,
        "workdir": str(setup.workdir),
        "home": str(setup.home),
        "model": agent.model or "",
    }


@dataclass
class ProgramSession:
    """One transcript's program agent: set up once, then one process per turn."""

    agent: CommandAgent
    setup: ProgramSetup
    env: dict[str, str] = field(default_factory=dict)
    session: str | None = None
    replies: list[ProgramReply] = field(default_factory=list)
    last_stdout: str = ""  # the last turn's output, as the program printed it

    @classmethod
    def open(cls, agent: CommandAgent, setup: ProgramSetup) -> ProgramSession:
        """A fresh private folder (whatever an earlier run left is removed), the preset's files, the
        environment."""
        if setup.home.exists():
            shutil.rmtree(setup.home)
        (setup.home / "tmp").mkdir(parents=True)
        setup.workdir.mkdir(parents=True, exist_ok=True)
        return cls(agent, setup, build_environment(agent, setup))

    def argv(self, prompt: str) -> list[str]:
        """This turn's command: the first turn gets a session id derived from the work key (presets
        that can name their session use it), later turns the id the previous turn reported."""
        resume = self.session is not None
        session = self.session if self.session is not None else session_uuid(self.setup.work)
        values = _values(self.agent, self.setup, prompt=prompt, session=session)
        return self.agent.command(values, resume=resume)

    async def turn(self, prompt: str) -> ProgramReply:
        """Run one turn with ``prompt`` and read its output; raises :class:`ProgramFailed` or
        :class:`ProgramMissing`."""
        argv = self.argv(prompt)
        started = time.monotonic()
        stdout, stderr, code = await self._run(argv, prompt.encode("utf-8") if self.agent.stdin else None)
        self.last_stdout = stdout
        reply = PARSERS[self.agent.output](stdout)
        self.replies.append(reply)
        if reply.session:
            self.session = reply.session
        elapsed = time.monotonic() - started
        if reply.error is not None:
            raise ProgramFailed(f"{self.agent.name}: the program reported an error: {reply.error[:500]}")
        if code != 0 and not reply.reply:
            tail = stderr.strip().splitlines()[-3:]
            raise ProgramFailed(
                f"{self.agent.name}: {Path(argv[0]).name} exited with status {code} after {elapsed:.1f}s "
                f"without a reply; stderr: {' | '.join(tail)[:500] or '(empty)'}"
            )
        return reply

    async def _run(self, argv: list[str], stdin: bytes | None) -> tuple[str, str, int]:
        """The process of one turn in its own group; killed with its group past the timeout."""
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                cwd=self.setup.workdir,
                env=self.env,
                stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
                limit=OUTPUT_LIMIT,
            )
        except FileNotFoundError:
            program = Path(argv[0]).name
            fix = INSTALL.get(program, f"install {program!r} or give its full path in the agent's argv")
            cause = f"agent {self.agent.name!r}: the program {argv[0]!r} was not found on PATH"
            raise ProgramMissing(cause, f"install it: {fix}") from None
        try:
            out, err = await asyncio.wait_for(proc.communicate(stdin), self.agent.timeout)
        except TimeoutError:
            _kill_group(proc.pid)
            await proc.wait()
            raise ProgramFailed(
                f"{self.agent.name}: the turn took longer than its timeout of {self.agent.timeout:g}s; "
                "its process group was killed"
            ) from None
        except asyncio.CancelledError:
            _kill_group(proc.pid)
            raise
        _kill_group(proc.pid)  # anything the program left running (an MCP server, a shell)
        code = proc.returncode if proc.returncode is not None else -1
        return out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), code


def _kill_group(pid: int) -> None:
    """SIGKILL to the process group ``pid`` leads (gone already: nothing to do)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
