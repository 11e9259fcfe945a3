"""Self-contained replay (issue 14): what a cassette export records beside the responses, and how a
replay run uses it, so ``--gauge-backend=replay --gauge-cassettes DIR`` needs no ``TAOTOKEN_*`` or model
variable.

``DIR/recording.json`` holds, per suite, the gateway identity the responses were keyed by (the base URL
as recorded), the model of every role and agent as recorded, the run seed and the task and prompt
hashes of the recorded run (from its ``manifest.json``). On replay the suite's models and gateway are
taken from it; when requests are still missing, :func:`miss_reasons` names the likely causes.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..suite.declare import ModelAgent, Suite
from .readwrite import FileFormatError, read_json_object, write_atomic

__all__ = [
    "RECORDING_FILE",
    "Recording",
    "load_recording",
    "miss_message",
    "miss_reasons",
    "recorded_suite",
    "save_recording",
]

RECORDING_FILE = "recording.json"
RECORDING_FORMAT_VERSION = 1


@dataclass(frozen=True)
class Recording:
    """What replay needs about one recorded suite (see the module docstring)."""

    suite: str
    gateway: str | None
    models: Mapping[str, str | None] = field(default_factory=dict)
    seed: int | None = None
    hashes: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "gateway": self.gateway,
            "models": dict(sorted(self.models.items())),
            "seed": self.seed,
            "hashes": dict(sorted(self.hashes.items())),
        }


def load_recording(folder: str | os.PathLike[str], suite: str) -> Recording | None:
    """The suite's recording in a cassettes folder, or None (no file, or the suite is not in it)."""
    path = Path(folder) / RECORDING_FILE
    try:
        data = read_json_object(path)
    except FileFormatError:
        return None
    entry = (data.get("suites") or {}).get(suite)
    if not isinstance(entry, dict):
        return None
    return Recording(
        suite,
        entry.get("gateway"),
        dict(entry.get("models") or {}),
        entry.get("seed"),
        dict(entry.get("hashes") or {}),
    )


def save_recording(folder: str | os.PathLike[str], recording: Recording) -> Path:
    """Add (or replace) the suite's entry in ``folder/recording.json``; other suites' entries stay."""
    path = Path(folder) / RECORDING_FILE
    try:
        data = read_json_object(path)
    except FileFormatError:
        data = {}
    suites = dict(data.get("suites") or {})
    suites[recording.suite] = recording.to_json()
    doc = {"format_version": RECORDING_FORMAT_VERSION, "suites": dict(sorted(suites.items()))}
    write_atomic(path, json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    return path


def recorded_suite(suite: Suite, recording: Recording) -> Suite:
    """The suite with every model as recorded (agents by name, the user simulator, each judge model), so
    a replay in an environment without the model variables sends the recorded requests."""
    models = recording.models
    agents = [
        replace(a, model=str(models[f"agent:{a.name}"]))
        if isinstance(a, ModelAgent) and models.get(f"agent:{a.name}")
        else a
        for a in suite.agents
    ]
    judges = [models.get(f"judge:{i}") or m for i, m in enumerate(suite.judge.models())]
    out = copy.copy(suite)
    out.agents = tuple(agents)
    out.judge = replace(suite.judge, model=str(judges[0]), extra_models=tuple(str(m) for m in judges[1:]))
    user_model = models.get("user_sim")
    out.user = replace(suite.user, model=str(user_model)) if user_model else suite.user
    return out


def miss_reasons(
    recording: Recording | None, models: Mapping[str, str | None], seed: int, hashes: Mapping[str, str]
) -> list[str]:
    """Why a replayed request may have no recording: what differs between the recording and this run."""
    if recording is None:
        return [
            "the cassettes folder has no recording.json entry for this suite (exported before it was "
            "kept, or another suite's folder): re-export with `python -m pytest_gauge cassettes export`"
        ]
    reasons: list[str] = []
    now_models = dict(models)
    changed = [k for k, v in sorted(recording.models.items()) if now_models.get(k, v) != v]
    if changed:
        reasons.append("different model for " + ", ".join(changed))
    if recording.hashes.get("tasks") and hashes.get("tasks") and recording.hashes["tasks"] != hashes["tasks"]:
        reasons.append("changed task (tasks.jsonl differs from the recording's)")
    prompts = sorted(
        k
        for k, v in recording.hashes.items()
        if k != "tasks" and hashes.get(k) is not None and hashes[k] != v
    )
    if prompts:
        reasons.append("changed prompt (" + ", ".join(prompts) + ")")
    if recording.seed is not None and recording.seed != seed:
        reasons.append(f"changed seed ({seed}, recorded with {recording.seed})")
    return reasons or [
        "no difference in models, tasks, prompts or seed: the recording is incomplete "
        "(re-record with the cache on, then export again)"
    ]


def miss_message(suite: str, missing: Sequence[str], reasons: Sequence[str], shown: int = 5) -> str:
    """One message for every replay miss of a suite: how many, the first few, the likely reasons."""
    first = ", ".join(missing[:shown]) + (
        f" … and {len(missing) - shown} more" if len(missing) > shown else ""
    )
    return (
        f"replay: {len(missing)} case(s) of suite {suite} had requests with no recorded response ({first}). "
        f"Likely: {'; '.join(reasons)}."
    )
