"""Tasks that act on files, end to end on the sim backend: the suite's ``project/``
folder is copied into each transcript's workspace at ``gauge-out/<suite>/work/<task>/<agent>/<sample>``,
a tool writes into it, and ``file_exists`` / ``file_contains`` / ``command_succeeds`` score what is
there after the dialogue, recorded in the transcript like every rule. Unit tests of the rules:
tests/unit/suite/test_workspace_rules.py."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.helpers import read_jsonl, run_inprocess

SUITE_DATA = Path(__file__).resolve().parents[1] / "data" / "workspace_suite"


def test_workspace_rules_score_what_the_agent_left_in_its_files(pytester: pytest.Pytester) -> None:
    target = pytester.path / "suites" / "ws"
    shutil.copytree(SUITE_DATA / "project", target / "project")
    shutil.copy(SUITE_DATA / "tasks.jsonl", target / "tasks.jsonl")
    shutil.copy(SUITE_DATA / "suite_workspace.py", target / "test_ws_suite.py")
    pytester.makeini("[pytest]\ngauge_backend = sim\ngauge_seed = 7\n")
    run_inprocess(pytester, "suites", "--gauge-cache", "off").assert_outcomes(passed=2 * 2)
    out = pytester.path / "gauge-out" / "ws"
    for agent in ("agent_x", "agent_y"):
        rows = {r["task_id"]: r for r in read_jsonl(out / "agents" / f"{agent}.jsonl")}
        w01, w02 = rows["w01"], rows["w02"]
        assert [c["passed"] for c in w01["score"]["criteria"]] == [True, True, True, True], w01["score"]
        assert w01["score"]["task_success"] and w01["score"]["constraints"][0]["passed"]
        assert sorted(c["passed"] for c in w01["workspace_checks"].values()) == [True] * 4
        assert w02["score"]["criteria"][0] == {
            "rule": 'After the conversation, the file "CHANGELOG.md" contains text matching /^## /.',
            "weight": 1.0,
            "passed": False,
            "detail": '"CHANGELOG.md" is not a file in the workspace',
        }
        workspace = out / "work" / "w01" / agent / "0"
        assert (workspace / "notes.txt").read_text(encoding="utf-8") == "add returns the sum"
        assert (workspace / "calc.py").is_file() and not (
            out / "work" / "w02" / agent / "0" / "notes.txt"
        ).exists()
    assert not (target / "project" / "notes.txt").exists()  # the suite's own folder is never written


def test_a_missing_workspace_folder_fails_collection_naming_the_module(pytester: pytest.Pytester) -> None:
    target = pytester.path / "suites" / "ws"
    target.mkdir(parents=True)
    shutil.copy(SUITE_DATA / "tasks.jsonl", target / "tasks.jsonl")
    shutil.copy(SUITE_DATA / "suite_workspace.py", target / "test_ws_suite.py")
    pytester.makeini("[pytest]\ngauge_backend = sim\n")
    result = run_inprocess(pytester, "suites", "--gauge-cache", "off")
    result.stdout.fnmatch_lines(["*test_ws_suite.py: Suite(workspace='project'): */project is not a folder*"])
