"""A tests-only suite whose tasks check the workspace with ``command_succeeds`` (tests/e2e/test_sandbox.py
writes the tasks): the command runs in the sandbox after each dialogue."""

from pytest_gauge import Judge, ModelAgent, SimAgent, Suite, UserSimulator

__all__ = ["suite"]

suite = Suite(
    agents=[
        ModelAgent("model_agent", "sim-agent-x", sim=SimAgent(skill=0.9)),
        ModelAgent("other_agent", "sim-agent-y", sim=SimAgent(skill=0.5)),
    ],
    judge=Judge("sim-judge"),
    user=UserSimulator("sim-user", max_turns=1),
)
