"""Unknown cost is unknown everywhere: a live run whose gateway never reports usage
shows every cost as a lower bound ("at least $X (N calls without usage)") on the HTML page,
``gauge-out/index.html`` and ``metrics.json``, and a cost gate is never PASS on it unless it says
``allow_unpriced``."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_gauge.testing import FaultPlan, LoopbackServer
from pytest_gauge.testing.browser import chromium, find_chromium
from pytest_gauge.testing.simserver import sim_responder
from tests.helpers import MINI_INI, read_jsonl, run_inprocess

PRICES = "gauge_prices =\n" + "".join(f"    {m} 1 2\n" for m in ("sim-agent-x", "sim-agent-y", "sim-agent-z"))
PRICES += "    sim-user 1 2\n    sim-judge 1 2\n"
GATES = ("total_cost <= 0.0001", "total_cost <= 0.0001; allow_unpriced", "judge_cost <= 0.0001")


@pytest.fixture
def no_usage_run(
    pytester: pytest.Pytester, mini_suite: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[pytest.RunResult, Path]]:
    """A live run of the mini suite against a loopback server whose answers carry no usage."""
    responder = sim_responder(mini_suite / "test_mini.py", seed=7)
    with LoopbackServer(responder, faults=FaultPlan(no_usage=True)) as srv:
        monkeypatch.setenv("TAOTOKEN_API_KEY", "tt-test-key")
        monkeypatch.setenv("TAOTOKEN_BASE_URL", srv.base_url)
        pytester.makeini(MINI_INI.replace("gauge_backend = sim", "gauge_backend = live") + PRICES)
        gates = [a for g in GATES for a in ("--gauge-gate", g)]
        result = run_inprocess(pytester, "suites", "-n", "0", *gates, "-rA")
        assert srv.requests_total > 0
        yield result, pytester.path / "gauge-out"


def test_no_usage_makes_every_cost_a_lower_bound_and_no_cost_gate_passes(
    no_usage_run: tuple[pytest.RunResult, Path],
) -> None:
    result, out = no_usage_run
    ledger = read_jsonl(out / "mini" / "agent_runs.jsonl")
    assert ledger and all(x.get("usage_missing") for x in ledger)
    n = len(ledger)
    metrics = json.loads((out / "mini" / "reports" / "metrics.json").read_text(encoding="utf-8"))
    costs = metrics["costs"]
    assert (costs["usage_missing"], costs["lower_bound"]) == (n, True)
    assert costs["total_cost_text"] == f"at least $0.000000 ({n} calls without usage)"
    assert all(r["usage_missing"] == r["attempts"] for r in costs["per_role"].values())
    status = {g["expr"]: g["status"] for g in metrics["gates"]}
    assert status == {
        "total_cost <= 0.0001": "inconclusive",
        "total_cost <= 0.0001; allow_unpriced": "pass",
        "judge_cost <= 0.0001": "inconclusive",
    }
    message = next(g["message"] for g in metrics["gates"] if g["expr"] == GATES[0])
    assert f"{n} calls without usage" in message and "allow_unpriced" in message
    index = (out / "index.html").read_text(encoding="utf-8")
    assert f"at least $0.000000 ({n} calls without usage)" in index
    assert "PASS total_cost <= 0.0001:" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*INCONCLUSIVE total_cost <= 0.0001: *calls without usage*"])
    table = (out / "mini" / "reports" / "pairwise_table.md").read_text(encoding="utf-8")
    rows = [line for line in table.splitlines() if line.startswith("| ") and "without usage)" in line]
    # every case's est_cost_incl_shared is "at least $0.000000 (N without usage)"
    assert rows and "$0.000000 |" not in table
    assert len(rows) == len(read_jsonl(out / "mini" / "pairs" / "pair_results.jsonl"))
    page = (out / "mini" / "reports" / "index.html").read_text(encoding="utf-8")
    assert f'"um":{n}' in page  # the page's data: the count its script shows as "at least"
    if find_chromium() is None:
        if os.environ.get("CI") or os.environ.get("GAUGE_REQUIRE_BROWSER"):
            pytest.fail("chromium/chromedriver missing in CI: apt-get install chromium chromium-driver")
        return
    _page_says_at_least(out / "mini" / "reports" / "index.html", n)


def _page_says_at_least(path: Path, n: int) -> None:
    """The overview, the cost table and every case's cost say "at least" in a browser."""
    pytest.importorskip("selenium")
    with chromium() as driver:
        driver.get(path.as_uri())
        assert driver.execute_script("return document.documentElement.dataset.ready") == "1"
        facts: str = driver.execute_script("return document.querySelector('#overview .facts').textContent")
        assert f"total cost at least $0.000000 ({n} calls without usage)" in facts
        rows = "return Array.from(document.querySelectorAll('{} tr')).map(r => r.cells[{}].textContent)"
        roles: list[Any] = driver.execute_script(rows.format("#cost-table tbody", 5))
        assert roles and all(c.startswith("at least $0.000000 (") for c in roles)
        cells: list[Any] = driver.execute_script(rows.format("#case-rows", 10))
        assert cells and all(c.startswith("at least $0.000000 (") for c in cells)
