"""The run's work store, ``<run folder>/work``: each transcript (task, agent, sample) and judgment of the
run is produced once, by whichever process claims it, and read by every process that needs it (so both
orders of a pair judge the same bytes and an agent in three pairs runs once), with no file created per
unit: creating a file costs hundreds of microseconds of CPU on many disks, and a run has thousands of
units. The format (docs/architecture.md#the-run-folder):

* ``claims/<key>.lock``, one empty file per unit claimed: a unit's claim is an exclusive lock on its
  file (:mod:`pytest_gauge._internal.files.locks`: ``flock`` on Linux and macOS, ``LockFileEx`` on Windows,
  through ``filelock``), held on a descriptor opened for the claim and closed with it. The operating system
  drops a process's locks when it dies, so a killed worker never leaves a stale claim. A claim file is
  created only when a process claims a unit while another process may (under xdist: a process alone in
  its run claims in memory, see below), and is never removed (a removed lock file lets two processes
  lock two files of one name). The process tracks the keys it holds (a held one is not available).
* ``<writer>-<pid>.log``, one per process that wrote entries: one line per entry, ``<key> <canonical
  JSON>\\n``, appended with one ``write`` (looped on a short write) to an ``O_APPEND`` descriptor. A
  reader reads every log of the folder on from where it stopped and indexes complete lines only (a
  line without its newline is still being written, or its writer died); an entry's JSON is parsed when
  it is asked for. A line whose JSON does not parse is a damaged entry: a miss, noted in
  ``unreadable``. When a key has several lines, the last one read wins.

A process alone in its run (no xdist, or one worker) keeps its entries in memory instead
(:meth:`WorkStore.keep`): every ``WorkStore`` over the same folder in the process sees them, as long as
the instance that kept them lives.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import weakref
from pathlib import Path

from ..records import dumps
from ..records.json_types import JSONObject
from .locks import lock_file, unlock_file

__all__ = ["WorkStore"]

CLAIMS = "claims"
"""The claims folder's name in the work folder (one ``<key>.lock`` per claimed unit)."""
LOG_SUFFIX = ".log"
"""How an entry log's name ends (``<writer>-<pid>.log``)."""
_CHUNK = 1 << 20  # bytes read from a log at once (doubled for a longer line)


class _Kept(dict[str, JSONObject]):
    """Entries of one work folder held in this process's memory (a dict that can be weakly referenced)."""


_KEPT: weakref.WeakValueDictionary[str, _Kept] = weakref.WeakValueDictionary()


_HEX = frozenset("0123456789abcdef")


def _claim_name(key: str) -> str:
    """The claim file's name of ``key``: the key itself when it is a hex digest (the engine's keys),
    else its sha256, so any key makes a safe file name."""
    if 0 < len(key) <= 64 and _HEX.issuperset(key):
        return key + ".lock"
    return hashlib.sha256(key.encode("utf-8")).hexdigest() + ".lock"


def _pread(fd: int, length: int, offset: int) -> bytes:
    """``os.pread`` where it exists; elsewhere (Windows) a seek and a read, safe under the folder's mutex
    (every read of a log descriptor holds it)."""
    if hasattr(os, "pread"):
        return os.pread(fd, length, offset)
    os.lseek(fd, offset, os.SEEK_SET)
    return os.read(fd, length)


class _Log:
    """One entry log being read: its descriptor and the offset just past its last complete line."""

    __slots__ = ("done", "fd")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.done = 0


def _close_all(fds: list[int], claims: dict[int, str]) -> None:
    for fd in [*fds, *claims]:
        try:
            os.close(fd)
        except OSError:
            pass


