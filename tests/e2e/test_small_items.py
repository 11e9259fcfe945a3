"""Small things a first run meets: the terminal points at the HTML report, ``report`` takes the runs'
default folder, ``doctor .`` names suites found from inside their folder, and cache hits that only
repeat this run's own requests are said to be so."""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_gauge._internal.cli import main
from pytest_gauge._internal.records import LedgerRecord
from pytest_gauge._internal.report.summary import _cached_calls
from pytest_gauge._internal.suite.discover import find_suites
from tests.helpers import run_inprocess


def test_the_terminal_points_at_the_html_report_and_report_defaults_to_gauge_out(
    pytester: pytest.Pytester, mini_suite: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run_inprocess(pytester, "suites", "-n", "0")
    page = pytester.path / "gauge-out" / "index.html"
    result.stdout.fnmatch_lines([f"HTML report: {page} (open it in a browser)"])
    page.unlink()
    monkeypatch.chdir(pytester.path)
    out, err = io.StringIO(), io.StringIO()
    assert main(["report"], out=out, err=err) == 0, err.getvalue()
    assert page.is_file() and "wrote" in out.getvalue()


def test_suites_found_from_inside_their_folder_are_named(
    mini_suite: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(mini_suite)
    assert [name for name, _ in find_suites(["."])] == ["mini"]


def _record(key: str, cached: bool) -> LedgerRecord:
    return LedgerRecord(
        run_id="r", call_id=f"w#{key}", attempt=1, status="ok", suite="s", task_id="t", role="user_sim",
        model="m", strategy="single", work="w", usage=None, usage_missing=False, latency_s=0.0,
        finish_reason="stop", cache_hit=cached, cost=None, request=key,
    )  # fmt: skip


def test_cache_hits_that_repeat_this_runs_own_requests_are_said_to() -> None:
    live = [_record("k1", False), _record("k2", False)]
    assert (
        _cached_calls([*live, _record("k1", True)], 1)
        == "1 cached calls, all repeats of this run's own requests"
    )
    mixed = [*live, _record("k1", True), _record("old", True)]
    assert _cached_calls(mixed, 2) == "2 cached calls, 1 of them repeats of this run's own requests"
    assert _cached_calls([replace(r, cache_hit=True) for r in live], 2) == "2 cached calls"


def test_an_unknown_model_is_reported_once_and_its_elo_gate_is_inconclusive(
    pytester: pytest.Pytester, mini_suite: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cases that share the unknown model's failed transcript say so in one
    short line naming the first, and ``elo(agent_z)`` is inconclusive (no judged case), not "unknown"."""
    from pytest_gauge.testing import FaultPlan, LoopbackServer
    from pytest_gauge.testing.simserver import sim_responder
    from tests.helpers import MINI_INI

    faults = FaultPlan(unknown_models=frozenset({"sim-agent-z"}))
    with LoopbackServer(sim_responder(mini_suite / "test_mini.py", seed=7), faults=faults) as srv:
        monkeypatch.setenv("TAOTOKEN_API_KEY", "tt-test-key")
        monkeypatch.setenv("TAOTOKEN_BASE_URL", srv.base_url)
        pytester.makeini(MINI_INI.replace("gauge_backend = sim", "gauge_backend = live"))
        result = run_inprocess(pytester, "suites", "-n", "0", "--gauge-gate", "elo(agent_z) >= 0", "-rA")
    out = result.stdout.str()
    failures = [ln for ln in out.splitlines() if "gateway failure" in ln]
    assert len(failures) >= 2 and sum("does not exist" in ln for ln in failures) == 1, failures
    assert all("the same as" in ln and len(ln) < 300 for ln in failures if "does not exist" not in ln)
    assert "unknown agent" not in out
    result.stdout.fnmatch_lines(["INCONCLUSIVE elo(agent_z) >= 0: *'agent_z' had no judged case in this*"])
