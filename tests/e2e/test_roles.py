"""The xdist roles' two channels besides the run folder: the run id is xdist's
``testrun_uid`` on every process, and each worker's end-of-run summary comes through ``workeroutput``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pytest_gauge._internal.process.roles import Controller, Standalone, role_key
from pytest_gauge._internal.process.state import render_worker_summaries, state_key
from pytest_gauge._internal.records import Usage, WorkerSummary
from tests.helpers import read_jsonl, run_inprocess

IDS_TEST = """
from pytest_gauge._internal.process.state import state_key


def test_the_run_id_is_xdists_testrun_uid(testrun_uid, pytestconfig):
    assert hasattr(pytestconfig, "workerinput")  # on a worker
    assert pytestconfig.stash[state_key].run_id == testrun_uid
"""


def test_the_controller_hands_its_run_id_to_xdist(pytester: pytest.Pytester, mini_suite: Path) -> None:
    """No --testrunuid: the controller's run id becomes xdist's ``--testrunuid`` before xdist's node
    manager reads it (at session start), so xdist sends it to every worker as ``testrunuid``. (``-n 2``
    becomes ``--dist load --tx 2*popen`` in xdist's ``pytest_cmdline_main``, which configuring skips.)"""
    config = pytester.parseconfigure("--dist", "load", "--tx", "2*popen")
    assert isinstance(config.stash[role_key], Controller)
    run_id = config.stash[state_key].run_id
    assert re.fullmatch(r"[0-9a-f]{12}", run_id)
    assert config.getoption("testrunuid") == run_id


def test_a_given_testrunuid_is_the_run_id_without_xdist_too(
    pytester: pytest.Pytester, mini_suite: Path
) -> None:
    config = pytester.parseconfigure("-n", "0", "--testrunuid", "nightly-7")
    assert isinstance(config.stash[role_key], Standalone)
    assert config.stash[state_key].run_id == "nightly-7"


@pytest.mark.parametrize("bad", ["../up", "a/b", ".hidden", "sp ace", "x" * 129])
def test_a_testrunuid_that_is_no_safe_folder_name_is_refused(
    pytester: pytest.Pytester, mini_suite: Path, bad: str
) -> None:
    with pytest.raises(pytest.UsageError, match=r"--testrunuid .* letters, digits, '\.', '_' or '-'"):
        pytester.parseconfigure("-n", "2", "--testrunuid", bad)


def test_a_testrunuid_whose_run_folder_exists_is_refused(pytester: pytest.Pytester, mini_suite: Path) -> None:
    """A killed run's folder under the same id would mix its ledgers into this run."""
    (pytester.path / "gauge-out" / ".gauge-run" / "taken").mkdir(parents=True)
    with pytest.raises(pytest.UsageError, match=r"--testrunuid taken: the run folder .*taken exists"):
        pytester.parseconfigure("-n", "2", "--testrunuid", "taken")


@pytest.mark.slow
def test_two_workers_share_the_given_run_id_and_report_their_work(
    pytester: pytest.Pytester, mini_suite: Path
) -> None:
    """``-n 2 --testrunuid ID``: the manifest's run id is ID, each worker's ``testrun_uid`` is the gauge
    run id, and under ``-v`` one line per worker from its ``workeroutput`` whose sums are the run's."""
    (mini_suite / "test_ids.py").write_text(IDS_TEST, encoding="utf-8")
    result = run_inprocess(
        pytester, "suites", "-n", "2", "-v", "--gauge-cache", "off", "--testrunuid", "ci-7.a"
    )
    result.assert_outcomes(passed=31)
    result.stdout.fnmatch_lines(
        ["[[]gw?[]] *PASSED suites/mini/test_ids.py::test_the_run_id_is_xdists_testrun_uid*"]
    )
    out = pytester.path / "gauge-out" / "mini"
    assert json.loads((out / "manifest.json").read_text(encoding="utf-8"))["run_id"] == "ci-7.a"
    ledger = read_jsonl(out / "agent_runs.jsonl")
    assert {r["run_id"] for r in ledger} == {"ci-7.a"}
    lines = result.stdout.lines
    section = lines.index(next(line for line in lines if "pytest-gauge: work per process" in line))
    per_worker = [
        re.match(r"(gw\d): (\d+) work units, (\d+) requests sent .*, (\d+) cached, (\d+) tokens", x)
        for x in lines[section + 1 : section + 3]
    ]
    assert all(per_worker), lines[section : section + 3]
    rows = [m.groups() for m in per_worker if m]
    assert sorted(r[0] for r in rows) == ["gw0", "gw1"]
    units, sent, cached, tokens = (sum(int(r[i]) for r in rows) for i in (1, 2, 3, 4))
    assert units == 5 * 3 + 30  # every transcript (tasks x agents) and every case's judgment, once
    assert (sent, cached) == (len(ledger), 0)  # cache off: every ledger line is a request sent
    assert tokens == sum(Usage.from_json(r["usage"]).total_tokens for r in ledger if r["usage"])


def test_worker_lines_in_worker_order_with_unknown_costs_and_lost_workers() -> None:
    summaries = [
        WorkerSummary("gw10", 3, 9, 1, 2, 900, None, 0, 4),
        WorkerSummary("gw2", 4, 5, 0, 0, 500, 0.0125, 2, 3),
    ]
    assert [WorkerSummary.from_json(json.loads(json.dumps(s.to_json()))) for s in summaries] == summaries
    assert render_worker_summaries(summaries, {"gw3": "Not properly terminated"}) == [
        "gw2: 4 work units, 5 requests sent (0 retries, 2 rate-limit waits, at most 3 in flight), 0 cached,"
        " 500 tokens, $0.0125",
        "gw10: 3 work units, 9 requests sent (1 retries, 0 rate-limit waits, at most 4 in flight), 2 cached,"
        " 900 tokens, unknown cost",
        "gw3: no summary, the worker went down (Not properly terminated)",
    ]
