"""The test reports the process that ends the run keeps are lean (process/kept_reports.py), and nothing a
team reads loses a report for it: junit, the real pytest-html and allure-pytest list every test at
``-n 2``, ``-rp`` lists the passes, ``-rP`` prints their captured output, ``--durations`` times every
phase. A recorder plugin in the run's folder says what the terminal reporter kept at the session's end
(bytes per case, as ``sys.getsizeof`` counts the reports' own attributes): the kept reports growing fat
again fails here. Without pytest-html or allure-pytest the reporters' test skips with the install command
(under ``CI`` it fails instead)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_gate_reports import _require
from tests.helpers import ROOT

PLAIN = """
def test_prints():
    print("output-of-a-passing-test")
"""

RECORDER = """
import json, sys

def _size(report):
    attrs = vars(report)
    return sys.getsizeof(report) + sys.getsizeof(attrs) + sum(sys.getsizeof(v) for v in attrs.values())

def pytest_sessionfinish(session):
    if hasattr(session.config, "workerinput"):
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    kept = {key: list(reports) for key, reports in reporter.stats.items()}
    passed = [r for r in kept.get("passed", []) if r.when == "call"]
    summary = {
        "counts": {key: len(reports) for key, reports in kept.items()},
        "bytes": sum(_size(r) for reports in kept.values() for r in reports if hasattr(r, "nodeid")),
        "fat": sorted({r.nodeid for r in passed if r.keywords or r.user_properties or r.sections}),
        "sections": {r.nodeid: [list(s) for s in r.sections] for r in passed if r.sections},
    }
    with open("kept.json", "w") as f:
        json.dump(summary, f)
"""


@pytest.fixture
def folder(mini_suite: Path) -> Path:
    root = mini_suite.parent.parent
    (mini_suite.parent / "test_plain.py").write_text(PLAIN, encoding="utf-8")
    (root / "conftest.py").write_text(RECORDER, encoding="utf-8")
    return root


def _pytest(folder: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """``python -m pytest`` in ``folder``; its output and what the terminal reporter kept."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST_", "PYTEST_ADDOPTS"))}
    env.pop("PYTEST_CURRENT_TEST", None)
    env.pop("CI", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider", *args],
        cwd=folder, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done, json.loads((folder / "kept.json").read_text(encoding="utf-8"))


@pytest.mark.slow
@pytest.mark.parametrize("workers", ["0", "2"])
def test_the_kept_reports_are_lean_and_the_summary_still_counts_them(folder: Path, workers: str) -> None:
    done, kept = _pytest(folder, "suites", "-n", workers, "-q")
    counts = kept["counts"]
    assert isinstance(counts, dict)
    assert counts.get("", 0) == 0  # no passed setup or teardown kept without --durations
    passes = int(counts["passed"])
    assert passes == 31 and f"{passes} passed" in done.stdout  # 30 cases and the plain test
    assert kept["fat"] == []
    # lean: about 800 bytes a pass as counted here (3,000 at -n 0, 4,600 at -n 2 kept whole with their
    # setup and teardown)
    assert int(str(kept["bytes"])) / passes < 1000


@pytest.mark.slow
def test_the_passes_output_is_kept_for_rP_and_the_durations_see_every_phase(folder: Path) -> None:
    done, kept = _pytest(folder, "suites", "-n", "0", "-rP")
    assert "output-of-a-passing-test" in done.stdout  # -rP's PASSES section
    assert list(kept["sections"]) == ["suites/test_plain.py::test_prints"]
    done, kept = _pytest(folder, "suites", "-n", "2", "-rp", "--durations=0", "-vv")
    assert "PASSED suites/test_plain.py::test_prints" in done.stdout  # -rp's short summary
    for when in ("setup", "call", "teardown"):
        assert f"s {when:<8} suites/test_plain.py::test_prints" in done.stdout
    assert kept["counts"]["passed"] + kept["counts"][""] == 31 * 3
    assert kept["fat"] == []


@pytest.mark.slow
def test_junit_pytest_html_and_allure_get_every_report_at_n2(folder: Path) -> None:
    _require("pytest_html")
    _require("allure_pytest")
    done, _ = _pytest(
        folder, "suites", "-n", "2", "--junitxml=junit.xml", "--html=report.html", "--self-contained-html",
        "--alluredir=allure",
    )  # fmt: skip
    cases = list(ET.parse(folder / "junit.xml").getroot().iter("testcase"))
    assert len(cases) == 31 and all(len(c) == 0 or c[0].tag == "system-out" for c in cases)
    html = (folder / "report.html").read_text(encoding="utf-8")
    assert "31 Passed" in html
    results = [json.loads(p.read_text()) for p in (folder / "allure").glob("*-result.json")]
    assert len(results) == 31 and {r["status"] for r in results} == {"passed"}
    assert "31 passed" in done.stdout
