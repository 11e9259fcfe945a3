"""Task shards (``--gauge-shard I/N``): which of a suite's tasks this run takes, and the shard manifest
that ``python -m pytest_gauge merge`` checks before it gates the whole suite.

Tasks, not cases, are split: every case of a task (every pair, both orders, every sample and tier) is
in one shard, so each transcript is produced once and both orders judge the same transcripts. The split
depends only on the task set (the tasks' ids and expected calls), never on file order: tasks go, most
expensive first (ties by a hash of the id), to the shard with the fewest expected calls so far.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .folders import SuiteFolder
from .readwrite import write_atomic

if TYPE_CHECKING:
    from ..records import SuiteMeta

__all__ = [
    "RESULT_OPTIONS",
    "Shard",
    "ShardError",
    "assign_tasks",
    "expected_calls",
    "parse_shard",
    "shard_from",
    "tasks_of",
    "write_shard_manifest",
]

# GaugeOptions fields that change records, metrics or reports: shards merged together must agree on them.
RESULT_OPTIONS = (
    "backend",
    "seed",
    "cache_mode",
    "close_threshold",
    "familywise",
    "gates",
    "prices",
    "genai_prices",
    "bootstrap_rounds",
    "baseline",
    "max_retries",
    "budget_usd",
    "budget_tokens",
    "budget_task_usd",
)


class ShardError(ValueError):
    """A shard setting that cannot be used; the message names where it came from and the fix."""


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` (1-based) of ``count``."""

    index: int
    count: int

    @property
    def label(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str, source: str = "--gauge-shard") -> Shard:
    """``I/N`` with 1 <= I <= N."""
    parts = text.strip().split("/")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise ShardError(f"{source}: expected I/N (e.g. 2/3), got {text!r}")
    index, count = int(parts[0]), int(parts[1])
    if count < 1 or not 1 <= index <= count:
        raise ShardError(f"{source}: shard {text!r} is not between 1/{max(count, 1)} and {count}/{count}")
    return Shard(index, count)


def shard_from(option: str | None, environ: Mapping[str, str]) -> Shard | None:
    """The run's shard: ``--gauge-shard``, else ``GAUGE_SHARD``, else Kubernetes' 0-based
    ``JOB_COMPLETION_INDEX`` with ``GAUGE_SHARD_COUNT``; None when none is set."""
    if option:
        return parse_shard(option)
    if environ.get("GAUGE_SHARD", "").strip():
        return parse_shard(environ["GAUGE_SHARD"], "GAUGE_SHARD")
    index = environ.get("JOB_COMPLETION_INDEX", "").strip()
    count = environ.get("GAUGE_SHARD_COUNT", "").strip()
    if not count:
        return None
    if not index.isdigit() or not count.isdigit():
        raise ShardError(
            f"JOB_COMPLETION_INDEX={index!r} with GAUGE_SHARD_COUNT={count!r}: both must be whole numbers"
            " (the Indexed Job's completion index, from 0, and its completions)"
        )
    return parse_shard(f"{int(index) + 1}/{count}", "JOB_COMPLETION_INDEX/GAUGE_SHARD_COUNT")


def expected_calls(cases: int, transcripts: int, turns: int, judge_repeats: int, judge_models: int) -> int:
    """A task's expected calls: each transcript's dialogue (an agent and a user-simulator call per turn)
    and each case's judge calls (every repeat of every judge model)."""
    return transcripts * 2 * max(turns, 1) + cases * max(judge_repeats, 1) * max(judge_models, 1)


def _tie_break(task_id: str) -> str:
    return hashlib.sha256(task_id.encode("utf-8")).hexdigest()


def assign_tasks(weights: Mapping[str, int], count: int) -> dict[str, int]:
    """Each task's shard (1-based), balanced by weight (expected calls), independent of the order of
    ``weights``: heaviest task first, ties by a hash of the id, each to the least loaded shard (ties to
    the lowest index)."""
    loads = [0] * count
    out: dict[str, int] = {}
    for task_id in sorted(weights, key=lambda t: (-weights[t], _tie_break(t), t)):
        target = min(range(count), key=lambda i: (loads[i], i))
        loads[target] += weights[task_id]
        out[task_id] = target + 1
    return out


def tasks_of(weights: Mapping[str, int], shard: Shard) -> frozenset[str]:
    """The tasks of ``shard``."""
    return frozenset(t for t, s in assign_tasks(weights, shard.count).items() if s == shard.index)


def task_weights(
    task_turns: Mapping[str, int], case_tasks: Iterable[tuple[str, str, str, int]], judge: tuple[int, int]
) -> dict[str, int]:
    """Expected calls per task from its cases ``(task, left, right, sample)``, its turns and the judge's
    ``(repeats, models)``."""
    cases: dict[str, int] = {}
    transcripts: dict[str, set[tuple[str, int]]] = {}
    for task_id, left, right, sample in case_tasks:
        cases[task_id] = cases.get(task_id, 0) + 1
        transcripts.setdefault(task_id, set()).update({(left, sample), (right, sample)})
    return {
        t: expected_calls(cases.get(t, 0), len(transcripts.get(t, ())), turns, *judge)
        for t, turns in task_turns.items()
    }


def write_shard_manifest(
    out: Path,
    meta: SuiteMeta,
    shard: Shard,
    options: Mapping[str, Any],
    manifest: Mapping[str, Any],
    *,
    interrupted: bool,
) -> None:
    """``<suite>/shard.json`` (beside the ``manifest`` just written, given in memory): which shard of how
    many, the tasks it ran, the seed, task-set and prompt hashes and versions, the options (as plain
    JSON) and the suite's metadata, for ``merge``."""
    doc = {
        "format_version": 1,
        "suite": meta.name,
        "shard": shard.label,
        "index": shard.index,
        "count": shard.count,
        "tasks": list(meta.shard_tasks or []),
        "interrupted": interrupted,
        "seed": manifest.get("seed"),
        "hashes": manifest.get("hashes"),
        "versions": manifest.get("versions"),
        "options": dict(options),
        "meta": meta.to_json(),
    }
    write_atomic(SuiteFolder(out).shard, json.dumps(doc, sort_keys=True, ensure_ascii=False, indent=1) + "\n")
