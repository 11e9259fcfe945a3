"""Program agents: the two CLIs' JSON streams read into a turn (samples captured from
Claude Code 2.1.328 and Codex 0.169.0 against a loopback recorder), the presets' configuration and
environment, and a real process per turn: placeholders, stdin, the session carried, the timeout that
kills the whole process group, a missing program."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import tomllib
from pathlib import Path

import pytest

from pytest_gauge._internal.run.program_output import parse_claude, parse_codex, parse_jsonl, parse_text
from pytest_gauge._internal.run.programs import (
    ProgramFailed,
    ProgramMissing,
    ProgramSession,
    build_environment,
)
from pytest_gauge._internal.suite.programs import (
    CommandAgent,
    ProgramEndpoint,
    ProgramSetup,
    claude_code,
    codex,
    codex_config,
    session_uuid,
)
from tests.helpers import KILL_TIMEOUTS, process_ended

STREAMS = Path(__file__).parent / "program_streams"
ENDPOINT = ProgramEndpoint(
    base_urls={
        "anthropic": "http://127.0.0.1:9/w/tok",
        "chat": "http://127.0.0.1:9/w/tok/v1",
        "responses": "http://127.0.0.1:9/w/tok/v1",
    },
    token="gauge-proxy-token",
    env={"OPENAI_BASE_URL": "http://127.0.0.1:9/w/tok/v1", "OPENAI_API_KEY": "gauge-proxy-token"},
)
INHERITED = {
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "ANTHROPIC_API_KEY": "sk-ant-real-key-0123456789",
    "ANTHROPIC_BASE_URL": "https://stale.example/api",
    "ANTHROPIC_AUTH_TOKEN": "stale-token-0123456789",
    "CLAUDECODE": "1",
    "CLAUDE_CODE_ENTRYPOINT": "cli",
    "TAOTOKEN_API_KEY": "sk-gateway-key-0123456789",
    "OPENAI_API_KEY": "sk-openai-0123456789",
}


def _setup(tmp_path: Path, **mcp: dict[str, object]) -> ProgramSetup:
    work = "transcript/t1/agent/0"
    return ProgramSetup(tmp_path / "ws", tmp_path / "ws.home", ENDPOINT, work, mcp)


def test_claude_stream_gives_reply_session_tool_call_and_cost() -> None:
    out = parse_claude((STREAMS / "claude_stream.jsonl").read_text())
    assert out.reply == "Hello from the recorder."
    assert out.session == "6f1c1f0e-5d7c-5c4a-9b1e-0d8a4f6f3b2a"
    [call] = out.tool_calls
    assert (call.name, call.arguments, call.return_code) == (
        "Bash",
        {"command": "echo hi > out.txt", "description": "write"},
        0,
    )
    assert call.result == "(Bash completed with no output)"
    assert out.cost_usd == pytest.approx(0.00027)
    assert out.usage is not None and out.usage["input_tokens"] == 40
    assert out.error is None


def test_claude_stream_error_result_is_the_turns_error() -> None:
    line = {
        "type": "result",
        "subtype": "error_during_execution",
        "is_error": True,
        "result": "API Error: 401",
    }
    assert parse_claude(json.dumps(line)).error == "API Error: 401"


def test_codex_stream_gives_reply_thread_commands_mcp_calls_and_usage() -> None:
    mcp = {
        "type": "item.completed",
        "item": {
            "id": "item_9",
            "type": "mcp_tool_call",
            "server": "gauge",
            "tool": "lookup_order",
            "arguments": {"order_id": "A1"},
            "result": {"content": [{"type": "text", "text": "shipped"}]},
            "status": "completed",
        },
    }
    text = (STREAMS / "codex_stream.jsonl").read_text() + json.dumps(mcp) + "\n"
    out = parse_codex(text)
    assert out.session == "01a23485-7a9c-77e0-96b6-591d6d116fd0"
    assert out.reply == "Hello from the recorder."
    shell, lookup = out.tool_calls
    assert shell.name == "command_execution" and shell.return_code == 0
    assert (lookup.name, lookup.arguments, lookup.result) == (
        "mcp__gauge__lookup_order",
        {"order_id": "A1"},
        "shipped",
    )
    assert out.usage == {
        "input_tokens": 60,
        "cached_input_tokens": 0,
        "cache_write_input_tokens": 0,
        "output_tokens": 12,
        "reasoning_output_tokens": 0,
    }
    assert out.error is None  # its "error" items (unknown model metadata) are warnings


def test_codex_turn_failed_is_the_turns_error() -> None:
    failed = {"type": "turn.failed", "error": {"message": "unexpected status 401 Unauthorized"}}
    assert parse_codex(json.dumps(failed)).error == "unexpected status 401 Unauthorized"


def test_jsonl_and_text_outputs() -> None:
    out = parse_jsonl('progress\n{"session": "s1"}\n{"reply": "done", "cost_usd": 0.5}\n')
    assert (out.reply, out.session, out.cost_usd) == ("done", "s1", 0.5)
    assert parse_text("  hello\n").reply == "hello"


def test_claude_code_preset_environment_and_files(tmp_path: Path) -> None:
    agent = claude_code("claude-sonnet-4-5", instructions="Answer in French.")
    setup = _setup(tmp_path, gauge={"command": "python", "args": ["-m", "x"]})
    setup.home.mkdir(parents=True)
    env = build_environment(agent, setup, INHERITED)
    assert {k for k in env if k.startswith("ANTHROPIC_")} == {
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_MODEL",
        "ANTHROPIC_DEFAULT_HAIKU_MODEL",
        "ANTHROPIC_SMALL_FAST_MODEL",
    }
    assert (
        env["ANTHROPIC_DEFAULT_HAIKU_MODEL"] == "claude-sonnet-4-5"
    )  # its background calls: a declared model
    assert agent.helper_models == ()
    assert claude_code("claude-sonnet-4-5", small_model="claude-haiku-4-5").helper_models == (
        "claude-haiku-4-5",
    )
    assert env["ANTHROPIC_BASE_URL"] == ENDPOINT.base_urls["anthropic"]
    assert env["ANTHROPIC_AUTH_TOKEN"] == ENDPOINT.token
    assert env["CLAUDE_CONFIG_DIR"] == str(setup.home / "claude")
    assert not any(k.startswith("CLAUDECODE") or k == "CLAUDE_CODE_ENTRYPOINT" for k in env)
    for secret in ("sk-ant-real-key", "sk-gateway-key", "sk-openai", "stale"):
        assert not any(secret in v for v in env.values()), secret
    assert (setup.home / "claude" / "CLAUDE.md").read_text() == "Answer in French."
    settings = json.loads((setup.home / "claude" / "settings.json").read_text())
    assert "mcp__gauge" in settings["permissions"]["allow"]
    assert json.loads((setup.home / "mcp.json").read_text())["mcpServers"]["gauge"]["command"] == "python"


def test_claude_code_argv_first_turn_names_the_session_later_turns_resume(tmp_path: Path) -> None:
    session = ProgramSession(claude_code("m"), _setup(tmp_path))
    first = session.argv("hi")
    assert first[:3] == ["claude", "-p", "hi"]
    assert first[first.index("--session-id") + 1] == session_uuid("transcript/t1/agent/0")
    assert first[first.index("--output-format") + 1] == "stream-json" and "--verbose" in first
    session.session = "abc"
    later = session.argv("more")
    assert later[later.index("--resume") + 1] == "abc" and "--session-id" not in later


def test_codex_preset_config_toml_and_environment(tmp_path: Path) -> None:
    agent = codex("gpt-5.1-codex", instructions="Be brief.")
    setup = _setup(tmp_path, gauge={"command": "python", "args": ["-m", "x"], "env": {"A": "1"}})
    setup.home.mkdir(parents=True)
    env = build_environment(agent, setup, INHERITED)
    config = tomllib.loads((setup.home / "codex" / "config.toml").read_text())
    provider = config["model_providers"][config["model_provider"]]
    assert config["model"] == "gpt-5.1-codex"
    assert provider["base_url"] == ENDPOINT.base_urls["responses"]
    assert provider["wire_api"] == "responses"
    assert env[provider["env_key"]] == ENDPOINT.token
    server = config["mcp_servers"]["gauge"]
    assert (server["command"], server["args"], server["env"]) == ("python", ["-m", "x"], {"A": "1"})
    assert server["startup_timeout_sec"] == 30
    assert server["required"] is True and server["default_tools_approval_mode"] == "approve"
    assert config["analytics"]["enabled"] is False
    assert provider["request_max_retries"] == 0 and provider["stream_max_retries"] == 0  # the gateway's
    assert env["CODEX_HOME"] == str(setup.home / "codex")
    assert not any(k.startswith(("ANTHROPIC_", "OPENAI_", "CLAUDECODE")) for k in env)
    assert (setup.home / "codex" / "AGENTS.md").read_text() == "Be brief."
    session = ProgramSession(agent, setup)
    assert session.argv("go")[:2] == ["codex", "exec"] and "--json" in session.argv("go")
    session.session = "t1"
    assert session.argv("next")[-3:] == ["resume", "t1", "next"]


PROGRAM = r"""
import json, os, sys
prompt = sys.stdin.read() if "--stdin" in sys.argv else sys.argv[1]
print("a line that is not JSON")
print(json.dumps({"session": "s-" + str(len(prompt)), "reply": "echo:" + prompt,
                  "argv": sys.argv[1:], "cwd": os.getcwd(), "env": dict(os.environ)}))
