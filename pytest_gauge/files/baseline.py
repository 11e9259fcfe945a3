"""Baselines on disk: read an earlier run (a ``--gauge-out`` folder or a compact ``baseline save`` folder)
into the typed :class:`~pytest_gauge.records.run_side.RunSide`, and write compact baselines.

A compact baseline is ``DIR/<suite>/baseline.json`` (format ``pytest-gauge-baseline``, versioned: the case
records, the tasks, each task's nominal cost, the ledger's per-role summary, ``metrics.json`` and the
manifest) plus ``DIR/<suite>/agents/*.jsonl`` (the transcripts, so reports can link both sides of a
flipped task). A baseline written by another format version or another pytest-gauge release
(major.minor) is refused with the fix: save it again with this version.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..records import CaseRecord, LedgerRecord, SuiteMeta, content_hash, dumps
from ..records.run_side import RunSide, outcomes_from_records
from ..version import __version__
from .readwrite import read_json_object, read_jsonl, write_atomic

__all__ = [
    "BASELINE_FORMAT",
    "BASELINE_FORMAT_VERSION",
    "BaselineError",
    "check_baseline_dir",
    "load_baseline",
    "load_run_side",
    "save_baseline",
    "side_from_records",
    "side_of_outputs",
    "transcript_links",
]

BASELINE_FORMAT = "pytest-gauge-baseline"
BASELINE_FORMAT_VERSION = 1
_OUT_FORMAT_VERSION = 1  # manifest.json's format_version of a --gauge-out folder
_COMPACT = "baseline.json"
_MANIFEST = "manifest.json"


class BaselineError(Exception):
    """A baseline that cannot be used; the message names the file and the fix."""


def _release(version: str) -> str:
    return ".".join(version.split(".")[:2])


def _check_version(path: Path, version: object) -> None:
    if not isinstance(version, str) or _release(version) != _release(__version__):
        raise BaselineError(
            f"{path}: written by pytest-gauge {version}, this is {__version__}; baselines are read only by "
            f"the release that wrote them ({_release(__version__)}.x): run the baseline again with this "
            "version (or python -m pytest_gauge baseline save --from <its gauge-out> --to DIR)"
        )


def _read_json(path: Path) -> dict[str, Any]:
    return read_json_object(path, error=BaselineError)


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return read_jsonl(path, missing_ok=True, error=BaselineError)


def _check_compact(path: Path, data: dict[str, Any]) -> None:
    if data.get("format") != BASELINE_FORMAT:
        raise BaselineError(f"{path}: not a pytest-gauge baseline (format {data.get('format')!r})")
    if data.get("format_version") != BASELINE_FORMAT_VERSION:
        raise BaselineError(
            f"{path}: baseline format_version {data.get('format_version')!r}, this pytest-gauge reads "
            f"{BASELINE_FORMAT_VERSION}: save the baseline again with this version"
        )
    _check_version(path, data.get("pytest_gauge"))


def _check_manifest(path: Path, manifest: dict[str, Any]) -> None:
    if manifest.get("format_version") != _OUT_FORMAT_VERSION:
        raise BaselineError(
            f"{path}: output format_version {manifest.get('format_version')!r}, this pytest-gauge reads "
            f"{_OUT_FORMAT_VERSION}: run the baseline again with this version"
        )
    _check_version(path, (manifest.get("versions") or {}).get("pytest-gauge"))


def check_baseline_dir(root: Path) -> list[str]:
    """The suites a baseline folder holds (checking every format and version); BaselineError otherwise."""
    if not root.is_dir():
        raise BaselineError(f"--gauge-baseline {root}: no such folder")
    suites = []
    for sub in sorted(p for p in root.iterdir() if p.is_dir()):
        if (sub / _COMPACT).is_file():
            _check_compact(sub / _COMPACT, _read_json(sub / _COMPACT))
            suites.append(sub.name)
        elif (sub / _MANIFEST).is_file():
            _check_manifest(sub / _MANIFEST, _read_json(sub / _MANIFEST))
            suites.append(sub.name)
    if not suites:
        raise BaselineError(
            f"--gauge-baseline {root}: no suite in it (expected <suite>/manifest.json from an earlier "
            "--gauge-out, or <suite>/baseline.json from python -m pytest_gauge baseline save)"
        )
    return suites


def _task_costs(ledger: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    """Nominal cost of every attempt per task; None when an attempt has usage but no price."""
    costs: dict[str, float | None] = {}
    for x in ledger:
        task = str(x.get("task_id", ""))
        cost = x.get("cost")
        if cost is None and x.get("usage") is not None:
            costs[task] = None
        elif task not in costs or costs[task] is not None:
            costs[task] = (costs.get(task) or 0.0) + float(cost or 0.0)
    return costs


def _links(agents_dir: Path, link_base: Path | None) -> dict[tuple[str, str, int], str]:
    """``(task, agent, sample) -> path#L<line>`` of each transcript file in ``agents_dir``."""
    return transcript_links(((p, _jsonl(p)) for p in sorted(agents_dir.glob("*.jsonl"))), link_base)


