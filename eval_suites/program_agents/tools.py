"""The suite's one tool, offered to the program agents over MCP: a deterministic order lookup."""

from __future__ import annotations

from typing import Any

from pytest_gauge import Tool, ToolResult

__all__ = ["ORDERS", "TOOLS", "lookup_order"]

ORDERS: dict[str, dict[str, Any]] = {
    "A123": {"order_id": "A123", "status": "delivered", "carrier": "UPS", "delivered_on": "2024-05-20"},
    "B456": {"order_id": "B456", "status": "shipped", "carrier": "DHL", "eta": "2024-06-01"},
}


def lookup_order(order_id: str) -> dict[str, Any] | ToolResult:
    """The order record, or return code 4 for an unknown id."""
    order = ORDERS.get(order_id.strip().upper())
    return dict(order) if order is not None else ToolResult(f"error: order {order_id!r} not found", 4)


TOOLS = [
    Tool(
        "lookup_order",
        "Look up an order by id: status and carrier.",
        {
            "type": "object",
            "properties": {"order_id": {"type": "string", "description": "Order id such as A123"}},
            "required": ["order_id"],
            "additionalProperties": False,
        },
        lookup_order,
    )
]
