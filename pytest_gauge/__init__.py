"""pytest-gauge: LLM-agent evaluations as ordinary pytest tests.

Declare a :class:`Suite` at module level in a test module next to a ``tasks.jsonl``; every
(task, agent pair, A/B order) becomes a test case judged double-blind, with rule-checked rewards, a
token/cost ledger, and suite-level gates that fail the run.
"""

from __future__ import annotations

from ._internal.fixtures import (
    Comparison,
    GaugeBudgetExceeded,
    GaugeClient,
    GaugeJudge,
    GaugeLedger,
    JudgedOrder,
    Reply,
    Spent,
)
from ._internal.gateway.proxy import ProxyRoute, client_environment
from ._internal.records import CaseRecord, Judgment, LedgerRecord, ToolCall, Transcript, Turn, Usage
from ._internal.suite.declare import (
    BestOf,
    CallableAgent,
    Judge,
    ModelAgent,
    Reflection,
    Suite,
    UserSimulator,
    best_of,
    env_model,
    reflection,
)
from ._internal.suite.http_agent import HttpAgent
from ._internal.suite.programs import CommandAgent, claude_code, codex
from ._internal.suite.rules import RuleResult
from ._internal.suite.sim_profiles import SimAgent, SimJudge, SimUser
from ._internal.suite.tools import Tool, ToolResult
from ._internal.version import __version__ as __version__

__all__ = [
    "BestOf",
    "CallableAgent",
    "CaseRecord",
    "CommandAgent",
    "Comparison",
    "GaugeBudgetExceeded",
    "GaugeClient",
    "GaugeJudge",
    "GaugeLedger",
    "HttpAgent",
    "Judge",
    "JudgedOrder",
    "Judgment",
    "LedgerRecord",
    "ModelAgent",
    "ProxyRoute",
    "Reflection",
    "Reply",
    "RuleResult",
    "SimAgent",
    "SimJudge",
    "SimUser",
    "Spent",
    "Suite",
    "Tool",
    "ToolCall",
    "ToolResult",
    "Transcript",
    "Turn",
    "Usage",
    "UserSimulator",
    "best_of",
    "claude_code",
    "client_environment",
    "codex",
    "env_model",
    "reflection",
]
