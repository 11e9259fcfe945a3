"""What the workspace rules look at (``file_exists``, ``file_contains``, ``command_succeeds``,
docs/protocol.md#workspaces): a path inside the workspace, a file's text read with a size bound, and a
command run in the workspace with a timeout that kills its whole process group. Plain functions of a
folder, so the rules in :mod:`.rules` stay values and the engine runs these once per transcript."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from ..records.json_types import JSONObject

__all__ = [
    "MAX_FILE_BYTES",
    "OUTPUT_TAIL_BYTES",
    "CommandOutcome",
    "CommandRunner",
    "Tail",
    "check_relative",
    "command_env",
    "inside",
    "read_tail",
    "read_text",
    "run_command",
    "run_command_async",
]

MAX_FILE_BYTES = 8 * 1024 * 1024
"""Most bytes of a file ``file_contains`` reads (the rest is not searched, and the detail says so)."""
_OUTPUT_CHARS = 400  # the tail of a failed command's output kept in the rule's detail
OUTPUT_TAIL_BYTES = 64 * 1024
"""Most bytes of a command's output held while it runs (the tail; the rest is counted, never kept)."""
_CHUNK = 1024 * 1024
_SECRET_NAME = re.compile(r"(?:_API_KEY|_AUTH_TOKEN|_API_TOKEN|_SECRET_KEY|_ACCESS_KEY)$")


def check_relative(path: str) -> str | None:
    """Why ``path`` cannot name a file inside a workspace (absolute, ``..``, empty), or None."""
    if not path.strip():
        return "must be a non-empty relative path"
    pure = PurePosixPath(path.replace("\\", "/"))
    if pure.is_absolute() or re.match(r"^[A-Za-z]:", path):
        return f"{path!r} is absolute: name a path relative to the workspace"
    if ".." in pure.parts:
        return f"{path!r} leaves the workspace ('..')"
    return None


def inside(workspace: Path, path: str) -> Path | None:
    """``workspace / path`` resolved, or None when a symlink takes it outside the workspace."""
    root = workspace.resolve()
    target = (root / path).resolve()
    return target if target == root or root in target.parents else None


def read_text(path: Path) -> tuple[str, bool]:
    """A file's text (UTF-8, undecodable bytes replaced) within :data:`MAX_FILE_BYTES`, and whether it
    was cut there."""
    with path.open("rb") as fh:
        data = fh.read(MAX_FILE_BYTES + 1)
    cut = len(data) > MAX_FILE_BYTES
    return data[:MAX_FILE_BYTES].decode("utf-8", errors="replace"), cut


@dataclass(frozen=True)
class CommandOutcome:
    """How a command ended: its exit code (None when killed at the timeout) and its output's tail."""

    code: int | None
    output: str


CommandRunner = Callable[[Sequence[str], Path, float], Awaitable[CommandOutcome]]
"""How the engine runs a rule's command (its sandbox, its redaction: ``run/commands.py``);
:func:`run_command_async` when none is given."""


@dataclass(frozen=True)
class Tail:
    """What a bounded read kept: the stream's last bytes, and how many it had in all."""

    data: bytes
    total: int


async def read_tail(stream: asyncio.StreamReader | None, limit: int) -> Tail:
    """Read ``stream`` to its end holding at most about twice ``limit`` bytes at any time: the last
    ``limit`` are kept, the rest only counted (a command printing gigabytes costs no memory)."""
    if stream is None:
        return Tail(b"", 0)
    buf, total = bytearray(), 0
    while chunk := await stream.read(_CHUNK):
        total += len(chunk)
        buf += chunk
        if len(buf) > 2 * limit:
            del buf[: len(buf) - limit]
    return Tail(bytes(buf[-limit:]) if limit else b"", total)


def command_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The command's environment: the run's, without any key variable (``*_API_KEY``,
    ``*_AUTH_TOKEN``, ...): a project's own tests never need the gateway key."""
    return {k: v for k, v in environ.items() if not _SECRET_NAME.search(k.upper())}


def _spawn_options(workspace: Path) -> JSONObject:
    """How a rule's command starts, sync or async alike: in the workspace, with :func:`command_env` (no
    key variable), no stdin, output and errors together, in a session of its own (its whole process
    group can be killed)."""
    return {
        "cwd": workspace,
        "env": command_env(os.environ),
        "stdin": subprocess.DEVNULL,
        "stdout": subprocess.PIPE,
        "stderr": subprocess.STDOUT,
        "start_new_session": True,
    }


def run_command(argv: Sequence[str], workspace: Path, timeout: float) -> CommandOutcome:
    """Run ``argv`` in ``workspace`` in its own session; past ``timeout`` seconds the whole process
    group is killed (a test runner's children too) and the code is None. Called where no loop runs
    (a worker thread): :func:`run_command_async` on a loop of its own."""
    return asyncio.run(run_command_async(argv, workspace, timeout))


async def run_command_async(argv: Sequence[str], workspace: Path, timeout: float) -> CommandOutcome:
    """:func:`run_command` on the running event loop: past ``timeout``, or when the unit is cancelled
    (Ctrl-C), the command's whole process group is killed, so no test runner is left behind by a
    stopped run. Its output is read bounded (:func:`read_tail`)."""
    return await spawn_bounded(argv, timeout, **_spawn_options(workspace))


async def spawn_bounded(argv: Sequence[str], timeout: float, **options: Any) -> CommandOutcome:
    """Start ``argv`` with ``options`` (output and errors on one pipe, its own session) and read its
    output bounded; past ``timeout`` its process group is killed (code None)."""
    try:
        proc = await asyncio.create_subprocess_exec(*argv, **options)
    except OSError as exc:
        return CommandOutcome(127, f"cannot start {argv[0]!r}: {exc.strerror or exc}")
    try:
        tail, _ = await asyncio.wait_for(
            asyncio.gather(read_tail(proc.stdout, OUTPUT_TAIL_BYTES), proc.wait()), timeout
        )
    except TimeoutError:
        _kill_group(proc)
        await proc.wait()
        return CommandOutcome(None, "")
    except asyncio.CancelledError:
        _kill_group(proc)
        await proc.wait()  # reaped before the loop goes (its transport closed with it)
        raise
    return CommandOutcome(proc.returncode, _tail(tail.data))


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    """Kill the command's process group (where there are none, Windows: the command itself)."""
    try:
        if hasattr(os, "killpg"):
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
    except ProcessLookupError:
        pass


_DURATION = re.compile(r"\b\d+\.\d+s\b")


def _tail(out: bytes | None) -> str:
    """The output's last characters, durations ("0.12s") blanked: the detail is recorded in the
    transcript, whose bytes must not change from one run to the next."""
    text = _DURATION.sub("#s", (out or b"").decode("utf-8", errors="replace").strip())
    return text if len(text) <= _OUTPUT_CHARS else "…" + text[-_OUTPUT_CHARS:]
