"""Baselines on disk: read an earlier run (a ``--gauge-out`` folder or a compact ``baseline save`` folder)
into the typed :class:`~pytest_gauge._internal.records.run_side.RunSide`, and write compact baselines.

A compact baseline is ``DIR/<suite>/baseline.json`` (format ``pytest-gauge-baseline``, versioned: the case
records, the tasks, each task's nominal cost, the ledger's per-role summary, ``metrics.json`` and the
manifest) plus ``DIR/<suite>/agents/*.jsonl`` (the transcripts, so reports can link both sides of a
flipped task). A baseline written by another format version or another pytest-gauge release
(major.minor) is refused with the fix: save it again with this version.
"""

from __future__ import annotations

import math
import os
import shutil
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from ..records import CaseRecord, Judgment, LedgerRecord, SuiteMeta, Usage, case_json, content_hash, dumps
from ..records.json_types import JSONObject
from ..records.run_side import RunSide, outcomes_from_records, setup_of
from ..version import __version__
from .folders import SuiteFolder
from .readwrite import read_json_object, read_jsonl, read_jsonl_lines, write_atomic

__all__ = [
    "BASELINE_FORMAT",
    "BASELINE_FORMAT_VERSION",
    "BaselineError",
    "baseline_side",
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


def _read_json(path: Path) -> JSONObject:
    return read_json_object(path, error=BaselineError)


def _jsonl(path: Path) -> list[JSONObject]:
    return read_jsonl(path, missing_ok=True, error=BaselineError)


# ----- the types of what a baseline holds: checked whole when it is read (at startup), never after paying


@cache
def _hints(cls: type) -> JSONObject:
    return typing.get_type_hints(cls)


def _fits(value: object, kind: Any) -> bool:
    """Whether a JSON value fits a record field's annotation (str, int, float, bool, None, Literal, unions,
    list[...]); other annotations are not checked."""
    origin = typing.get_origin(kind)
    if origin is typing.Literal:
        return value in typing.get_args(kind)
    if origin is typing.Union or origin is types.UnionType:
        return any(_fits(value, k) for k in typing.get_args(kind))
    if kind is type(None):
        return value is None
    if kind is bool:
        return isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is float:
        return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if kind is str:
        return isinstance(value, str)
    if origin is list or kind is dict:
        return isinstance(value, origin or kind)
    return True


def _typed(cls: type, row: Mapping[str, Any]) -> str | None:
    """What is wrong with ``row`` as a ``cls`` record (an unknown or missing field, a wrong type), or None."""
    hints = _hints(cls)
    unknown = sorted(set(row) - set(hints))
    if unknown:
        return f"unknown field {unknown[0]!r}"
    for name, kind in hints.items():
        if name not in row:
            field = cls.__dataclass_fields__[name]  # type: ignore[attr-defined]
            if field.default is field.default_factory:  # both MISSING: a required field
                return f"missing field {name!r}"
        elif not _fits(row[name], kind):
            return f"field {name!r} is {type(row[name]).__name__} {row[name]!r:.40}, not {_kind(kind)}"
    return None


def _kind(kind: Any) -> str:
    if typing.get_origin(kind) is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(kind))
    return getattr(kind, "__name__", str(kind))


def _case_record(where: str, row: Mapping[str, Any]) -> CaseRecord:
    """One case record of a baseline (also as older versions named its fields), its types checked;
    BaselineError naming ``where`` otherwise."""
    row = case_json(row)
    problem = _typed(CaseRecord, row)
    for i, j in enumerate(row.get("judgments") or []):
        wrong = "not an object" if not isinstance(j, dict) else _typed(Judgment, j)
        if problem is None and wrong is not None:
            problem = f"judgments[{i}]: {wrong}"
    if problem is not None:
        raise BaselineError(f"{where}: not a case record of this version: {problem}")
    return CaseRecord.from_json(dict(row))


def _case_records(path: Path) -> list[CaseRecord]:
    """``pairs/pair_results.jsonl`` of a baseline, every line checked (file and line in the error)."""
    lines = read_jsonl_lines(path, missing_ok=True, error=BaselineError)
    return [_case_record(f"{path}:{n}", row) for n, row in lines]


def _checked_rows(path: Path, fields: Mapping[str, Any]) -> list[JSONObject]:
    """The rows of a baseline's JSON-lines file, each field of ``fields`` that is present of its type."""
    rows = []
    for number, row in read_jsonl_lines(path, missing_ok=True, error=BaselineError):
        for name, kind in fields.items():
            if name in row and not _fits(row[name], kind):
                raise BaselineError(
                    f"{path}:{number}: field {name!r} is {type(row[name]).__name__} {row[name]!r:.40}, "
                    f"not {_kind(kind)}"
                )
        rows.append(row)
    return rows


