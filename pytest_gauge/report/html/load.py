"""Reading one suite's written outputs (SPEC §10) back into typed values for the HTML report.

The HTML report is rendered from the files a run wrote, not from the run's memory, so the end of a run,
``python -m pytest_gauge report OUT_DIR`` and a future ``merge`` give the same bytes from the same
folder. This module is the I/O edge; :mod:`.payload` and :mod:`.render` are pure.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...records import CaseRecord, LedgerRecord, Transcript

__all__ = [
    "GateRow",
    "MetricRow",
    "ReportInputError",
    "RoleCost",
    "RuleRow",
    "SuiteOutputs",
    "TaskRow",
    "TranscriptRow",
    "is_suite_folder",
    "load_suite",
]


class ReportInputError(ValueError):
    """An output folder the HTML report cannot be built from (missing or malformed file)."""


@dataclass(frozen=True)
class RuleRow:
    """One success criterion or hard constraint on one transcript, as the verifier decided it."""

    rule: str
    passed: bool
    detail: str
    weight: float = 1.0


@dataclass(frozen=True)
class TranscriptRow:
    """One line of ``agents/<agent>.jsonl``: the transcript (None when it failed), its cost and verdict."""

    task_id: str
    agent: str
    sample: int
    transcript: Transcript | None
    error: str | None
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = None
    reward: float | None = None
    task_success: bool | None = None
    criteria: tuple[RuleRow, ...] = ()
    constraints: tuple[RuleRow, ...] = ()


@dataclass(frozen=True)
class TaskRow:
    """One task as run: id, category, prompt."""

    task_id: str
    category: str
    prompt: str


@dataclass(frozen=True)
class GateRow:
    """One gate result of ``metrics.json``; ``drivers`` are case ids, flip groups or transcript labels."""

    expr: str
    status: str
    value: float | None
    low: float | None
    high: float | None
    n: int
    threshold: float | None
    message: str
    drivers: tuple[str, ...] = ()


@dataclass(frozen=True)
class MetricRow:
    """One metric of ``metrics.json`` with its interval."""

    name: str
    value: float | None
    low: float | None
    high: float | None
    n: int
    method: str


@dataclass(frozen=True)
class RoleCost:
    """Nominal calls, tokens and cost of one role (``metrics.json`` ``costs.per_role``)."""

    role: str
    calls: int
    attempts: int
    input_tokens: int
    output_tokens: int
    cost: float | None


@dataclass(frozen=True)
class SuiteOutputs:
    """Everything the HTML report shows about one suite, read from its output folder."""

    name: str
    seed: int | None
    backend: str
    models: dict[str, str]
    tasks: tuple[TaskRow, ...]
    records: tuple[CaseRecord, ...]
    transcripts: tuple[TranscriptRow, ...]
    ledger: tuple[LedgerRecord, ...]
    gates: tuple[GateRow, ...] = ()
    metrics: tuple[MetricRow, ...] = ()
    costs: tuple[RoleCost, ...] = ()
    total_cost: float | None = None
    pair_class: dict[str, str] = field(default_factory=dict)
    flipped: tuple[str, ...] = ()
    elo_svg: str | None = None


def is_suite_folder(folder: Path) -> bool:
    """Whether ``folder`` holds a suite's outputs (its ``pairs/pair_results.jsonl``)."""
    return (folder / "pairs" / "pair_results.jsonl").is_file()


def _jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ReportInputError(f"{path}:{number}: not valid JSON ({exc.msg})") from None
    return rows


def _json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ReportInputError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    return data if isinstance(data, dict) else {}


def _rules(rows: list[dict[str, Any]] | None) -> tuple[RuleRow, ...]:
    return tuple(
        RuleRow(r["rule"], bool(r["passed"]), r.get("detail", ""), r.get("weight", 1.0)) for r in rows or []
    )


def _transcript_row(data: dict[str, Any]) -> TranscriptRow:
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


def _metrics_parts(doc: dict[str, Any]) -> dict[str, Any]:
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
        RoleCost(role, c["calls"], c["attempts"], c["input_tokens"], c["output_tokens"], c.get("cost"))
        for role, c in costs_doc.get("per_role", {}).items()
    )
    return {
        "gates": gates,
        "metrics": metrics,
        "costs": costs,
        "total_cost": costs_doc.get("total_cost"),
        "pair_class": {pid: p.get("class", "") for pid, p in doc.get("pairs", {}).items()},
        "flipped": tuple(doc.get("flipped", ())),
    }


def load_suite(folder: Path) -> SuiteOutputs:
    """Read ``folder`` (``gauge-out/<suite>``); a missing or malformed file raises :class:`ReportInputError`
    naming it. ``reports/metrics.json`` and ``reports/elo.svg`` are optional (an interrupted run)."""
    if not is_suite_folder(folder):
        raise ReportInputError(f"{folder}: no pairs/pair_results.jsonl here; pass a --gauge-out folder")
    manifest = _json(folder / "manifest.json")
    tasks_path = folder / "tasks.jsonl"
    task_rows = _jsonl(tasks_path)[1:] if tasks_path.is_file() else []
    records = tuple(CaseRecord.from_json(r) for r in _jsonl(folder / "pairs" / "pair_results.jsonl"))
    transcripts = tuple(
        _transcript_row(row) for path in sorted((folder / "agents").glob("*.jsonl")) for row in _jsonl(path)
    )
    ledger_path = folder / "agent_runs.jsonl"
    ledger = tuple(LedgerRecord.from_json(r) for r in _jsonl(ledger_path)) if ledger_path.is_file() else ()
    svg_path = folder / "reports" / "elo.svg"
    tasks = tuple(TaskRow(t["task_id"], t.get("category", ""), t.get("task_prompt", "")) for t in task_rows)
    return SuiteOutputs(
        name=str(manifest.get("suite") or folder.name),
        seed=manifest.get("seed"),
        backend=str(manifest.get("backend", "")),
        models={k: str(v) for k, v in (manifest.get("models") or {}).items() if v},
        tasks=tasks,
        records=records,
        transcripts=transcripts,
        ledger=ledger,
        elo_svg=svg_path.read_text(encoding="utf-8") if svg_path.is_file() else None,
        **_metrics_parts(_json(folder / "reports" / "metrics.json")),
    )
