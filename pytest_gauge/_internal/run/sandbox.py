"""The sandbox every program the plugin starts runs in (docs/protocol.md#programs-and-sandboxing):
program agents (the ``claude``/``codex`` CLIs, any
:class:`~pytest_gauge._internal.suite.programs.CommandAgent`) with the MCP server they start, and
``command_succeeds`` commands, on bubblewrap (``bwrap``).

Inside: PID, IPC, UTS and network namespaces of its own (it sees no process of the run, so no other
``environ``), an environment built from an allowlist, a fresh ``HOME`` and ``TMPDIR``, the workspace
read-write at :data:`WORKSPACE` whatever the host path, the system folders and the program's own
installation read-only, nothing else of the host. A program's model calls reach the run's recording
proxy through :mod:`.relay`: a byte relay on 127.0.0.1:\\ :data:`PROXY_PORT` inside, a Unix socket
bound in, the proxy's TCP port on the host.

:class:`SandboxSpec` is the record, :func:`bwrap_argv` the pure function building the command line;
:func:`sandbox_problem` probes once per process whether a sandbox can be made.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from . import relay

__all__ = [
    "HOME",
    "PROXY_PORT",
    "WORKSPACE",
    "SandboxSpec",
    "SandboxUnavailable",
    "allowed_environment",
    "bwrap_argv",
    "installation",
    "python_paths",
    "sandbox_problem",
    "unavailable_line",
]

WORKSPACE = "/workspace"
"""Where the workspace is inside, read-write: the same path in every run and checkout."""
HOME = "/home/agent"
"""The program's ``HOME`` inside (its private folder bound there, or a fresh tmpfs)."""
TMP = "/tmp"
PROXY_PORT = 8080
"""The port the relay listens on inside (127.0.0.1): fixed, so the base URLs a program sends are too."""
PROXY_SOCKET = "/run/gauge/proxy.sock"
"""Where the host's relay socket is bound inside."""
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt")
"""Host folders bound read-only (a symlink, as on merged-/usr systems, is made a symlink inside)."""
HIDDEN = ("/etc/shadow", "/etc/gshadow", "/etc/ssh", "/etc/sudoers", "/etc/sudoers.d")
"""Secrets under ``/etc`` covered (an empty file or folder over them)."""
INHERITED = ("PATH", "LANG", "LANGUAGE", "TERM", "TZ")
"""The only variables taken from the host, with ``LC_*``: where programs are, the locale, the terminal."""
BWRAP = "bwrap"
INSTALL_LINE = "apt-get install bubblewrap"


class SandboxUnavailable(RuntimeError):
    """No sandbox can be made here and the run did not opt out: one line naming the fix."""


@dataclass(frozen=True)
class SandboxSpec:
    """One sandboxed process: ``workspace`` (host folder, read-write at :data:`WORKSPACE`), ``home``
    (host folder read-write at :data:`HOME`, or None for a tmpfs), its whole environment ``env``,
    extra host paths visible read-only (``read_only``) or read-write (``writable``) at their own path,
    and the host's relay socket (``relay``, None: no network at all)."""

    workspace: Path
    env: Mapping[str, str]
    home: Path | None = None
    read_only: tuple[Path, ...] = ()
    writable: tuple[Path, ...] = ()
    relay: Path | None = None
    python: str = field(default_factory=lambda: sys.executable)


