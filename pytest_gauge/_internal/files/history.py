"""The verdict history file (``--gauge-history PATH``, docs/protocol.md#verdict-history): an SQLite
database of every run's per-task, per-agent and per-gate outcomes, the one home of its format.

stdlib :mod:`sqlite3` only: a CI job caches the file or passes it as an artifact, and
``python -m pytest_gauge history merge`` joins the histories of shards or branches.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from ..records.history import AgentOutcome, GateOutcome, HistoryRun, TaskOutcome

__all__ = [
    "FORMAT_VERSION",
    "HistoryError",
    "MergeResult",
    "append_runs",
    "check_history",
    "merge_histories",
    "read_history",
]

FORMAT_VERSION = 1  # PRAGMA user_version of a history file
_RUN = "run_id TEXT NOT NULL, suite TEXT NOT NULL, shard TEXT NOT NULL"
_SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS runs ({_RUN}, finished_at TEXT NOT NULL, seed INTEGER NOT NULL,"
    " backend TEXT NOT NULL, git_commit TEXT, hashes TEXT NOT NULL, PRIMARY KEY (run_id, suite, shard))",
    f"CREATE TABLE IF NOT EXISTS tasks ({_RUN}, task_id TEXT NOT NULL, task_hash TEXT NOT NULL,"
    " rules_hash TEXT NOT NULL, agents_hash TEXT NOT NULL, judge_hash TEXT NOT NULL, key TEXT NOT NULL,"
    " outcome TEXT NOT NULL, PRIMARY KEY (run_id, suite, shard, task_id))",
    f"CREATE TABLE IF NOT EXISTS agents ({_RUN}, agent TEXT NOT NULL, model TEXT NOT NULL,"
    " prompt_hash TEXT NOT NULL, successes INTEGER NOT NULL, attempts INTEGER NOT NULL,"
    " PRIMARY KEY (run_id, suite, shard, agent))",
    f"CREATE TABLE IF NOT EXISTS gates ({_RUN}, expr TEXT NOT NULL, status TEXT NOT NULL, value REAL,"
    " low REAL, high REAL, n INTEGER NOT NULL, PRIMARY KEY (run_id, suite, shard, expr))",
    "CREATE INDEX IF NOT EXISTS tasks_by_key ON tasks (suite, task_id, key)",
)
_TABLES = ("runs", "tasks", "agents", "gates")


class HistoryError(Exception):
    """A history file that cannot be read or written: the message names the file and the fix."""


@dataclass(frozen=True)
class MergeResult:
    """What ``history merge`` did: suite runs read, written and skipped as already present."""

    read: int
    written: int
    duplicates: int


def _connect(path: Path) -> sqlite3.Connection:
    """The file opened with its version checked (a new file gets the schema)."""
    conn = sqlite3.connect(path)
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise HistoryError(f"history {path}: not a pytest-gauge history ({exc}); pass another path") from None
    if tables and version != FORMAT_VERSION:
        conn.close()
        raise HistoryError(
            f"history {path}: format version {version}, this pytest-gauge reads {FORMAT_VERSION}; "
            "start a new history file"
        )
    if not tables:
        with conn:
            for statement in _SCHEMA:
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {FORMAT_VERSION}")
    return conn


def check_history(path: Path) -> None:
    """Fail early (at configuration) on a history the end of the run could not read or write."""
    if not path.parent.is_dir():
        raise HistoryError(f"history {path}: folder {path.parent} does not exist; create it first")
    if path.exists():
        read_history(path)


def _insert(conn: sqlite3.Connection, runs: Iterable[HistoryRun]) -> int:
    """Each run's rows (a run already present is replaced: a run id is unique); the runs inserted."""
    count = 0
    for run in runs:
        ident = run.identity
        for table in _TABLES:
            conn.execute(f"DELETE FROM {table} WHERE run_id = ? AND suite = ? AND shard = ?", ident)
        hashes = json.dumps(dict(run.hashes), sort_keys=True)
        conn.execute(
            "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (*ident, run.finished_at, run.seed, run.backend, run.git_commit, hashes),
        )
        conn.executemany(
            "INSERT INTO tasks VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(*ident, t.task_id, t.task_hash, t.rules_hash, t.agents_hash, t.judge_hash, t.key, t.outcome)
             for t in run.tasks],
        )  # fmt: skip
        conn.executemany(
            "INSERT INTO agents VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [(*ident, a.agent, a.model, a.prompt_hash, a.successes, a.attempts) for a in run.agents],
        )
        conn.executemany(
            "INSERT INTO gates VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(*ident, g.expr, g.status, g.value, g.low, g.high, g.n) for g in run.gates],
        )
        count += 1
    return count