def transcript_links(
    files: Iterable[tuple[Path, Sequence[Mapping[str, Any]]]], link_base: Path | None
) -> dict[tuple[str, str, int], str]:
    """``(task, agent, sample) -> path#L<line>`` of each transcript row of each ``agents/<agent>.jsonl``
    (its path and rows, as written or read back), relative to ``link_base``."""
    out: dict[tuple[str, str, int], str] = {}
    for path, rows in files:
        shown = os.path.relpath(path, link_base) if link_base is not None else str(path)
        for i, row in enumerate(rows, start=1):
            unit = (str(row.get("task_id")), path.stem, int(row.get("sample", 0)))
            out[unit] = f"{Path(shown).as_posix()}#L{i}"
    return out


def _side(
    suite: str,
    manifest: Mapping[str, Any],
    tasks: list[str],
    records: list[CaseRecord],
    task_costs: dict[str, float | None],
    links: dict[tuple[str, str, int], str],
) -> RunSide:
    hashes = manifest.get("hashes") or {}
    return RunSide(
        suite=suite,
        tasks=tuple(tasks),
        records=tuple(records),
        outcomes=outcomes_from_records(records),
        task_costs=task_costs,
        models={str(k): str(v) for k, v in (manifest.get("models") or {}).items()},
        prompts={str(k): str(v) for k, v in hashes.items() if str(k).startswith("prompt:")},
        links=links,
    )


def load_run_side(folder: Path, link_base: Path | None = None) -> RunSide:
    """One suite's ``--gauge-out`` folder (``<out>/<suite>``) read back as a comparison side."""
    manifest = _read_json(folder / _MANIFEST)
    _check_manifest(folder / _MANIFEST, manifest)
    return side_of_outputs(
        manifest,
        _jsonl(folder / "tasks.jsonl"),
        [CaseRecord.from_json(r) for r in _jsonl(folder / "pairs" / "pair_results.jsonl")],
        _jsonl(folder / "agent_runs.jsonl"),
        _links(folder / "agents", link_base),
        default_suite=folder.name,
    )


def side_of_outputs(
    manifest: Mapping[str, Any],
    task_rows: Sequence[Mapping[str, Any]],
    records: Sequence[CaseRecord],
    ledger_rows: Sequence[Mapping[str, Any]],
    links: dict[tuple[str, str, int], str],
    *,
    default_suite: str = "",
) -> RunSide:
    """A suite's outputs as a comparison side: the manifest, ``tasks.jsonl``'s rows, the case records,
    the ledger's rows and the transcripts' links (:func:`transcript_links`). The one builder for a
    folder read back (:func:`load_run_side`) and for the end of a run, from the values it has just
    written."""
    tasks = [str(t["task_id"]) for t in task_rows if "task_id" in t]
    suite = str(manifest.get("suite", default_suite))
    return _side(suite, dict(manifest), tasks, list(records), _task_costs(ledger_rows), links)


