"""A tests-only suite that exercises every declaration feature at once: a
``CallableAgent``, a ``reflection()`` tier, a ``best_of(selector="judge")`` tier, a judge with
``repeats`` and ``extra_models``, ``samples=2``, ``orders="seeded"`` and ``checks=``.

``tests/test_features_suite.py`` copies this folder into a pytester directory as ``suites/features/``
with this module renamed ``test_features_suite.py`` and runs it on the sim backend.
"""

from __future__ import annotations

from typing import Any

from pytest_gauge import (
    CallableAgent,
    Judge,
    ModelAgent,
    SimAgent,
    SimJudge,
    Suite,
    Transcript,
    UserSimulator,
    best_of,
    reflection,
)

__all__ = ["BOT_REPLY", "MAX_WORDS", "bot", "short_reply", "suite"]

BOT_REPLY = "Our plans are basic, pro and enterprise; enterprise includes single sign-on."
MAX_WORDS = 12


def bot(messages: list[dict[str, Any]], tools: Any) -> str:
    """The callable agent: the same answer to everything."""
    return BOT_REPLY


def short_reply(transcript: Transcript) -> bool:
    """A ``checks=`` rule: the final reply has at most MAX_WORDS words."""
    return len(transcript.final_reply.split()) <= MAX_WORDS


suite = Suite(
    agents=[
        CallableAgent("bot", bot),
        reflection(ModelAgent("writer", "sim-agent-x", sim=SimAgent(skill=0.6)), 1),
        best_of(ModelAgent("solver", "sim-solver", sim=SimAgent(skill=0.5)), 2, selector="judge"),
    ],
    pairs=[("bot", "writer@reflect1"), ("solver@bo2", "bot")],
    orders="seeded",
    samples=2,
    judge=Judge(
        "sim-judge",
        repeats=2,
        extra_models=("sim-judge-b",),
        sim=SimJudge(noise=0.1),
        extra_sims={"sim-judge-b": SimJudge(noise=0.3)},
    ),
    user=UserSimulator("sim-user", max_turns=1),
    checks={"short_reply": short_reply},
)
