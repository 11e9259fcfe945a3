"""Reading a run's output folder back into the HTML page's typed inputs: the one reader
``python -m pytest_gauge report OUT_DIR`` and ``merge`` use; :mod:`pytest_gauge._internal.finish.html` renders
and writes the pages, :mod:`pytest_gauge._internal.report.html` renders them, purely.
"""

from __future__ import annotations

import weakref
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, overload

from ..records import CaseRecord, LedgerRecord, Transcript
from ..records.html import (
    GateRow,
    LatencyRow,
    MetricRow,
    RoleCost,
    RuleRow,
    SuiteOutputs,
    TaskRow,
    TranscriptRow,
    WatchRow,
)
from ..records.json_types import JSONObject
from ..records.labels import SampleCase
from ..records.ledger_columns import LedgerColumns
from .folders import SuiteFolder
from .labels import LabelsError, read_sample
from .readwrite import MAX_LINE_BYTES, iter_jsonl_lines, jsonl_row, read_json_object, read_jsonl

__all__ = [
    "ReportInputError",
    "TranscriptLines",
    "is_suite_folder",
    "load_suite",
    "suite_folders",
    "suite_outputs",
]


class ReportInputError(ValueError):
    """An output folder the HTML report cannot be built from (missing or malformed file)."""


def is_suite_folder(folder: Path) -> bool:
    """Whether ``folder`` holds a suite's outputs (its ``pairs/pair_results.jsonl``)."""
    return SuiteFolder(folder).pairs.is_file()


def _jsonl(path: Path) -> list[JSONObject]:
    return read_jsonl(path, error=ReportInputError)


def _json(path: Path) -> JSONObject:
    return read_json_object(path, missing_ok=True, error=ReportInputError)


def _rules(rows: list[JSONObject] | None) -> tuple[RuleRow, ...]:
    return tuple(
        RuleRow(r["rule"], bool(r["passed"]), r.get("detail", ""), r.get("weight", 1.0)) for r in rows or []
    )


def _transcript_row(data: Mapping[str, Any]) -> TranscriptRow:
    spend = data.get("spend") or {}
    verdict = data.get("score") or {}
    body = {k: v for k, v in data.items() if k not in ("spend", "score")}
    return TranscriptRow(
        task_id=data["task_id"],
        agent=data["agent"],
        sample=int(data.get("sample", 0)),
        transcript=Transcript.from_json(body) if "turns" in body else None,
        error=data.get("error"),
        input_tokens=int(spend.get("input_tokens", 0)),
        output_tokens=int(spend.get("output_tokens", 0)),
        cost=spend.get("cost"),
        reward=verdict.get("reward"),
        task_success=verdict.get("task_success"),
        criteria=_rules(verdict.get("criteria")),
        constraints=_rules(verdict.get("constraints")),
    )


def _reproducibility(doc: Any) -> tuple[float, float] | None:
    """A gate's ``reproducibility`` (same tasks, fresh tasks) from ``metrics.json``, when it has one."""
    if not isinstance(doc, Mapping):
        return None
    return float(doc["same_tasks"]), float(doc["fresh_tasks"])


def _block(doc: Mapping[str, Any], name: str) -> JSONObject | None:
    """A metrics.json block the page shows when present (an object), else None."""
    value = doc.get(name)
    return value if isinstance(value, dict) else None


