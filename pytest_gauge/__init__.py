"""pytest-gauge: LLM-agent evaluations as ordinary pytest tests.

Declare a :class:`Suite` at module level in a test module next to a ``tasks.jsonl``; every
(task, agent pair, A/B order) becomes a test case judged double-blind, with rule-checked rewards, a
token/cost ledger, and suite-level gates that fail the run.
"""

from __future__ import annotations

from .records import CaseRecord, Judgment, LedgerRecord, ToolCall, Transcript, Turn, Usage
from .rules import RuleResult
from .sim.profiles import SimAgent, SimJudge, SimUser
from .suite import CallableAgent, Judge, ModelAgent, Suite, UserSimulator, env_model
from .tools import Tool, ToolResult

__all__ = [
    "CallableAgent",
    "CaseRecord",
    "Judge",
    "Judgment",
    "LedgerRecord",
    "ModelAgent",
    "RuleResult",
    "SimAgent",
    "SimJudge",
    "SimUser",
    "Suite",
    "Tool",
    "ToolCall",
    "ToolResult",
    "Transcript",
    "Turn",
    "Usage",
    "UserSimulator",
    "env_model",
]

__version__ = "0.1.0"
