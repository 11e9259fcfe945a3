"""The code under test: a rule-based support agent, plus the FAQ-only version it replaces.

A ``CallableAgent`` gets the conversation so far (OpenAI-style messages) and the task's tools
(``await tools.run(call_id, name, json_arguments)``, recorded in the transcript like a model's calls),
and returns its reply. Swap in your own agent: an LLM pipeline, a retrieval chain, anything callable.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["POLICY", "faq_agent", "support_agent"]

POLICY = "You can return any item within 30 days of delivery for a full refund."
_ORDER_ID = re.compile(r"\b([A-Z][0-9]{3})\b")


def _question(messages: list[dict[str, Any]]) -> str:
    return next(str(m["content"]) for m in messages if m["role"] == "user")


async def support_agent(messages: list[dict[str, Any]], tools: Any) -> str:
    """Looks orders up with the ``order_status`` tool; answers policy questions from the policy."""
    question = _question(messages)
    found = _ORDER_ID.search(question)
    if found and tools is not None:
        call = await tools.run("c1", "order_status", json.dumps({"order_id": found.group(1)}))
        if call.return_code != 0:
            return f"I could not find order {found.group(1)}. Could you check the order number?"
        order = json.loads(call.result)
        return f"Order {order['order_id']} is {order['status']} (arriving in {order['eta_days']} days)."
    if "return" in question.lower() or "refund" in question.lower():
        return POLICY
    return "Could you tell me your order number or what you would like to return?"


def faq_agent(messages: list[dict[str, Any]], tools: Any) -> str:
    """The old bot: the policy for everything, never a lookup (a plain function works too)."""
    return POLICY