def _metrics_parts(doc: Mapping[str, Any]) -> JSONObject:
    gates = tuple(
        GateRow(
            expr=g["expr"],
            status=g["status"],
            value=g.get("value"),
            low=g.get("low"),
            high=g.get("high"),
            n=int(g.get("n") or 0),
            threshold=g.get("threshold"),
            message=g.get("message", ""),
            drivers=tuple(g.get("drivers", ())),
            driver_cases=tuple(g.get("driver_cases", ())),
            reproducibility=_reproducibility(g.get("reproducibility")),
        )
        for g in doc.get("gates", [])
    )
    metrics = tuple(
        MetricRow(
            name, m.get("value"), m.get("low"), m.get("high"), int(m.get("n") or 0), m.get("method", "")
        )
        for name, m in sorted(doc.get("metrics", {}).items())
    )
    costs_doc = doc.get("costs", {})
    costs = tuple(
        RoleCost(
            role,
            c["calls"],
            c["attempts"],
            c["input_tokens"],
            c["output_tokens"],
            c.get("cost"),
            int(c.get("usage_missing") or 0),
        )
        for role, c in costs_doc.get("per_role", {}).items()
    )
    watch = tuple(
        WatchRow(
            str(c["role"]),
            str(c["model"]),
            float(c.get("tokens_per_task") or 0.0),
            float(c.get("retry_rate") or 0.0),
            int(c.get("rate_limited") or 0),
            float(c.get("asked_wait_s") or 0.0),
        )
        for c in costs_doc.get("per_model", ())
    )
    volatile = doc.get("volatile") or {}
    latency = tuple(
        LatencyRow(str(x["role"]), str(x["model"]), int(x["attempts"]), float(x["p50"]), float(x["p95"]))
        for x in volatile.get("latency_s", ())
    )
    return {
        "gates": gates,
        "metrics": metrics,
        "costs": costs,
        "watch": watch,
        "latency": latency,
        "total_cost": costs_doc.get("total_cost"),
        "usage_missing": int(costs_doc.get("usage_missing") or 0),
        "pair_class": {pid: p.get("class", "") for pid, p in doc.get("pairs", {}).items()},
        "human": doc.get("human") if isinstance(doc.get("human"), dict) else None,
        "self_preference": _block(doc, "self_preference"),
        "baseline": doc.get("baseline") if isinstance(doc.get("baseline"), dict) else None,
        "flipped": tuple(
            (f["task_id"], f["pair_id"], int(f["sample"]))
            for f in doc.get("flipped", ())
            if isinstance(f, dict)
        ),
    }


def load_suite(folder: Path) -> SuiteOutputs:
    """Read ``folder`` (``gauge-out/<suite>``); a missing or malformed file raises :class:`ReportInputError`
    naming it. ``reports/metrics.json`` and ``reports/elo.svg`` are optional (an interrupted run)."""
    if not is_suite_folder(folder):
        raise ReportInputError(f"{folder}: no pairs/pair_results.jsonl here; pass a --gauge-out folder")
    files = SuiteFolder(folder)
    tasks_path = files.tasks
    ledger_path = files.ledger
    svg_path = files.report("elo.svg")
    return suite_outputs(
        folder.name,
        manifest=_json(files.manifest),
        task_rows=_jsonl(tasks_path)[1:] if tasks_path.is_file() else [],
        records=[CaseRecord.from_json(r) for r in _jsonl(files.pairs)],
        transcripts=TranscriptLines(files.transcript_files()),
        ledger=[LedgerRecord.from_json(r) for r in _jsonl(ledger_path)] if ledger_path.is_file() else [],
        elo_svg=svg_path.read_text(encoding="utf-8") if svg_path.is_file() else None,
        metrics=_json(files.report("metrics.json")),
        sample=_sample(files),
        history=_json(files.report("history.json")) or None,
    )


def _sample(files: SuiteFolder) -> tuple[SampleCase, ...]:
    """The suite's ``labels sample`` (none when it was never drawn)."""
    try:
        return tuple(read_sample(files.label_sample))
    except LabelsError as exc:
        raise ReportInputError(str(exc)) from None


