"""Human labels of judged cases: one reviewer's blind A/B/tie answer on one case, in the slot
terms the judge saw, and one case of a labelling sample with its stratum and weight
(docs/protocol.md#human-labels). ``files/labels.py`` reads and writes them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["LABEL_CHOICES", "LABEL_STRATA", "Label", "SampleCase"]

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

    def to_json(self) -> dict[str, Any]:
        """The line as written (``format_version`` 1)."""
        return {
            "format_version": 1,
            "suite": self.suite,
            "case_id": self.case_id,
            "label": self.label,
            "labeller": self.labeller,
            "note": self.note,
            "weight": self.weight,
            "stratum": self.stratum,
        }


@dataclass(frozen=True)
class SampleCase:
    """One case of ``labels/sample.jsonl``: its place in the order the page offers, its stratum, the
    stratum's size and sampled count, and its weight (stratum size / sampled)."""

    case_id: str
    stratum: str
    weight: float
    position: int

    def to_json(self) -> dict[str, Any]:
        """The line as written."""
        return {
            "position": self.position,
            "case_id": self.case_id,
            "stratum": self.stratum,
            "weight": self.weight,
        }