class _Folder:
    """What every ``WorkStore`` over one folder shares in this process: the claims held (claim file name
    → its locked descriptor), this process's own log, and the index of every line read so far (key →
    log, offset, length). One per folder and process, so two stores of a process never claim one key."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.mutex = threading.Lock()  # the engine's loop thread and the main thread may both read
        self.held: dict[str, int] = {}  # claim file name -> its locked descriptor
        self._held_names: dict[int, str] = {}  # the same, descriptor -> name
        self.index: dict[str, tuple[_Log, int, int]] = {}
        self._logs: dict[str, _Log] = {}
        self._claims_made = False  # the claims folder exists
        self._out: int | None = None
        self._outs = 0  # logs this process has opened for writing (a new one after a failed write)
        self._fds: list[int] = []  # closed when no store of the folder is left
        weakref.finalize(self, _close_all, self._fds, self._held_names)

    def _open(self, name: str, flags: int) -> int:
        fd = os.open(os.path.join(self.root, name), flags, 0o644)
        self._fds.append(fd)
        return fd

    # ----- claims ---------------------------------------------------------------------------
    def try_lock(self, name: str) -> int | None:
        """Lock the claim file ``name`` without waiting: its descriptor, or None if held (here or
        elsewhere)."""
        with self.mutex:
            if name in self.held:
                return None
            claims = os.path.join(self.root, CLAIMS)
            if not self._claims_made:
                os.makedirs(claims, exist_ok=True)
                self._claims_made = True
            fd = os.open(os.path.join(claims, name), os.O_RDWR | os.O_CREAT, 0o644)
            try:
                locked = lock_file(fd, block=False)
            except BaseException:
                os.close(fd)
                raise
            if not locked:
                os.close(fd)
                return None
            self.held[name] = fd
            self._held_names[fd] = name
            return fd

    def unlock(self, fd: int) -> None:
        """Give back the claim whose descriptor is ``fd`` (unknown ones are ignored)."""
        with self.mutex:
            name = self._held_names.pop(fd, None)
            if name is None:
                return
            del self.held[name]
            try:
                unlock_file(fd)
            finally:
                os.close(fd)

    # ----- entries --------------------------------------------------------------------------
    def append(self, line: bytes, writer: str) -> None:
        """Append one whole line to this process's log. If a write fails part way, the log is left
        (its last line stays incomplete, so no reader takes it) and the next entry starts a new one."""
        with self.mutex:
            if self._out is None:
                os.makedirs(self.root, exist_ok=True)
                suffix = f"-{self._outs}" if self._outs else ""
                name = f"{writer}-{os.getpid()}{suffix}{LOG_SUFFIX}"
                self._out = self._open(name, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
                self._outs += 1
            view = memoryview(line)
            written = 0
            try:
                while written < len(line):
                    written += os.write(self._out, view[written:])
            except BaseException:
                if written:
                    self._out = None
                raise

    def entry(self, key: str, *, fresh: bool) -> bytes | None:
        """The raw JSON of the key's entry, or None; ``fresh``: read what the logs gained first."""
        with self.mutex:
            if fresh:
                self._refresh()
            where = self.index.get(key)
            if where is None:
                return None
            log, offset, length = where
            return _pread(log.fd, length, offset)

    def refresh(self) -> bool:
        """Read what the logs gained; whether they gained any entry."""
        with self.mutex:
            known = len(self.index)
            self._refresh()
            return len(self.index) > known

    def _refresh(self) -> None:
        """Read every log of the folder on from where it was last read (new logs from the start)."""
        try:
            names = os.listdir(self.root)
        except FileNotFoundError:
            return
        for name in names:
            if not name.endswith(LOG_SUFFIX):
                continue
            log = self._logs.get(name)
            if log is None:
                try:
                    log = self._logs[name] = _Log(self._open(name, os.O_RDONLY))
                except FileNotFoundError:
                    continue
            self._read(log)

    def _read(self, log: _Log) -> None:
        """Index the complete lines the log gained since it was last read."""
        size = _CHUNK
        while True:
            data = _pread(log.fd, size, log.done)
            end = data.rfind(b"\n")
            if end < 0:
                if len(data) < size:
                    return  # nothing new, or an incomplete last line
                size *= 2  # a line longer than the chunk: read it whole
                continue
            self._index(log, data, end)
            log.done += end + 1
            if len(data) < size:
                return

    def _index(self, log: _Log, data: bytes, end: int) -> None:
        """Index the lines of ``data[: end + 1]``, read at ``log.done`` (a line without a key is skipped)."""
        pos = 0
        while pos <= end:
            newline = data.index(b"\n", pos)
            sep = data.find(b" ", pos, newline)
            if sep > pos:
                key = data[pos:sep].decode("utf-8", "replace")
                self.index[key] = (log, log.done + sep + 1, newline - sep - 1)
            pos = newline + 1


