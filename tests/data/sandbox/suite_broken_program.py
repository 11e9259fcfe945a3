"""A tests-only suite whose program agent exits 1 on every turn with its own error on stderr
(tests/e2e/test_sandbox.py): the run must fail, naming the error once per agent."""

from pytest_gauge import CommandAgent, Judge, ModelAgent, SimAgent, Suite, UserSimulator

__all__ = ["suite"]

SCRIPT = "echo 'fatal: the service rejected our credentials' >&2; exit 1"

suite = Suite(
    agents=[
        ModelAgent("model_agent", "sim-agent-x", sim=SimAgent(skill=0.9)),
        CommandAgent("broken", ("sh", "-c", SCRIPT, "sh", "{prompt}"), timeout=30.0),
    ],
    judge=Judge("sim-judge"),
    user=UserSimulator("sim-user", max_turns=1),
)
