"""A content-addressed JSON store with one lock per key, safe for many processes at once.

It serves the **response cache** (``.gauge-cache/responses``: a gateway response keyed by its canonical
request, so re-runs cost nothing and CI can replay) and the run's once-per-model judge format decisions
(``<run folder>/formats``). The run's work store, where thousands of units would each cost an entry file, is
:mod:`pytest_gauge.files.work_store` instead.

Locks are file locks (:mod:`pytest_gauge.files.locks`) on a ``<key>.lock`` file beside the entry:
the kernel drops them when a process dies, so a crashed worker never leaves a stale lock. Entries are
written to a temporary file and renamed into place, so a reader sees nothing or a whole entry (POSIX).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from ..files.locks import lock_file, unlock_file
from ..files.readwrite import loads_bounded, write_atomic
from ..records import dumps
from ..records.json_types import JSONObject

__all__ = ["Store", "content_key"]


def content_key(material: Any) -> str:
    """sha256 of the canonical JSON of ``material``: the address of an entry."""
    return hashlib.sha256(dumps(material).encode("utf-8")).hexdigest()


class Store:
    """JSON entries under ``root``, sharded by the first two hex digits of their key."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self._root = os.fspath(self.root)  # plain strings on the hot paths: pathlib costs more than the I/O
        self._made: set[str] = set()  # shard folders known to exist (saves a mkdir per call)
        self.unreadable: set[str] = set()  # keys whose file exists but is not a JSON object (damaged)

    def _shard(self, key: str, *, fresh: bool = False) -> str:
        """The key's shard folder, created on first use (``fresh``: check again, it may have been removed)."""
        folder = os.path.join(self._root, key[:2])
        if fresh or key[:2] not in self._made:
            os.makedirs(folder, exist_ok=True)
            self._made.add(key[:2])
        return folder

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> JSONObject | None:
        """The entry, or None when absent (or unreadable, which counts as absent)."""
        try:
            with open(os.path.join(self._root, key[:2], key + ".json"), "rb") as fh:
                value = loads_bounded(fh.read())
        except FileNotFoundError:
            return None
        except (OSError, ValueError):  # unreadable, not UTF-8, not JSON or past the bounds: a miss, noted
            self.unreadable.add(key)
            return None
        if not isinstance(value, dict):
            self.unreadable.add(key)
            return None
        return value

    def put(self, key: str, value: JSONObject) -> None:
        """Write atomically: a temporary file in the same folder, then a rename."""
        text = dumps(value)
        target = Path(self._shard(key), key + ".json")
        try:
            write_atomic(target, text, mkdir=False)
        except FileNotFoundError:  # the shard folder was removed meanwhile (a prune)
            self._shard(key, fresh=True)
            write_atomic(target, text, mkdir=False)

    def delete(self, key: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path(key).unlink()

    def _lock_path(self, key: str) -> str:
        return os.path.join(self._shard(key), key + ".lock")

    def _open_lock(self, key: str) -> int:
        try:
            return os.open(self._lock_path(key), os.O_RDWR | os.O_CREAT, 0o644)
        except FileNotFoundError:  # the shard folder was removed meanwhile (a prune)
            self._shard(key, fresh=True)
            return os.open(self._lock_path(key), os.O_RDWR | os.O_CREAT, 0o644)

    def try_lock(self, key: str) -> int | None:
        """Take the key's lock without waiting: a file descriptor to :meth:`unlock`, or None if held."""
        fd = self._open_lock(key)
        if not lock_file(fd, block=False):
            os.close(fd)
            return None
        return fd

    @staticmethod
    def unlock(fd: int) -> None:
        unlock_file(fd)
        os.close(fd)

    @contextlib.asynccontextmanager
    async def lock(self, key: str, poll: float = 0.002, max_poll: float = 0.05) -> AsyncIterator[None]:
        """Hold the key's lock, polling (without blocking the event loop) while another process has it."""
        delay = poll
        while (fd := self.try_lock(key)) is None:
            await asyncio.sleep(delay)
            delay = min(delay * 2, max_poll)
        try:
            yield
        finally:
            self.unlock(fd)

    @contextlib.contextmanager
    def lock_sync(self, key: str) -> Iterator[None]:
        """Blocking variant of :meth:`lock` for code outside the event loop."""
        fd = self._open_lock(key)
        lock_file(fd, block=True)
        try:
            yield
        finally:
            self.unlock(fd)

    def keys(self) -> Iterator[str]:
        """Every stored key (for pruning and cassette export)."""
        if not self.root.is_dir():
            return
        for shard in sorted(self.root.iterdir()):
            if shard.is_dir():
                for entry in sorted(shard.glob("*.json")):
                    yield entry.stem
