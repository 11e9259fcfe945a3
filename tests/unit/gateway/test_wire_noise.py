"""An agent program's per-run noise is out of the cache material: two requests
Claude Code or Codex send for the same transcript in two runs, from checkouts in different folders on
different days, have one key; a request that differs in what decides the answer does not."""

from __future__ import annotations

from typing import Any

from pytest_gauge._internal.gateway.wire import wire_format
from pytest_gauge._internal.gateway.wire.noise import quiet, register_folder, register_suite


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
        "memory at `<workspace:transcript/t1/cc/0>.home/claude/projects/<project>/memory/`\n"
        "Today's date is <date>."
    )


def test_a_request_without_noise_is_unchanged() -> None:
    body = {"model": "m", "input": [{"type": "message", "role": "user", "content": "hi"}], "seed": None}
    assert quiet(body) == body


def test_a_tool_schema_with_a_property_named_type_is_material_too() -> None:
    """Codex's tools have parameters whose properties include one named ``type`` (a dict there, not an
    item's type): quiet keeps it whole (it raised TypeError, a 500 from the proxy to every request)."""
    from pytest_gauge._internal.gateway.wire.noise import quiet

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
            "memory: <gauge-out>/program_agents/work/t1/codex/0.home/claude/projects/<project>/memory/"
        ), quiet(text)


def _claude_system(root: str, day: str, version: str, git: str | None, tz: str) -> dict[str, Any]:
    """A Claude Code request's system blocks as 2.1.328 sends them: its billing line with its version,
    the environment section (checkout or not, date) and, in a git checkout, the git status block."""
    status = (
        "gitStatus: This is the git status at the start of the conversation. Note that this status is a"
        " snapshot in time, and will not update during the conversation.\n\nCurrent branch: "
        f"{git}\n\nMain branch (you will usually use this for PRs): main\n\nGit user: ci\n\nStatus:\n"
        f"?? notes-{git}.txt\n M README.md\n\nRecent commits:\nabc1234 first\ndef5678 {git} second"
        if git
        else ""
    )
    env = (
        f"Primary working directory: {root}/gauge-out/s/work/t1/claude_code/0\n"
        f" - Is a git repository: {'true' if git else 'false'}\n - OS Version: Linux 6.1\n"
        f"Your memory is at {root}/gauge-out/s/work/t1/claude_code/0.home/claude/projects/"
        f"{root.replace('/', '-')}/memory/.\nToday's date is {day}.\n{status}\n\nAnswer briefly."
    )
    return {
        "model": "claude-x",
        "max_tokens": 32000,
        "system": [
            {
                "type": "text",
                "text": f"x-anthropic-billing-header: cc_version={version}; cc_entrypoint=sdk-cli;",
            },
            {"type": "text", "text": env},
        ],
        "messages": [
            {"role": "user", "content": f"<env>{tz}</env> Look up order A123."},
            {
                "role": "user",
                "content": f"<environment_context><timezone>{tz}</timezone></environment_context>",
            },
        ],
    }


def test_claude_codes_version_git_state_date_and_time_zone_are_not_in_the_key() -> None:
    register_suite("s")
    messages = wire_format("anthropic")
    one = messages.cache_material(_claude_system("/ci/a", "2026-12-04", "2.1.328.f36", "main", "Etc/UTC"))
    other = messages.cache_material(
        _claude_system("/home/dev/b", "2026-12-05", "2.1.400.a1", "feature-x", "Etc/UTC")
    )
    assert one["system"] == other["system"]  # another clone, branch, status, day and CLI version
    plain = messages.cache_material(_claude_system("/ci/a", "2026-12-04", "2.1.328.f36", None, "Etc/UTC"))
    later = messages.cache_material(_claude_system("/x/y", "2027-01-01", "2.2.0", None, "Etc/UTC"))
    assert plain["system"] == later["system"]  # outside a checkout likewise
    assert "<git status>\n\nAnswer briefly." in other["system"][1]["text"]  # the rest of the text is kept
    same_tz = messages.cache_material(
        _claude_system("/ci/a", "2026-12-04", "2.1.328.f36", None, "Asia/Tokyo")
    )
    assert same_tz["messages"][1] == one["messages"][1]  # Codex's <timezone> line is quieted
    assert same_tz["messages"][0] != one["messages"][0]  # but nothing outside the known lines
