"""Why a replayed request found no recording: the part of the request that differs
from the nearest recorded request of the same unit of work and model, so a program agent whose own
behaviour changed between the recording and the replay (another prompt, a new tool, a changed order)
is named, not just counted as a miss.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice
from typing import Any

from ..records.json_types import JSONObject
from .store import Store
from .wire import Api, wire_format

__all__ = ["differences", "explain_miss", "nearest_difference"]

SCANNED = 5000  # recorded entries looked at per miss, at most
SHOWN = 60  # characters of each side shown around the first difference
EXPLAINED = 3  # misses per process explained (each reads up to SCANNED entries)
_explained = [0]


def differences(a: Any, b: Any, path: str = "") -> Iterator[tuple[str, Any, Any]]:
    """Every leaf where ``a`` and ``b`` differ: (path such as ``messages[0].content``, a's, b's)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            yield from differences(a.get(key), b.get(key), f"{path}.{key}" if path else str(key))
    elif isinstance(a, list) and isinstance(b, list):
        for i in range(max(len(a), len(b))):
            yield from differences(a[i] if i < len(a) else None, b[i] if i < len(b) else None, f"{path}[{i}]")
    elif a != b:
        yield path or "(the request)", a, b


def _excerpt(value: Any, other: Any) -> str:
    """``value`` around where it starts to differ from ``other`` (strings), else its JSON-ish text."""
    if not isinstance(value, str) or not isinstance(other, str):
        return "(absent)" if value is None else repr(value)[: 2 * SHOWN]
    start = next(
        (i for i, (x, y) in enumerate(zip(value, other, strict=False)) if x != y), min(len(value), len(other))
    )
    lo = max(0, start - SHOWN // 3)
    return repr(("…" if lo else "") + value[lo : lo + SHOWN] + ("…" if lo + SHOWN < len(value) else ""))


def nearest_difference(cache: Store, work: str, model: str, api: Api, body: JSONObject) -> str | None:
    """The nearest recorded request of ``work`` and ``model`` (fewest differing parts of their cache
    material) and where it differs from ``body``, in one clause; None when nothing of that work and
    model is recorded."""
    fmt = wire_format(api)
    mine = fmt.cache_material(body)
    best: tuple[int, str, Any, Any] | None = None
    for key in islice(cache.keys(), SCANNED):
        entry = cache.get(key)
        meta = entry.get("meta") if isinstance(entry, dict) else None
        if not isinstance(meta, dict) or meta.get("work") != work or meta.get("model") != model:
            continue
        request = entry.get("request") if isinstance(entry, dict) else None
        if not isinstance(request, dict):
            continue
        try:
            found = list(differences(mine, fmt.cache_material(request)))
        except (TypeError, ValueError):  # a recording of another format
            continue
        if found and (best is None or len(found) < best[0]):
            best = (len(found), *found[0])
    if best is None:
        return None
    count, where, now, then = best
    return (
        f"the nearest recorded request of {work} differs in {count} part(s), first at {where}: "
        f"now {_excerpt(now, then)}, recorded {_excerpt(then, now)}"
    )


def explain_miss(cache: Store, work: str, model: str, api: Api, body: JSONObject) -> str | None:
    """:func:`nearest_difference` for the first :data:`EXPLAINED` misses of the process (a replay that
    misses everything is not slowed down by a scan per miss); None after them or on any failure."""
    if _explained[0] >= EXPLAINED:
        return None
    _explained[0] += 1
    try:
        return nearest_difference(cache, work, model, api, body)
    except (OSError, ValueError, TypeError):
        return None
