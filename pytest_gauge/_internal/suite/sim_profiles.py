"""Parameters of the offline simulator's agents, user and judge, declared in a suite next to each role.

They only matter on ``--gauge-backend=sim``; a live run ignores them. Kept apart from the simulator
itself so that declaring a suite imports nothing heavy.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SimAgent", "SimJudge", "SimUser"]


@dataclass(frozen=True)
class SimAgent:
    """A simulated agent: ``skill`` is the chance of meeting each criterion (and of keeping each hard
    constraint); ``verbosity`` scales padding (length-bias bait); ``self_name`` makes it introduce
    itself by agent and model name (to prove the judge's redaction); ``tool_skill`` defaults to skill."""

    skill: float = 0.7
    verbosity: float = 1.0
    self_name: bool = False
    politeness: float = 0.5
    tool_skill: float | None = None


@dataclass(frozen=True)
class SimUser:
    """A simulated user: satisfaction follows politeness and apparent effort more than task success,
    so it can disagree with the rule verdict (docs/protocol.md#why: satisfaction is not completion).

    The user's own mistakes, on the tasks named (for the user audit's tests, docs/protocol.md#user-audit):
    ``leak_tasks``: it volunteers its hidden facts when the agent answered without asking;
    ``end_early_tasks``: it ends satisfied at its first reply, even to a question; ``silent_tasks``: its
    first reply says nothing; ``contradict_tasks``: its first reply gives each hidden fact that has a digit
    with that digit changed (``Party of 4`` as ``Party of 5``)."""

    leniency: float = 0.6
    leak_tasks: tuple[str, ...] = ()
    end_early_tasks: tuple[str, ...] = ()
    silent_tasks: tuple[str, ...] = ()
    contradict_tasks: tuple[str, ...] = ()


@dataclass(frozen=True)
class SimJudge:
    """A simulated judge: reads the two responses, estimates quality from the text, adds Gaussian
    decision ``noise``, ``position_bias`` (towards slot A when > 0) and ``length_bias`` (per doubling of
    length), calls a tie within ``tie_margin``, and returns a malformed verdict with ``error_rate``.
    ``tone_bias`` is added for a polite, friendly reply ("better tone"), the other bias judges are
    known for. ``misread`` is how badly it reads the rules (phrases missed with probability misread/3,
    counts off by a log-normal factor of that spread); None means the same as ``noise``."""

    noise: float = 0.15
    misread: float | None = None
    tone_bias: float = 0.0
    position_bias: float = 0.0
    length_bias: float = 0.0
    tie_margin: float = 0.02
    error_rate: float = 0.0
