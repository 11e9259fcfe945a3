"""The workspace rules (``file_exists``, ``file_contains``, ``command_succeeds``): their parsing with
located errors, what they see in a real folder, a command's timeout killing its process group, the
recorded result a transcript carries, and the per-transcript workspace copy (docs/protocol.md#workspaces)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from pytest_gauge._internal.files.workspace import workspace_for, workspace_path
from pytest_gauge._internal.records import Transcript
from pytest_gauge._internal.suite import regex_bound
from pytest_gauge._internal.suite.file_checks import command_env, run_command_async
from pytest_gauge._internal.suite.rules import (
    CommandSucceeds,
    FileContains,
    FileExists,
    RuleSpecError,
    WorkspaceRule,
    observe_workspace,
    parse_rule,
    score,
)
from pytest_gauge._internal.suite.tasks import TaskFileError, load_tasks
from pytest_gauge._internal.suite.tools import Tool, ToolExecutor
from tests.helpers import KILL_TIMEOUTS, process_ended


def rule(obj: dict[str, object]) -> WorkspaceRule:
    built = parse_rule(obj, field="success_criteria[0]")
    assert isinstance(built, WorkspaceRule)
    return built


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    (folder / "src").mkdir(parents=True)
    (folder / "src" / "app.py").write_text("def add(a, b):\n    return a + b\n", encoding="utf-8")
    (folder / "README.md").write_text("Café ’quoted’ Notes\n", encoding="utf-8")
    return folder


def test_file_exists_and_absent(ws: Path) -> None:
    assert rule({"type": "file_exists", "path": "src/app.py"}).observe(ws).passed
    missing = rule({"type": "file_exists", "path": "src/nope.py"}).observe(ws)
    assert not missing.passed and "does not exist" in missing.detail
    assert rule({"type": "file_exists", "path": "gone.txt", "exists": False}).observe(ws).passed
    assert not rule({"type": "file_exists", "path": "README.md", "exists": False}).observe(ws).passed


def test_a_symlink_out_of_the_workspace_is_not_followed(ws: Path, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("outside", encoding="utf-8")
    (ws / "link.txt").symlink_to(tmp_path / "secret.txt")
    assert not rule({"type": "file_exists", "path": "link.txt"}).observe(ws).passed
    assert not rule({"type": "file_contains", "path": "link.txt", "phrases": ["outside"]}).observe(ws).passed


def test_file_contains_phrases_are_matched_like_text_rules(ws: Path) -> None:
    assert (
        rule({"type": "file_contains", "path": "README.md", "phrases": ["café", "'quoted'"]})
        .observe(ws)
        .passed
    )
    exact = rule({"type": "file_contains", "path": "README.md", "phrases": ["notes"], "case_sensitive": True})
    result = exact.observe(ws)
    assert not result.passed and "lacks" in result.detail and '"notes"' in result.detail


def test_file_contains_pattern_and_its_time_bound(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert (
        rule({"type": "file_contains", "path": "src/app.py", "pattern": r"return a \+ b"}).observe(ws).passed
    )
    assert not rule({"type": "file_contains", "path": "src/app.py", "pattern": "^RETURN"}).observe(ws).passed
    assert (
        rule({"type": "file_contains", "path": "src/app.py", "pattern": "^ +RETURN", "flags": "im"})
        .observe(ws)
        .passed
    )
    monkeypatch.setattr(regex_bound, "REGEX_TIMEOUT", 0.1)  # "(a|aa)+$" on 40 a's runs for minutes
    (ws / "big.txt").write_text("a" * 40 + "!", encoding="utf-8")
    slow = rule({"type": "file_contains", "path": "big.txt", "pattern": "(a|aa)+$"}).observe(ws)
    assert not slow.passed and "catastrophic backtracking" in slow.detail
    not_file = rule({"type": "file_contains", "path": "src", "phrases": ["x"]}).observe(ws)
    assert not not_file.passed and "is not a file" in not_file.detail


def test_command_succeeds_pass_fail_and_code(ws: Path) -> None:
    ok = rule({"type": "command_succeeds", "command": [sys.executable, "-c", "import src.app"]})
    assert ok.observe(ws).passed
    failing = rule(
        {"type": "command_succeeds", "command": f"{sys.executable} -c 'print(1.25); raise SystemExit(3)'"}
    )
    result = failing.observe(ws)
    assert not result.passed and "exited with 3, expected 0" in result.detail
    assert result.detail.endswith(": 1.25")  # the output's tail, no duration in it to blank
    three = rule(
        {"type": "command_succeeds", "command": [sys.executable, "-c", "raise SystemExit(3)"], "code": 3}
    )
    assert three.observe(ws).passed
    absent = rule({"type": "command_succeeds", "command": ["no-such-program-gauge"]}).observe(ws)
    assert not absent.passed and "exited with 127" in absent.detail


def test_command_timeout_kills_the_process_group(ws: Path, tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    for timeout in KILL_TIMEOUTS:
        hung = rule({"type": "command_succeeds", "command": _sleeper(pidfile), "timeout": timeout})
        result = hung.observe(ws)
        assert not result.passed
        assert f"did not finish within {timeout:g}s (process group killed)" in result.detail
        if _started(pidfile):
            break
    # the grandchild was in the group: it is gone (or a zombie reaped by init)
    assert process_ended(int(pidfile.read_text())), "the command's child outlived the timeout"


def _started(pidfile: Path) -> bool:
    """The sleeper had started its child (and written its pid) before it was killed."""
    return pidfile.exists() and pidfile.read_text() != ""


def _sleeper(pidfile: Path) -> list[str]:
    script = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(60)\n"
    )
    return [sys.executable, "-c", script]


def test_the_engines_command_is_killed_at_its_timeout_and_when_cancelled(ws: Path, tmp_path: Path) -> None:
    timed = tmp_path / "timed.pid"
    for timeout in KILL_TIMEOUTS:
        outcome = asyncio.run(run_command_async(_sleeper(timed), ws, timeout))
        assert outcome.code is None
        if _started(timed):
            break
    assert process_ended(int(timed.read_text()))
    ok = asyncio.run(run_command_async([sys.executable, "-c", "print('fine')"], ws, 30))
    assert (ok.code, ok.output) == (0, "fine")

    cancelled = tmp_path / "cancelled.pid"

    async def cancel_it() -> None:
        task = asyncio.ensure_future(run_command_async(_sleeper(cancelled), ws, 60))
        for _ in range(200):  # until the child has started
            await asyncio.sleep(0.05)
            if _started(cancelled):
                break
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_it())
    assert process_ended(int(cancelled.read_text()))  # Ctrl-C leaves no test runner behind


def test_command_env_has_no_key_variables() -> None:
    env = command_env({"PATH": "/bin", "OPENAI_API_KEY": "sk-x", "ANTHROPIC_AUTH_TOKEN": "t", "HOME": "/h"})
    assert env == {"PATH": "/bin", "HOME": "/h"}


@pytest.mark.parametrize(
    ("obj", "field", "reason"),
    [
        ({"type": "file_exists", "path": "/etc/passwd"}, "success_criteria[0].path", "is absolute"),
        ({"type": "file_exists", "path": "../x"}, "success_criteria[0].path", "leaves the workspace"),
        ({"type": "file_exists", "path": 3}, "success_criteria[0].path", "non-empty string"),
        ({"type": "file_contains", "path": "a"}, "success_criteria[0]", "exactly one of phrases, pattern"),
        (
            {"type": "file_contains", "path": "a", "phrases": ["x"], "pattern": "x"},
            "success_criteria[0]",
            "exactly one",
        ),
        (
            {"type": "file_contains", "path": "a", "pattern": "("},
            "success_criteria[0].pattern",
            "invalid regular",
        ),
        (
            {"type": "file_contains", "path": "a", "pattern": "x", "flags": "q"},
            "success_criteria[0].flags",
            "letters",
        ),
        ({"type": "command_succeeds", "command": ""}, "success_criteria[0].command", "non-empty command"),
        ({"type": "command_succeeds", "command": "a 'b"}, "success_criteria[0].command", "cannot split"),
        (
            {"type": "command_succeeds", "command": ["x"], "timeout": 0},
            "success_criteria[0].timeout",
            "(0, 3600]",
        ),
        (
            {"type": "command_succeeds", "command": ["x"], "shell": True},
            "success_criteria[0].shell",
            "unknown argument",
        ),
    ],
)
def test_malformed_rules_name_the_field(obj: dict[str, object], field: str, reason: str) -> None:
    with pytest.raises(RuleSpecError) as info:
        parse_rule(obj, field="success_criteria[0]")
    assert info.value.field == field and reason in info.value.message


def test_a_malformed_rule_in_tasks_jsonl_is_one_line_naming_file_and_line(tmp_path: Path) -> None:
    bad = {"type": "command_succeeds", "command": ["pytest"], "timeout": -1}
    task = {"task_id": "t1", "category": "multi_step", "task_prompt": "Fix it.", "success_criteria": [bad]}
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps({"format_version": 1}) + "\n" + json.dumps(task) + "\n", encoding="utf-8")
    with pytest.raises(TaskFileError) as info:
        load_tasks(path)
    text = str(info.value)
    assert "\n" not in text and text.startswith(f"{path}:2: ") and "success_criteria[0].timeout" in text


def test_the_transcript_carries_what_was_observed(ws: Path) -> None:
    rules = (
        rule({"type": "file_exists", "path": "src/app.py"}),
        rule({"type": "file_contains", "path": "README.md", "phrases": ["absent phrase"]}),
    )
    checks = observe_workspace(rules, ws)
    transcript = Transcript("t1", "a", 0, [], "", None, "user_done", workspace_checks=checks)
    back = Transcript.from_json(json.loads(json.dumps(transcript.to_json())))
    verdict = score(rules, (), back)
    assert [r.passed for r in verdict.criteria] == [True, False] and verdict.reward == 0.5
    unchecked = score(rules, (), Transcript("t1", "a", 0, [], "", None, "user_done"))
    assert "no workspace was checked" in unchecked.criteria[0].detail
    assert "workspace_checks" not in Transcript("t1", "a", 0, [], "", None, "user_done").to_json()


def test_keys_differ_by_arguments_not_by_weight() -> None:
    a = rule({"type": "file_exists", "path": "x"})
    assert a.key == rule({"type": "file_exists", "path": "x", "weight": 2}).key
    assert a.key != rule({"type": "file_exists", "path": "y"}).key
    assert isinstance(a, FileExists)
    assert isinstance(rule({"type": "file_contains", "path": "x", "phrases": ["p"]}), FileContains)
    assert isinstance(rule({"type": "command_succeeds", "command": "true"}), CommandSucceeds)


def test_workspace_for_is_a_fresh_copy_at_a_stable_path(ws: Path, tmp_path: Path) -> None:
    out = tmp_path / "gauge-out"
    first = workspace_for(out, "s", "t1", "agent_a", 0, ws)
    assert (
        first
        == workspace_path(out, "s", "t1", "agent_a", 0)
        == out.absolute() / "s" / "work" / "t1" / "agent_a" / "0"
    )
    (first / "src" / "app.py").write_text("broken", encoding="utf-8")
    (first / "new.txt").write_text("left over", encoding="utf-8")
    again = workspace_for(out, "s", "t1", "agent_a", 0, ws)
    assert again == first and not (again / "new.txt").exists()
    assert (again / "src" / "app.py").read_text(encoding="utf-8").startswith("def add")
    empty = workspace_for(out, "s", "t1", "agent_b", 1, None)
    assert empty.is_dir() and not any(empty.iterdir())


def test_tools_taking_workspace_get_the_folder(ws: Path) -> None:
    def write_file(path: str, text: str, workspace: Path) -> str:
        (workspace / path).write_text(text, encoding="utf-8")
        return "written"

    schema = {"type": "object", "properties": {"path": {"type": "string"}, "text": {"type": "string"}},
              "required": ["path", "text"], "additionalProperties": False}  # fmt: skip
    tool = Tool("write_file", "Write a file", schema, write_file)
    call = asyncio.run(
        ToolExecutor([tool], 5.0, ws).run("c1", "write_file", '{"path": "out.txt", "text": "hi"}')
    )
    assert (call.return_code, call.result) == (0, "written")
    assert (ws / "out.txt").read_text(encoding="utf-8") == "hi"
    bare = asyncio.run(ToolExecutor([tool], 5.0).run("c2", "write_file", '{"path": "o.txt", "text": "x"}'))
    assert bare.return_code == 1 and "workspace" in bare.result  # without a workspace: a TypeError
