"""The response cache on disk between runs: pruning old, unpersisted and unreadable entries (and orphan
lock and temporary files), and merging other machines' caches into one. The run itself reads and writes
the cache through :class:`~.store.Store` in :mod:`.gateway`.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..files.readwrite import FileFormatError, read_json_object
from ..records.json_types import JSONObject
from .store import Store

__all__ = ["TMP_GRACE_SECONDS", "CacheMergeResult", "PruneResult", "merge_caches", "prune_cache"]

TMP_GRACE_SECONDS = 60.0


@dataclass(frozen=True)
class PruneResult:
    """Counts from a prune: entries removed by reason, entries kept, and orphan lock/tmp files removed."""

    removed_old: int
    removed_unpersisted: int
    removed_unreadable: int
    kept: int
    removed_files: int
    busy: int

    @property
    def removed(self) -> int:
        """Every response entry removed."""
        return self.removed_old + self.removed_unpersisted + self.removed_unreadable


def _read_entry(path: Path) -> JSONObject | None:
    try:
        return read_json_object(path)
    except FileFormatError:
        return None


def prune_cache(
    cache_dir: str | os.PathLike[str],
    older_than_days: float,
    now: float | None = None,
    tmp_grace: float = TMP_GRACE_SECONDS,
) -> PruneResult:
    """Delete response entries created more than ``older_than_days`` ago, non-persisted and unreadable
    entries, orphan ``.lock`` files and stale ``.tmp`` files. An entry whose lock is held is left alone.
    Do not run it while a pytest-gauge run is using the same cache."""
    now = time.time() if now is None else now
    cutoff = now - older_than_days * 86400.0
    store = Store(Path(cache_dir) / "responses")
    old = unpersisted = unreadable = kept = files = busy = 0
    for key in list(store.keys()):
        entry = _read_entry(store.path(key))
        created = entry.get("created") if entry is not None else None
        if entry is None:
            reason = "unreadable"
        elif not entry.get("persist"):
            reason = "unpersisted"
        elif isinstance(created, (int, float)) and created < cutoff:
            reason = "old"
        else:
            kept += 1
            continue
        fd = store.try_lock(key)
        if fd is None:  # a run is writing this key right now
            busy += 1
            kept += 1
            continue
        try:
            store.delete(key)
            (store.root / key[:2] / f"{key}.lock").unlink(missing_ok=True)  # part of the entry, not counted
        finally:
            Store.unlock(fd)
        old += reason == "old"
        unpersisted += reason == "unpersisted"
        unreadable += reason == "unreadable"
    if store.root.is_dir():
        for shard in sorted(p for p in store.root.iterdir() if p.is_dir()):
            for path in sorted(shard.iterdir()):
                if path.suffix == ".lock" and not path.with_suffix(".json").exists():
                    fd = store.try_lock(path.stem)
                    if fd is None:
                        continue
                    try:
                        path.unlink(missing_ok=True)
                        files += 1
                    finally:
                        Store.unlock(fd)
                elif path.suffix == ".tmp":
                    with contextlib.suppress(FileNotFoundError):
                        if now - path.stat().st_mtime > tmp_grace:
                            path.unlink()
                            files += 1
            with contextlib.suppress(OSError):
                shard.rmdir()  # only succeeds when empty
    return PruneResult(old, unpersisted, unreadable, kept, files, busy)


@dataclass(frozen=True)
class CacheMergeResult:
    """What a cache merge did: entries copied, entries the destination had already."""

    copied: int
    kept: int


def merge_caches(
    sources: Sequence[str | os.PathLike[str]], cache_dir: str | os.PathLike[str]
) -> CacheMergeResult:
    """Copy each source cache's responses that ``cache_dir`` lacks (content-addressed: same key, same
    request; the entry already there wins)."""
    dest = Store(Path(cache_dir) / "responses")
    copied = kept = 0
    for source in sources:
        store = Store(Path(source) / "responses")
        for key in store.keys():
            entry = store.get(key)
            if entry is None:
                continue
            if dest.get(key) is not None:
                kept += 1
                continue
            dest.put(key, entry)
            copied += 1
    return CacheMergeResult(copied, kept)
