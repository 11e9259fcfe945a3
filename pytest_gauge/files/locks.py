"""The one home of the package's file locks: an exclusive lock on a whole open file, taken through the
``filelock`` library's descriptor locks (``flock`` on Linux and macOS, ``LockFileEx`` on Windows). The
operating system drops such a lock when its process dies, so a killed worker never leaves a stale one.

``filelock`` is imported on first use, never at import time, so pytest (which loads the plugin) pays
for it only once the plugin configures; :func:`platform_problem` says why the plugin cannot run where
the library has no native lock (a POSIX system without ``fcntl``: the plugin then disables itself with
one warning)."""

from __future__ import annotations

import importlib
import sys
import time
from types import ModuleType

__all__ = ["lock_file", "platform_problem", "unlock_file"]

_POLL_FIRST = 0.0005  # seconds between attempts of a waiting lock at first, doubled up to _POLL_MAX
_POLL_MAX = 0.02


def _filelock() -> ModuleType:
    return importlib.import_module("filelock")


def platform_problem() -> str | None:
    """Why this platform cannot run pytest-gauge's runs (no native file lock), or None."""
    if sys.platform == "win32":
        return None
    try:
        native = bool(_filelock().has_fcntl)
    except ImportError:
        native = False
    if native:
        return None
    return (
        "pytest-gauge is disabled: it needs native file locks (filelock's fcntl or Windows locks), which"
        " this platform lacks"
    )


def lock_file(fd: int, *, block: bool) -> bool:
    """Take the exclusive lock of the open file ``fd``: waiting when ``block``, else False if held.
    A wait polls (from half a millisecond up to 20 ms): neither Windows nor ``filelock`` offers a
    portable wait on a descriptor."""
    lock_descriptor = _filelock().lock_descriptor
    if lock_descriptor(fd, blocking=False):
        return True
    if not block:
        return False
    delay = _POLL_FIRST
    while not lock_descriptor(fd, blocking=False):
        time.sleep(delay)
        delay = min(delay * 2, _POLL_MAX)
    return True


def unlock_file(fd: int) -> None:
    """Give back the lock :func:`lock_file` took on ``fd`` (the descriptor stays open)."""
    _filelock().unlock_descriptor(fd)