def side_from_records(
    meta: SuiteMeta, tasks: Sequence[str], records: Sequence[CaseRecord], ledger: Sequence[LedgerRecord]
) -> RunSide:
    """The run in progress as a comparison side, from its records and ledger (an adaptive run's look,
    before any output file is written)."""
    manifest = {
        "models": dict(meta.models),
        "hashes": {f"prompt:{k}": content_hash(v) for k, v in sorted(meta.prompts.items()) if v},
    }
    costs = _task_costs([r.to_json() for r in ledger])
    return _side(meta.name, manifest, list(tasks), list(records), costs, {})


def _load_compact(folder: Path, link_base: Path | None) -> RunSide:
    data = _read_json(folder / _COMPACT)
    _check_compact(folder / _COMPACT, data)
    records = [CaseRecord.from_json(r) for r in data.get("records", [])]
    costs = {str(k): (None if v is None else float(v)) for k, v in (data.get("task_costs") or {}).items()}
    manifest = data.get("manifest") or {}
    links = _links(folder / "agents", link_base)
    tasks = [str(t) for t in data.get("tasks", [])]
    return _side(str(data.get("suite", folder.name)), manifest, tasks, records, costs, links)


def load_baseline(root: Path, suite: str, link_base: Path | None = None) -> RunSide | None:
    """The baseline of ``suite`` under ``root`` (compact or an output folder); None if it has none."""
    folder = root / suite
    if (folder / _COMPACT).is_file():
        return _load_compact(folder, link_base)
    if (folder / _MANIFEST).is_file():
        return load_run_side(folder, link_base)
    return None


def _ledger_summary(ledger: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for x in ledger:
        empty = {"attempts": 0, "input_tokens": 0, "output_tokens": 0, "cost": 0.0}
        role = out.setdefault(str(x.get("role")), empty)
        usage = x.get("usage") or {}
        role["attempts"] += 1
        role["input_tokens"] += int(usage.get("prompt_tokens", 0))
        role["output_tokens"] += int(usage.get("completion_tokens", 0))
        if role["cost"] is not None:
            unpriced = x.get("cost") is None and x.get("usage")
            role["cost"] = None if unpriced else role["cost"] + float(x.get("cost") or 0)
    return dict(sorted(out.items()))


def save_baseline(source: Path, target: Path) -> list[Path]:
    """Write a compact baseline of every suite in the ``--gauge-out`` folder ``source`` to ``target``;
    returns the files written. BaselineError when ``source`` holds no suite output."""
    suites = [p for p in sorted(source.iterdir()) if (p / _MANIFEST).is_file()] if source.is_dir() else []
    if not suites:
        raise BaselineError(f"--from {source}: no suite output in it (expected <suite>/manifest.json)")
    written: list[Path] = []
    for folder in suites:
        manifest = _read_json(folder / _MANIFEST)
        _check_manifest(folder / _MANIFEST, manifest)
        ledger = _jsonl(folder / "agent_runs.jsonl")
        metrics_path = folder / "reports" / "metrics.json"
        doc = {
            "format": BASELINE_FORMAT,
            "format_version": BASELINE_FORMAT_VERSION,
            "pytest_gauge": __version__,
            "suite": folder.name,
            "manifest": {k: v for k, v in manifest.items() if k not in ("run_id", "finished_at")},
            "tasks": [t["task_id"] for t in _jsonl(folder / "tasks.jsonl") if "task_id" in t],
            "records": _jsonl(folder / "pairs" / "pair_results.jsonl"),
            "task_costs": _task_costs(ledger),
            "ledger_summary": _ledger_summary(ledger),
            "metrics": _read_json(metrics_path) if metrics_path.is_file() else None,
        }
        out = target / folder.name
        write_atomic(out / _COMPACT, dumps(doc) + "\n")
        written.append(out / _COMPACT)
        if (folder / "agents").is_dir():
            shutil.copytree(folder / "agents", out / "agents", dirs_exist_ok=True)
            written += sorted((out / "agents").glob("*.jsonl"))
    return written
