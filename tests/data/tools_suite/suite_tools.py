"""A tests-only suite for tool use: tools that work, return their own code, raise or hang.

``tests/test_tools.py`` copies this folder into a pytester directory as ``suites/tools/`` with this
module renamed ``test_tools_suite.py`` (so the plugin's own test run never collects it here). Both
simulated agents are fully skilled, so on the sim backend every tool a rule asks for is really called.
"""

from __future__ import annotations

import threading
from typing import Any

from pytest_gauge import Judge, ModelAgent, SimAgent, SimJudge, Suite, Tool, ToolResult, UserSimulator

__all__ = [
    "NEVER",
    "ORDERS",
    "STEP_LIMIT",
    "check_stock",
    "issue_refund",
    "lookup_order",
    "suite",
    "track_shipment",
]

ORDERS: dict[str, dict[str, Any]] = {"A123": {"order_id": "A123", "status": "delivered", "amount": 25}}
NEVER = threading.Event()  # never set: track_shipment hangs until its 0.2 s timeout
STEP_LIMIT = 3


def lookup_order(order_id: str) -> dict[str, Any] | ToolResult:
    """The order, or return code 4 for an unknown id."""
    if order_id not in ORDERS:
        return ToolResult({"error": f"no order {order_id}"}, return_code=4)
    return dict(ORDERS[order_id])


def issue_refund(order_id: str, amount: float) -> dict[str, Any]:
    """Refund ``amount`` on the order."""
    return {"order_id": order_id, "refunded": amount}


def check_stock(sku: str) -> dict[str, Any]:
    """Always fails: the inventory service is down (return code 1)."""
    raise RuntimeError(f"inventory service unavailable for {sku}")


def track_shipment(order_id: str) -> dict[str, Any]:
    """Hangs (waits on an event nobody sets) past its timeout (return code 124)."""
    NEVER.wait(30)
    return {"order_id": order_id, "eta": "unknown"}


def _schema(**props: str) -> dict[str, Any]:
    properties = {k: {"type": v} for k, v in props.items()}
    return {"type": "object", "properties": properties, "required": list(props)}


suite = Suite(
    agents=[
        ModelAgent("agent_x", "model-x", sim=SimAgent(skill=1.0)),
        ModelAgent("agent_y", "model-y", sim=SimAgent(skill=1.0)),
    ],
    judge=Judge("judge-model", sim=SimJudge(noise=0.0)),
    user=UserSimulator("user-model"),
    tools=[
        Tool("lookup_order", "Look up an order by id", _schema(order_id="string"), lookup_order),
        Tool("issue_refund", "Refund an order", _schema(order_id="string", amount="number"), issue_refund),
        Tool("check_stock", "Stock level of a SKU", _schema(sku="string"), check_stock),
        Tool("track_shipment", "Shipping ETA", _schema(order_id="string"), track_shipment, timeout=0.2),
    ],
    tool_step_limit=STEP_LIMIT,
)
