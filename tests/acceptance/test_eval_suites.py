"""The repo's own eval suites end to end: outputs, metrics recomputed independently from the records,
gates that fail the run, reports that are the same bytes under xdist."""

from __future__ import annotations

import json
import re
import shutil
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from pytest_gauge._internal.report import REPORT_FILES
from tests.helpers import SharedRun, SharedRuns, normalised, read_jsonl, run_inprocess, stable_report

ROOT = Path(__file__).resolve().parents[2]
SUITES = ("example", "tiers", "in_house")
ALL_REPORTS = REPORT_FILES
INI = (
    "[pytest]\ngauge_backend = sim\ngauge_seed = 20261129\n"
    "gauge_prices =\n    sim-agent-x 0.50 1.50\n    sim-agent-y 0.50 1.50\n    sim-agent-z 0.15 0.60\n"
    "    sim-solver 0.15 0.60\n    sim-user 0.15 0.60\n    sim-judge 2.50 10.00\n"
)


def copy_suites(folder: Path) -> None:
    """A copy of ``eval_suites/`` (every example suite) in ``folder`` with the repo's settings."""
    shutil.copytree(
        ROOT / "eval_suites",
        folder / "eval_suites",
        ignore=shutil.ignore_patterns("__pycache__", "gauge-snapshots"),
    )
    (folder / "pytest.ini").write_text(INI, encoding="utf-8")


@pytest.fixture
def suites(pytester: pytest.Pytester) -> Path:
    """A copy of ``eval_suites/`` in a fresh pytester folder, for the runs that change a suite or options."""
    copy_suites(pytester.path)
    return pytester.path / "eval_suites"


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """A run in this process (see :func:`tests.helpers.run_inprocess`), cache off."""
    return run_inprocess(pytester, "--gauge-cache", "off", "--gauge-no-progress", *args)


def main_job(shared_runs: SharedRuns, workers: str, pytester: pytest.Pytester | None = None) -> SharedRun:
    """``pytest eval_suites/ -n WORKERS`` with a cold response cache, once per session for every test
    that reads it: the main CI job (junit XML, the GitHub step summary) with ``-n 0`` (in the calling
    test's process when it gives its ``pytester``), and the same run with ``-n 2`` to compare against
    (a subprocess: it starts workers; two workers on the machine's two cores prove the same thing as four,
    and cost two interpreters less)."""
    return shared_runs.get(
        f"eval-suites-n{workers}",
        copy_suites,
        "eval_suites/", "-n", workers, "--gauge-cache", "use", "--gauge-cache-dir", "cache",
        "--gauge-out", "out", "--gauge-no-progress", "--junitxml", "junit.xml",
        env={"GITHUB_STEP_SUMMARY": "step_summary.md"},
        pytester=pytester if workers == "0" else None,
    )  # fmt: skip


def recompute(records: list[dict[str, Any]]) -> dict[str, float]:
    """docs/protocol.md#metrics by hand: LRS over non-tie, non-error unequal-reward cases; flips over
    both-order groups."""
    eligible = [
        r for r in records if r["judge_choice"] in ("A", "B") and r["reward_left"] != r["reward_right"]
    ]
    lrs = sum(1 for r in eligible if r["lower_reward_selected"]) / len(eligible)
    groups: dict[tuple[str, str, int], dict[str, str | None]] = defaultdict(dict)
    for r in records:
        if r["judge_choice"] == "error":
            continue
        if r["judge_choice"] == "tie":
            preferred = None
        else:
            left_in_a = r["blind_order"] == "A=left"
            preferred = r["agent_left"] if (r["judge_choice"] == "A") == left_in_a else r["agent_right"]
        groups[(r["task_id"], r["pair_id"], r["sample"])][r["order"]] = preferred
    both = [g for g in groups.values() if len(g) == 2]
    flips = sum(1 for g in both if g["AB"] != g["BA"])
    return {"lrs": lrs, "flip_rate": flips / len(both)}


