"""Collection of suites in real pytest runs: ``--collect-only`` is harmless (no call, no output file
written or removed, no gate, exit 0, the gates listed and counted as the items they are), and tool
rules that must name the suite's tools."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tests.helpers import run_inprocess


def _files(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` with its content's digest."""
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_collect_only_writes_nothing_removes_nothing_and_lists_the_gates(
    pytester: pytest.Pytester, mini_suite: Path
) -> None:
    (mini_suite / "test_mini.py").write_text(
        (mini_suite / "test_mini.py")
        .read_text()
        .replace("suite = Suite(", 'suite = Suite(gates=["success_rate(agent_x) >= 0.99"],', 1)
    )
    first = run_inprocess(pytester, "suites", "-n", "0")
    assert first.ret == pytest.ExitCode.TESTS_FAILED  # the gate fails on a real run
    out = pytester.path / "gauge-out"
    before = _files(out)
    assert any(name.endswith("pair_results.jsonl") for name in before)

    result = run_inprocess(pytester, "suites", "--collect-only", "-q")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(["suites/mini/test_mini.py::gates[success_rate(agent_x) >= 0.99]"])
    listed = [line for line in result.stdout.lines if line.startswith("suites/")]
    assert f"{len(listed)} tests collected" in result.stdout.str()  # the count is the ids listed
    assert "FAIL" not in result.stdout.str()
    assert _files(out) == before  # nothing written, nothing emptied
    assert not list(pytester.path.rglob("ledger-*.jsonl"))  # no call was made


def test_the_gates_are_collected_items_run_after_the_cases(
    pytester: pytest.Pytester, mini_suite: Path
) -> None:
    (mini_suite / "test_mini.py").write_text(
        (mini_suite / "test_mini.py")
        .read_text()
        .replace("suite = Suite(", 'suite = Suite(gates=["judge_error_rate <= 0.5", "flip_rate <= 1"],', 1)
    )
    result = run_inprocess(pytester, "suites", "-n", "0", "-v")
    out = result.stdout.str()
    collected = int(out.split("collected ", 1)[1].split(" ", 1)[0])
    result.assert_outcomes(passed=collected)
    ran = [line.split(" PASSED", 1)[0] for line in result.stdout.lines if " PASSED" in line]
    assert ran[-2:] == [
        "suites/mini/test_mini.py::gates[judge_error_rate <= 0.5]",
        "suites/mini/test_mini.py::gates[flip_rate <= 1]",
    ]  # after every case
    assert all("::gates[" not in nodeid for nodeid in ran[:-2])


def test_a_tool_rule_naming_an_undefined_tool_fails_collection(
    pytester: pytest.Pytester, mini_suite: Path
) -> None:
    lines = (mini_suite / "tasks.jsonl").read_text().splitlines()
    number = next(i for i, line in enumerate(lines, 1) if '"tool_order"' in line)
    lines[number - 1] = lines[number - 1].replace('"names": ["lookup_order"', '"names": ["lookup_ordr"')
    (mini_suite / "tasks.jsonl").write_text("\n".join(lines) + "\n")
    result = run_inprocess(pytester, "suites", "-n", "0")
    assert result.ret == pytest.ExitCode.INTERRUPTED  # a collection error: no case runs
    result.stdout.re_match_lines(
        [
            rf".*tasks\.jsonl:{number}: success_criteria\[\d\]\.names\[\d\]: tool_order names the tool"
            r" 'lookup_ordr', which the suite does not define; did you mean 'lookup_order'\?.*"
        ]
    )
    assert not (pytester.path / "gauge-out").exists()
