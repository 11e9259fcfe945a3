"""A tests-only suite with Codex beside a model agent (tests/e2e/test_sandbox.py): against a gateway
that answers Codex's model with 500, Codex must not retry on top of the plugin's gateway."""

import os

from pytest_gauge import Judge, ModelAgent, SimAgent, Suite, UserSimulator, codex

__all__ = ["suite"]

suite = Suite(
    agents=[
        ModelAgent("model_agent", "sim-agent-x", sim=SimAgent(skill=0.9)),
        codex(
            "sim-codex", name="codex", timeout=120.0, command=os.environ.get("GAUGE_CODEX_COMMAND", "codex")
        ),
    ],
    judge=Judge("sim-judge"),
    user=UserSimulator("sim-user", max_turns=1),
)
