"""One record per gateway attempt (docs/protocol.md#ledger), appended by each process to its own file and
merged on the controller in a deterministic order, so ``agent_runs.jsonl`` is the same with ``-n 0`` and
``-n 4``.

Each process appends whole lines to ``ledger-<worker>.jsonl`` in the run folder and flushes after every
record, so a crash loses at most the line being written; the controller merges every worker's file
(also those of workers that died), sorted by :meth:`LedgerRecord.sort_key`.

Write-ahead: before an attempt is sent, :meth:`Ledger.begin` writes a ``sent`` line for it; its outcome
line follows when the answer (or the failure) comes. At merge a ``sent`` line with an outcome is dropped,
one without (the process was killed, or stopped before the answer came) becomes the attempt's only line,
``status: "interrupted"`` with ``possibly_billed: true`` and no cost. So every request that may have
reached the gateway has exactly one line in ``agent_runs.jsonl``, whatever happened to the process.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import TypeVar, cast

from ..files.folders import RunFolder
from ..records import LedgerRecord, dumps
from ..records.json_types import JSONObject
from ..records.ledger_columns import LedgerColumns

__all__ = [
    "INTERRUPTED",
    "SENT",
    "Ledger",
    "attribute_shared_calls",
    "merge_ledgers",
    "one_history_per_call",
    "resolve_sent",
]

SENT = "sent"
"""Status of a write-ahead line: the attempt is about to be sent, its outcome line follows."""
INTERRUPTED = "interrupted"
"""Status of an attempt whose outcome never came (process stopped or killed): possibly billed."""


class Ledger:
    """This process's ledger: appends records to its own JSON-lines file and keeps running totals."""

    def __init__(self, folder: Path, worker: str) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.path = RunFolder(folder).ledger(worker)
        self.worker = worker
        self._fh = open(self.path, "a", encoding="utf-8")
        self._lock = threading.Lock()
        self.calls = 0
        self.live_calls = 0
        self.cached_calls = 0
        self.retries = 0
        self.tokens = 0
        self.cost = 0.0  # of the priced attempts sent
        self.unpriced = 0  # attempts sent that reported usage for a model without a price
        self._watchers: list[Callable[[LedgerRecord], None]] = []

    def watch(self, fn: Callable[[LedgerRecord], None]) -> None:
        """Call ``fn`` with every record appended from now on, once it is written (in the appending
        thread): the fixtures sum each test's spend without re-reading the file."""
        self._watchers.append(fn)

    def _write(self, record: LedgerRecord) -> None:
        """One whole line, flushed at once (the caller holds the lock)."""
        record.worker = self.worker
        self._fh.write(dumps(record.to_json()) + "\n")
        self._fh.flush()

    def append(self, record: LedgerRecord) -> None:
        """An attempt's outcome (or a cache hit), counted in the running totals."""
        with self._lock:
            self._write(record)
            self.calls += 1
            if record.cache_hit:
                self.cached_calls += 1
            else:
                self.live_calls += 1
                if record.attempt > 1:
                    self.retries += 1
                if record.usage:
                    self.tokens += record.usage.total_tokens
                if record.cost:
                    self.cost += record.cost
                elif record.cost is None and record.usage is not None:
                    self.unpriced += 1
        for fn in self._watchers:
            fn(record)

    def begin(self, record: LedgerRecord) -> None:
        """The write-ahead line of an attempt about to be sent (``status: "sent"``); not in the totals."""
        with self._lock:
            self._write(record)

    def close(self) -> None:
        with self._lock:
            if not self._fh.closed:
                self._fh.close()


_Kept = TypeVar("_Kept")
"""What a merge keeps of each resolved line: the record itself, or its line number in the columns."""


def resolve_sent(records: Iterable[LedgerRecord | _SentLine]) -> list[LedgerRecord]:
    """One process's lines (in file order) with each write-ahead ``sent`` line matched to its outcome:
    matched ones dropped, unmatched ones turned into ``interrupted``, ``possibly_billed`` attempts."""
    return _matched(records, lambda record: record)


def _matched(lines: Iterable[LedgerRecord | _SentLine], keep: Callable[[LedgerRecord], _Kept]) -> list[_Kept]:
    """:func:`resolve_sent`'s matching, each outcome passed through ``keep`` as it is read and each
    unanswered write-ahead line, made interrupted, at the end: the kept values in the resolved order."""
    out: list[_Kept | LedgerRecord | _SentLine] = []
    open_attempts: dict[tuple[str, int, str | None], list[int]] = {}
    for line in lines:
        key = (line.call_id, line.attempt, line.request)
        if line.status == SENT:
            open_attempts.setdefault(key, []).append(len(out))
            out.append(line)
        elif line.cache_hit or not open_attempts.get(key):
            out.append(keep(cast(LedgerRecord, line)))
        else:  # the outcome takes the place of its write-ahead line
            out[open_attempts[key].pop(0)] = keep(cast(LedgerRecord, line))
    for indexes in open_attempts.values():
        for i in indexes:
            sent = out[i]
            out[i] = keep(
                _interrupted(sent.record() if isinstance(sent, _SentLine) else cast(LedgerRecord, sent))
            )
    return cast("list[_Kept]", out)  # every write-ahead line was replaced above


