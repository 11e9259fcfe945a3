"""The HTML page's transcript rows read from the agents' files on access (files/html.py's
TranscriptLines): the rows a whole read gives, by index or in order, and bad lines named."""

from __future__ import annotations

import gc
import json
from pathlib import Path

import pytest

from pytest_gauge._internal.files.html import ReportInputError, TranscriptLines
from pytest_gauge._internal.records import dumps


def _row(task: str, agent: str, sample: int = 0, reply: str = "ok") -> dict[str, object]:
    return {
        "task_id": task,
        "agent": agent,
        "sample": sample,
        "final_reply": reply,
        "turns": [{"role": "assistant", "content": reply}],
        "user_satisfied": True,
        "ended_by": "user_done",
        "spend": {"input_tokens": 3, "output_tokens": 4, "cost": None},
        "score": {"reward": 0.5, "task_success": True, "criteria": [], "constraints": []},
        "error": None,
    }


def _files(tmp_path: Path) -> list[Path]:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text("".join(dumps(_row(f"t{i}", "a", reply="é" * i)) + "\n" for i in range(3)), encoding="utf-8")
    b.write_text(
        "\n" + dumps(_row("t0", "b")) + "\n  \n" + dumps(_row("t1", "b", 1)) + "\n", encoding="utf-8"
    )
    return [a, b]


def test_rows_by_index_are_the_rows_in_order(tmp_path: Path) -> None:
    lines = TranscriptLines(_files(tmp_path))
    in_order = list(lines)
    assert len(lines) == len(in_order) == 5  # blank lines are no rows
    assert [(t.task_id, t.agent, t.sample) for t in in_order] == [
        ("t0", "a", 0), ("t1", "a", 0), ("t2", "a", 0), ("t0", "b", 0), ("t1", "b", 1),
    ]  # fmt: skip
    assert [lines[i] for i in (4, 0, 2, 1, 3)] == [in_order[i] for i in (4, 0, 2, 1, 3)]
    assert lines[-1] == in_order[-1] and list(lines[1:3]) == in_order[1:3]
    assert in_order[2].transcript is not None and in_order[2].transcript.final_reply == "éé"
    with pytest.raises(IndexError):
        lines[5]
    del lines
    gc.collect()  # its open files closed with it (no ResourceWarning under -W error)


def test_a_malformed_row_is_named_by_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text(dumps(_row("t0", "a")) + "\n" + '{"task_id": "t1", ' + "\n", encoding="utf-8")
    lines = TranscriptLines([path])
    assert lines[0].task_id == "t0"
    with pytest.raises(ReportInputError, match=f"{path}:2: not valid JSON"):
        lines[1]
    with pytest.raises(ReportInputError, match=f"{path}:2: not valid JSON"):
        list(lines)


def test_a_missing_file_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ReportInputError, match="cannot be read"):
        TranscriptLines([tmp_path / "gone.jsonl"])


def test_the_rows_are_the_files_rows(tmp_path: Path) -> None:
    """Each row is its line's JSON, as a whole read of the file gives it."""
    paths = _files(tmp_path)
    lines = TranscriptLines(paths)
    raw = [json.loads(x) for p in paths for x in p.read_text(encoding="utf-8").splitlines() if x.strip()]
    assert [(t.task_id, t.transcript.final_reply if t.transcript else None) for t in lines] == [
        (r["task_id"], r["final_reply"]) for r in raw
    ]
