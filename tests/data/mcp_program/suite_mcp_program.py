"""A tests-only suite with a program agent that calls the suite's tool over MCP:
tests/e2e/test_mcp_server.py copies it beside tasks.jsonl and runs it on the simulator."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_gauge import CommandAgent, Judge, ModelAgent, SimAgent, Suite, Tool, ToolResult, UserSimulator
from pytest_gauge._internal.suite.programs import ProgramSetup

__all__ = ["suite"]

CLIENT = Path(__file__).with_name("mcp_client_agent.py")


def lookup_order(order_id: str) -> dict[str, Any] | ToolResult:
    """The order, or return code 4 for an unknown id."""
    if order_id != "A123":
        return ToolResult({"error": f"no order {order_id}"}, return_code=4)
    return {"order_id": "A123", "status": "delivered"}


def write_mcp_config(setup: ProgramSetup) -> Mapping[str, str]:
    """What a preset does for its CLI: the MCP servers in a file the program reads."""
    setup.home.mkdir(parents=True, exist_ok=True)
    (setup.home / "mcp.json").write_text(
        json.dumps({"mcpServers": dict(setup.mcp_servers)}), encoding="utf-8"
    )
    return {}


_SCHEMA = {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}

suite = Suite(
    agents=[
        ModelAgent("model_agent", "model-x", sim=SimAgent(skill=1.0)),
        CommandAgent(
            "program",
            (sys.executable, str(CLIENT), "{home}/mcp.json", "{prompt}"),
            output="jsonl",
            timeout=120.0,
            configure=write_mcp_config,
        ),
    ],
    judge=Judge("judge-model"),
    user=UserSimulator("user-model", max_turns=1),
    tools=[Tool("lookup_order", "Look up an order by id", _SCHEMA, lookup_order)],
)
