"""A paired non-inferiority gate a suite is too small to pass is named at collection, with the size it
needs; the size is the one at which the paired score interval of an unchanged agent clears the margin."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pytest_gauge._internal.analysis.decidable import fewest_tasks, undecidable_gates
from pytest_gauge._internal.analysis.gates import parse_gate
from pytest_gauge._internal.analysis.paired import paired_interval
from tests.helpers import run_inprocess

NI = "lower(delta(success_rate(agent_x))) >= -0.05"


@pytest.mark.parametrize(
    "gate",
    [NI, "lower(delta(mean_reward(a))) > -0.1", "upper(delta(success_rate(a))) <= 0.2"],
)
def test_fewest_tasks_is_where_an_unchanged_agent_first_passes(gate: str) -> None:
    """One task fewer than the stated size and the paired interval of no change fails the gate; at the
    size it passes (the interval computed by the plugin's own function, not the closed form)."""
    parsed = parse_gate(gate)
    need = fewest_tasks(parsed)
    assert need is not None and need > 2
    side = 0 if parsed.bound == "lower" else 1
    below = float(paired_interval(np.zeros((1, need - 1)))[side][0])
    at = float(paired_interval(np.zeros((1, need)))[side][0])
    from pytest_gauge._internal.analysis.gates import OPS

    assert not OPS[parsed.op](below, parsed.threshold)
    assert OPS[parsed.op](at, parsed.threshold)


def test_gates_an_unchanged_agent_passes_anyway_are_not_named() -> None:
    """Fail-when-confident gates, point gates and non-paired deltas have no such size."""
    for gate in (
        "upper(delta(success_rate(a))) >= 0",
        "delta(success_rate(a)) >= -0.05",
        "lower(delta(flip_rate)) >= -0.05",
        "lower(delta(success_rate(a))) >= 0",
        "lower(success_rate(a)) >= 0.5",
    ):
        assert fewest_tasks(parse_gate(gate)) is None, gate
    assert undecidable_gates("s", [NI], 76) == []
    (line,) = undecidable_gates("s", [NI], 44)
    assert "needs at least 76 tasks to be decidable at this margin (the suite has 44)" in line


def test_collection_warns_of_a_paired_gate_the_suite_cannot_pass(
    pytester: pytest.Pytester, mini_suite: Path
) -> None:
    """Named when the suite is collected (a baseline run first: delta gates need one)."""
    assert run_inprocess(pytester, "suites", "--gauge-out", "base", "--gauge-no-progress").ret == 0
    args = ("suites", "--collect-only", "-q", "--gauge-baseline", "base")
    result = run_inprocess(pytester, *args, "--gauge-gate", NI)
    out = result.stdout.str()
    assert result.ret == 0, out
    assert f"suite mini: gate {NI!r}: this gate needs at least 76 tasks to be decidable" in out, out
    wide = run_inprocess(pytester, *args, "--gauge-gate", "lower(delta(success_rate(agent_x))) >= -0.9")
    assert "to be decidable at this margin" not in wide.stdout.str()
