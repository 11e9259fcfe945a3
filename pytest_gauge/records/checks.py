"""A suite-level check's outcome (a gate, a report snapshot) as the process that ends the run hands it to
the test item that reports it: outcome, message and the properties junit and Allure carry."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

__all__ = [
    "CHECKS_FORMAT_VERSION",
    "CheckEntry",
    "CheckEntryJSON",
    "ChecksJSON",
    "checks_from_json",
    "checks_to_json",
    "gate_nodeid",
    "is_check_nodeid",
    "without_group",
]

CHECKS_FORMAT_VERSION = 1

Outcome = Literal["passed", "failed", "skipped"]


def gate_nodeid(module_nodeid: str, canonical: str) -> str:
    """A gate's test id: ``<module>::gates[<canonical gate>]`` (the canonical text is stable)."""
    return f"{module_nodeid}::gates[{canonical}]"


class CheckEntryJSON(TypedDict):
    """One check as ``checks.json`` holds it (:meth:`CheckEntry.to_json`)."""

    nodeid: str
    group: Literal["gates", "snapshots"]
    name: str
    suite: str
    outcome: Outcome
    message: str
    properties: list[list[str]]


class ChecksJSON(TypedDict):
    """The run folder's ``checks.json`` (:func:`checks_to_json`)."""

    format_version: int
    checks: list[CheckEntryJSON]


@dataclass(frozen=True)
class CheckEntry:
    """One check's test outcome; ``properties`` are (name, value) pairs in a fixed order (the gate's
    value, interval, threshold, n, reproducibility), written as the test's ``user_properties``."""

    nodeid: str
    group: Literal["gates", "snapshots"]
    name: str
    suite: str
    outcome: Outcome
    message: str
    properties: tuple[tuple[str, str], ...] = ()

    def to_json(self) -> CheckEntryJSON:
        return {
            "nodeid": self.nodeid,
            "group": self.group,
            "name": self.name,
            "suite": self.suite,
            "outcome": self.outcome,
            "message": self.message,
            "properties": [list(p) for p in self.properties],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CheckEntry:
        return cls(
            nodeid=str(data["nodeid"]),
            group=data["group"],
            name=str(data["name"]),
            suite=str(data["suite"]),
            outcome=data["outcome"],
            message=str(data["message"]),
            properties=tuple((str(k), str(v)) for k, v in data.get("properties", ())),
        )


def checks_to_json(entries: Mapping[str, CheckEntry]) -> ChecksJSON:
    """The run folder's ``checks.json``: every check by node id (the xdist workers' gate items read it)."""
    return {
        "format_version": CHECKS_FORMAT_VERSION,
        "checks": [e.to_json() for _, e in sorted(entries.items())],
    }


def checks_from_json(data: Mapping[str, Any]) -> dict[str, CheckEntry]:
    entries = (CheckEntry.from_json(row) for row in data.get("checks", ()))
    return {e.nodeid: e for e in entries}


def without_group(nodeid: str) -> str:
    """A check item's id without the ``@<group>`` xdist appends to it on the workers under ``--dist
    loadgroup`` (from an ``xdist_group`` mark on the suite module): the id its outcome is kept under."""
    head, sep, tail = nodeid.rpartition("@")
    return head if sep and head.endswith("]") and "]" not in tail and "::" not in tail else nodeid


def is_check_nodeid(nodeid: str) -> bool:
    """Whether a test id is a suite-level check's (a gate item, a report snapshot entry)."""
    last = without_group(nodeid).rsplit("::", 1)[-1]
    return last.startswith(("gates[", "snapshots["))
