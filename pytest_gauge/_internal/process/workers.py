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

import pytest

from ..files.folders import RunFolder
from ..options import GaugeOptions

__all__ = [
    "OPTIONS_KEY",
    "PROXY_TOKEN_KEY",
    "controller_paths",
    "mark_controller",
    "remote_worker_problem",
    "worker_options",
]


OPTIONS_KEY = "gauge_options"
PROXY_TOKEN_KEY = "gauge_proxy_token"
"""The run's recording-proxy token in ``workerinput``: made once on the controller, the same in every
worker (docs/protocol.md#the-recording-proxy); never in the options, which are written to files."""
# Settings a worker's own view of the ini and command line must agree on with the controller's: they
# change records or reports (folders and per-machine settings may differ, e.g. ``--tx popen//chdir=``).
_AGREED = (
    "backend",
    "seed",
    "cache_mode",
    "close_threshold",
    "familywise",
    "gates",
    "genai_prices",
    "bootstrap_rounds",
    "max_retries",
    "budget_usd",
    "budget_tokens",
    "budget_task_usd",
)


def controller_paths(options: GaugeOptions, proxy_token: str | None = None) -> dict[str, Any]:
    """What the controller passes each worker (``workerinput``): every resolved option (the worker runs
    with these, never with its own reading of the ini), its absolute output folder and the run's proxy
    token."""
    given = {"gauge_out_dir": options.out_dir, OPTIONS_KEY: options.to_json()}
    return given if proxy_token is None else {**given, PROXY_TOKEN_KEY: proxy_token}


def _disagreement(own: GaugeOptions, given: GaugeOptions) -> list[str]:
    """The result-changing settings on which a worker's own resolution differs from the controller's."""
    names = [n for n in _AGREED if getattr(own, n) != getattr(given, n)]
    if [row[:3] for row in own.prices] != [row[:3] for row in given.prices]:
        names.append("prices")
    return names


def worker_options(options: GaugeOptions, workerinput: Mapping[str, Any]) -> GaugeOptions:
    """The controller's options (``workerinput``), not the worker's own reading of its ini and command line;
    a worker whose reading differs in a setting that changes results refuses to start (UsageError)."""
    data = workerinput.get(OPTIONS_KEY)
    if not isinstance(data, dict):
        out = workerinput.get("gauge_out_dir")
        return dataclasses.replace(options, out_dir=str(out)) if out else options
    given = GaugeOptions.from_json(data)
    differ = _disagreement(options, given)
    if differ:
        worker = workerinput.get("workerid", "?")
        shown = ", ".join(f"{n} {getattr(options, n)!r} (controller {getattr(given, n)!r})" for n in differ)
        raise pytest.UsageError(
            f"pytest-gauge: xdist worker {worker} reads other settings than the controller: {shown}; its"
            " ini file or command line differs: give the controller's ini file with -c FILE"
        )
    out = workerinput.get("gauge_out_dir")  # the controller's folder (a remote worker cannot see it)
    return dataclasses.replace(given, out_dir=str(out)) if out else given


def mark_controller(run_dir: Path) -> None:
    """Leave a mark in the run folder, before any worker starts, that workers look for."""
    run_dir.mkdir(parents=True, exist_ok=True)
    mark = RunFolder(run_dir).controller
    if not mark.exists():
        mark.write_text(f"{os.getpid()}\n", encoding="utf-8")


def remote_worker_problem(run_dir: Path, worker_id: str, workerinput: Mapping[str, Any]) -> str | None:
    """Why this worker cannot take part in the run (it does not see the controller's run folder), or
    None. A worker of a controller without this plugin's ``workerinput`` is not checked."""
    if not workerinput.get("gauge_out_dir") or RunFolder(run_dir).controller.is_file():
        return None
    return (
        f"pytest-gauge: xdist worker {worker_id} cannot see the controller's run folder {run_dir}: it runs"
        " on another machine or filesystem (--tx ssh=/socket=). pytest-gauge's xdist workers share the"
        " controller's run folder (ledgers, transcripts), so its cases would be lost. Use -n N for local"
        " workers; to spread a suite across machines run one shard per machine with --gauge-shard I/N and"
        " gate them with 'python -m pytest_gauge merge SHARD_DIRS... --out DIR'."
    )
