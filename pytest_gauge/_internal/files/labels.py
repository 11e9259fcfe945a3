"""``labels.jsonl`` (the HTML report's export of blind human labels) and ``labels/sample.jsonl`` (the
cases ``labels sample`` chose): their one reader and writer, errors naming the file and line
(docs/protocol.md#human-labels)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path

from ..records.json_types import JSONObject
from ..records.labels import LABEL_CHOICES, LABEL_STRATA, Label, SampleCase
from .readwrite import FileFormatError, read_jsonl_lines, write_atomic

__all__ = ["LabelsError", "read_labels", "read_sample", "suite_labels", "write_labels", "write_sample"]


MAX_WEIGHT = 1e9
"""Largest label weight: a sample's weight is its stratum's size over its sampled count, at most the number
of cases; past this a weighted sum could overflow (``1e308``) after the run has paid for its calls."""
MAX_LABELS_BYTES = 16 * 2**20
"""Largest labels file read (some 100,000 labels: more than people label; a larger one is a mistake that
would cost gigabytes of memory)."""


class LabelsError(FileFormatError):
    """A labels or sample file that cannot be read; the message names the file and line."""


def _text(row: JSONObject, key: str, where: str, *, required: bool = True) -> str:
    value = row.get(key, None if required else "")
    if not isinstance(value, str) or (required and not value.strip()):
        raise LabelsError(f"{where}: field {key!r} must be a non-empty string, got {value!r}")
    return value


def _weight(row: JSONObject, where: str) -> float:
    value = row.get("weight", 1.0)
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0 < value <= MAX_WEIGHT
    ):
        raise LabelsError(
            f"{where}: field 'weight' must be a number above 0 to {MAX_WEIGHT:,.0f}, got {value!r}"
        )
    return float(value)


def _label(row: JSONObject, where: str) -> Label:
    label = row.get("label")
    if label not in LABEL_CHOICES:
        raise LabelsError(f"{where}: field 'label' must be one of A, B, tie, got {label!r}")
    return Label(
        suite=_text(row, "suite", where),
        case_id=_text(row, "case_id", where),
        label=str(label),
        labeller=_text(row, "labeller", where),
        note=_text(row, "note", where, required=False),
        weight=_weight(row, where),
        stratum=_text(row, "stratum", where, required=False),
        transcripts=_text(row, "transcripts", where, required=False),
    )


def read_labels(paths: Iterable[Path]) -> list[Label]:
    """Every label of every file, in file then line order; a later line of the same (suite, case,
    labeller) replaces an earlier one (a labeller who changed their mind)."""
    found: dict[tuple[str, str, str], Label] = {}
    for path in paths:
        for number, row in read_jsonl_lines(path, error=LabelsError, max_bytes=MAX_LABELS_BYTES):
            lab = _label(row, f"{path}:{number}")
            found.pop((lab.suite, lab.case_id, lab.labeller), None)
            found[(lab.suite, lab.case_id, lab.labeller)] = lab
    return list(found.values())


def suite_labels(suite: str, files: Sequence[str]) -> list[Label] | None:
    """The labels of ``suite`` in the ``--gauge-labels`` files (None when none was given)."""
    if not files:
        return None
    return [x for x in read_labels(Path(f) for f in files) if x.suite == suite]


def write_labels(path: Path, labels: Sequence[Label]) -> None:
    """``labels.jsonl``: one line per label (tests and tools; the page writes the same lines)."""
    write_atomic(path, "".join(json.dumps(x.to_json(), ensure_ascii=False) + "\n" for x in labels))


def read_sample(path: Path) -> list[SampleCase]:
    """A suite's ``labels/sample.jsonl`` (``[]`` when there is none), in the order the page offers it."""
    rows: list[SampleCase] = []
    for number, row in read_jsonl_lines(path, missing_ok=True, error=LabelsError, max_bytes=MAX_LABELS_BYTES):
        where = f"{path}:{number}"
        stratum = _text(row, "stratum", where)
        if stratum not in LABEL_STRATA:
            raise LabelsError(f"{where}: field 'stratum' must be one of {', '.join(LABEL_STRATA)}")
        position = row.get("position")
        if not isinstance(position, int) or isinstance(position, bool):
            raise LabelsError(f"{where}: field 'position' must be a whole number, got {position!r}")
        rows.append(SampleCase(_text(row, "case_id", where), stratum, _weight(row, where), position))
    return sorted(rows, key=lambda c: c.position)


def write_sample(path: Path, sample: Sequence[SampleCase]) -> None:
    """Write a suite's ``labels/sample.jsonl``."""
    write_atomic(path, "".join(json.dumps(c.to_json(), ensure_ascii=False) + "\n" for c in sample))
