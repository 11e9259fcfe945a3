"""Baselines end to end: on the example suite an unchanged run passes every regression gate, a run whose
agent_x was made weaker fails them naming the regressed tasks, the compact format's version check; the
comparison made from memory equals the one read back. The pure rules:
tests/unit/analysis/test_baseline.py."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import run_inprocess

ROOT = Path(__file__).resolve().parents[2]


# -- end to end ------------------------------------------------------------------------------------

INI = (
    "[pytest]\ngauge_backend = sim\ngauge_seed = 20261129\n"
    "gauge_prices =\n    sim-agent-x 0.50 1.50\n    sim-agent-y 0.50 1.50\n    sim-agent-z 0.15 0.60\n"
    "    sim-user 0.15 0.60\n    sim-judge 2.50 10.00\n"
)
GATES = (
    "--gauge-gate",
    "upper(delta(success_rate(agent_x))) >= 0",
    "--gauge-gate",
    "regressions(agent_x) <= 2",
)


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """A run in this process (seconds cheaper than a subprocess; see tests/helpers.py run_inprocess)."""
    return run_inprocess(pytester, "-n", "0", *args)


@pytest.mark.slow
def test_example_suite_against_its_baseline(pytester: pytest.Pytester) -> None:
    suite = pytester.path / "example"
    shutil.copytree(
        ROOT / "eval_suites" / "example", suite, ignore=shutil.ignore_patterns("__pycache__", "gauge-*")
    )
    pytester.makeini(INI)
    # a regression gate without a baseline is a usage error before anything runs
    refused = _run(pytester, "example", *GATES)
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    assert "compares with a baseline, but none was given" in refused.stderr.str()

    first = _run(pytester, "example", "--gauge-out", "base-out")
    assert first.ret == 0, first.stdout.str()[-2000:]
    saved = pytester.run(
        sys.executable, "-m", "pytest_gauge", "baseline", "save", "--from", "base-out", "--to", "base"
    )
    assert saved.ret == 0, saved.stderr.str()
    size = sum(p.stat().st_size for p in (pytester.path / "base").rglob("*") if p.is_file())
    assert size < 1_000_000

    # lrs_close 0.250 [0.045, 0.500] on 28 cases: passes <= 0.3, but its interval crosses it (needed_n)
    same = _run(pytester, "example", "--gauge-baseline", "base", *GATES, "--gauge-gate", "lrs_close <= 0.3")
    assert same.ret == 0, same.stdout.str()[-2000:]
    same.stdout.fnmatch_lines(
        [
            "*PASS*regressions(agent_x) <= 2*",
            "*needed: lrs_close <= 0.3: pass, interval across the threshold at n=28; about * tasks (*) wou*",
            "*agent_x: success 0.000*0 regressed*",
        ]
    )
    reports = pytester.path / "gauge-out" / "example" / "reports"
    assert (reports / "baseline.md").is_file()
    gate = next(
        g
        for g in json.loads((reports / "metrics.json").read_text())["gates"]
        if g["expr"] == "lrs_close <= 0.3"
    )
    assert (
        gate["needed_n"] > 28 and f"about {gate['needed_n']} tasks" in (reports / "conclusion.md").read_text()
    )

    test_file = suite / "test_example.py"
    test_file.write_text(
        test_file.read_text().replace(
            "SimAgent(skill=0.8, politeness=0.05)", "SimAgent(skill=0.45, politeness=0.05)"
        )
    )
    weaker = _run(pytester, "example", "--gauge-baseline", "base", "--gauge-cache", "off", *GATES)
    assert weaker.ret == pytest.ExitCode.TESTS_FAILED
    out = weaker.stdout.str()
    metrics = json.loads((pytester.path / "gauge-out" / "example" / "reports" / "metrics.json").read_text())
    regressed = [r["task_id"] for r in metrics["baseline"]["agents"]["agent_x"]["regressions"]]
    assert len(regressed) > 2
    assert "FAIL regressions(agent_x) <= 2" in out and f"driven by: {regressed[0]} (reward" in out
    assert "FAIL upper(delta(success_rate(agent_x))) >= 0" in out
    conclusion = (pytester.path / "gauge-out" / "example" / "reports" / "conclusion.md").read_text()
    assert conclusion.split("\n\n")[1] == "## Against the baseline"
    assert f"- agent_x: `{regressed[0]}`" in conclusion
    # the HTML report's "Since the baseline" lists the same regressed tasks as baseline.md
    reports = pytester.path / "gauge-out" / "example" / "reports"
    page = (reports / "index.html").read_text(encoding="utf-8")
    data = json.loads(page.split('id="gauge-data">', 1)[1].split("</script>", 1)[0])
    md = (reports / "baseline.md").read_text(encoding="utf-8")
    for agent, comp in data["baseline"]["agents"].items():
        section = md.split(f"### {agent}\n", 1)[1].split("Passed before, fails now", 1)[1].split("\n\n", 1)[0]
        listed = [line.split("`")[1] for line in section.splitlines()[1:] if line.startswith("- `")]
        assert [f["task_id"] for f in comp["regressions"]] == listed
    assert [f["task_id"] for f in data["baseline"]["agents"]["agent_x"]["regressions"]] == regressed

    itself = _run(pytester, "example", "--gauge-baseline", "gauge-out")
    assert itself.ret == pytest.ExitCode.USAGE_ERROR and "which the run overwrites" in itself.stderr.str()

    baseline_json = pytester.path / "base" / "example" / "baseline.json"
    doc = json.loads(baseline_json.read_text())
    doc["pytest_gauge"] = "0.0.1"
    baseline_json.write_text(json.dumps(doc))
    old = _run(pytester, "example", "--gauge-baseline", "base")
    assert old.ret == pytest.ExitCode.USAGE_ERROR
    assert "written by pytest-gauge 0.0.1" in old.stderr.str() and "baseline save" in old.stderr.str()
    assert np.isfinite(metrics["baseline"]["agents"]["agent_x"]["delta(success_rate)"]["value"])


def test_suite_gate_on_a_baseline_without_one_is_a_usage_error(
    pytester: pytest.Pytester, mini_suite: Path
) -> None:
    module = mini_suite / "test_mini.py"
    module.write_text(
        module.read_text().replace(
            '    user=UserSimulator("sim-user"),',
            '    user=UserSimulator("sim-user"),\n    gates=["regressions(agent_x) <= 2"],',
        )
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "0", "--collect-only", "suites")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert (
        "suite mini: Suite(gates=...): 'regressions(agent_x) <= 2' compares with a baseline"
        in result.stderr.str()
    )


def test_the_baseline_comparison_made_from_memory_equals_the_one_read_back_from_disk(
    pytester: pytest.Pytester, mini_suite: Path
) -> None:
    """The end of a run compares with its baseline from the outputs it holds in memory (finish/outputs.py's
    run_side), not from the files it has just written; the same comparison made from the files read back
    (load_run_side, the one reader) renders the same reports, flipped tasks' transcript links included."""
    from dataclasses import replace

    from pytest_gauge._internal.analysis.numbers import compare_with_baseline
    from pytest_gauge._internal.files.baseline import baseline_side, load_run_side
    from pytest_gauge._internal.process.state import state_key
    from pytest_gauge._internal.report import render_reports

    class Keep:
        """Keeps the run's options and finished suites (the state drops them after the summary)."""

        @pytest.hookimpl(trylast=True)
        def pytest_terminal_summary(self, config: pytest.Config) -> None:
            state = config.stash[state_key]
            self.options, self.finished = state.options, dict(state.finished)

    assert _run(pytester, "suites", "--gauge-out", "base-out", "--gauge-seed", "3").ret in (0, 1)
    keep = Keep()
    run = run_inprocess(pytester, "-n", "0", "suites", "--gauge-baseline", "base-out", plugins=[keep])
    assert run.ret in (0, 1), run.stdout.str()[-2000:]
    ctx = keep.finished["mini"]["ctx"]
    assert ctx.baseline is not None and any(a.regressions or a.fixes for a in ctx.baseline.agents.values())
    out = pytester.path / "gauge-out" / "mini"
    reports = out / "reports"
    base = baseline_side(keep.options.baseline, "mini", reports)
    from_disk, note = compare_with_baseline(base, keep.options, lambda: load_run_side(out, link_base=reports))
    assert note == "" and from_disk is not None
    rendered = render_reports(replace(ctx, baseline=from_disk))
    assert "../agents/" in rendered["baseline.md"]
    assert rendered == render_reports(ctx)
    assert rendered == {name: (reports / name).read_text(encoding="utf-8") for name in rendered}