def allowed_environment(declared: Mapping[str, str], host: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment inside: :data:`INHERITED` and ``LC_*`` from ``host`` (default the process's),
    then ``declared`` (the proxy variables the plugin sets, the program's own), then the fixed
    ``HOME`` and ``TMPDIR``. Built from nothing: no other host variable can reach a program."""
    source = os.environ if host is None else host
    env = {k: v for k, v in source.items() if k in INHERITED or k.startswith("LC_")}
    env.setdefault("LANG", "C.UTF-8")
    env.update(declared)
    env["HOME"] = HOME
    env["TMPDIR"] = TMP
    return env


def _system_binds() -> list[str]:
    """The host's system folders read-only; symlinks (``/bin -> usr/bin``) recreated as symlinks."""
    args: list[str] = []
    for path in SYSTEM:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for path in HIDDEN:
        if os.path.isdir(path) and not os.path.islink(path):
            args += ["--tmpfs", path, "--remount-ro", path]
        elif os.path.isfile(path):
            args += ["--ro-bind", "/dev/null", path]
    return args


def bwrap_argv(spec: SandboxSpec, argv: Sequence[str], *, bwrap: str = BWRAP) -> list[str]:
    """The bubblewrap command line running ``argv`` under ``spec`` (pure but for reading which system
    folders exist): new namespaces, system folders read-only, fresh ``/proc``, ``/dev`` and ``/tmp``,
    the binds, the environment set after ``--clearenv``, and with a relay the inner relay first."""
    args = [bwrap, "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net"]
    args += ["--unshare-cgroup-try", "--die-with-parent", "--new-session", "--hostname", "sandbox"]
    args += _system_binds()
    args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", TMP, "--tmpfs", "/home", "--tmpfs", "/run"]
    args += ["--bind", str(spec.home), HOME] if spec.home is not None else ["--dir", HOME]
    for path in spec.read_only:
        args += ["--ro-bind-try", str(path), str(path)]
    for path in spec.writable:
        args += ["--bind-try", str(path), str(path)]
    args += ["--bind", str(spec.workspace), WORKSPACE, "--chdir", WORKSPACE]
    command = list(argv)
    if spec.relay is not None:
        args += ["--dir", os.path.dirname(PROXY_SOCKET), "--bind", str(spec.relay), PROXY_SOCKET]
        command = [spec.python, "-I", "-S", "-c", relay.INSIDE, str(PROXY_PORT), PROXY_SOCKET, *command]
    args.append("--clearenv")
    for name, value in sorted(spec.env.items()):
        args += ["--setenv", name, value]
    return [*args, "--", *command]


def installation(program: str, search_path: str | None = None) -> Path | None:
    """The folder of ``program``'s installation to bind read-only: for a program found on ``PATH``
    (resolved through its symlinks), its package folder (``.../node_modules/<pkg>`` for an npm CLI),
    else the folder holding it; None when it is not found."""
    found = shutil.which(program, path=search_path)
    if found is None:
        return None
    real = Path(os.path.realpath(found))
    for parent in real.parents:
        scope = parent.parent
        if scope.name == "node_modules" or (
            scope.name.startswith("@") and scope.parent.name == "node_modules"
        ):
            return parent
    return real.parent


def python_paths() -> tuple[Path, ...]:
    """What this interpreter needs visible to run inside (the relay, the MCP server): its prefixes,
    the folders on ``sys.path`` outside them, and this package's own folder."""
    package = Path(__file__).resolve().parents[2]  # pytest_gauge/, above _internal/run/
    paths = {Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).resolve().parent, package}
    for entry in sys.path:
        if entry and os.path.isdir(entry) and not entry.startswith(("/usr/", "/etc/")):
            paths.add(Path(entry).resolve())
    return tuple(sorted(paths))


@functools.cache
def sandbox_problem(bwrap: str = BWRAP) -> str | None:
    """Why no sandbox can be made in this process (bubblewrap missing, or its probe failing), or None.
    Probed once per process: ``bwrap`` with the namespaces the sandbox uses, running ``true``."""
    found = shutil.which(bwrap)
    if found is None:
        return f"bubblewrap ({bwrap}) is not installed"
    probe = [found, "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net"]
    probe += ["--die-with-parent", *_system_binds(), "--proc", "/proc", "--dev", "/dev", "--", "true"]
    try:
        done = subprocess.run(probe, capture_output=True, timeout=30, check=False, env={})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap cannot start: {exc}"
    if done.returncode != 0:
        detail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no detail"]
        return f"bubblewrap cannot make a sandbox here: {detail[0][:200]}"
    return None


def unavailable_line(problem: str) -> str:
    """The one line a program agent or command refusing to start prints."""
    return f"no sandbox for programs: {problem}; fix: {INSTALL_LINE}, or run with --gauge-unsandboxed"
