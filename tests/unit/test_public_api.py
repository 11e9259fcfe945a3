"""The public names of ``pytest_gauge`` are frozen: adding or removing one is a deliberate
change to this list, the README and the CHANGELOG, never a side effect of moving modules."""

from __future__ import annotations

import pytest_gauge

PUBLIC = [
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


def test_the_public_names_are_exactly_the_frozen_sorted_list() -> None:
    assert sorted(pytest_gauge.__all__) == PUBLIC
    assert pytest_gauge.__all__ == PUBLIC  # kept sorted in the module too


def test_every_public_name_is_importable_from_the_package() -> None:
    missing = [name for name in PUBLIC if not hasattr(pytest_gauge, name)]
    assert missing == []
