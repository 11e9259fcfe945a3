"""The gates as the test items they are, in every report a team reads: the real pytest-html and
allure-pytest count a failing gate as failed, junit's failing testcase carries the gate's numbers as
properties, ``--lf`` reruns the failed gate with its suite's cases, and ``-n 0`` and ``-n 2`` report the
same outcomes. Without pytest-html or allure-pytest a test skips with the install command (under ``CI``,
or ``GAUGE_REQUIRE_BROWSER``, as ``.ci/run`` sets, it fails instead)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.helpers import ROOT

FAILING = "success_rate(agent_x) >= 0.99"
PASSING = "flip_rate <= 1"
GATE_ID = f"suites/mini/test_mini.py::gates[{FAILING}]"
INSTALL = "pip install pytest-html allure-pytest (in the test extra)"


def _require(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        if os.environ.get("CI") or os.environ.get("GAUGE_REQUIRE_BROWSER"):
            pytest.fail(f"{module} is missing in CI: {INSTALL}", pytrace=False)
        pytest.skip(f"{module} is not installed ({INSTALL})")


@pytest.fixture
def gated_suite(mini_suite: Path) -> Path:
    test = mini_suite / "test_mini.py"
    gates = f'gates=["{FAILING}", "{PASSING}"],'
    test.write_text(test.read_text().replace("suite = Suite(", f"suite = Suite({gates}", 1))
    return mini_suite.parent.parent


def _pytest(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m pytest`` in ``folder`` with the plugins installed here (pytest-html, allure-pytest)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST_", "PYTEST_ADDOPTS"))}
    env.pop("PYTEST_CURRENT_TEST", None)
    env.pop("CI", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:randomly", *args],
        cwd=folder, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip


def _junit_outcomes(path: Path) -> dict[str, str]:
    outcomes = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        kind = next((c.tag for c in case if c.tag in ("failure", "error", "skipped")), "passed")
        outcomes[f"{case.get('classname')}::{case.get('name')}"] = kind
    return outcomes


@pytest.mark.slow
def test_a_failing_gate_is_failed_in_pytest_html_allure_and_junit_at_n0_and_n2(gated_suite: Path) -> None:
    _require("pytest_html")
    _require("allure_pytest")
    outcomes = {}
    for n in ("0", "2"):
        done = _pytest(
            gated_suite, "suites", "-n", n, "-rA", f"--html=report{n}.html", "--self-contained-html",
            f"--alluredir=allure{n}", f"--junitxml=junit{n}.xml",
        )  # fmt: skip
        assert done.returncode == 1, done.stdout + done.stderr
        assert f"FAILED {GATE_ID}" in done.stdout  # -rA's summary lists it like any test
        assert f"PASSED suites/mini/test_mini.py::gates[{PASSING}]" in done.stdout

        html = (gated_suite / f"report{n}.html").read_text(encoding="utf-8")
        assert "1 Failed" in html and "0 Failed" not in html  # pytest-html's own count

        results = [json.loads(p.read_text()) for p in (gated_suite / f"allure{n}").glob("*-result.json")]
        by_name = {r["name"]: r for r in results}
        assert by_name[f"gates[{FAILING}]"]["status"] == "failed"
        assert by_name[f"gates[{PASSING}]"]["status"] == "passed"
        params = {p["name"]: p["value"] for p in by_name[f"gates[{FAILING}]"]["parameters"]}
        assert params["value"].strip("'") == "0.2" and params["n"].strip("'") == "5"

        root = ET.parse(gated_suite / f"junit{n}.xml").getroot()
        gate = next(c for c in root.iter("testcase") if c.get("name") == f"gates[{FAILING}]")
        assert gate.find("failure") is not None
        props = {p.get("name"): p.get("value") for p in gate.iter("property")}
        assert props["gauge_value"] == "0.2" and props["gauge_threshold"] == ">= 0.99"
        assert str(props["gauge_interval"]).startswith("[0.036") and props["gauge_n"] == "5"
        outcomes[n] = _junit_outcomes(gated_suite / f"junit{n}.xml")
    assert outcomes["0"] == outcomes["2"]  # the same tests, the same outcomes


@pytest.mark.slow
def test_last_failed_reruns_the_failed_gate_with_its_suites_cases(gated_suite: Path) -> None:
    first = _pytest(gated_suite, "suites", "-n", "0", "-q")
    assert first.returncode == 1
    again = _pytest(gated_suite, "suites", "-n", "0", "--lf", "-rA")
    assert again.returncode == 1, again.stdout
    assert "known failures not in selected tests" not in again.stdout
    assert "rerun previous 1 failure" in again.stdout
    assert f"FAILED {GATE_ID}" in again.stdout  # evaluated again on its suite's cases (cache hits)
    assert "1 failed, 30 passed" in again.stdout
