"""Tools of the in-house suite: an order book held in memory (deterministic, no I/O).

This suite's own ``tools.py``: the example suite next door has another module of the same name, and
each suite imports its own (``from .tools import TOOLS``) because every suite folder is a package.
"""

from __future__ import annotations

from typing import Any

from pytest_gauge import Tool, ToolResult

__all__ = ["ORDERS", "TOOLS", "order_status"]

ORDERS: dict[str, dict[str, Any]] = {
    "A100": {"order_id": "A100", "status": "shipped", "eta_days": 2},
    "B200": {"order_id": "B200", "status": "delivered", "eta_days": 0},
}


def order_status(order_id: str) -> dict[str, Any] | ToolResult:
    """The order's status, or return code 4 for an unknown id."""
    if order_id not in ORDERS:
        return ToolResult({"error": f"no order {order_id}"}, return_code=4)
    return dict(ORDERS[order_id])


TOOLS = [
    Tool(
        "order_status",
        "Status and ETA of an order",
        {
            "type": "object",
            "properties": {"order_id": {"type": "string", "pattern": "^[A-Z][0-9]{3}$"}},
            "required": ["order_id"],
            "additionalProperties": False,
        },
        order_status,
    )
]
