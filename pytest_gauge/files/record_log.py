"""Per-process record logs in the run folder: each xdist worker appends its cases' records (one JSON line
each) to ``records-<worker>.jsonl``, and the process that ends the run reads them back as a stream.

Records travel through files, not through the test reports xdist sends: a report's
``user_properties`` is copied into every report the controller keeps (pytest's terminal reporter keeps
them all), so a record sent that way stayed in the controller's memory twice, as JSON and as a record,
for the whole run. A worker writes and flushes a record's line before its test's report is sent, so once
every report arrived every line is complete; a worker killed mid-write leaves at most one cut-off last
line, which the reader skips.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

__all__ = ["RecordLog", "read_new_lines"]


class RecordLog:
    """One process's record log, opened for appending on the first record (a worker that runs no case
    leaves no file)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: IO[str] | None = None

    def append(self, line: str) -> None:
        """Append one record's JSON ``line`` (no newline in it) and flush it to the file."""
        if self._fh is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(self.path, "a", encoding="utf-8")  # closed by close()
        self._fh.write(line + "\n")
        self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def read_new_lines(path: Path, offset: int) -> tuple[Iterator[dict[str, Any]], list[int]]:
    """The complete JSON lines of ``path`` from byte ``offset`` on, parsed one at a time (never the whole
    file in memory), and a one-item list that holds the offset after the last complete line once the
    iterator is exhausted (a cut-off last line is left for a later read)."""
    end = [offset]

    def lines() -> Iterator[dict[str, Any]]:
        try:
            fh = open(path, "rb")  # closed below
        except FileNotFoundError:
            return
        with fh:
            fh.seek(offset)
            for raw in fh:
                if not raw.endswith(b"\n"):
                    break  # a line still being written (or cut off by a crash)
                end[0] += len(raw)
                data = json.loads(raw)
                if isinstance(data, dict):
                    yield data

    return lines(), end
