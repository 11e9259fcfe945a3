"""An agent program's per-run noise is out of the cache material: two requests
Claude Code or Codex send for the same transcript in two runs, from checkouts in different folders on
different days, have one key; a request that differs in what decides the answer does not."""

from __future__ import annotations

from typing import Any

from pytest_gauge.gateway.wire import wire_format
from pytest_gauge.gateway.wire.noise import quiet, register_folder, register_suite


def _codex_body(root: str, day: str, ids: tuple[str, str], prompt: str = "Fix the bug") -> dict[str, Any]:
    """A Codex request in the shape 0.169.0 sends (ids, metadata and paths as they vary per run)."""
    work = f"{root}/gauge-out/s/work/t1/codex/0"
    context = (
        f"<environment_context>\n  <cwd>{work}</cwd>\n  <current_date>{day}</current_date>\n"
        f"  <filesystem><workspace_roots><root>{work}</root></workspace_roots></filesystem>\n"
        "</environment_context>"
    )
    return {
        "model": "gpt-5.1-codex",
        "stream": True,
        "input": [
            {
                "type": "message",
                "id": ids[0],
                "role": "user",
                "content": [{"type": "input_text", "text": context}],
            },
            {
                "type": "message",
                "id": ids[1],
                "role": "user",
                "content": [{"type": "input_text", "text": prompt}],
            },
        ],
        "prompt_cache_key": ids[0],
        "client_metadata": {"session_id": ids[1], "turn_started_at_unix_ms": 1},
        "tools": [{"type": "function", "name": "exec_command", "parameters": {"type": "object"}}],
    }


def test_codex_requests_of_two_runs_in_two_checkouts_share_a_key() -> None:
    for root in ("/tmp/run-a", "/srv/checkout-b"):
        work = f"{root}/gauge-out/s/work/t1/codex/0"
        register_folder(work + ".home", "<home:transcript/t1/codex/0>")
        register_folder(work, "<workspace:transcript/t1/codex/0>")
    fmt = wire_format("responses")
    first = fmt.cache_material(_codex_body("/tmp/run-a", "2026-12-02", ("msg_1", "msg_2")))
    second = fmt.cache_material(_codex_body("/srv/checkout-b", "2026-12-03", ("msg_9", "msg_8")))
    assert first == second
    assert "<workspace:transcript/t1/codex/0>" in str(first) and "/tmp/run-a" not in str(first)
    other = fmt.cache_material(
        _codex_body("/tmp/run-a", "2026-12-02", ("msg_1", "msg_2"), "Fix the other bug")
    )
    assert other != first


def test_claude_codes_folders_slugs_dates_and_os_line() -> None:
    work = "/tmp/x_1/gauge-out/s/work/t1/cc/0"
    register_folder(work, "<workspace:transcript/t1/cc/0>")
    text = (
        f" - Primary working directory: {work}\n - OS Version: Linux 6.18.44-fc-v1045\n"
        f"memory at `{work}.home/claude/projects/-tmp-x-1-gauge-out-s-work-t1-cc-0/memory/`\n"
        "Today's date is 2026-12-02."
    )
    assert quiet(text) == (
        " - Primary working directory: <workspace:transcript/t1/cc/0>\n - OS Version: <os>\n"
        "memory at `<workspace:transcript/t1/cc/0>.home/claude/projects/"
        "-workspace-transcript-t1-cc-0-/memory/`\n"
        "Today's date is <date>."
    )


def test_a_request_without_noise_is_unchanged() -> None:
    body = {"model": "m", "input": [{"type": "message", "role": "user", "content": "hi"}], "seed": None}
    assert quiet(body) == body


def test_a_tool_schema_with_a_property_named_type_is_material_too() -> None:
    """Codex's tools have parameters whose properties include one named ``type`` (a dict there, not an
    item's type): quiet keeps it whole (it raised TypeError, a 500 from the proxy to every request)."""
    from pytest_gauge.gateway.wire.noise import quiet

    tool = {"type": "function", "parameters": {"properties": {"type": {"type": "string"}}, "id": "kept"}}
    assert quiet([tool]) == [tool]


def test_codexs_tool_output_wrapper() -> None:
    wrapped = "Chunk ID: 59fe38\nWall time: 0.0122 seconds\nProcess exited with code 0\nOutput:\nok"
    assert quiet(wrapped) == "Chunk ID: <id>\nWall time: <t> seconds\nProcess exited with code 0\nOutput:\nok"


def test_a_suites_output_folders_read_the_same_from_any_checkout() -> None:
    """A program's workspace, private folder and MCP files live under ``<gauge-out>/<suite>/``; an entry
    stored by a run in another folder still hashes to its key (its stored request is quieted too)."""
    register_suite("program_agents")
    for out in ("/tmp/a/cold", "/srv/checkout/gauge-out"):
        text = (
            f"Primary working directory: {out}/program_agents/work/t1/codex/0\n"
            f"args: {out}/program_agents/mcp/t1/codex/0/spec.json\n"
            f"memory: {out}/program_agents/work/t1/codex/0.home/claude/projects/"
            f"{out.replace('/', '-')}-program-agents-work-t1-codex-0/memory/"
        )
        assert quiet(text) == (
            "Primary working directory: <gauge-out>/program_agents/work/t1/codex/0\n"
            "args: <gauge-out>/program_agents/mcp/t1/codex/0/spec.json\n"
            "memory: <gauge-out>/program_agents/work/t1/codex/0.home/claude/projects/"
            "-gauge-out--program-agents-work-t1-codex-0/memory/"
        ), quiet(text)
