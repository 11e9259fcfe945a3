"""Test-time compute strategies (docs/protocol.md#elo): what :func:`~.declare.best_of` and
:func:`~.declare.reflection` put on an agent of any kind (a model, a callable, a program, a service).

A strategy is a plain record on the agent; how its samples and revision rounds are run is
``run/work.py``'s: each best-of sample is its own session (its own workspace, program folder and proxy
route, seeded per sample), each reflection round one more turn of the agent's own session.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BestOf", "Reflection", "Strategy", "family"]


@dataclass(frozen=True)
class BestOf:
    """Test-time compute: ``n`` samples (distinct seeds), one chosen by the rule ``verifier`` (highest
    reward, first on ties) or by the ``judge`` (a knockout of pairwise blind judgments)."""

    n: int
    selector: str = "verifier"

    @property
    def label(self) -> str:
        return f"bo{self.n}"

    @property
    def compute(self) -> float:
        return float(self.n)


@dataclass(frozen=True)
class Reflection:
    """Test-time compute: after the conversation, ``rounds`` extra agent turns that revise the final reply."""

    rounds: int

    @property
    def label(self) -> str:
        return f"reflect{self.rounds}"

    @property
    def compute(self) -> float:
        return 1.0 + self.rounds


Strategy = BestOf | Reflection


def family(name: str) -> str:
    """The agent family of a tier's name: ``claude_code@bo4`` -> ``claude_code``."""
    return name.split("@", 1)[0]
