"""A tests-only suite for tasks that act on files: a workspace folder (``project/``)
copied per transcript, a tool that writes into it, and the workspace rules checking it afterwards.

``tests/e2e/test_workspace.py`` copies this folder into a pytester directory as ``suites/ws/`` with this
module renamed ``test_ws_suite.py``. Both simulated agents are fully skilled, so on the sim backend the
tool a ``tool_args`` rule asks for is called with exactly those arguments.
"""

from __future__ import annotations

from pathlib import Path

from pytest_gauge import Judge, ModelAgent, SimAgent, SimJudge, Suite, Tool, UserSimulator

__all__ = ["suite", "write_file"]


def write_file(path: str, text: str, workspace: Path) -> str:
    """Write ``text`` to ``path`` inside the transcript's workspace."""
    target = workspace / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    return f"wrote {len(text)} characters to {path}"


_SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "text": {"type": "string"}},
    "required": ["path", "text"],
    "additionalProperties": False,
}

suite = Suite(
    agents=[
        ModelAgent("agent_x", "model-x", sim=SimAgent(skill=1.0)),
        ModelAgent("agent_y", "model-y", sim=SimAgent(skill=1.0)),
    ],
    judge=Judge("judge-model", sim=SimJudge(noise=0.0)),
    user=UserSimulator("user-model"),
    tools=[Tool("write_file", "Write a text file in the project", _SCHEMA, write_file)],
    workspace="project",
)
