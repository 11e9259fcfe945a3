"""Your own agent code under test: a ``CallableAgent`` (``agent.py``) judged blind against the FAQ bot
it replaces, with the suite's own tools (``tools.py``) and a Python check (``checks=``) used by the
``python`` rules in ``tasks.jsonl``. Passes offline: the agents are plain Python, the simulator plays
the user and the judge.
"""

from __future__ import annotations

import re

from pytest_gauge import CallableAgent, Judge, Suite, Transcript, UserSimulator, env_model

from .agent import faq_agent, support_agent
from .tools import TOOLS


def names_the_order(transcript: Transcript) -> bool:
    """The final reply repeats the order number the user asked about (a check rules cannot express)."""
    asked = re.search(r"\b[A-Z][0-9]{3}\b", transcript.turns[0].content)
    return asked is not None and asked.group(0) in transcript.final_reply


suite = Suite(
    agents=[CallableAgent("support_bot", support_agent), CallableAgent("faq_bot", faq_agent)],
    judge=Judge(env_model("TAOTOKEN_JUDGE_MODEL", "sim-judge")),
    user=UserSimulator(env_model("GAUGE_USER_MODEL", "sim-user"), max_turns=2),
    tools=TOOLS,
    checks={"names_the_order": names_the_order},
    gates=["success_rate(support_bot) >= 0.9; min_n=3"],  # the new bot solves (nearly) every task
)