_FOLDERS: weakref.WeakValueDictionary[str, _Folder] = weakref.WeakValueDictionary()
_FOLDERS_MUTEX = threading.Lock()


def _folder(root: str) -> _Folder:
    """The process's one ``_Folder`` of ``root`` (an absolute path, so two spellings share it)."""
    with _FOLDERS_MUTEX:
        folder = _FOLDERS.get(root)
        if folder is None:
            folder = _FOLDERS[root] = _Folder(root)
        return folder


class WorkStore:
    """The run's work store over ``root`` (see the module docstring): ``get`` / ``put`` of JSON entries,
    ``try_lock`` / ``unlock`` of claims, ``keep`` for a process alone in its run. ``writer`` names this
    process's log (its xdist worker id)."""

    def __init__(self, root: str | os.PathLike[str], writer: str = "main") -> None:
        self.root = Path(root)
        self._root = os.fspath(self.root)
        self._writer = writer
        self._folder = _folder(os.path.abspath(self._root))
        self._kept: _Kept | None = None  # entries this instance keeps in memory (see keep)
        self.unreadable: set[str] = set()  # keys whose last line is not a JSON object (damaged)

    def keep(self, key: str, value: JSONObject) -> None:
        """Hold the entry in memory instead of writing it, for a store no other process reads; every
        ``WorkStore`` over this folder in this process sees it while this instance lives."""
        if self._kept is None:
            self._kept = _KEPT.setdefault(self._root, _Kept())
        self._kept[key] = value

    def get(self, key: str, fresh: bool = True) -> JSONObject | None:
        """The entry, or None when absent (or unreadable, which counts as absent). The logs are read
        again only when the key is not known yet (or its known line is damaged), and with ``fresh``."""
        kept = _KEPT.get(self._root)
        if kept is not None and key in kept:
            return kept[key]
        value = self._parse(key, self._folder.entry(key, fresh=False))
        if value is None and fresh:
            value = self._parse(key, self._folder.entry(key, fresh=True))
        return value

    def _parse(self, key: str, raw: bytes | None) -> JSONObject | None:
        if raw is None:
            return None
        try:
            value = json.loads(raw)
        except ValueError:  # not UTF-8 or not JSON: a miss, noted as damaged
            self.unreadable.add(key)
            return None
        if not isinstance(value, dict):
            self.unreadable.add(key)
            return None
        self.unreadable.discard(key)
        return value

    def refresh(self) -> bool:
        """Read the entries other processes appended since the logs were last read; whether there
        were any (the engine wakes the units that wait for another process's work on it)."""
        return self._folder.refresh()

    def put(self, key: str, value: JSONObject) -> None:
        """Append the entry to this process's log: one line, written whole with one ``write``."""
        if " " in key or "\n" in key:
            raise ValueError(f"a work store key has no space or newline: {key!r}")
        self._folder.append(f"{key} {dumps(value)}\n".encode(), self._writer)

    def try_lock(self, key: str) -> int | None:
        """Claim the key without waiting: a token to :meth:`unlock`, or None if any process (this one
        included) holds its claim."""
        return self._folder.try_lock(_claim_name(key))

    def unlock(self, token: int) -> None:
        """Give the claim back (other processes may take it at once)."""
        self._folder.unlock(token)
