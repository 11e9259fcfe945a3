"""The task value (SPEC §3) as loaded from a suite's ``tasks.jsonl``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .rules import Rule

__all__ = ["CATEGORIES", "Task"]

CATEGORIES = (
    "information_retrieval",
    "multi_step",
    "tool_call",
    "constraint",
    "clarification",
    "refusal",
)


@dataclass(frozen=True)
class Task:
    """One task of a suite. ``source``/``line`` locate it for error messages."""

    task_id: str
    category: str
    task_prompt: str
    success_criteria: tuple[Rule, ...]
    hard_constraints: tuple[Rule, ...] = ()
    hidden_facts: tuple[str, ...] = ()
    persona: str | None = None
    tools: tuple[str, ...] = ()
    max_turns: int | None = None
    source: str = ""
    line: int = 0
    raw: dict[str, object] = field(default_factory=dict, compare=False, hash=False)