_LEDGER_FIELDS: dict[str, object] = {"task_id": str, "cost": float | None, "usage": dict | None}
_TRANSCRIPT_FIELDS: dict[str, object] = {"task_id": str, "sample": int}
_TASK_FIELDS: dict[str, object] = {"task_id": str}


def _check_compact(path: Path, data: JSONObject) -> None:
    if data.get("format") != BASELINE_FORMAT:
        raise BaselineError(f"{path}: not a pytest-gauge baseline (format {data.get('format')!r})")
    if data.get("format_version") != BASELINE_FORMAT_VERSION:
        raise BaselineError(
            f"{path}: baseline format_version {data.get('format_version')!r}, this pytest-gauge reads "
            f"{BASELINE_FORMAT_VERSION}: save the baseline again with this version"
        )
    _check_version(path, data.get("pytest_gauge"))


def _check_manifest(path: Path, manifest: JSONObject) -> None:
    _check_manifest_types(path, manifest)
    if manifest.get("format_version") != _OUT_FORMAT_VERSION:
        raise BaselineError(
            f"{path}: output format_version {manifest.get('format_version')!r}, this pytest-gauge reads "
            f"{_OUT_FORMAT_VERSION}: run the baseline again with this version"
        )
    _check_version(path, (manifest.get("versions") or {}).get("pytest-gauge"))


def check_baseline_dir(root: Path) -> list[str]:
    """The suites a baseline folder holds, each read whole (formats, versions, every file the comparison
    uses and its types); BaselineError naming the file (and line) otherwise."""
    if not root.is_dir():
        raise BaselineError(f"--gauge-baseline {root}: no such folder")
    suites = []
    for sub in sorted(p for p in root.iterdir() if p.is_dir()):
        if (SuiteFolder(sub).compact_baseline).is_file():
            suites.append(sub.name)
        elif (SuiteFolder(sub).manifest).is_file():
            suites.append(sub.name)
    for suite in suites:  # read whole, as the end of the run will: a damaged file is refused before paying
        load_baseline(root, suite)
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
    files = ((p, _checked_rows(p, _TRANSCRIPT_FIELDS)) for p in sorted(agents_dir.glob("*.jsonl")))
    return transcript_links(files, link_base)


def transcript_links(
    files: Iterable[tuple[Path, Iterable[Mapping[str, Any]]]], link_base: Path | None
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
        setup=setup_of(manifest),
    )


def load_run_side(folder: Path, link_base: Path | None = None) -> RunSide:
    """One suite's ``--gauge-out`` folder (``<out>/<suite>``) read back as a comparison side."""
    manifest = _read_json(SuiteFolder(folder).manifest)
    _check_manifest(SuiteFolder(folder).manifest, manifest)
    return side_of_outputs(
        manifest,
        _checked_rows(SuiteFolder(folder).tasks, _TASK_FIELDS),
        _case_records(SuiteFolder(folder).pairs),
        _checked_rows(SuiteFolder(folder).ledger, _LEDGER_FIELDS),
        _links(SuiteFolder(folder).agents, link_base),
        default_suite=folder.name,
    )


_MANIFEST_TYPES: dict[str, tuple[type, ...]] = {
    "suite": (str,),
    "run_id": (str,),
    "finished_at": (str,),
    "seed": (int,),
    "backend": (str,),
    "cache": (str,),
    "git_commit": (str, type(None)),
    "cases_total": (int,),
    "cases_selected": (int,),
    "cases_recorded": (int,),
    "interrupted": (str,),
}
"""The manifest's plain fields and their types (``models``, ``hashes``, ``versions`` are objects)."""


def _check_manifest_types(path: Path, manifest: Mapping[str, Any]) -> None:
    """Every field the comparison reads has its type; one line naming the field otherwise."""
    for name in ("models", "hashes", "versions"):
        if not isinstance(manifest.get(name) or {}, dict):
            raise BaselineError(f"{path}: {name!r} is {type(manifest[name]).__name__}, not an object")
    for name, kinds in _MANIFEST_TYPES.items():
        value = manifest.get(name)
        if name in manifest and (not isinstance(value, kinds) or isinstance(value, bool)):
            expected = " or ".join("null" if k is type(None) else k.__name__ for k in kinds)
            raise BaselineError(f"{path}: {name!r} is {type(value).__name__} {value!r:.40}, not {expected}")


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
        "settings": dict(meta.settings),
    }
    costs = _task_costs([r.to_json() for r in ledger])
    return _side(meta.name, manifest, list(tasks), list(records), costs, {})


def _load_compact(folder: Path, link_base: Path | None) -> RunSide:
    path = SuiteFolder(folder).compact_baseline
    data = _read_json(path)
    _check_compact(path, data)
    _check_compact_types(path, data)
    records = [_case_record(f"{path}: records[{i}]", r) for i, r in enumerate(data.get("records") or [])]
    costs = {str(k): (None if v is None else float(v)) for k, v in (data.get("task_costs") or {}).items()}
    manifest = data.get("manifest") or {}
    links = _links(SuiteFolder(folder).agents, link_base)
    tasks = [str(t) for t in data.get("tasks", [])]
    return _side(str(data.get("suite", folder.name)), manifest, tasks, records, costs, links)


