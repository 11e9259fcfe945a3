"""One verdict from many machines (issue 16): no silent green, remote workers, shards and their merge."""

from __future__ import annotations

from pathlib import Path

import pytest

GATE = ("--gauge-gate", "lrs <= 1")


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
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
    result.assert_outcomes(deselected=30)
    result.stdout.fnmatch_lines(["*1 gates deselected in suite mini (no case selected)*"])
    assert not (pytester.path / "gauge-out" / "mini").exists()


OTHER_HOST = """
import pytest


@pytest.hookimpl(trylast=True)
def pytest_configure_node(node):
    # what a worker on another machine sees: a path that does not exist on its filesystem
    node.workerinput["gauge_out_dir"] = "/nonexistent/other-host/gauge-out"
"""


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