def read_ledger_file(path: Path) -> list[LedgerRecord]:
    """One process's ledger file, write-ahead lines resolved (see :func:`resolve_sent`). A ``sent`` line
    is read into a record only if no outcome answers it (half a run's lines are answered ``sent`` ones)."""
    return resolve_sent(list(_file_lines(path)))


def _file_lines(path: Path) -> Iterator[LedgerRecord | _SentLine]:
    """A ledger file's lines in order: outcomes as records, write-ahead lines as :class:`_SentLine`;
    a line cut short by a crashed worker is skipped."""
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                row = json.loads(line)
                if isinstance(row, dict) and row.get("status") == SENT:
                    yield _SentLine(line, row)
                else:
                    yield LedgerRecord.from_json(row)
            except (json.JSONDecodeError, TypeError, KeyError, AttributeError):
                continue  # a line cut short by a crashed worker


def _resolved_lines(path: Path, rows: _Rows) -> list[int]:
    """:func:`read_ledger_file` straight into ``rows``: each outcome appended as it is read; the file's
    line numbers in :func:`resolve_sent`'s order (only the unanswered write-ahead lines are held)."""
    return _matched(_file_lines(path), lambda record: rows.add([record])[0])


def _interrupted(record: LedgerRecord) -> LedgerRecord:
    """A write-ahead line no outcome answered: the attempt, interrupted and possibly billed."""
    return replace(
        record,
        status=INTERRUPTED,
        possibly_billed=True,
        error="no outcome recorded: the process stopped while the request may have been in flight",
    )


class _SentLine:
    """A write-ahead line as read: its text and match key, made a record only if it stays unanswered
    (its parsed JSON, kept for each of half a file's lines, was most of the peak of reading a ledger)."""

    __slots__ = ("attempt", "call_id", "line", "request")
    status = SENT
    cache_hit = False

    def __init__(self, line: str, row: JSONObject) -> None:
        self.line = line
        self.call_id, self.attempt, self.request = row["call_id"], row["attempt"], row.get("request")

    def record(self) -> LedgerRecord:
        return LedgerRecord.from_json(json.loads(self.line))


def merge_ledgers(files: Iterable[Path]) -> LedgerColumns:
    """All workers' records in the deterministic merge order, shared calls attributed canonically
    (:func:`one_history_per_call`, then :func:`attribute_shared_calls`), held as columns: filled a file
    at a time, and only the lines of a call or request that several histories share made records
    again (a whole run's ledger as records was a large part of the controller's peak)."""
    rows = _Rows(LedgerColumns())
    for path in files:
        rows.group(_resolved_lines(path, rows))
    order = _attributed_rows(rows, _one_history_rows(rows))
    order.sort(key=rows.key.__getitem__)  # stable: as attribute_shared_calls sorts its records
    return rows.lines.take(order).done()


class _Rows:
    """The merge's lines (columns) and, by line number, what it groups and sorts them by: each call's
    first line, and its other lines only for a call that has several (most have one)."""

    def __init__(self, lines: LedgerColumns) -> None:
        self.lines = lines
        self.first: dict[tuple[str, str], int] = {}  # (suite, call id) -> its first line
        self.more: dict[tuple[str, str], list[int]] = {}  # the call's other lines, when it has several
        self.worker: list[str] = []
        self.call_id: list[str] = []
        self.suite: list[str] = []
        self.request: list[str | None] = []
        self.key: list[tuple[str, str, int, int]] = []
        self._works: dict[str, str] = {}  # each unit of work's one string, for the keys of its lines

    def add(self, records: Iterable[LedgerRecord]) -> list[int]:
        """Append ``records``; their line numbers (a file's lines are then noted by :meth:`group`, a
        merge rule's results are not)."""
        out = []
        for r in records:
            i = len(self.key)
            out.append(i)
            self.lines.append(r)
            self.worker.append(r.worker)
            self.call_id.append(r.call_id)
            self.request.append(r.request)
            self.suite.append(r.suite)
            suite, work, n, attempt = r.sort_key()
            self.key.append((suite, self._works.setdefault(work, work), n, attempt))  # one string a work
        return out

    def group(self, lines: Iterable[int]) -> None:
        """Note ``lines`` (in merge order) under their calls."""
        for i in lines:
            call = (self.suite[i], self.call_id[i])
            if self.first.setdefault(call, i) != i:
                self.more.setdefault(call, []).append(i)