@pytest.mark.slow
def test_a_changed_judge_is_named_and_its_metrics_deltas_are_inconclusive(
    pytester: pytest.Pytester, mini_suite: Path
) -> None:
    from pytest_gauge._internal.cli import main

    first = run_inprocess(pytester, "suites", "-n", "0", "--gauge-out", "base-out")
    assert first.ret == 0, first.stdout.str()[-2000:]
    base_out, base = str(pytester.path / "base-out"), str(pytester.path / "base")
    saved = main(["baseline", "save", "--from", base_out, "--to", base])
    assert saved == 0
    manifest = json.loads((pytester.path / "base-out" / "mini" / "manifest.json").read_text())
    assert manifest["settings"]["judge_temperature"] == 0.0 and manifest["models"]["judge:0"] == "sim-judge"

    test = mini_suite / "test_mini.py"
    test.write_text(test.read_text().replace('Judge("sim-judge"', 'Judge("sim-judge-2"', 1))
    gates = (
        "--gauge-gate",
        "upper(delta(flip_rate)) <= 0.5",
        "--gauge-gate",
        "upper(delta(success_rate(agent_x))) <= 1",
    )
    again = run_inprocess(pytester, "suites", "-n", "0", "--gauge-baseline", "base", *gates)
    out = again.stdout.str()
    assert again.ret == 1, out  # the inconclusive gate fails the run (it does not allow inconclusive)
    assert "changed since the baseline: judge:0 model sim-judge -> sim-judge-2" in out
    report = json.loads((pytester.path / "gauge-out" / "mini" / "reports" / "metrics.json").read_text())
    status = {g["expr"]: g["status"] for g in report["gates"]}
    assert status["upper(delta(flip_rate)) <= 0.5"] == "inconclusive"
    assert status["upper(delta(success_rate(agent_x))) <= 1"] == "pass"  # the rules did not change
    assert "the judge changed since the baseline" in out
    baseline_md = (pytester.path / "gauge-out" / "mini" / "reports" / "baseline.md").read_text()
    assert "judge:0 model sim-judge -> sim-judge-2" in baseline_md