def suite_outputs(
    folder_name: str,
    *,
    manifest: Mapping[str, Any],
    task_rows: Sequence[Mapping[str, Any]],
    records: Sequence[CaseRecord],
    transcripts: Sequence[TranscriptRow],
    ledger: Sequence[LedgerRecord],
    elo_svg: str | None,
    metrics: Mapping[str, Any],
    sample: tuple[SampleCase, ...] = (),
    history: Mapping[str, Any] | None = None,
) -> SuiteOutputs:
    """The page's values from a suite's outputs as they are written (the manifest, tasks.jsonl's task
    rows, the records, the agents' transcript rows, the ledger, elo.svg, metrics.json): the one builder
    for the outputs in memory at the end of a run and for a folder read back (:func:`load_suite`)."""
    tasks = tuple(TaskRow(t["task_id"], t.get("category", ""), t.get("task_prompt", "")) for t in task_rows)
    return SuiteOutputs(
        name=str(manifest.get("suite") or folder_name),
        seed=manifest.get("seed"),
        backend=str(manifest.get("backend", "")),
        models={k: str(v) for k, v in (manifest.get("models") or {}).items() if v},
        tasks=tasks,
        records=tuple(records),
        transcripts=transcripts,
        ledger=ledger if isinstance(ledger, LedgerColumns) else tuple(ledger),
        elo_svg=elo_svg,
        sample=sample,
        history=dict(history) if history is not None else None,
        **_metrics_parts(metrics),
    )


class TranscriptLines(Sequence[TranscriptRow]):
    """The page's transcript rows: the lines of the agents' ``agents/<agent>.jsonl`` files, in the order
    given, each parsed when it is read (where each line is, not the row, is kept: a suite's transcripts
    as rows were the largest of the page's values, 7.6 MB at 1,000 tasks). A malformed line is a
    :class:`ReportInputError` naming its file and line."""

    def __init__(self, paths: Iterable[Path]) -> None:
        self._paths = tuple(paths)
        self._file, self._offset, self._number = array("I"), array("q"), array("I")
        for index, path in enumerate(self._paths):
            self._scan(index, path)
        self._handles: dict[int, IO[bytes]] = {}
        weakref.finalize(self, _close_handles, self._handles)

    def _scan(self, index: int, path: Path) -> None:
        """Note where each of the file's rows starts (a blank line is no row, as :func:`read_jsonl` reads)."""
        try:
            fh = path.open("rb")
        except OSError as exc:
            raise ReportInputError(f"{path}: cannot be read ({exc})") from None
        with fh:
            offset, number = 0, 0
            while raw := fh.readline(MAX_LINE_BYTES + 1):
                number += 1
                if len(raw) > MAX_LINE_BYTES:
                    raise ReportInputError(f"{path}:{number}: the line is longer than the accepted length")
                if raw.strip() and raw.decode("utf-8", "replace").strip():
                    self._file.append(index)
                    self._offset.append(offset)
                    self._number.append(number)
                offset += len(raw)

    def __len__(self) -> int:
        return len(self._offset)

    @overload
    def __getitem__(self, index: int) -> TranscriptRow: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[TranscriptRow]: ...
    def __getitem__(self, index: int | slice) -> TranscriptRow | Sequence[TranscriptRow]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("transcript row out of range")
        which = self._file[index]
        fh = self._handles.get(which)
        if fh is None:
            fh = self._handles[which] = self._paths[which].open("rb")
        fh.seek(self._offset[index])
        where = f"{self._paths[which]}:{self._number[index]}"
        row = jsonl_row(fh.readline(MAX_LINE_BYTES + 1), where, ReportInputError)
        if row is None:  # the file changed under the page: a row where a row was
            raise ReportInputError(f"{where}: no longer a JSON row")
        return _transcript_row(row)

    def __iter__(self) -> Iterator[TranscriptRow]:
        for path in self._paths:
            for _, row in iter_jsonl_lines(path, error=ReportInputError):
                yield _transcript_row(row)


def _close_handles(handles: dict[int, IO[bytes]]) -> None:
    for fh in handles.values():
        fh.close()


def suite_folders(out_dir: Path) -> list[Path]:
    """The suite output folders directly under ``out_dir``, by name."""
    if not out_dir.is_dir():
        raise ReportInputError(f"{out_dir}: no such folder; pass the --gauge-out folder of a run")
    return sorted(p for p in out_dir.iterdir() if p.is_dir() and is_suite_folder(p))
