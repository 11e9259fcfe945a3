"""A tests-only suite with an HTTP agent whose service is down and another whose header variable is
unset (tests/e2e/test_sandbox.py): their cases must fail, never read as results."""

from pytest_gauge import HttpAgent, Judge, ModelAgent, SimAgent, Suite, UserSimulator

__all__ = ["suite"]

suite = Suite(
    agents=[
        ModelAgent("model_agent", "sim-agent-x", sim=SimAgent(skill=0.9)),
        HttpAgent("dead", "http://127.0.0.1:9/chat", retries=0),
        HttpAgent(
            "unset",
            "http://127.0.0.1:9/chat",
            headers={"Authorization": "Bearer ${GAUGE_SANDBOX_TEST_UNSET}"},
            retries=0,
        ),
    ],
    judge=Judge("sim-judge"),
    user=UserSimulator("sim-user", max_turns=1),
)
