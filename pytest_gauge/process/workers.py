"""xdist workers and the controller's run folder: a worker writes its suites' metadata, ledger lines and
transcripts into the controller's run folder (``<out>/.gauge-run/<run id>``), so it must see it.

A local worker started in another folder (``--tx popen//chdir=DIR``) is given the controller's output
and cache folders and works. A worker on another machine (``ssh=``, ``socket=``) cannot see them: it
stops at collection with an error naming ``--gauge-shard``, never a silent run without outputs or gates.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..options import GaugeOptions

__all__ = [
    "CONTROLLER_MARK",
    "controller_paths",
    "mark_controller",
    "remote_worker_problem",
    "worker_options",
]

CONTROLLER_MARK = "controller"


def controller_paths(options: GaugeOptions) -> dict[str, str]:
    """What the controller passes each worker (``workerinput``): its absolute output and cache folders."""
    return {"gauge_out_dir": options.out_dir, "gauge_cache_dir": options.cache_dir}


def worker_options(options: GaugeOptions, workerinput: Mapping[str, Any]) -> GaugeOptions:
    """The worker's options with the controller's folders (not ones resolved from its own directory)."""
    out = workerinput.get("gauge_out_dir")
    cache = workerinput.get("gauge_cache_dir")
    if not out:
        return options
    return dataclasses.replace(options, out_dir=str(out), cache_dir=str(cache or options.cache_dir))


def mark_controller(run_dir: Path) -> None:
    """Leave a mark in the run folder, before any worker starts, that workers look for."""
    run_dir.mkdir(parents=True, exist_ok=True)
    mark = run_dir / CONTROLLER_MARK
    if not mark.exists():
        mark.write_text(f"{os.getpid()}\n", encoding="utf-8")


def remote_worker_problem(run_dir: Path, worker_id: str, workerinput: Mapping[str, Any]) -> str | None:
    """Why this worker cannot take part in the run (it does not see the controller's run folder), or
    None. A worker of a controller without this plugin's ``workerinput`` is not checked."""
    if not workerinput.get("gauge_out_dir") or (run_dir / CONTROLLER_MARK).is_file():
        return None
    return (
        f"pytest-gauge: xdist worker {worker_id} cannot see the controller's run folder {run_dir}: it runs"
        " on another machine or filesystem (--tx ssh=/socket=). pytest-gauge's xdist workers share the"
        " controller's run folder (ledgers, transcripts), so its cases would be lost. Use -n N for local"
        " workers; to spread a suite across machines run one shard per machine with --gauge-shard I/N and"
        " gate them with 'python -m pytest_gauge merge SHARD_DIRS... --out DIR'."
    )
