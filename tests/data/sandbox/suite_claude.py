"""A tests-only suite with Claude Code beside a model agent (tests/e2e/test_sandbox.py): against a
gateway refusing Claude Code's model (401), its cases must fail, never read as Claude Code losing."""

import os

from pytest_gauge import Judge, ModelAgent, SimAgent, Suite, UserSimulator, claude_code

__all__ = ["suite"]

suite = Suite(
    agents=[
        ModelAgent("model_agent", "sim-agent-x", sim=SimAgent(skill=0.9)),
        claude_code(
            "sim-claude",
            name="claude_code",
            timeout=120.0,
            command=os.environ.get("GAUGE_CLAUDE_COMMAND", "claude"),
        ),
    ],
    judge=Judge("sim-judge"),
    user=UserSimulator("sim-user", max_turns=1),
)
