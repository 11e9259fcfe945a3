"""The simulator drives an agent program's own tools for a coding task (docs/protocol.md#program-agents):
the file a ``file_contains`` rule names is written with the CLI's shell (a relative path, the same answer
from any checkout), else with Claude Code's ``Write`` under the working directory its prompt names."""

from __future__ import annotations

import json
import shlex
from typing import Any

from pytest_gauge._internal.sim.agent import _edit_plan

EDITS = [("status.py", 'CARRIERS = {"A123": "UPS"}\n')]


def _tools(*names: str) -> dict[str, dict[str, Any]]:
    return {n: {"name": n, "parameters": {"type": "object"}} for n in names}


def test_a_shell_writes_the_file_in_the_working_directory() -> None:
    for shell, field in (("Bash", "command"), ("exec_command", "cmd")):
        [(name, raw)] = _edit_plan(EDITS, _tools("Read", "Write", shell), [])
        command = json.loads(raw)[field]
        assert name == shell and shlex.split(command)[-2:] == [">", "status.py"]
        assert shlex.split(command)[2] == EDITS[0][1]  # printf '%s' <content>: the content verbatim


def test_claude_codes_write_takes_the_absolute_path_its_prompt_names() -> None:
    system = [
        {"role": "system", "content": "Env:\n - Primary working directory: /w/t1/0\n - Platform: linux"}
    ]
    [(name, raw)] = _edit_plan(EDITS, _tools("Read", "Write"), system)
    assert name == "Write" and json.loads(raw) == {"file_path": "/w/t1/0/status.py", "content": EDITS[0][1]}
    assert _edit_plan(EDITS, _tools("Read", "Write"), []) == []  # no working directory named: no guess
    assert _edit_plan(EDITS, _tools("lookup_order"), system) == []  # no file tool offered