"""


def _python_agent(tmp_path: Path, *argv: str, **kw: object) -> CommandAgent:
    script = tmp_path / "agent.py"
    script.write_text(PROGRAM)
    return CommandAgent(name="py", argv=(sys.executable, str(script), *argv), output="jsonl", **kw)  # type: ignore[arg-type]


def test_a_python_program_per_turn_placeholders_session_and_environment(tmp_path: Path) -> None:
    agent = _python_agent(
        tmp_path, "{prompt}", "{session}", "{workdir}", resume_argv=None, env={"MY_VAR": "{home}/x"}
    )
    session = ProgramSession.open(agent, _setup(tmp_path))
    reply = asyncio.run(session.turn("hello"))
    assert reply.reply == "echo:hello" and session.session == "s-5"
    seen = json.loads(session_output(session))
    assert seen["argv"][1:] == [session_uuid("transcript/t1/agent/0"), str(tmp_path / "ws")]
    assert Path(seen["cwd"]) == tmp_path / "ws"
    assert (
        seen["env"]["HOME"] == str(tmp_path / "ws.home")
        and seen["env"]["MY_VAR"] == f"{tmp_path / 'ws.home'}/x"
    )
    assert "TAOTOKEN_API_KEY" not in seen["env"] and "PYTEST_CURRENT_TEST" not in seen["env"]
    asyncio.run(session.turn("again"))
    assert json.loads(session_output(session))["argv"][1] == "s-5"  # the reported session, next turn


def session_output(session: ProgramSession) -> str:
    """The JSON line the test program printed on its last turn (it echoes what it saw)."""
    return session.last_stdout.splitlines()[-1]


def test_prompt_on_stdin(tmp_path: Path) -> None:
    agent = _python_agent(tmp_path, "--stdin", stdin=True)
    reply = asyncio.run(ProgramSession.open(agent, _setup(tmp_path)).turn("from stdin"))
    assert reply.reply == "echo:from stdin"


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    script = tmp_path / "slow.py"
    script.write_text(
        "import subprocess, sys, time\n"
        f"child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(60)\n"
    )
    for timeout in KILL_TIMEOUTS:
        agent = CommandAgent(name="slow", argv=(sys.executable, str(script), "{prompt}"), timeout=timeout)
        session = ProgramSession.open(agent, _setup(tmp_path))
        with pytest.raises(ProgramFailed, match=f"timeout of {timeout:g}s; its process group was killed"):
            asyncio.run(session.turn("x"))
        if pidfile.exists() and pidfile.read_text():
            break
    child = int(pidfile.read_text())
    assert process_ended(child), f"the program's child {child} outlived the turn's timeout"


def test_failed_exit_without_reply_names_status_and_stderr(tmp_path: Path) -> None:
    argv = (sys.executable, "-c", "import sys; sys.stderr.write('boom\\n'); sys.exit(3)", "{prompt}")
    session = ProgramSession.open(CommandAgent(name="bad", argv=argv), _setup(tmp_path))
    with pytest.raises(ProgramFailed, match=r"exited with status 3 .*stderr: boom"):
        asyncio.run(session.turn("x"))


def test_missing_program_names_the_install_command(tmp_path: Path) -> None:
    agent = claude_code("m", command="claude-not-installed-here")
    session = ProgramSession.open(agent, _setup(tmp_path))
    with pytest.raises(ProgramMissing, match="was not found on PATH"):
        asyncio.run(session.turn("x"))
    agent = claude_code("m", command=str(tmp_path / "nowhere" / "claude"))
    with pytest.raises(ProgramMissing, match=re.escape("npm install -g @anthropic-ai/claude-code@2.1.328")):
        asyncio.run(ProgramSession.open(agent, _setup(tmp_path)).turn("x"))


def test_command_agent_declaration_errors() -> None:
    with pytest.raises(ValueError, match="no \\{prompt\\} and stdin=False"):
        CommandAgent(name="x", argv=("prog",))
    with pytest.raises(ValueError, match="output is one of"):
        CommandAgent(name="x", argv=("prog", "{prompt}"), output="xml")
    with pytest.raises(ValueError, match="timeout must be > 0"):
        CommandAgent(name="x", argv=("prog", "{prompt}"), timeout=0)


def test_codex_config_round_trips_any_value_through_tomllib() -> None:
    odd = 'modèle "été" \\ \u00e9\n\ttab \u2603'
    text = codex_config(odd, "http://127.0.0.1:8080/w/x/v1", {"naïve": {"command": odd, "args": [odd]}})
    config = tomllib.loads(text)
    assert config["model"] == odd and config["mcp_servers"]["naïve"]["args"] == [odd]


def test_claude_code_turns_its_own_retries_off(tmp_path: Path) -> None:
    setup = _setup(tmp_path)
    setup.home.mkdir(parents=True)
    assert build_environment(claude_code("m"), setup, INHERITED)["CLAUDE_CODE_MAX_RETRIES"] == "0"
