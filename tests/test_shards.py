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
