"""The verdict history file: runs written and read back whole, merges without duplicates, bad files named."""

from __future__ import annotations

import io
import sqlite3
from pathlib import Path

import pytest

from pytest_gauge._internal.cli import main
from pytest_gauge._internal.files.history import (
    HistoryError,
    append_runs,
    check_history,
    merge_histories,
    read_history,
)
from pytest_gauge._internal.records.history import AgentOutcome, GateOutcome, HistoryRun, TaskOutcome


def a_run(run_id: str, finished_at: str = "2026-01-01T00:00:00Z", outcome: str = '{"x": 1}') -> HistoryRun:
    return HistoryRun(
        run_id=run_id,
        suite="mini",
        shard="",
        finished_at=finished_at,
        seed=3,
        backend="sim",
        git_commit=None,
        hashes=(("judge_prompt", "j"), ("tasks", "t")),
        tasks=(
            TaskOutcome("m01", "th", "rh", "ah", "jh", "key1", outcome),
            TaskOutcome("m02", "a", "b", "c", "d", "e", "{}"),
        ),
        agents=(AgentOutcome("agent_x", "sim-agent-x", "ph", 4, 5),),
        gates=(
            GateOutcome("flip_rate <= 0.15", "pass", 0.1, 0.02, 0.2, 30),
            GateOutcome("x", "skipped", None, None, None, 0),
        ),
    )


def test_runs_read_back_as_written_oldest_first(tmp_path: Path) -> None:
    path = tmp_path / "h.db"
    late, early = a_run("r2", "2026-01-02T00:00:00Z"), a_run("r1", "2026-01-01T00:00:00Z")
    append_runs(path, [late])
    append_runs(path, [early])
    assert read_history(path) == [early, late]


def test_a_run_written_again_replaces_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "h.db"
    append_runs(path, [a_run("r1", outcome="old")])
    append_runs(path, [a_run("r1", outcome="new")])
    (run,) = read_history(path)
    assert run.tasks[0].outcome == "new"


def test_merge_keeps_each_run_once(tmp_path: Path) -> None:
    a, b, out = tmp_path / "a.db", tmp_path / "b.db", tmp_path / "c.db"
    append_runs(a, [a_run("r1"), a_run("r2", "2026-01-02T00:00:00Z")])
    append_runs(b, [a_run("r2", "2026-01-02T00:00:00Z"), a_run("r3", "2026-01-03T00:00:00Z")])
    merged = merge_histories([a, b], out)
    assert (merged.read, merged.written, merged.duplicates) == (4, 3, 1)
    assert [r.run_id for r in read_history(out)] == ["r1", "r2", "r3"]
    again = merge_histories([out, a], out)  # into one of its inputs
    assert again.written == 3 and [r.run_id for r in read_history(out)] == ["r1", "r2", "r3"]


def test_a_file_that_is_no_history_is_named(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello, this is not SQLite\n" * 40)
    with pytest.raises(HistoryError, match=r"notes\.txt: not a pytest-gauge history"):
        check_history(path)
    with pytest.raises(HistoryError, match="does not exist"):
        check_history(tmp_path / "missing" / "h.db")


def test_another_format_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "h.db"
    append_runs(path, [a_run("r1")])
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version = 99")
    with pytest.raises(HistoryError, match="format version 99"):
        read_history(path)


def test_the_merge_command_joins_histories_and_names_a_bad_one(tmp_path: Path) -> None:
    a, b, out = tmp_path / "a.db", tmp_path / "b.db", tmp_path / "c.db"
    append_runs(a, [a_run("r1")])
    append_runs(b, [a_run("r1"), a_run("r2", "2026-01-02T00:00:00Z")])
    said, errors = io.StringIO(), io.StringIO()
    argv = ["history", "merge", str(a), str(b), "--out", str(out)]
    assert main(argv, environ={}, out=said, err=errors) == 0
    assert "wrote 2 suite runs" in said.getvalue() and "1 already present" in said.getvalue()
    assert [r.run_id for r in read_history(out)] == ["r1", "r2"]
    bad = tmp_path / "bad.db"
    bad.write_text("not a database at all\n" * 50)
    assert main(["history", "merge", str(bad), "--out", str(out)], environ={}, out=said, err=errors) == 1
    assert "bad.db: not a pytest-gauge history" in errors.getvalue()
    assert [r.run_id for r in read_history(out)] == ["r1", "r2"]  # a failed merge leaves the output


def test_runs_finished_in_the_same_second_read_back_as_written(tmp_path: Path) -> None:
    path, out = tmp_path / "h.db", tmp_path / "merged.db"
    for run_id in ("zz", "aa", "mm"):  # ids against the order they were written in
        append_runs(path, [a_run(run_id)])
    assert [r.run_id for r in read_history(path)] == ["zz", "aa", "mm"]
    merge_histories([path], out)
    assert [r.run_id for r in read_history(out)] == ["zz", "aa", "mm"]
