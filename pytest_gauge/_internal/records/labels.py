"""Human labels of judged cases: one reviewer's blind A/B/tie answer on one case, in the slot
terms the judge saw, and one case of a labelling sample with its stratum and weight
(docs/protocol.md#human-labels). ``files/labels.py`` reads and writes them."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from . import dumps
from .json_types import JSONObject

__all__ = [
    "EMPTY_SEEN",
    "LABEL_CHOICES",
    "LABEL_STRATA",
    "Label",
    "SampleCase",
    "SampleCaseJSON",
    "bind_labels",
    "case_transcripts",
    "hash_of_seen",
    "seen_text",
    "transcripts_hash",
]

LABEL_CHOICES = ("A", "B", "tie")
"""What a labeller answers: slot A, slot B or a tie (keys 1, 2, 3 in the HTML report)."""

LABEL_STRATA = ("disagree", "flip", "close", "rest")
"""The strata of ``labels sample``, in the order a case is put in the first that fits: the judge chose
the lower rule reward, the verdict flipped with the order, a close pair, everything else."""


@dataclass(frozen=True)
class Label:
    """One line of ``labels.jsonl``: ``labeller``'s answer on ``case_id`` of ``suite`` (slot terms);
    ``weight`` is the sample's inverse inclusion probability (1 without a sample)."""

    suite: str
    case_id: str
    label: str
    labeller: str
    note: str = ""
    weight: float = 1.0
    stratum: str = ""
    transcripts: str = ""  # the hash of the two transcripts it was given on ("": not recorded)

    def to_json(self) -> JSONObject:
        """The line as written (``format_version`` 1; ``transcripts`` when known)."""
        return {
            "format_version": 1,
            "suite": self.suite,
            "case_id": self.case_id,
            "label": self.label,
            "labeller": self.labeller,
            "note": self.note,
            "weight": self.weight,
            "stratum": self.stratum,
            **({"transcripts": self.transcripts} if self.transcripts else {}),
        }


def seen_text(transcript: Mapping[str, Any] | None) -> str:
    """What a labeller sees of one transcript, as canonical JSON: its final reply and turns (role,
    content, tool calls' names, arguments and results; a failed transcript counts as empty)."""

    def turn(x: Mapping[str, Any]) -> list[Any]:  # a tool call's latency is no part of what was said
        calls = [[c.get("name"), c.get("arguments"), c.get("result")] for c in x.get("tool_calls") or []]
        return [x.get("role"), x.get("content"), calls]

    t = transcript or {}
    return dumps([t.get("final_reply"), [turn(x) for x in t.get("turns") or []]])


EMPTY_SEEN = seen_text(None)
""":func:`seen_text` of a missing or failed transcript."""


def transcripts_hash(left: Mapping[str, Any] | None, right: Mapping[str, Any] | None) -> str:
    """What a labeller judged of a case, by content: the two transcripts' :func:`seen_text`, left agent
    first. The HTML page puts it in each exported label."""
    return hash_of_seen(seen_text(left), seen_text(right))


def hash_of_seen(left: str, right: str) -> str:
    """:func:`transcripts_hash` from the two transcripts' :func:`seen_text` (the canonical JSON of the pair
    is theirs joined: ``dumps([a, b])`` is ``"[" + dumps(a) + "," + dumps(b) + "]"``)."""
    return hashlib.sha256(f"[{left},{right}]".encode()).hexdigest()[:16]


def case_transcripts(
    cases: Iterable[tuple[str, str, str, str, int]], seen: Mapping[tuple[str, str, int], str]
) -> dict[str, str]:
    """Each case's :func:`transcripts_hash` from ``(case_id, task_id, left, right, sample)`` and the
    transcripts' :func:`seen_text` by (task, agent, sample): the text, not the transcript, held per
    transcript (a suite's transcripts as JSON objects were most of the HTML page's peak)."""
    return {
        cid: hash_of_seen(seen.get((task, left, s), EMPTY_SEEN), seen.get((task, right, s), EMPTY_SEEN))
        for cid, task, left, right, s in cases
    }


def bind_labels(labels: Sequence[Label], hashes: Mapping[str, str] | None) -> tuple[list[Label], int]:
    """The labels still about this run's transcripts, and how many were set aside: a label that names
    the hash of what it was given on, where this run's case now hashes otherwise (the transcripts
    changed). Labels without a hash, or without ``hashes``, are kept."""
    if not hashes:
        return list(labels), 0
    kept = [x for x in labels if not x.transcripts or hashes.get(x.case_id, x.transcripts) == x.transcripts]
    return kept, len(labels) - len(kept)


class SampleCaseJSON(TypedDict):
    """One line of ``labels/sample.jsonl`` (:meth:`SampleCase.to_json`)."""

    position: int
    case_id: str
    stratum: str
    weight: float


@dataclass(frozen=True)
class SampleCase:
    """One case of ``labels/sample.jsonl``: its place in the order the page offers, its stratum, the
    stratum's size and sampled count, and its weight (stratum size / sampled)."""

    case_id: str
    stratum: str
    weight: float
    position: int

    def to_json(self) -> SampleCaseJSON:
        """The line as written."""
        return {
            "position": self.position,
            "case_id": self.case_id,
            "stratum": self.stratum,
            "weight": self.weight,
        }
