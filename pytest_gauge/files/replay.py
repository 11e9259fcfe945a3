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
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..gateway.endpoint import KEY_VARIABLE
from ..gateway.store import Store
from ..suite.declare import ModelAgent, Suite
from .readwrite import FileFormatError, read_json_object, write_atomic

__all__ = [
    "DROPPED_FIELDS",
    "RECORDING_FILE",
    "ExportResult",
    "Recording",
    "export_cassettes",
    "load_recording",
    "miss_message",
    "miss_reasons",
    "recorded_suite",
    "save_recording",
    "scrub_entry",
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


# ------------------------------------------------------------------------------------ cassettes export

DROPPED_FIELDS = frozenset({"run_id", "created"})
_SECRET_NAME = re.compile(r"authorization|api_?key|headers?$|^cookie$|^set_cookie$")


def _secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name.lower().replace("-", "_")))


def scrub_entry(entry: Mapping[str, Any]) -> dict[str, Any]:
    """The entry for review: no ``run_id``/``created``, and no authorization/api-key/headers field at the top
    level of the entry, its ``meta``, ``request`` or ``response`` (the only places the SDK could put one)."""
    out: dict[str, Any] = {}
    for name, value in entry.items():
        if name in DROPPED_FIELDS or _secret_name(name):
            continue
        if name in ("meta", "request", "response") and isinstance(value, dict):
            value = {k: v for k, v in value.items() if not _secret_name(k)}
        out[name] = value
    return out


def _has_secret_field(entry: Mapping[str, Any]) -> bool:
    parts: list[Mapping[str, Any]] = [entry]
    parts += [entry[k] for k in ("meta", "request", "response") if isinstance(entry.get(k), dict)]
    return any(_secret_name(name) for part in parts for name in part) or bool(DROPPED_FIELDS & set(entry))


@dataclass(frozen=True)
class ExportResult:
    """What an export wrote: the keys exported, the suites present in the cache, and keys refused."""

    exported: tuple[str, ...]
    suites_seen: tuple[str, ...]
    refused: tuple[str, ...]


def _review_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def _readme(dest: Store) -> str:
    rows = []
    for key in dest.keys():
        entry = dest.get(key)
        meta = entry.get("meta") if entry is not None else None
        if not isinstance(meta, dict):
            continue
        rows.append(
            (
                str(meta.get("suite")),
                str(meta.get("role")),
                str(meta.get("model")),
                str(meta.get("task_id")),
                str(meta.get("work")),
                f"{key[:2]}/{key}.json",
            )
        )
    lines = [
        "# Cassettes",
        "",
        "Recorded gateway responses, replayed with",
        "`pytest --gauge-backend=replay --gauge-cassettes <this folder>`.",
        "Written by `python -m pytest_gauge cassettes export`; one entry per line (no keys, no headers).",
        "",
    ]
    for suite, role, model, task, work, file in sorted(rows):
        lines.append(f"- role={role} model={model} task={task} work={work} suite={suite} file={file}")
    return "\n".join(lines) + "\n"


def export_cassettes(
    cache_dir: str | os.PathLike[str],
    suite: str,
    to: str | os.PathLike[str],
    environ: Mapping[str, str] | None = None,
    out_dir: str | os.PathLike[str] = "gauge-out",
) -> ExportResult:
    """Copy the suite's persisted cache entries into ``to`` (same content-addressed layout, readable by
    :class:`Store`), scrubbed and pretty-printed, then rewrite ``to/README.md`` and the suite's entry of
    ``to/recording.json`` (what replay needs without the recording's environment). Entries in which the
    value of ``TAOTOKEN_API_KEY`` appears are refused, not exported."""
    env = os.environ if environ is None else environ
    key_value = env.get(KEY_VARIABLE, "").strip()
    source = Store(Path(cache_dir) / "responses")
    dest = Store(to)
    exported: list[str] = []
    refused: list[str] = []
    suites: set[str] = set()
    for key in source.keys():
        entry = source.get(key)
        if entry is None:
            continue
        meta = entry.get("meta")
        entry_suite = meta.get("suite") if isinstance(meta, dict) else None
        if isinstance(entry_suite, str):
            suites.add(entry_suite)
        if entry_suite != suite or entry.get("persist") is not True:
            continue
        clean = scrub_entry(entry)
        assert not _has_secret_field(clean), "scrubbed cassette still carries a secret field"
        text = _review_json(clean)
        if len(key_value) >= 4 and key_value in text:
            refused.append(key)
            continue
        write_atomic(dest.path(key), text)
        exported.append(key)
    if exported:
        write_atomic(Path(to) / "README.md", _readme(dest))
        save_recording(to, _recording(suite, [dest.get(k) for k in exported], out_dir))
    return ExportResult(tuple(exported), tuple(sorted(suites)), tuple(refused))


def _recording(
    suite: str, entries: list[dict[str, Any] | None], out_dir: str | os.PathLike[str]
) -> Recording:
    """What replay needs beside the responses: the gateway the entries were keyed by and, from the
    recorded run's manifest (``<out_dir>/<suite>/manifest.json``), the model per role, seed and hashes;
    without a manifest, the models are read from the entries themselves."""
    metas = [e["meta"] for e in entries if e is not None and isinstance(e.get("meta"), dict)]
    gateways = sorted({str(m["gateway"]) for m in metas if m.get("gateway")})
    try:
        manifest = read_json_object(Path(out_dir) / suite / "manifest.json")
    except FileFormatError:
        manifest = {}
    models: dict[str, str | None] = dict(manifest.get("models") or {})
    if not models:
        for m in metas:
            kind, _, rest = str(m.get("work", "")).partition("/")
            parts = rest.split("/")
            if m.get("role") == "agent" and kind == "transcript" and len(parts) == 3:
                models[f"agent:{parts[1]}"] = m.get("model")
            elif m.get("role") == "user_sim":
                models["user_sim"] = m.get("model")
            elif m.get("role") == "judge" and kind == "judge" and len(parts) == 3:
                models[f"judge:{parts[1]}"] = m.get("model")
    return Recording(
        suite,
        gateways[0] if len(gateways) == 1 else None,
        models,
        manifest.get("seed"),
        dict(manifest.get("hashes") or {}),
    )