@pytest.mark.slow
def test_main_job_writes_outputs_and_its_metrics_match_the_records(
    shared_runs: SharedRuns, pytester: pytest.Pytester
) -> None:
    run = main_job(shared_runs, "0", pytester)
    assert run.ret == 0, run.stdout[-3000:]
    assert "pytest-gauge: example" in run.stdout and "gates: 6 PASS" in run.stdout
    example = run.path / "out" / "example"
    for name in ("tasks.jsonl", "agent_runs.jsonl", "manifest.json", "pairs/pair_results.jsonl"):
        assert (example / name).is_file()
    for name in ALL_REPORTS:
        assert (example / "reports" / name).is_file(), name
    records = read_jsonl(example / "pairs" / "pair_results.jsonl")
    assert len(records) >= 120
    metrics = json.loads((example / "reports" / "metrics.json").read_text())
    expected = recompute(records)
    assert metrics["metrics"]["lrs"]["value"] == pytest.approx(expected["lrs"], abs=1e-6)
    assert metrics["metrics"]["flip_rate"]["value"] == pytest.approx(expected["flip_rate"], abs=1e-6)
    assert {g["status"] for g in metrics["gates"]} == {"pass"}
    # each gate is a test case in junit xml
    cases = ET.parse(run.path / "junit.xml").getroot().iter("testcase")
    gate_cases = [c for c in cases if "gates[" in c.get("name", "")]
    assert len(gate_cases) == 6 + 2 + 1  # example + tiers + in_house
    # the tiers suite: Elo rises with the tier, and the top tier buys the least Elo per 1k tokens (adjacent
    # lower tiers' gains are within each other's noise, so their order is not a property of the suite)
    elo = json.loads((run.path / "out" / "tiers" / "reports" / "elo.json").read_text())
    tiers = [t for t in elo["tiers"] if t["family"] == "solver"]
    assert [t["tier"] for t in tiers] == ["bo1", "bo2", "bo4", "bo8"]
    elos = [t["elo"] for t in tiers]
    assert elos == sorted(elos) and elos[-1] - elos[0] > 50
    per_1k = [t["delta_elo_per_1k_tokens"] for t in tiers[1:]]
    assert per_1k[-1] == min(per_1k) and per_1k[-1] < per_1k[0]
    assert all(t["low"] is not None and t["high"] is not None for t in tiers)
    assert "elo.svg" in (run.path / "out" / "tiers" / "reports" / "conclusion.md").read_text()


@pytest.mark.slow
def test_example_suite_cost_interval_and_judge_accuracy(
    shared_runs: SharedRuns, pytester: pytest.Pytester
) -> None:
    """Cost per success is a ratio estimator with a skew-corrected interval of non-zero width over
    tasks (44 tasks: enough for one); the total cost stays an exact accounting figure; judge_accuracy
    is reported."""
    run = main_job(shared_runs, "0", pytester)
    metrics = json.loads((run.path / "out" / "example" / "reports" / "metrics.json").read_text())["metrics"]
    cps = metrics["cost_per_success"]
    assert cps["method"] == "skewed-ratio"
    assert cps["low"] < cps["value"] < cps["high"]
    assert metrics["total_cost"]["method"] == "exact"
    assert metrics["total_cost"]["low"] == metrics["total_cost"]["value"] == metrics["total_cost"]["high"]
    # the judge against the rules: in metrics.json (main verdict = 1 - LRS) and conclusion.md
    accuracy = metrics["judge_accuracy"]
    assert accuracy["value"] == pytest.approx(1 - metrics["lrs"]["value"])
    assert accuracy["low"] <= accuracy["value"] <= accuracy["high"] and "judge_accuracy(close)" in metrics
    conclusion = (run.path / "out" / "example" / "reports" / "conclusion.md").read_text()
    assert "## The judge against the rules" in conclusion and "| main verdict | close |" in conclusion
    assert "rank corr." in conclusion and metrics["judge_rank_corr(main)"]["value"] > 0.5


@pytest.mark.slow
def test_github_step_summary_gets_the_summary(shared_runs: SharedRuns, pytester: pytest.Pytester) -> None:
    run = main_job(shared_runs, "0", pytester)
    text = (run.path / "step_summary.md").read_text()
    assert "example" in text and "tiers" in text and "PASS" in text


