"""The response cache's prune, pure: old, unpersisted, unreadable and orphan files go, the rest stays; a
missing cache is a no-op."""

from __future__ import annotations

import os
from pathlib import Path

from pytest_gauge._internal.gateway.cache import prune_cache
from pytest_gauge._internal.gateway.store import Store, content_key
from tests.unit.gateway.test_cassettes import NOW, entry, put

DAY = 86400.0


def test_prune_removes_old_unpersisted_unreadable_and_orphans_and_keeps_the_rest(tmp_path: Path) -> None:
    cache = tmp_path / "c"
    store = Store(cache / "responses")
    fresh = put(cache, entry("s", "fresh", created=NOW - 2 * DAY))
    old = put(cache, entry("s", "old", created=NOW - 10 * DAY))
    unpersisted = put(cache, entry("s", "trunc", persist=False, created=NOW))
    undated = put(cache, entry("s", "undated") | {"created": None})
    corrupt = content_key("corrupt")
    store.path(corrupt).parent.mkdir(parents=True, exist_ok=True)
    store.path(corrupt).write_text("{not json", encoding="utf-8")
    held = put(cache, entry("s", "held", created=NOW - 30 * DAY))
    orphan_lock = store.root / "ab" / f"ab{'0' * 62}.lock"
    orphan_lock.parent.mkdir(parents=True, exist_ok=True)
    orphan_lock.touch()
    kept_lock = store.root / fresh[:2] / f"{fresh}.lock"
    kept_lock.touch()
    stale_tmp = store.root / fresh[:2] / f".{fresh}.json.123.tmp"
    stale_tmp.write_text("partial", encoding="utf-8")
    os.utime(stale_tmp, (NOW - 3600, NOW - 3600))
    live_tmp = store.root / fresh[:2] / f".{fresh}.json.456.tmp"
    live_tmp.write_text("partial", encoding="utf-8")
    os.utime(live_tmp, (NOW - 5, NOW - 5))
    fd = store.try_lock(held)
    assert fd is not None
    try:
        result = prune_cache(cache, 7, now=NOW)
    finally:
        Store.unlock(fd)
    assert (result.removed_old, result.removed_unpersisted, result.removed_unreadable) == (1, 1, 1)
    assert result.kept == 3 and result.busy == 1  # fresh, undated, and the locked old one
    assert result.removed_files == 2  # the orphan lock and the stale tmp file
    assert set(store.keys()) == {fresh, undated, held}
    assert store.get(old) is None and store.get(unpersisted) is None and not store.path(corrupt).exists()
    assert kept_lock.exists() and live_tmp.exists() and not stale_tmp.exists()
    assert not orphan_lock.exists() and not orphan_lock.parent.exists()  # the emptied shard went too


def test_prune_of_a_missing_cache_is_a_no_op(tmp_path: Path) -> None:
    result = prune_cache(tmp_path / "nothing", 1, now=NOW)
    assert (result.removed, result.kept, result.removed_files) == (0, 0, 0)