def append_runs(path: Path, runs: Sequence[HistoryRun]) -> None:
    """Add the runs to the history at ``path`` (created if missing), in one transaction."""
    try:
        with closing(_connect(path)) as conn, conn:
            _insert(conn, runs)
    except sqlite3.Error as exc:
        raise HistoryError(f"history {path}: could not write ({exc})") from None


def _rows(conn: sqlite3.Connection, table: str) -> dict[tuple[str, str, str], list[tuple[object, ...]]]:
    found: dict[tuple[str, str, str], list[tuple[object, ...]]] = {}
    for row in conn.execute(f"SELECT * FROM {table} ORDER BY rowid"):
        found.setdefault((str(row[0]), str(row[1]), str(row[2])), []).append(tuple(row[3:]))
    return found


def read_history(path: Path) -> list[HistoryRun]:
    """Every suite run of the history, oldest first (by finish time, to the second, then as written)."""
    if not path.is_file():
        raise HistoryError(f"history {path}: no such file")
    try:
        with closing(_connect(path)) as conn:
            tasks, agents, gates = (_rows(conn, t) for t in _TABLES[1:])
            runs = conn.execute("SELECT * FROM runs ORDER BY finished_at, rowid").fetchall()
    except sqlite3.Error as exc:
        raise HistoryError(f"history {path}: could not read ({exc})") from None
    out = []
    for run_id, suite, shard, finished_at, seed, backend, commit, hashes in runs:
        ident = (run_id, suite, shard)
        out.append(
            HistoryRun(
                run_id, suite, shard, finished_at, int(seed), backend, commit,
                tuple(sorted(json.loads(hashes).items())),
                tuple(TaskOutcome(*map(str, r)) for r in tasks.get(ident, [])),
                tuple(AgentOutcome(str(r[0]), str(r[1]), str(r[2]), int(str(r[3])), int(str(r[4])))
                      for r in agents.get(ident, [])),
                tuple(_gate(r) for r in gates.get(ident, [])),
            )
        )  # fmt: skip
    return out


def _float(value: object) -> float | None:
    return None if value is None else float(str(value))


def _gate(row: Sequence[object]) -> GateOutcome:
    expr, status, value, low, high, n = row
    return GateOutcome(str(expr), str(status), _float(value), _float(low), _float(high), int(str(n)))


def merge_histories(inputs: Sequence[Path], out: Path) -> MergeResult:
    """Join histories into ``out`` (which may be one of them): every suite run once, the first copy of a
    run id kept; written to a temporary file and moved into place, so a failed merge leaves ``out``."""
    runs: dict[tuple[str, str, str], HistoryRun] = {}
    read = 0
    for path in inputs:
        for run in read_history(path):
            read += 1
            runs.setdefault(run.identity, run)
    temporary = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    temporary.unlink(missing_ok=True)
    try:
        append_runs(temporary, sorted(runs.values(), key=lambda r: r.finished_at))  # stable: input order
        os.replace(temporary, out)
    finally:
        temporary.unlink(missing_ok=True)
    return MergeResult(read=read, written=len(runs), duplicates=read - len(runs))
