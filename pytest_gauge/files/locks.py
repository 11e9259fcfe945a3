"""The one home of the package's file locks: whole-file locks (``flock``) on an open file descriptor and
one-byte record locks (``lockf``) at an offset, which the kernel drops when their process dies.

They need POSIX's ``fcntl``; it is imported on first use, never at import time, so the package (and
pytest, which loads the plugin) imports on any platform, and :func:`platform_problem` says why the
plugin cannot run where it is missing (the plugin then disables itself with one warning)."""

from __future__ import annotations

import errno
import importlib
from types import ModuleType

__all__ = ["lock_byte", "lock_file", "platform_problem", "unlock_byte", "unlock_file"]


def _fcntl() -> ModuleType:
    return importlib.import_module("fcntl")


def platform_problem() -> str | None:
    """Why this platform cannot run pytest-gauge's runs (no ``fcntl``: Windows), or None."""
    try:
        _fcntl()
    except ImportError:
        return (
            "pytest-gauge is disabled: it needs POSIX file locks (the fcntl module), which this platform"
            " lacks; run it on Linux or macOS (WSL on Windows)"
        )
    return None


def lock_file(fd: int, *, block: bool) -> bool:
    """Take the exclusive lock of the open file ``fd``: waiting when ``block``, else False if held."""
    fcntl = _fcntl()
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if block else fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def unlock_file(fd: int) -> None:
    fcntl = _fcntl()
    fcntl.flock(fd, fcntl.LOCK_UN)


def lock_byte(fd: int, offset: int) -> bool:
    """Take the exclusive record lock on the byte at ``offset`` of ``fd`` without waiting (False if
    another process holds it)."""
    fcntl = _fcntl()
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, offset)
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EAGAIN):
            return False
        raise
    return True


def unlock_byte(fd: int, offset: int) -> None:
    fcntl = _fcntl()
    fcntl.lockf(fd, fcntl.LOCK_UN, 1, offset)
