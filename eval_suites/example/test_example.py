"""The example suite: three agents of a customer-support / productivity assistant, judged blind in pairs.

On the offline simulator (the default backend) agent_x and agent_y are close in skill and agent_z is
clearly weaker; agent_y is verbose and names itself and its model, which the judge must never see.
Live runs take model names from the environment (see ``env_model``).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from pytest_gauge import Judge, ModelAgent, SimAgent, SimJudge, Suite, UserSimulator, env_model


def _load_tools() -> ModuleType:
    """This suite's ``tools.py`` under a suite-specific module name, so another suite's ``tools.py``
    on ``sys.path`` can never shadow it."""
    name = "gauge_example_suite_tools"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("tools.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


suite = Suite(
    agents=[
        ModelAgent("agent_x", env_model("GAUGE_AGENT_X_MODEL", "sim-agent-x"), sim=SimAgent(skill=0.82)),
        ModelAgent(
            "agent_y",
            env_model("GAUGE_AGENT_Y_MODEL", "sim-agent-y"),
            sim=SimAgent(skill=0.78, verbosity=1.6, self_name=True),
        ),
        ModelAgent(
            "agent_z",
            env_model("GAUGE_AGENT_Z_MODEL", "sim-agent-z"),
            sim=SimAgent(skill=0.45, verbosity=0.8),
        ),
    ],
    pairs=[("agent_x", "agent_y"), ("agent_x", "agent_z"), ("agent_y", "agent_z")],
    judge=Judge(env_model("TAOTOKEN_JUDGE_MODEL", "sim-judge"), sim=SimJudge(noise=0.15)),
    user=UserSimulator(env_model("GAUGE_USER_MODEL", "sim-user")),
    tools=_load_tools().TOOLS,
)
