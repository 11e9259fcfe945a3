"""A tests-only suite with a hostile program agent (tests/e2e/test_sandbox.py): ``probe.py`` beside it
looks for the gateway key in every process's environment, tries to write outside its workspace, and
calls its own model through the proxy, then writes what it found to ``$HOME/probe.json``."""

import sys
from pathlib import Path

from pytest_gauge import CommandAgent, Judge, ModelAgent, SimAgent, Suite, UserSimulator

__all__ = ["suite"]

PROBE = Path(__file__).with_name("probe.py")

suite = Suite(
    agents=[
        ModelAgent("model_agent", "sim-agent-x", sim=SimAgent(skill=0.9)),
        CommandAgent("probe", (sys.executable, str(PROBE), "{prompt}"), output="jsonl", model="sim-agent-y"),
    ],
    judge=Judge("sim-judge"),
    user=UserSimulator("sim-user", max_turns=1),
)
