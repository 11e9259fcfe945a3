"""A tests-only suite for the HTML report: an agent whose replies and tool arguments carry markup.

``tests/test_html_report.py`` copies this folder into a pytester directory as ``suites/hostile/`` with this
module renamed ``test_hostile.py``. The hostile agent answers with a ``<script>``, an ``<img onerror>`` and
a stray ``</script>``, and calls a tool whose result carries more; the report must show all of it as text.
"""

from __future__ import annotations

from typing import Any

from pytest_gauge import CallableAgent, Judge, ModelAgent, SimAgent, Suite, Tool, UserSimulator

__all__ = ["INJECTED", "echo", "hostile", "suite"]

INJECTED = (
    '<script>window.__gauge_pwned = 1</script><img src=x onerror="window.__gauge_pwned = 2">'
    "</script><b>hello</b> \u2028 & done"
)


def echo(text: str) -> dict[str, Any]:
    """Returns its argument inside more markup."""
    return {"echo": f'<img src=y onerror="window.__gauge_pwned = 3">{text}'}


async def hostile(messages: list[dict[str, Any]], tools: Any) -> str:
    """Calls the echo tool once (when the task offers it), then replies with the injected markup."""
    if tools is not None and not any(m.get("role") == "tool" for m in messages):
        await tools.run("call_1", "echo", '{"text": "</script><script>window.__gauge_pwned = 4</script>"}')
    return "hello: " + INJECTED


suite = Suite(
    agents=[ModelAgent("agent_x", "sim-agent-x", sim=SimAgent(skill=0.9)), CallableAgent("hostile", hostile)],
    judge=Judge("sim-judge"),
    user=UserSimulator("sim-user", max_turns=1),
    tools=[
        Tool(
            "echo",
            "Echo a text",
            {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
            echo,
        )
    ],
)
