"""``--gauge-familywise`` end to end: the terminal says how much the run's fail-when-confident gates
inflate an unchanged system's chance of failing, and Holm's levels are shown per gate and written to
metrics.json. The statistics are tests/unit/analysis/test_familywise.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import run_inprocess

GATES = (
    "--gauge-gate", "upper(success_rate(agent_z)) >= 0.99",  # confident it is below 0.99: fails
    "--gauge-gate", "upper(success_rate(agent_x)) >= 0.01",  # passes
    "--gauge-gate", "upper(flip_rate) <= 1",  # a pass-when-confident gate: not in the family
)  # fmt: skip


def _gates(out: Path) -> dict[str, dict[str, object]]:
    rows = json.loads((out / "mini" / "reports" / "metrics.json").read_text())["gates"]
    return {str(g["expr"]): g for g in rows}


def test_per_gate_says_the_inflation_and_holm_shows_each_level(
    pytester: pytest.Pytester, mini_suite: Path
) -> None:
    per_gate = run_inprocess(pytester, "suites", "--gauge-out", "pg", "--gauge-no-progress", *GATES)
    assert per_gate.ret == 1
    per_gate.stdout.fnmatch_lines(["*family-wise: 2 fail-when-confident gates at 2.5% each*4.9%*"])
    assert all("holm_level" not in g for g in _gates(pytester.path / "pg").values())

    holm = run_inprocess(
        pytester, "suites", "--gauge-out", "holm", "--gauge-no-progress", "--gauge-familywise", "holm", *GATES
    )
    assert holm.ret == 1  # the clear failure stays a failure
    holm.stdout.fnmatch_lines(["*FAIL*upper(success_rate(agent_z)) >= 0.99*holm level 0.0125*"])
    holm.stdout.fnmatch_lines(["*Holm's step-down (--gauge-familywise holm): at most 2.5% together*"])
    gates = _gates(pytester.path / "holm")
    assert gates["upper(success_rate(agent_z)) >= 0.99"]["holm_level"] == pytest.approx(0.0125)
    assert gates["upper(success_rate(agent_x)) >= 0.01"]["holm_level"] == pytest.approx(0.025)
    assert "holm_level" not in gates["upper(flip_rate) <= 1"]


def test_holm_with_adaptive_is_a_usage_error(pytester: pytest.Pytester, mini_suite: Path) -> None:
    result = run_inprocess(pytester, "suites", "--gauge-adaptive", "--gauge-familywise", "holm")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--gauge-adaptive with --gauge-familywise holm" in result.stderr.str()
