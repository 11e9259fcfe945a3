"""End-to-end runs of the plugin on a real (small) suite, the way pytest plugins test themselves."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import read_jsonl

XDIST_MODES = [
    pytest.param([], id="no-xdist"),
    pytest.param(["-n", "0"], id="n0"),
    pytest.param(["-n", "2"], id="n2"),
]
CASES = 5 * 3 * 2  # tasks x pairs x orders


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("suites", "-p", "no:cacheprovider", "-p", "no:randomly", *args)


@pytest.mark.parametrize("mode", XDIST_MODES)
def test_suite_run_writes_every_output(pytester: pytest.Pytester, mini_suite: Path, mode: list[str]) -> None:
    result = run(pytester, *mode, "--gauge-cache", "off")
    result.assert_outcomes(passed=CASES)
    out = pytester.path / "gauge-out" / "mini"
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


def test_results_identical_without_xdist_and_with_four_workers(
    pytester: pytest.Pytester, mini_suite: Path, read_outputs: Callable[[Path], dict[str, list[str]]]
) -> None:
    outputs = {}
    for label, extra in (("seq", []), ("n0", ["-n", "0"]), ("n4", ["-n", "4", "-v"])):
        result = run(pytester, *extra, "--gauge-cache", "off", "--gauge-out", f"out-{label}")
        result.assert_outcomes(passed=CASES)
        outputs[label] = read_outputs(pytester.path / f"out-{label}" / "mini")
        if label == "n4":
            workers = set(re.findall(r"\[(gw\d)\]", result.stdout.str()))
            assert len(workers) >= 2, "both xdist workers must have run cases"
            ledger = read_jsonl(pytester.path / "out-n4" / "mini" / "agent_runs.jsonl")
            assert {r["worker"] for r in ledger} <= {"gw0", "gw1", "gw2", "gw3"}
    assert outputs["seq"] == outputs["n0"] == outputs["n4"]
    # no record lost or doubled: one ok attempt per call id
    ledger = read_jsonl(pytester.path / "out-n4" / "mini" / "agent_runs.jsonl")
    ok = Counter(r["call_id"] for r in ledger if r["status"] == "ok")
    assert ok and max(ok.values()) == 1


def test_each_transcript_is_generated_once(pytester: pytest.Pytester, mini_suite: Path) -> None:
    run(pytester, "-n", "2", "--gauge-cache", "off").assert_outcomes(passed=CASES)
    out = pytester.path / "gauge-out" / "mini"
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
            user_calls = user_turns + (1 if t["ended_by"] == "user_done" else 0)
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


def test_same_seed_same_bytes(pytester: pytest.Pytester, mini_suite: Path) -> None:
    for label in ("a", "b"):
        run(pytester, "--gauge-cache", "off", "--gauge-out", label).assert_outcomes(passed=CASES)
    for name in ("pairs/pair_results.jsonl", "tasks.jsonl"):
        assert (pytester.path / "a" / "mini" / name).read_bytes() == (
            pytester.path / "b" / "mini" / name
        ).read_bytes()


def test_plugin_can_be_disabled(pytester: pytest.Pytester, mini_suite: Path) -> None:
    result = run(pytester, "-p", "no:gauge")
    result.assert_outcomes()
    assert not (pytester.path / "gauge-out").exists()
