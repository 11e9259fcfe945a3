"""A judge whose model is also a contestant's: flagged at collection, and its self-preference measured
against the rules (its pick of its own model's lower-reward transcript against the same rate for the
other agents, with intervals) in the terminal and conclusion.md."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.helpers import run_inprocess


def test_a_judge_sharing_an_agents_model_is_flagged_and_measured(
    pytester: pytest.Pytester, mini_suite: Path
) -> None:
    test = mini_suite / "test_mini.py"
    test.write_text(test.read_text().replace('Judge("sim-judge"', 'Judge("sim-agent-x"', 1))
    result = run_inprocess(pytester, "suites", "-n", "0")
    out = result.stdout.str()
    assert result.ret == 0, out
    assert "suite mini: the judge model 'sim-agent-x' is also the model of agent_x" in out  # collection
    line = next(x for x in result.stdout.lines if x.startswith("self-preference: judge sim-agent-x"))
    assert re.search(r"own \d\.\d+ \[\d\.\d+, \d\.\d+\] \(n=\d+\), others \d\.\d+ \[", line), line
    conclusion = (pytester.path / "gauge-out" / "mini" / "reports" / "conclusion.md").read_text()
    section = conclusion.split("## Self-preference", 1)[1].split("\n## ", 1)[0]
    assert "`sim-agent-x` is also the model of `agent_x`" in section
    assert re.search(r"difference \(own − others\): -?\d\.\d+ \[-?\d\.\d+, -?\d\.\d+\]", section), section
    metrics = json.loads((pytester.path / "gauge-out" / "mini" / "reports" / "metrics.json").read_text())
    block = metrics["self_preference"]  # what the HTML page's "Self-preference" panel draws
    assert block["judge_model"] == "sim-agent-x" and block["agents"] == ["agent_x"]
    assert block["own"]["n"] > 0 and block["difference"]["low"] is not None


def test_a_judge_no_agent_shares_is_not_flagged(pytester: pytest.Pytester, mini_suite: Path) -> None:
    result = run_inprocess(pytester, "suites", "-n", "0")
    assert "self-preference" not in result.stdout.str()
    conclusion = (pytester.path / "gauge-out" / "mini" / "reports" / "conclusion.md").read_text()
    assert "## Self-preference" not in conclusion
    metrics = json.loads((pytester.path / "gauge-out" / "mini" / "reports" / "metrics.json").read_text())
    assert "self_preference" not in metrics
