"""The key of one unit of the engine's work, as the ledger's ``work`` field and the work store spell it:
``transcript/<task>/<agent>/<sample>`` or ``judge/<case>/<judge index>/<repeat>``. One formatter and one
parser (task ids, agent names and case ids never hold a ``/``); any other ``work`` (your own tests'
node ids) is no work key."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["WorkKey", "parse_work"]

_KINDS = ("transcript", "judge")


@dataclass(frozen=True)
class WorkKey:
    """``kind`` ``transcript``: ``owner`` the task, ``who`` the agent, ``index`` the sample; ``judge``:
    ``owner`` the case, ``who`` the judge's index in the panel, ``index`` the repeat."""

    kind: Literal["transcript", "judge"]
    owner: str
    who: str
    index: int

    @classmethod
    def transcript(cls, task_id: str, agent: str, sample: int) -> WorkKey:
        return cls("transcript", task_id, agent, sample)

    @classmethod
    def judge(cls, case_id: str, judge_index: int, repeat: int) -> WorkKey:
        return cls("judge", case_id, str(judge_index), repeat)

    def __str__(self) -> str:
        return f"{self.kind}/{self.owner}/{self.who}/{self.index}"


def parse_work(work: str) -> WorkKey | None:
    """The work key ``work`` spells, or None when it is not one (an ad-hoc call's node id)."""
    parts = work.split("/")
    if len(parts) != 4 or parts[0] not in _KINDS or not (parts[3].isascii() and parts[3].isdigit()):
        return None
    kind: Literal["transcript", "judge"] = "transcript" if parts[0] == "transcript" else "judge"
    return WorkKey(kind, parts[1], parts[2], int(parts[3]))
