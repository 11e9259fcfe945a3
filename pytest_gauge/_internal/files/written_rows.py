"""A suite's transcript rows as just written (``agents/<agent>.jsonl``), read back from the files a row at
a time on each pass rather than held: at the end of a large run every transcript as parsed JSON was a
large part of the controller's peak (an agent's file parsed at once still added 11 MB at 1,000 tasks)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from ..records.json_types import JSONObject
from .folders import SuiteFolder
from .readwrite import iter_jsonl_lines

__all__ = ["TranscriptFile", "WrittenRows"]


class TranscriptFile(Iterable[JSONObject]):
    """One agent's transcript file as rows: each iteration reads the file afresh, a row at a time."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __iter__(self) -> Iterator[JSONObject]:
        return (row for _, row in iter_jsonl_lines(self.path))


class WrittenRows(Mapping[str, Iterable[JSONObject]]):
    """Each agent's transcript rows, as its file holds them (the rows :func:`write_outputs
    <pytest_gauge._internal.finish.outputs.write_outputs>` wrote, streamed from the file on every pass)."""

    def __init__(self, out: Path, agents: Sequence[str]) -> None:
        self._folder = SuiteFolder(out)
        self._agents = tuple(agents)

    def __getitem__(self, agent: str) -> TranscriptFile:
        if agent not in self._agents:
            raise KeyError(agent)
        return TranscriptFile(self._folder.transcripts(agent))

    def __iter__(self) -> Iterator[str]:
        return iter(self._agents)

    def __len__(self) -> int:
        return len(self._agents)
