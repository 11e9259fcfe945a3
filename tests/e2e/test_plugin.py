"""End-to-end runs of the plugin on a real (small) suite, the way pytest plugins test themselves."""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers import DATA, MINI_INI, SharedRun, SharedRuns, read_jsonl, run_inprocess

CASES = 5 * 3 * 2  # tasks x pairs x orders
MODES = {"no-xdist": ["-p", "no:xdist"], "n0": ["-n", "0"], "n2": ["-n", "2", "-v"]}


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return run_inprocess(pytester, "suites", *args)


def copy_mini(folder: Path) -> None:
    """What the ``mini_suite`` fixture makes, in a shared run's folder."""
    shutil.copytree(DATA / "mini", folder / "suites" / "mini")
    (folder / "pytest.ini").write_text(MINI_INI, encoding="utf-8")


def mini_run(shared_runs: SharedRuns, mode: str, pytester: pytest.Pytester | None = None) -> SharedRun:
    """The small suite run once per session in each mode (without xdist, -n 0, -n 2), cache off. The
    example suites compare -n 2 with -n 0 too (tests/acceptance/test_eval_suites.py): each worker costs a
    process start and the package's imports, so both compare the one worker count the issue names.
    Every mode runs in this process when a ``pytester`` is given; with ``-n 2`` only the two workers are
    processes of their own (the way xdist's own tests run its controller)."""
    return shared_runs.get(
        f"mini-{mode}", copy_mini, "suites", *MODES[mode], "--gauge-cache", "off", pytester=pytester
    )


def outcomes(run: SharedRun) -> dict[str, int]:
    return pytest.RunResult(run.ret, run.stdout.splitlines(), [], 0.0).parseoutcomes()


@pytest.mark.parametrize("mode", ["no-xdist", "n0", pytest.param("n2", marks=pytest.mark.slow)])
def test_suite_run_writes_every_output(shared_runs: SharedRuns, pytester: pytest.Pytester, mode: str) -> None:
    run = mini_run(shared_runs, mode, pytester)
    assert (run.ret, outcomes(run)["passed"]) == (0, CASES), run.stdout[-3000:]
    out = run.path / "gauge-out" / "mini"
    for name in ("tasks.jsonl", "pairs/pair_results.jsonl", "agent_runs.jsonl", "manifest.json"):
        assert (out / name).is_file(), name
    for agent in ("agent_x", "agent_y", "agent_z"):
        rows = read_jsonl(out / "agents" / f"{agent}.jsonl")
        assert sorted(r["task_id"] for r in rows) == ["m01", "m02", "m03", "m04", "m05"]
    pairs = read_jsonl(out / "pairs" / "pair_results.jsonl")
    assert len(pairs) == CASES
    assert len({p["case_id"] for p in pairs}) == CASES
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["seed"] == 7 and manifest["backend"] == "sim" and manifest["cases_recorded"] == CASES
    assert set(manifest["versions"]) >= {"python", "pytest", "openai", "numpy"}


@pytest.mark.slow
def test_results_identical_without_xdist_and_with_two_workers(
    shared_runs: SharedRuns, pytester: pytest.Pytester, read_outputs: Callable[[Path], dict[str, list[str]]]
) -> None:
    runs = {mode: mini_run(shared_runs, mode, pytester) for mode in ("no-xdist", "n0", "n2")}
    for run in runs.values():
        assert (run.ret, outcomes(run)["passed"]) == (0, CASES), run.stdout[-3000:]
    outputs = {mode: read_outputs(run.path / "gauge-out" / "mini") for mode, run in runs.items()}
    workers = set(re.findall(r"\[(gw\d)\]", runs["n2"].stdout))
    assert len(workers) == 2, "both xdist workers must have run cases"
    ledger = read_jsonl(runs["n2"].path / "gauge-out" / "mini" / "agent_runs.jsonl")
    assert {r["worker"] for r in ledger} <= {"gw0", "gw1"}
    assert outputs["no-xdist"] == outputs["n0"] == outputs["n2"]
    # no record lost or doubled: one ok attempt per call id
    ok = Counter(r["call_id"] for r in ledger if r["status"] == "ok")
    assert ok and max(ok.values()) == 1