@pytest.mark.slow
def test_outputs_are_identical_with_zero_and_two_workers_and_the_cache_on(
    shared_runs: SharedRuns, pytester: pytest.Pytester
) -> None:
    """Both suites with a cold cache: every report is the same bytes, the records and the ledger the same
    apart from volatile fields. The tiers suite's strategies send many identical requests (best-of-N
    shares its first samples): each is sent once and answered from the cache for the others, whichever
    worker got there first; the merged ledger attributes them the same way with -n 0 and -n 2."""
    n0, n2 = main_job(shared_runs, "0", pytester), main_job(shared_runs, "2")
    assert (n0.ret, n2.ret) == (0, 0), n2.stdout[-3000:]
    assert re.search(r"\b2 workers\b", n2.stdout)
    hits = [r for r in read_jsonl(n0.path / "out" / "tiers" / "agent_runs.jsonl") if r["cache_hit"]]
    assert len(hits) > 50  # shared requests do occur in one cold run
    for suite in SUITES:
        a, b = n0.path / "out" / suite, n2.path / "out" / suite
        for name in ("agent_runs.jsonl", "pairs/pair_results.jsonl"):
            assert normalised(read_jsonl(a / name)) == normalised(read_jsonl(b / name)), (suite, name)
        for name in ALL_REPORTS:
            assert stable_report(a / "reports" / name) == stable_report(b / "reports" / name), (suite, name)


@pytest.mark.slow
def test_gates_fail_the_run_name_their_cases_and_need_min_n(pytester: pytest.Pytester, suites: Path) -> None:
    """One run, three gates: a failing one (names the flipped cases), one below its min_n (inconclusive,
    which fails the run) and the same one allowed to be inconclusive (which does not)."""
    result = run(
        pytester, "eval_suites/example", "--junitxml", "junit.xml",
        "--gauge-gate", "flip_rate <= 0",
        "--gauge-gate", "flip_rate <= 1; min_n=100000",
        "--gauge-gate", "flip_rate <= 1; min_n=100000; allow_inconclusive",
    )  # fmt: skip
    assert result.ret == 1
    out = result.stdout.str()
    assert re.search(r"FAIL flip_rate <= 0: value 0\.\d+ \(95% CI .*n=\d+\) > 0", out)
    assert re.search(r"driven by: \S+/agent_\w-vs-agent_\w#0: agent_\w vs (agent_\w|tie)", out)
    assert re.search(r"INCONCLUSIVE flip_rate <= 1: n=\d+ < min_n=100000", out)
    report = json.loads((pytester.path / "gauge-out" / "example" / "reports" / "metrics.json").read_text())
    statuses = {g["expr"]: g["status"] for g in report["gates"]}
    assert statuses["flip_rate <= 1; min_n=100000; allow_inconclusive"] == "inconclusive"
    failed = [
        c.get("name")
        for c in ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")
        if c.find("failure") is not None
    ]
    assert failed == ["gates[flip_rate <= 0]", "gates[flip_rate <= 1; min_n=100000]"]


def test_deselection_skips_gates(pytester: pytest.Pytester, suites: Path) -> None:
    subset = run(pytester, "eval_suites/example", "-k", "ir01", "-rs")
    assert subset.ret == 0
    subset.stdout.fnmatch_lines(["*skipped*partial run*"])
    assert "gates: 6 SKIP" in subset.stdout.str() or "6 SKIPPED" in subset.stdout.str()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("edit", "gate"),
    [
        (
            ("SimAgent(skill=0.8, politeness=0.05)", "SimAgent(skill=0.2, politeness=0.05)"),
            "success_rate(agent_x) >= 0.3; min_n=30",
        ),
        (
            ("tone_bias=1.2, misread=0.05", "tone_bias=1.2, misread=0.05, position_bias=0.6"),
            "upper(position_bias) <= 0.65",
        ),
    ],
    ids=["regressed-agent", "position-biased-judge"],
)
def test_a_regression_makes_the_matching_gate_fail(
    pytester: pytest.Pytester, suites: Path, edit: tuple[str, str], gate: str
) -> None:
    module = suites / "example" / "test_example.py"
    text = module.read_text()
    assert edit[0] in text
    module.write_text(text.replace(edit[0], edit[1]))
    result = run(pytester, "eval_suites/example")
    assert result.ret == 1
    failed = re.findall(r"FAILED \S+::gates\[([^\]]+)\]", result.stdout.str())
    assert gate in failed


