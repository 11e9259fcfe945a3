"""A suite's transcript rows as just written (``agents/<agent>.jsonl``), read back from the files on each
access rather than held: at the end of a large run every transcript as parsed JSON was a large part of
the controller's peak, held from writing the files through the analysis to the HTML page."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from ..records.json_types import JSONObject
from .folders import SuiteFolder
from .readwrite import read_jsonl

__all__ = ["WrittenRows"]


class WrittenRows(Mapping[str, list[JSONObject]]):
    """Each agent's transcript rows, as its file holds them (the rows :func:`write_outputs
    <pytest_gauge._internal.finish.outputs.write_outputs>` wrote, read fresh on every access)."""

    def __init__(self, out: Path, agents: Sequence[str]) -> None:
        self._folder = SuiteFolder(out)
        self._agents = tuple(agents)

    def __getitem__(self, agent: str) -> list[JSONObject]:
        if agent not in self._agents:
            raise KeyError(agent)
        return list(read_jsonl(self._folder.transcripts(agent)))

    def __iter__(self) -> Iterator[str]:
        return iter(self._agents)

    def __len__(self) -> int:
        return len(self._agents)
