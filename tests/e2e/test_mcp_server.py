"""The suite's tools over MCP, driven by the ``mcp`` package's own client (``stdio_client`` /
``ClientSession``) through the relay a program starts (``python -m pytest_gauge._internal.run.mcp_relay``) to
the tool server this process serves on the transcript's Unix socket: the tools listed with their schemas,
calls run through the plugin's executor (schema errors, timeouts, return codes) and recorded here, as
ToolCall records that the tool rules score (a file written into the MCP folder changes nothing); and the
configuration that names the relay to Claude Code and Codex."""

from __future__ import annotations

import json
import shutil
import sys
import tomllib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from pytest_gauge._internal.records import Transcript, Turn
from pytest_gauge._internal.run.mcp_tools import McpTools
from pytest_gauge._internal.suite.discover import load_suite
from pytest_gauge._internal.suite.rules import parse_rules, score
from pytest_gauge._internal.suite.tools import ToolExecutor

SUITE_DATA = Path(__file__).resolve().parents[1] / "data" / "mcp_suite"


@pytest.fixture
def mcp_tools(tmp_path: Path) -> McpTools:
    (tmp_path / "suite").mkdir()
    module = tmp_path / "suite" / "suite_mcp.py"
    shutil.copy(SUITE_DATA / "suite_mcp.py", module)
    (tmp_path / "ws").mkdir()
    names = ["lookup_order", "track_shipment", "write_note"]
    tools = [t for t in load_suite(module).tools if t.name in names]
    executor = ToolExecutor(tools, 5.0, tmp_path / "ws")
    return McpTools.create(tmp_path / "out", "mcp", "t1", "agent_x", 0, executor=executor)


async def _session(tools: McpTools, *works: Callable[[Any], Awaitable[Any]]) -> list[Any]:
    """Each ``work`` in its own client session (a program's turn: its own relay process)."""
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    server = tools.claude_config()["mcpServers"]["gauge"]
    params = StdioServerParameters(command=server["command"], args=server["args"], env=server["env"])
    done = []
    with anyio.fail_after(60):  # bounded: a server that never answers fails the test
        async with tools:
            for work in works:
                async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                    await session.initialize()
                    done.append(await work(session))
    return done


@pytest.mark.slow  # the full tier only: the mcp client's imports and a tool timeout (~5.6 s CPU)
def test_list_call_schema_error_and_timeout_through_the_mcp_client(
    mcp_tools: McpTools, tmp_path: Path
) -> None:
    async def work(session: Any) -> dict[str, Any]:
        listed = await session.list_tools()
        return {
            "tools": {t.name: t.input_schema for t in listed.tools},
            "ok": await session.call_tool("lookup_order", {"order_id": "A123"}),
            "code": await session.call_tool("lookup_order", {"order_id": "Z9"}),
            "schema": await session.call_tool("lookup_order", {"order_id": 5}),
            "hang": await session.call_tool("track_shipment", {"order_id": "A123"}),
            "write": await session.call_tool("write_note", {"text": "hello"}),
            "unknown": await session.call_tool("delete_all", {}),
        }

    (got,) = anyio.run(_session, mcp_tools, work)
    assert sorted(got["tools"]) == ["lookup_order", "track_shipment", "write_note"]
    assert got["tools"]["write_note"]["properties"] == {"text": {"type": "string"}}  # no workspace in it
    assert not got["ok"].is_error and json.loads(got["ok"].content[0].text)["status"] == "delivered"
    assert got["code"].is_error and "no order Z9" in got["code"].content[0].text
    assert got["schema"].is_error and "do not match the tool's schema" in got["schema"].content[0].text
    assert got["hang"].is_error and got["hang"].content[0].text == "error: tool did not finish within 0.3s"
    assert (tmp_path / "ws" / "notes.txt").read_text(encoding="utf-8") == "hello"
    calls = mcp_tools.take_calls()
    assert [(c.id, c.name, c.return_code) for c in calls] == [
        ("mcp-1", "lookup_order", 0),
        ("mcp-2", "lookup_order", 4),
        ("mcp-3", "lookup_order", 2),
        ("mcp-4", "track_shipment", 124),
        ("mcp-5", "write_note", 0),
        ("mcp-6", "delete_all", 127),
    ]
    assert calls[2].arguments == {"order_id": 5} and calls[3].error == "timeout"
    assert mcp_tools.take_calls() == []  # taken once
    rules = parse_rules(
        [
            {"type": "tool_args", "name": "lookup_order", "args": {"order_id": "A123"}},
            {"type": "tool_return_code", "name": "track_shipment", "code": 124},
            {"type": "no_call_after_failure", "precondition": "track_shipment", "then": "write_note"},
        ],
        field="success_criteria",
    )
    turns = [Turn("user", "go"), Turn("assistant", "", tool_calls=calls), Turn("assistant", "done")]
    verdict = score(rules, (), Transcript("t1", "agent_x", 0, turns, "done", None, "user_done"))
    assert [r.passed for r in verdict.criteria] == [True, True, False]


