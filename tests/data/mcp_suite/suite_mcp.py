"""A tests-only suite whose tools the MCP server offers: a lookup that works, one that
returns its own code, one that hangs past its timeout and one that writes into the workspace.
tests/e2e/test_mcp_server.py copies it with tasks.jsonl into a temporary folder."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from pytest_gauge import ModelAgent, Suite, Tool, ToolResult

__all__ = ["suite"]

NEVER = threading.Event()
print("suite module imported")  # must not reach the protocol's stdout


def lookup_order(order_id: str) -> dict[str, Any] | ToolResult:
    """The order, or return code 4 for an unknown id."""
    if order_id != "A123":
        return ToolResult({"error": f"no order {order_id}"}, return_code=4)
    return {"order_id": "A123", "status": "delivered"}


def track_shipment(order_id: str) -> str:
    """Hangs past its 0.3 s timeout (return code 124)."""
    NEVER.wait(30)
    return "never"


def write_note(text: str, workspace: Path) -> str:
    """Write ``notes.txt`` in the transcript's workspace."""
    (workspace / "notes.txt").write_text(text, encoding="utf-8")
    return "saved"


def _schema(**props: str) -> dict[str, Any]:
    properties = {k: {"type": v} for k, v in props.items()}
    return {
        "type": "object",
        "properties": properties,
        "required": list(props),
        "additionalProperties": False,
    }


suite = Suite(
    agents=[ModelAgent("agent_x", "model-x"), ModelAgent("agent_y", "model-y")],
    tools=[
        Tool("lookup_order", "Look up an order by id", _schema(order_id="string"), lookup_order),
        Tool("track_shipment", "Shipping ETA", _schema(order_id="string"), track_shipment, timeout=0.3),
        Tool("write_note", "Save a note", _schema(text="string"), write_note),
    ],
)
