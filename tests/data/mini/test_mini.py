"""A small suite for the plugin's own tests: three simulated agents, five tasks, one with tools."""

from pytest_gauge import Judge, ModelAgent, SimAgent, SimJudge, Suite, Tool, ToolResult, UserSimulator

ORDERS = {"A123": {"status": "delivered", "amount": 25}}


def lookup_order(order_id: str) -> dict:
    if order_id not in ORDERS:
        return ToolResult({"error": "no such order"}, return_code=4)
    return {"order_id": order_id, **ORDERS[order_id]}


def issue_refund(order_id: str, amount: float) -> dict:
    return {"refunded": amount, "order_id": order_id}


suite = Suite(
    agents=[
        ModelAgent("agent_x", "sim-agent-x", sim=SimAgent(skill=0.85)),
        ModelAgent("agent_y", "sim-agent-y", sim=SimAgent(skill=0.8, verbosity=1.6, self_name=True)),
        ModelAgent("agent_z", "sim-agent-z", sim=SimAgent(skill=0.35)),
    ],
    judge=Judge("sim-judge", sim=SimJudge(noise=0.15)),
    user=UserSimulator("sim-user"),
    tools=[
        Tool(
            "lookup_order",
            "Look up an order",
            {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
            lookup_order,
        ),
        Tool(
            "issue_refund",
            "Refund an order",
            {
                "type": "object",
                "properties": {"order_id": {"type": "string"}, "amount": {"type": "number"}},
                "required": ["order_id", "amount"],
            },
            issue_refund,
        ),
    ],
)