def lrs_close_beats_distant(example: Path) -> bool:
    """Whether a run's example suite has LRS(close) at least 0.15 above LRS(distant)."""
    metrics = json.loads((example / "reports" / "metrics.json").read_text())["metrics"]
    close, distant = metrics["lrs_close"]["value"], metrics["lrs_distant"]["value"]
    return close is not None and distant is not None and close - distant >= 0.15


@pytest.mark.slow
def test_lrs_close_exceeds_lrs_distant_across_seeds(
    shared_runs: SharedRuns, pytester: pytest.Pytester, suites: Path
) -> None:
    """The study's headline on the simulator: the judge picks the lower-reward side far more often for
    the close pair than for the distant ones (at least 3 of 4 seeds by at least 0.15). The fourth seed is
    the main job's (the repo's seed), read from its shared run instead of running the suite again."""
    main = main_job(shared_runs, "0", pytester)
    assert main.ret == 0, main.stdout[-3000:]
    wins = int(lrs_close_beats_distant(main.path / "out" / "example"))
    for seed in range(1, 4):
        out = f"seed{seed}"
        result = run(
            pytester, "eval_suites/example", "--gauge-seed", str(seed), "--gauge-out", out,
            "--gauge-bootstrap-rounds", "300",
        )  # fmt: skip
        assert result.ret in (0, 1)  # gates may fail on some seeds; the numbers are what matter here
        wins += lrs_close_beats_distant(pytester.path / out / "example")
    assert wins >= 3
    conclusion = (pytester.path / "seed3" / "example" / "reports" / "conclusion.md").read_text()
    assert re.search(r"p[- ]?value|p = |p=", conclusion)
    assert "95%" in conclusion


def test_report_snapshots_opt_in(pytester: pytest.Pytester, mini_suite: Path) -> None:
    """``--gauge-snapshot-reports`` on the small suite (the mechanism does not depend on the suite)."""
    first = run(pytester, "suites", "--gauge-snapshot-reports")
    assert first.ret == 1 and "--snapshot-update" in first.stdout.str()
    assert run(pytester, "suites", "--gauge-snapshot-reports", "--snapshot-update").ret == 0
    assert run(pytester, "suites", "--gauge-snapshot-reports").ret == 0
    module = mini_suite / "test_mini.py"
    module.write_text(module.read_text().replace("SimAgent(skill=0.35)", "SimAgent(skill=0.95)"))
    changed = run(pytester, "suites", "--gauge-snapshot-reports")
    assert changed.ret == 1
    assert "differs from its snapshot" in changed.stdout.str()


@pytest.mark.slow
def test_elo_non_inferiority_gate_fails_when_the_bound_is_not_met(
    pytester: pytest.Pytester, suites: Path
) -> None:
    failing = "lower(elo(solver@bo1) - elo(solver@bo8)) >= -20"
    passing = "lower(elo(solver@bo8) - elo(solver@bo1)) >= -20"
    result = run(pytester, "eval_suites/tiers", "--gauge-gate", failing, "--gauge-gate", passing)
    assert result.ret == 1
    out = result.stdout.str()
    assert f"FAILED eval_suites/tiers/test_tiers.py::gates[{failing}]" in out
    assert re.search(re.escape(f"FAIL {failing}: ") + r"lower 95% bound -\d+\.\d+", out)
    assert re.search(r"\bPASS\s+" + re.escape(passing), out)  # the summary's gate table
    assert re.search(r"\bFAIL\s+" + re.escape(failing), out)