@pytest.mark.slow
def test_each_transcript_is_generated_once(shared_runs: SharedRuns, pytester: pytest.Pytester) -> None:
    run = mini_run(shared_runs, "n2", pytester)
    assert run.ret == 0, run.stdout[-3000:]
    out = run.path / "gauge-out" / "mini"
    ledger = read_jsonl(out / "agent_runs.jsonl")
    transcripts = {r["work"] for r in ledger if r["work"].startswith("transcript/")}
    assert len(transcripts) == 5 * 3  # tasks x agents, whatever the number of cases using them
    judge_calls = [r for r in ledger if r["role"] == "judge"]
    assert len(judge_calls) == CASES
    # the calls each transcript needed: every user-simulator and agent turn, tool loops included
    for agent in ("agent_x", "agent_y", "agent_z"):
        for t in read_jsonl(out / "agents" / f"{agent}.jsonl"):
            work = f"transcript/{t['task_id']}/{agent}/0"
            calls = [r for r in ledger if r["work"] == work]
            user_turns = sum(1 for turn in t["turns"] if turn["role"] == "user")
            agent_calls = sum(1 for turn in t["turns"] if turn["role"] == "assistant")
            # the user opens with the task verbatim (no call); every later user turn, and the last
            # word of a user who is done, is one user-simulator call
            user_calls = user_turns - 1 + (1 if t["ended_by"] == "user_done" else 0)
            assert Counter(r["role"] for r in calls) == Counter(
                {"user_sim": user_calls, "agent": agent_calls}
            )


def test_malformed_task_line_is_one_located_error(pytester: pytest.Pytester, mini_suite: Path) -> None:
    lines = (mini_suite / "tasks.jsonl").read_text().splitlines()
    lines[2] = lines[2][:-5]  # cut the JSON short on line 3
    (mini_suite / "tasks.jsonl").write_text("\n".join(lines) + "\n")
    result = run(pytester)
    assert result.ret != 0
    result.stdout.re_match_lines([r".*tasks\.jsonl:3: malformed JSON: .*"])
    assert "Traceback" not in result.stdout.str()


def test_unknown_rule_type_names_file_line_and_field(pytester: pytest.Pytester, mini_suite: Path) -> None:
    lines = (mini_suite / "tasks.jsonl").read_text().splitlines()
    lines[1] = lines[1].replace('"contains_all"', '"contains_everything"')
    (mini_suite / "tasks.jsonl").write_text("\n".join(lines) + "\n")
    result = run(pytester)
    assert result.ret != 0
    result.stdout.re_match_lines([r".*tasks\.jsonl:2: success_criteria\[0\]\.type: .*contains_everything.*"])


@pytest.mark.parametrize("explicit", [True, False])
def test_live_backend_without_key_stops_before_any_request(
    pytester: pytest.Pytester, mini_suite: Path, monkeypatch: pytest.MonkeyPatch, explicit: bool
) -> None:
    monkeypatch.delenv("TAOTOKEN_API_KEY", raising=False)
    monkeypatch.setenv("TAOTOKEN_BASE_URL", "http://127.0.0.1:9/v1")  # nothing listens: a request would error
    if explicit:
        result = run(pytester, "--gauge-backend", "live")
        assert result.ret == pytest.ExitCode.USAGE_ERROR
    else:
        pytester.makeini("[pytest]\n")  # live is the default backend
        result = run(pytester)
        assert result.ret != 0
    assert "TAOTOKEN_API_KEY" in result.stdout.str() + result.stderr.str()
    assert "passed" not in result.stdout.str()
    assert not (pytester.path / "gauge-out" / "mini" / "agent_runs.jsonl").exists()


def test_same_seed_same_bytes(shared_runs: SharedRuns, pytester: pytest.Pytester) -> None:
    """Two separate runs with the same seed (with and without xdist loaded) write the same bytes."""
    a, b = (mini_run(shared_runs, mode, pytester).path / "gauge-out" / "mini" for mode in ("no-xdist", "n0"))
    for name in ("pairs/pair_results.jsonl", "tasks.jsonl"):
        assert (a / name).read_bytes() == (b / name).read_bytes()


def test_plugin_can_be_disabled(pytester: pytest.Pytester, mini_suite: Path) -> None:
    result = run(pytester, "-p", "no:gauge")
    result.assert_outcomes()
    assert not (pytester.path / "gauge-out").exists()


def test_pytest_help_lists_every_flag_and_ini_key(pytester: pytest.Pytester) -> None:
    """``pytest --help`` works and shows each ``--gauge-*`` flag and ini key with its help (a help text
    with a bare ``%``, such as "95%", made argparse raise instead)."""
    from pytest_gauge._internal.options import _SETTINGS

    result = pytester.runpytest("--help")
    assert result.ret == 0, result.stderr.str()
    text = result.stdout.str()
    for suffix, ini, _kind, _help, _choices in _SETTINGS:
        assert f"--gauge-{suffix}" in text and ini in text, suffix
    assert "each gate at its own 95%)" in text
