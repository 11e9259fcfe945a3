"""One verdict from many machines: no silent green, remote workers, shards and their merge."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pytest_gauge._internal.cli import main
from pytest_gauge._internal.files.shards import (
    Shard,
    ShardError,
    assign_tasks,
    expected_calls,
    parse_shard,
    shard_from,
    task_weights,
    tasks_of,
)
from pytest_gauge._internal.gateway.store import Store
from pytest_gauge._internal.report.format import without_volatile
from tests.helpers import VOLATILE, run_inprocess

GATE = ("--gauge-gate", "lrs <= 1")


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """A run of the pytester folder's suites, cache off: in this process unless it starts xdist workers."""
    workers = args[args.index("-n") + 1] if "-n" in args else "0"
    if workers == "0":
        return run_inprocess(pytester, "suites", "--gauge-cache", "off", *args)
    return pytester.runpytest_subprocess(
        "suites", "-p", "no:cacheprovider", "-p", "no:randomly", "--gauge-cache", "off", *args
    )


@pytest.mark.slow
def test_a_skipped_gate_fails_under_ci_and_is_loud_locally(
    pytester: pytest.Pytester, mini_suite: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = run(pytester, "-k", "m01", *GATE)
    assert local.ret == 0
    local.assert_outcomes(passed=6, skipped=1, deselected=24)
    local.stdout.fnmatch_lines(["*pytest-gauge: 1 gate skipped in suite mini (partial run): NOT CHECKED*"])
    monkeypatch.setenv("CI", "true")
    ci = run(pytester, "-k", "m01", *GATE)
    assert ci.ret == 1
    ci.assert_outcomes(passed=6, failed=1, deselected=24)
    ci.stdout.fnmatch_lines(["*a skipped gate fails a CI run*--gauge-shard*", "*FAILED because CI is set*"])
    allowed = run(pytester, "-k", "m01", *GATE, "--gauge-allow-skipped-gates")
    assert allowed.ret == 0
    allowed.assert_outcomes(passed=6, skipped=1, deselected=24)


def test_a_suite_with_every_case_deselected_has_its_gates_deselected(
    pytester: pytest.Pytester, mini_suite: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "1")
    result = run(pytester, "-k", "no_such_case", *GATE)
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.assert_outcomes(deselected=31)  # the 30 cases and the gate
    result.stdout.fnmatch_lines(["*1 gates deselected in suite mini (no case selected)*"])
    assert not (pytester.path / "gauge-out" / "mini").exists()


OTHER_HOST = """
import pytest


@pytest.hookimpl(trylast=True)
def pytest_configure_node(node):
    # what a worker on another machine sees: a path that does not exist on its filesystem
    node.workerinput["gauge_out_dir"] = "/nonexistent/other-host/gauge-out"
"""


@pytest.mark.slow
def test_a_worker_that_cannot_see_the_controllers_run_folder_stops_the_run(
    pytester: pytest.Pytester, mini_suite: Path
) -> None:
    pytester.makeconftest(OTHER_HOST)
    result = run(pytester, "-n", "2", *GATE)
    assert result.ret != 0
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*xdist worker gw* cannot see the controller's run folder*--gauge-shard*"])
    assert "passed" not in result.stdout.lines[-1]


@pytest.mark.slow
def test_local_workers_started_in_another_folder_write_the_controllers_outputs(
    pytester: pytest.Pytester, mini_suite: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    far = tmp_path_factory.mktemp("far")
    root = str(pytester.path)
    result = pytester.runpytest_subprocess(
        f"{root}/suites", "-p", "no:cacheprovider", "-p", "no:randomly", "--gauge-cache", "off", *GATE,
        "--tx", f"2*popen//chdir={far}", "--rsyncdir", root, "-d", "--gauge-out=out",
    )  # fmt: skip
    result.assert_outcomes(passed=31)  # 30 cases and the gate
    records = (pytester.path / "out" / "mini" / "pairs" / "pair_results.jsonl").read_text().splitlines()
    assert len(records) == 30
    assert not (far / "out").exists()


# ----- shards: the split ---------------------------------------------------------------------------


def test_shard_settings_from_the_option_and_the_environment() -> None:
    assert shard_from("2/3", {}) == Shard(2, 3)
    assert shard_from(None, {"GAUGE_SHARD": "1/4"}) == Shard(1, 4)
    assert shard_from("3/3", {"GAUGE_SHARD": "1/4"}) == Shard(3, 3)  # the option wins
    # Kubernetes Indexed Job: the completion index counts from 0
    assert shard_from(None, {"JOB_COMPLETION_INDEX": "0", "GAUGE_SHARD_COUNT": "3"}) == Shard(1, 3)
    assert shard_from(None, {"JOB_COMPLETION_INDEX": "2", "GAUGE_SHARD_COUNT": "3"}) == Shard(3, 3)
    assert shard_from(None, {"JOB_COMPLETION_INDEX": "2"}) is None
    for bad in ("0/3", "4/3", "1/0", "1-3", "a/b"):
        with pytest.raises(ShardError, match="--gauge-shard"):
            parse_shard(bad)
    with pytest.raises(ShardError, match="JOB_COMPLETION_INDEX"):
        shard_from(None, {"JOB_COMPLETION_INDEX": "3", "GAUGE_SHARD_COUNT": "3"})


def test_tasks_are_split_by_expected_calls_whatever_their_order() -> None:
    weights = {"a": 5, "b": 4, "c": 3, "d": 2, "e": 1}
    # by hand: a->1 (5,0), b->2 (5,4), c->2 (5,7), d->1 (7,7), e->1 (8,7)
    assert assign_tasks(weights, 2) == {"a": 1, "b": 2, "c": 2, "d": 1, "e": 1}
    assert assign_tasks(dict(reversed(weights.items())), 2) == assign_tasks(weights, 2)
    equal = {f"t{i:02d}": 10 for i in range(10)}
    split = assign_tasks(equal, 3)
    assert split == assign_tasks(dict(sorted(equal.items(), reverse=True)), 3)
    assert sorted(Counter(split.values()).values()) == [3, 3, 4]
    union = sorted(t for s in (1, 2, 3) for t in tasks_of(equal, Shard(s, 3)))
    assert union == sorted(equal)  # every task in exactly one shard


def test_a_tasks_expected_calls_count_dialogue_turns_and_judge_calls() -> None:
    # 2 transcripts x 2 calls x 3 turns + 2 cases x 2 repeats x 1 judge model
    assert expected_calls(cases=2, transcripts=2, turns=3, judge_repeats=2, judge_models=1) == 16
    cases = [("t1", "x", "y", 0), ("t1", "x", "y", 0), ("t2", "x", "z", 0)]
    assert task_weights({"t1": 3, "t2": 1}, cases, (1, 1)) == {"t1": 2 * 2 * 3 + 2, "t2": 2 * 2 * 1 + 1}


# ----- shards and their merge, end to end ------------------------------------------------------------

GATES = ("--gauge-gate", "lrs <= 1", "--gauge-gate", "success_rate(agent_z) >= 0.99")  # the second fails
SCRUBBED = {*VOLATILE, "git_commit"}


def _scrub(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _scrub(v) for k, v in value.items() if k not in SCRUBBED}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    return value


def _folder(root: Path) -> dict[str, str]:
    """Every file under ``root``, JSON and JSON lines without volatile fields (line order kept)."""
    out = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".jsonl":
            text = "\n".join(
                json.dumps(_scrub(json.loads(x)), sort_keys=True) for x in text.splitlines() if x
            )
        elif path.suffix == ".json":
            text = json.dumps(_scrub(json.loads(text)), sort_keys=True)
        else:
            text = without_volatile(text)  # token_cost.md's and the page's latencies
        out[path.relative_to(root).as_posix()] = text
    return out


def _merge(*args: str, environ: dict[str, str] | None = None) -> tuple[int, str]:
    buffer = io.StringIO()
    status = main(["merge", *args], environ=environ or {}, out=buffer)
    return status, buffer.getvalue()


@pytest.mark.slow
def test_three_shards_merged_equal_one_run_and_a_missing_shard_is_refused(
    pytester: pytest.Pytester, mini_suite: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = run(pytester, *GATES, "--gauge-out", "whole")
    assert whole.ret == 1  # the failing gate
    monkeypatch.setenv("CI", "true")  # a shard's deferred gates are not skipped gates: CI stays green
    for index, workers in ((1, "0"), (2, "2"), (3, "0")):
        shard = run(
            pytester, *GATES, "-n", workers, "--gauge-shard", f"{index}/3", "--gauge-out", f"s{index}"
        )
        assert shard.ret == 0, shard.stdout.str()
        shard.stdout.fnmatch_lines(["*2 gates of suite mini deferred to merge*"])
    shards = [str(pytester.path / f"s{i}") for i in (1, 2, 3)]
    tasks = [json.loads((Path(s) / "mini" / "shard.json").read_text())["tasks"] for s in shards]
    assert sorted(t for ts in tasks for t in ts) == ["m01", "m02", "m03", "m04", "m05"]

    xml = pytester.path / "merged.xml"
    step_summary = pytester.path / "step-summary.md"
    status, text = _merge(
        *shards, "--out", str(pytester.path / "merged"), "--junitxml", str(xml),
        environ={"GITHUB_STEP_SUMMARY": str(step_summary)},
    )  # fmt: skip
    assert status == 1, text
    assert "mini::gates[success_rate(agent_z) >= 0.99] FAILED" in text
    assert "mini::gates[lrs <= 1] PASSED" in text
    summary = step_summary.read_text()  # Markdown: the gates table
    assert "## pytest-gauge: mini: FAIL" in summary and "| FAIL | success_rate(agent_z) >= 0.99 |" in summary
    whole_files, merged_files = _folder(pytester.path / "whole"), _folder(pytester.path / "merged")
    assert "mini/reports/metrics.json" in merged_files and "mini/pairs/pair_results.jsonl" in merged_files
    assert merged_files == whole_files
    suite_xml = ET.parse(xml).getroot().find("testsuite")
    assert suite_xml is not None and suite_xml.get("failures") == "1" and suite_xml.get("tests") == "2"

    status, text = _merge(shards[0], shards[2], "--out", str(pytester.path / "partial"))
    assert status == 2
    assert f"tasks missing: {', '.join(tasks[1])} (shards absent: 2/3)" in text
    status, text = _merge(shards[0], *shards, "--out", str(pytester.path / "twice"))
    assert status == 2 and "ran more than once" in text


def test_cache_merge_copies_what_the_destination_lacks(tmp_path: Path) -> None:
    one, two = Store(tmp_path / "a" / "responses"), Store(tmp_path / "b" / "responses")
    one.put("k1", {"v": 1})
    two.put("k1", {"v": "other"})
    two.put("k2", {"v": 2})
    buffer = io.StringIO()
    dest = tmp_path / "merged"
    assert (
        main(
            ["cache", "merge", str(tmp_path / "a"), str(tmp_path / "b"), "--cache-dir", str(dest)], out=buffer
        )
        == 0
    )
    assert "copied 2 responses" in buffer.getvalue() and "1 were there already" in buffer.getvalue()
    merged = Store(dest / "responses")
    assert merged.get("k1") == {"v": 1} and merged.get("k2") == {"v": 2}