@pytest.mark.slow  # two relay processes and the mcp client
def test_a_later_turn_continues_the_numbering_and_a_forged_file_changes_nothing(mcp_tools: McpTools) -> None:
    async def one(session: Any) -> Any:
        return await session.call_tool("lookup_order", {"order_id": "A123"})

    forged = {"id": "mcp-9", "name": "lookup_order", "arguments": {"order_id": "B456"}, "return_code": 0}
    (mcp_tools.folder / "calls.jsonl").write_text(json.dumps(forged) + "\n", encoding="utf-8")
    anyio.run(_session, mcp_tools, one, one)  # two turns: two relays, one server, one numbering
    calls = mcp_tools.take_calls()
    assert [(c.id, c.arguments) for c in calls] == [
        ("mcp-1", {"order_id": "A123"}),
        ("mcp-2", {"order_id": "A123"}),
    ]
    assert not mcp_tools.socket.exists()  # served only while the transcript runs


def test_the_relay_names_the_socket_it_cannot_reach(mcp_tools: McpTools) -> None:
    import subprocess

    env = {**mcp_tools.claude_config()["mcpServers"]["gauge"]["env"], "PATH": "/usr/bin:/bin"}
    done = subprocess.run(mcp_tools.argv(), input=b"", capture_output=True, timeout=60, env=env)
    assert done.returncode == 2 and done.stdout == b""
    assert f"cannot reach the tool server at {mcp_tools.socket}" in done.stderr.decode()


def test_the_agents_configurations_name_the_same_server(mcp_tools: McpTools) -> None:
    claude = json.loads(mcp_tools.claude_config_file.read_text(encoding="utf-8"))
    server = claude["mcpServers"]["gauge"]
    assert [server["command"], *server["args"]] == mcp_tools.argv()
    assert mcp_tools.argv() == [
        sys.executable,
        "-m",
        "pytest_gauge._internal.run.mcp_relay",
        str(mcp_tools.socket),
    ]
    assert set(server["env"]) == {"PYTHONPATH"}  # never a key
    codex = tomllib.loads(mcp_tools.codex_toml())["mcp_servers"]["gauge"]
    assert [codex["command"], *codex["args"]] == mcp_tools.argv() and codex["env"] == server["env"]
    assert codex["startup_timeout_sec"] == 30
    assert mcp_tools.claude_tool_names() == [
        "mcp__gauge__lookup_order",
        "mcp__gauge__track_shipment",
        "mcp__gauge__write_note",
    ]
    assert mcp_tools.folder.parts[-5:] == ("mcp", "mcp", "t1", "agent_x", "0")


def test_merge_keeps_the_programs_other_calls_and_takes_the_servers_records() -> None:
    from pytest_gauge._internal.records import ToolCall
    from pytest_gauge._internal.run.mcp_tools import merge_calls

    shell = ToolCall("t1", "Bash", '{"command": "ls"}', {"command": "ls"}, "a.txt")
    claude_view = ToolCall("t2", "mcp__gauge__lookup_order", "{}", {}, "…", 0)
    recorded = ToolCall("mcp-1", "lookup_order", '{"order_id": "A123"}', {"order_id": "A123"}, "{}", 4)
    tools = ["lookup_order"]
    assert merge_calls([shell, claude_view], [recorded], tools) == [shell, recorded]
    assert merge_calls([claude_view, shell], [recorded], tools) == [recorded, shell]
    assert merge_calls([shell], [recorded], tools) == [shell, recorded]  # the program did not say
    assert merge_calls([shell, claude_view], [], tools) == [shell, claude_view]  # nothing recorded


@pytest.mark.slow  # a program agent that starts the MCP server: two interpreters importing mcp
def test_a_program_agents_mcp_calls_are_in_its_transcript_and_scored(pytester: pytest.Pytester) -> None:
    from tests.helpers import read_jsonl, run_inprocess

    data = SUITE_DATA.parent / "mcp_program"
    folder = pytester.path / "suites" / "mcpprog"
    folder.mkdir(parents=True)
    shutil.copy(data / "tasks.jsonl", folder / "tasks.jsonl")
    shutil.copy(data / "mcp_client_agent.py", folder / "mcp_client_agent.py")
    shutil.copy(data / "suite_mcp_program.py", folder / "test_mcp_program.py")
    pytester.makeini("[pytest]\ngauge_backend = sim\ngauge_seed = 5\n")
    run_inprocess(pytester, "suites", "--gauge-cache", "off").assert_outcomes(passed=2)
    [row] = read_jsonl(pytester.path / "gauge-out" / "mcpprog" / "agents" / "program.jsonl")
    calls = [c for t in row["turns"] if t["role"] == "assistant" for c in t["tool_calls"]]
    assert [(c["id"], c["name"], c["arguments"], c["return_code"]) for c in calls] == [
        ("mcp-1", "lookup_order", {"order_id": "A123"}, 0)
    ]
    assert '"delivered"' in row["final_reply"] and row["score"]["task_success"], row["score"]
