"""The controller's kept test reports share their strings and a test's keywords (process/reports.py)."""

from __future__ import annotations

import pytest

from pytest_gauge._internal.process.reports import ReportSharing


def _report(when: str, nodeid: str) -> pytest.TestReport:
    fresh = "".join(nodeid)  # a new string object, as execnet decodes each report
    keywords = {"".join(k): 1 for k in (fresh, "gauge_case", "suite_bench")}
    location = ("".join("suites/test_bench.py"), None, fresh)
    return pytest.TestReport(fresh, location, keywords, "passed", None, when, [], 0.0, 1.0, 2.0, [])  # type: ignore[arg-type]


def test_reports_keep_their_values_and_share_strings_and_keywords() -> None:
    sharing = ReportSharing()
    reports = [_report(when, "suites/test_bench.py::t0001[ab]") for when in ("setup", "call", "teardown")]
    before = [dict(vars(r)) for r in reports]
    for report in reports:
        sharing.share(report)
    assert [dict(vars(r)) for r in reports] == before  # equal values, names and order
    assert reports[0].nodeid is reports[1].nodeid is reports[2].nodeid
    assert reports[0].keywords is reports[2].keywords and reports[0].location[0] is reports[1].location[0]
    other = _report("call", "suites/test_bench.py::t0002[ab]")
    sharing.share(other)
    assert other.keywords is not reports[0].keywords and "suites/test_bench.py::t0002[ab]" in other.keywords
    assert other.passed and other.when == "call"


def test_the_terminal_reporters_kept_passes_are_lean_and_the_report_itself_untouched() -> None:
    from types import SimpleNamespace
    from typing import cast

    from pytest_gauge._internal.process.kept_reports import KeptReports

    reports = [_report(when, "suites/test_bench.py::t0001[ab]") for when in ("setup", "call", "teardown")]
    reports[1].sections.append(("Captured stdout call", "out"))
    reports[1].user_properties.append(("gauge_failure", ""))
    stats: dict[str, list[pytest.TestReport]] = {}
    reporter = SimpleNamespace(stats=stats, reportchars="fE")
    config = SimpleNamespace(
        pluginmanager=SimpleNamespace(get_plugin=lambda name: reporter), getoption=lambda *a: None
    )
    kept = KeptReports(cast(pytest.Config, config))
    for report in reports:
        stats.setdefault("passed" if report.when == "call" else "", []).append(report)
        kept.pytest_runtest_logreport(report)
    assert stats[""] == []  # setup and teardown: shown only by --durations
    (lean,) = stats["passed"]
    assert lean is not reports[1] and lean.nodeid == reports[1].nodeid and lean.when == "call"
    assert not (lean.keywords or lean.sections or lean.user_properties) and lean.passed
    assert reports[1].sections and reports[1].user_properties and reports[1].keywords  # others' copy whole
