"""A shard's share of the run from the process's state and options, where the wiring is: the tasks a
shard runs (from the suite's declaration) and the options as the plain JSON ``shard.json`` keeps
(:mod:`pytest_gauge._internal.files.shards` takes these values)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from ..files.shards import Shard, task_weights, tasks_of
from ..options import GaugeOptions
from .state import SuiteEntry

__all__ = ["options_json", "suite_shard_tasks"]


def suite_shard_tasks(entry: SuiteEntry, shard: Shard) -> frozenset[str]:
    """The tasks of ``entry`` that ``shard`` runs (computed from all of the suite's cases, so every
    shard and every xdist worker agrees)."""
    s = entry.suite
    turns = {t.task_id: t.max_turns or s.user.max_turns for t in entry.tasks}
    cases = [(c.task_id, c.left, c.right, c.sample) for c in entry.cases]
    weights = task_weights(turns, cases, (s.judge.repeats, len(s.judge.models())))
    return tasks_of(weights, shard)


def options_json(opts: GaugeOptions) -> dict[str, Any]:
    """Every option as plain JSON (what the merge reuses), without folders and per-machine settings."""
    data = dataclasses.asdict(opts)
    for key in ("out_dir", "cache_dir", "cassettes", "progress", "shard", "limits", "run_id", "history"):
        data.pop(key, None)
    plain: dict[str, Any] = json.loads(json.dumps(data))  # tuples as lists, as they are read back
    return plain