def _one_history_rows(rows: _Rows) -> list[int]:
    """:func:`one_history_per_call` on line numbers: a call with one history keeps its lines, the lines
    of a call with several are made records and put through it (their results appended)."""
    out: list[int] = []
    for call, first in rows.first.items():
        more = rows.more.get(call)
        if more is None:
            out.append(first)
            continue
        histories: dict[str, list[int]] = {}
        for i in (first, *more):
            histories.setdefault(rows.worker[i], []).append(i)
        if len(histories) == 1:
            out += [first, *more]
        else:
            lines = [rows.lines[i] for history in histories.values() for i in history]
            out += rows.add(one_history_per_call(lines))
    return out


def _attributed_rows(rows: _Rows, order: list[int]) -> list[int]:
    """:func:`attribute_shared_calls` on line numbers (not yet sorted): a request of one call keeps its
    lines, those of a request several calls share are made records and put through it."""
    by_request: dict[str, dict[str, list[int]]] = {}
    out: list[int] = []
    for i in order:
        request = rows.request[i]
        if request is None:
            out.append(i)
        else:
            by_request.setdefault(request, {}).setdefault(rows.call_id[i], []).append(i)
    for calls in by_request.values():
        if len(calls) == 1:
            out.extend(next(iter(calls.values())))
        else:
            lines = [rows.lines[i] for history in calls.values() for i in history]
            out.extend(rows.add(attribute_shared_calls(lines)))
    return out


def one_history_per_call(records: Iterable[LedgerRecord]) -> list[LedgerRecord]:
    """Each call (``call_id``) with one history, so ``(call_id, attempt)`` is unique after any crash or
    interrupt. A unit of work another process started and could not store (it crashed or was stopped)
    is done again, so one call can have a history in two processes' files: the histories are taken in
    order (the one that reached the gateway first, then by time), a later history's cache hits are
    dropped once an earlier one was answered (the same answer read back: no call, no cost), and its
    live attempts (real requests, each kept) are numbered after the earlier ones."""
    by_call: dict[tuple[str, str], dict[str, list[LedgerRecord]]] = {}
    out: list[LedgerRecord] = []
    for record in records:
        by_call.setdefault((record.suite, record.call_id), {}).setdefault(record.worker, []).append(record)
    for histories in by_call.values():
        if len(histories) == 1:
            out.extend(next(iter(histories.values())))
            continue
        answered, attempt = False, 0
        for history in sorted(histories.values(), key=_history_order):
            for r in sorted(history, key=lambda r: r.attempt):
                if r.cache_hit and answered:
                    continue
                attempt += 1
                out.append(r if r.attempt == attempt else replace(r, attempt=attempt))
                answered = answered or r.status == "ok"
    return out


def _history_order(history: list[LedgerRecord]) -> tuple[bool, float]:
    """Histories that reached the gateway first (in time), then cache hits."""
    reached_gateway = any(not r.cache_hit for r in history)
    return (not reached_gateway, min(r.ts for r in history))


def attribute_shared_calls(records: Iterable[LedgerRecord]) -> list[LedgerRecord]:
    """The records in merge order, with the calls that share a request attributed independently of timing.

    Calls of different work that send the same request share one gateway call: the cache's per-key lock
    lets one send it and the others read its answer. Which one sends it depends on which worker gets
    there first, so the histories of a request's calls are re-assigned in a fixed way: the history that
    reached the gateway goes to the call first in merge order, the cache hits to the others. Every
    attempt is kept (none lost or doubled) and the totals are unchanged; each call keeps its identity
    (call id, suite, task, role, model, strategy, work), so ``-n 0`` and ``-n 4`` give the same ledger.
    """
    calls_by_request: dict[str, dict[str, list[LedgerRecord]]] = {}
    out: list[LedgerRecord] = []
    for record in records:
        if record.request is None:
            out.append(record)
        else:
            calls_by_request.setdefault(record.request, {}).setdefault(record.call_id, []).append(record)
    for calls in calls_by_request.values():
        owners = sorted((history[0] for history in calls.values()), key=LedgerRecord.sort_key)
        histories = sorted(calls.values(), key=_history_order)
        for owner, history in zip(owners, histories, strict=True):
            out.extend(
                replace(
                    r,
                    call_id=owner.call_id,
                    suite=owner.suite,
                    task_id=owner.task_id,
                    role=owner.role,
                    model=owner.model,
                    strategy=owner.strategy,
                    work=owner.work,
                )
                for r in history
            )
    out.sort(key=LedgerRecord.sort_key)
    return out
