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
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..gateway.errors import GatewayError
from ..gateway.gateway import CallContext
from ..gateway.proxy import WorkCalls
from ..gateway.redact import redact_output
from ..gateway.route_policy import RoutePolicy
from ..suite.file_checks import read_tail
from ..suite.programs import CommandAgent, ProgramEndpoint, ProgramSetup, fill, session_uuid
from . import sandbox
from .program_output import PARSERS, ProgramReply

__all__ = [
    "INSTALL",
    "ProgramError",
    "ProgramFailed",
    "ProgramHost",
    "ProgramMissing",
    "ProgramSession",
    "build_environment",
    "program_home",
    "program_setup",
]

INSTALL = {
    "claude": "npm install -g @anthropic-ai/claude-code@2.1.328",
    "codex": "npm install -g @openai/codex@0.169.0",
}
"""The install command of each program a preset runs (what doctor and a missing binary print)."""

BASE_VARIABLES = ("PATH", "LANG", "LC_ALL", "TZ", "SYSTEMROOT")
"""The only variables a program inherits from the test process: where programs are, and the locale."""

OUTPUT_LIMIT = 16 * 1024 * 1024  # bytes of stdout kept per turn (the tail: a CLI's result is its last line)
ERROR_LIMIT = 64 * 1024  # bytes of stderr kept per turn (the tail)


class ProgramMissing(GatewayError):
    """The agent's program is not installed: no case of this agent can run (cause, then the install)."""

    fatal = True


class ProgramError(GatewayError):
    """A program agent's (or HTTP agent's) turn failed: its case fails with the cause in one line (the
    program's own error, redacted), as a model agent's case does when its calls fail; never a result."""


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


def program_setup(
    workdir: Path,
    endpoint: ProgramEndpoint,
    work: str,
    mcp_servers: Mapping[str, Mapping[str, Any]],
    read_only: tuple[Path, ...] = (),
    writable: tuple[Path, ...] = (),
) -> ProgramSetup:
    """One transcript's :class:`ProgramSetup`: its private folder beside the workspace and, in the
    sandbox, the two seen at the fixed paths (``/workspace``, ``/home/agent``); ``read_only`` and
    ``writable`` the host paths its MCP server needs (the suite module's folder; its files and the
    workspace at their host paths, which the server's specification names)."""
    home = program_home(workdir)
    view = {workdir: sandbox.WORKSPACE, home: sandbox.HOME} if endpoint.sandboxed else {}
    return ProgramSetup(workdir, home, endpoint, work, mcp_servers, view, read_only, writable)


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
    env["HOME"] = setup.visible(setup.home)
    env["TMPDIR"] = sandbox.TMP if setup.endpoint.sandboxed else str(setup.home / "tmp")
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
        "workdir": setup.visible(setup.workdir),
        "home": setup.visible(setup.home),
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
        stdout, stderr, code = await self._run(argv, prompt.encode("utf-8") if self.agent.stdin else None)
        self.last_stdout = stdout
        reply = PARSERS[self.agent.output](stdout)
        self.replies.append(reply)
        if reply.session:
            self.session = reply.session
        if reply.error is not None:
            raise ProgramFailed(f"{self.agent.name}: the program reported an error: {reply.error[:500]}")
        if code != 0 and not reply.reply:
            tail = stderr.strip().splitlines()[-3:]
            raise ProgramFailed(
                f"{self.agent.name}: {Path(argv[0]).name} exited with status {code} without a reply; "
                f"stderr: {' | '.join(tail)[:500] or '(empty)'}"
            )
        return reply

    async def _run(self, argv: list[str], stdin: bytes | None) -> tuple[str, str, int]:
        """The process of one turn in its own group (in the sandbox when the endpoint says so); killed
        with its group past the timeout. Its output is read bounded (the tails kept) and redacted."""
        search = self.env.get("PATH", os.defpath)
        if shutil.which(argv[0], path=search) is None:
            program = Path(argv[0]).name
            fix = INSTALL.get(program, f"install {program!r} or give its full path in the agent's argv")
            cause = f"agent {self.agent.name!r}: the program {argv[0]!r} was not found on PATH"
            raise ProgramMissing(cause, f"install it: {fix}")
        command, env, cwd = self._launch(argv)
        try:
            proc = await asyncio.create_subprocess_exec(
                *command,
                cwd=cwd,
                env=env,
                stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
        except FileNotFoundError:
            raise ProgramMissing(
                f"agent {self.agent.name!r}: cannot start {command[0]!r}", "install it"
            ) from None
        try:
            out, err = await asyncio.wait_for(self._communicate(proc, stdin), self.agent.timeout)
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
        return redact_output(out), redact_output(err), code

    @staticmethod
    async def _communicate(proc: asyncio.subprocess.Process, stdin: bytes | None) -> tuple[str, str]:
        """Feed ``stdin``, read stdout and stderr to their ends bounded, wait for the exit."""
        if proc.stdin is not None:
            proc.stdin.write(stdin or b"")
            await proc.stdin.drain()
            proc.stdin.close()
        out, err, _ = await asyncio.gather(
            read_tail(proc.stdout, OUTPUT_LIMIT), read_tail(proc.stderr, ERROR_LIMIT), proc.wait()
        )
        return out.data.decode("utf-8", "replace"), err.data.decode("utf-8", "replace")

    def _launch(self, argv: list[str]) -> tuple[list[str], dict[str, str], Path]:
        """The command, environment and folder the turn's process starts with: as given, or wrapped in
        the sandbox (bwrap's own environment then only ``PATH``; the program's is set inside)."""
        setup = self.setup
        if not setup.endpoint.sandboxed:
            return argv, self.env, setup.workdir
        program = sandbox.installation(argv[0], self.env.get("PATH"))
        named = tuple(Path(a) for a in argv[1:] if os.path.isabs(a) and os.path.isfile(a))  # its script
        spec = sandbox.SandboxSpec(
            setup.workdir.resolve(),
            sandbox.allowed_environment(self.env),
            home=setup.home.resolve(),
            read_only=(*sandbox.python_paths(), *setup.read_only, *((program,) if program else ()), *named),
            writable=setup.writable,
            relay=setup.endpoint.relay,
        )
        return sandbox.bwrap_argv(spec, argv), {"PATH": os.environ.get("PATH", os.defpath)}, setup.workdir


def _kill_group(pid: int) -> None:
    """SIGKILL to the process group ``pid`` leads (gone already: nothing to do; where there are no
    process groups, Windows: the process itself)."""
    try:
        if hasattr(os, "killpg"):
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass
