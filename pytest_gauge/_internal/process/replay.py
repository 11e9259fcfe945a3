"""How a replay run uses its recording: the suite with the recorded models, and why requests
that found no recorded response may have missed (:mod:`pytest_gauge._internal.files.replay` is the file)."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from ..files.replay import RECORDING_FILE, Recording
from ..suite.declare import ModelAgent, Suite

__all__ = ["miss_message", "miss_reasons", "recorded_suite"]


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
    recording: Recording | None,
    models: Mapping[str, str | None],
    seed: int,
    hashes: Mapping[str, str],
    cassettes: str | None = None,
) -> list[str]:
    """Why a replayed request may have no recording: what differs between the recording and this run
    (``cassettes``: the folder, to name a missing ``recording.json``)."""
    path = Path(cassettes) / RECORDING_FILE if cassettes else None
    if recording is None and path is not None and not path.is_file():
        return [
            f"{path} is missing, so the recorded models, prompts and seed are unknown (not a cassettes "
            "folder, or exported before it was kept): export again with `python -m pytest_gauge cassettes "
            "export`"
        ]
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
