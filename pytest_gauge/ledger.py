"""One record per gateway attempt (SPEC §8), appended by each process to its own file and merged on
the controller in a deterministic order, so ``agent_runs.jsonl`` is the same with ``-n 0`` and ``-n 4``.

Each process appends whole lines to ``ledger-<worker>.jsonl`` in the run folder and flushes after every
record, so a crash loses at most the line being written; the controller merges every worker's file
(also those of workers that died), sorted by :meth:`LedgerRecord.sort_key`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from pathlib import Path

from .records import LedgerRecord, dumps

__all__ = ["Ledger", "merge_ledgers"]


class Ledger:
    """This process's ledger: appends records to its own JSON-lines file and keeps running totals."""

    def __init__(self, folder: Path, worker: str) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / f"ledger-{worker}.jsonl"
        self.worker = worker
        self._fh = open(self.path, "a", encoding="utf-8")
        self._lock = threading.Lock()
        self.calls = 0
        self.live_calls = 0
        self.cached_calls = 0
        self.retries = 0
        self.tokens = 0
        self.cost = 0.0

    def append(self, record: LedgerRecord) -> None:
        record.worker = self.worker
        line = dumps(record.to_json())
        with self._lock:
            self._fh.write(line + "\n")
            self._fh.flush()
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

    def close(self) -> None:
        with self._lock:
            if not self._fh.closed:
                self._fh.close()


def read_ledger_file(path: Path) -> list[LedgerRecord]:
    records = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                records.append(LedgerRecord.from_json(json.loads(line)))
            except (json.JSONDecodeError, TypeError, KeyError):
                continue  # a line cut short by a crashed worker
    return records


def merge_ledgers(files: Iterable[Path]) -> list[LedgerRecord]:
    """All workers' records in the deterministic merge order."""
    merged: list[LedgerRecord] = []
    for path in files:
        merged.extend(read_ledger_file(path))
    merged.sort(key=LedgerRecord.sort_key)
    return merged