def _check_compact_types(path: Path, data: Mapping[str, Any]) -> None:
    """The containers of a compact baseline are of their types (the records are checked one by one)."""
    shapes = {"records": list, "tasks": list, "task_costs": dict, "manifest": dict}
    for name, kind in shapes.items():
        if not isinstance(data.get(name) or kind(), kind):
            raise BaselineError(f"{path}: {name!r} is {type(data[name]).__name__}, not a {kind.__name__}")
    if any(not isinstance(r, dict) for r in data.get("records") or []):
        raise BaselineError(f"{path}: 'records' holds something else than objects")
    for task, cost in (data.get("task_costs") or {}).items():
        if not _fits(cost, float | None):
            raise BaselineError(f"{path}: task_costs[{task!r}] is {cost!r:.40}, not a number or null")
    _check_manifest_types(path, data.get("manifest") or {})


def load_baseline(root: Path, suite: str, link_base: Path | None = None) -> RunSide | None:
    """The baseline of ``suite`` under ``root`` (compact or an output folder); None if it has none."""
    folder = root / suite
    if (SuiteFolder(folder).compact_baseline).is_file():
        return _load_compact(folder, link_base)
    if (SuiteFolder(folder).manifest).is_file():
        return load_run_side(folder, link_base)
    return None


def baseline_side(folder: str | None, suite: str, link_base: Path | None) -> tuple[RunSide | None, str]:
    """``--gauge-baseline``'s side of ``suite`` (its links relative to ``link_base``), or None and why:
    no baseline given, a baseline that cannot be used, or one without the suite."""
    if not folder:
        return None, "no baseline given: run with --gauge-baseline DIR"
    try:
        base = load_baseline(Path(folder), suite, link_base=link_base)
    except BaselineError as exc:
        return None, f"baseline not usable: {exc}"
    if base is None:
        return None, f"the baseline {folder} has no suite {suite!r}: nothing to compare"
    return base, ""


def _ledger_summary(ledger: Sequence[JSONObject]) -> dict[str, JSONObject]:
    out: dict[str, JSONObject] = {}
    for x in ledger:
        empty = {"attempts": 0, "input_tokens": 0, "output_tokens": 0, "cost": 0.0}
        role = out.setdefault(str(x.get("role")), empty)
        usage = Usage.from_json(x.get("usage") or {})  # a ledger line of any format version
        role["attempts"] += 1
        role["input_tokens"] += usage.prompt_tokens  # every input token, cached ones included
        role["output_tokens"] += usage.completion_tokens
        if role["cost"] is not None:
            unpriced = x.get("cost") is None and x.get("usage")
            role["cost"] = None if unpriced else role["cost"] + float(x.get("cost") or 0)
    return dict(sorted(out.items()))


def save_baseline(source: Path, target: Path) -> list[Path]:
    """Write a compact baseline of every suite in the ``--gauge-out`` folder ``source`` to ``target``;
    returns the files written. BaselineError when ``source`` holds no suite output."""
    suites = (
        [p for p in sorted(source.iterdir()) if (SuiteFolder(p).manifest).is_file()]
        if source.is_dir()
        else []
    )
    if not suites:
        raise BaselineError(f"--from {source}: no suite output in it (expected <suite>/manifest.json)")
    written: list[Path] = []
    for folder in suites:
        manifest = _read_json(SuiteFolder(folder).manifest)
        _check_manifest(SuiteFolder(folder).manifest, manifest)
        ledger = _jsonl(SuiteFolder(folder).ledger)
        metrics_path = SuiteFolder(folder).report("metrics.json")
        doc = {
            "format": BASELINE_FORMAT,
            "format_version": BASELINE_FORMAT_VERSION,
            "pytest_gauge": __version__,
            "suite": folder.name,
            "manifest": {k: v for k, v in manifest.items() if k not in ("run_id", "finished_at")},
            "tasks": [t["task_id"] for t in _jsonl(SuiteFolder(folder).tasks) if "task_id" in t],
            "records": _jsonl(SuiteFolder(folder).pairs),
            "task_costs": _task_costs(ledger),
            "ledger_summary": _ledger_summary(ledger),
            "metrics": _read_json(metrics_path) if metrics_path.is_file() else None,
        }
        out = target / folder.name
        write_atomic(SuiteFolder(out).compact_baseline, dumps(doc) + "\n")
        written.append(SuiteFolder(out).compact_baseline)
        if SuiteFolder(folder).agents.is_dir():
            shutil.copytree(SuiteFolder(folder).agents, SuiteFolder(out).agents, dirs_exist_ok=True)
            written += SuiteFolder(out).transcript_files()
    return written
