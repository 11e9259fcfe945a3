"""Self-contained replay: what a cassette export records beside the responses, so
``--gauge-backend=replay --gauge-cassettes DIR`` needs no ``TAOTOKEN_*`` or model variable. How a replay
run uses it is :mod:`pytest_gauge._internal.process.replay`; the export is
:mod:`pytest_gauge._internal.gateway.cassettes`.

``DIR/recording.json`` holds, per suite, the gateway identity the responses were keyed by (the base URL
as recorded), the model of every role and agent as recorded, the run seed and the task and prompt
hashes of the recorded run (from its ``manifest.json``). On replay the suite's models and gateway are
taken from it; when requests are still missing, ``miss_reasons`` names the likely causes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from .readwrite import FileFormatError, read_json_object, write_atomic

__all__ = [
    "RECORDING_FILE",
    "Recording",
    "RecordingError",
    "RecordingJSON",
    "load_recording",
    "save_recording",
]

RECORDING_FILE = "recording.json"
RECORDING_FORMAT_VERSION = 1


class RecordingJSON(TypedDict):
    """One suite's entry of ``recording.json`` (:meth:`Recording.to_json`)."""

    gateway: str | None
    models: dict[str, str | None]
    seed: int | None
    hashes: dict[str, str]


@dataclass(frozen=True)
class Recording:
    """What replay needs about one recorded suite (see the module docstring)."""

    suite: str
    gateway: str | None
    models: Mapping[str, str | None] = field(default_factory=dict)
    seed: int | None = None
    hashes: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> RecordingJSON:
        return {
            "gateway": self.gateway,
            "models": dict(sorted(self.models.items())),
            "seed": self.seed,
            "hashes": dict(sorted(self.hashes.items())),
        }


class RecordingError(ValueError):
    """A ``recording.json`` that is there but cannot be used: the message names the file and the field."""


def load_recording(folder: str | os.PathLike[str], suite: str) -> Recording | None:
    """The suite's recording in a cassettes folder, or None (no file, or the suite is not in it);
    :class:`RecordingError` naming the file when it is damaged or holds the wrong types."""
    path = Path(folder) / RECORDING_FILE
    if not path.exists():
        return None
    try:
        data = read_json_object(path)
    except FileFormatError as exc:
        raise RecordingError(f"{path}: damaged ({exc}): export the cassettes again") from None
    suites = data.get("suites") or {}
    entry = suites.get(suite) if isinstance(suites, dict) else None
    if not isinstance(entry, dict):
        return None
    for key, kind in (("models", dict), ("hashes", dict), ("gateway", (str, type(None)))):
        if key in entry and entry[key] is not None and not isinstance(entry[key], kind):
            raise RecordingError(f"{path}: suites.{suite}.{key} is {type(entry[key]).__name__}: wrong type")
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
