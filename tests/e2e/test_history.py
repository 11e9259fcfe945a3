"""The verdict history across runs: three runs of the mini suite at three seeds, appended to one history,
give a flake table whose flaky tasks are exactly those whose outcome flipped across the runs' own records."""

from __future__ import annotations

import io
import json
import re
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pytest_gauge.cli import main
from pytest_gauge.files.history import append_runs, read_history
from tests.e2e import test_html_report as html_report
from tests.helpers import MINI_INI, read_jsonl, run_inprocess

GATE = "flip_rate <= 0.5"
browser, page, _open = html_report.browser, html_report.page, html_report._open  # Chromium's fixtures


def _steady(suite: Path) -> None:
    """A judge without noise and two agents that always or never succeed: only agent_y's draws (skill 0.8)
    differ between seeds, so some tasks flip across runs and some do not."""
    module = suite / "test_mini.py"
    text = module.read_text()
    for old, new in (
        ("skill=0.85", "skill=1.0"),
        ("skill=0.35", "skill=0.0"),
        ("SimJudge(noise=0.15)", "SimJudge(noise=0.0, misread=0.0)"),
    ):
        assert old in text
        text = text.replace(old, new)
    module.write_text(text)


def _preferred(row: dict[str, object]) -> str:
    choice = row["judge_choice"]
    if choice not in ("A", "B"):
        return str(choice)
    left_in_a = row["blind_order"] == "A=left"
    return str(row["agent_left"] if (choice == "A") == left_in_a else row["agent_right"])


def _outcomes(out: Path) -> dict[str, frozenset[tuple[object, ...]]]:
    """Each task's outcome read from a run's pair_results.jsonl: its cases' preferred agents and rule
    successes (computed here, not by the plugin)."""
    found: dict[str, set[tuple[object, ...]]] = {}
    for row in read_jsonl(out / "mini" / "pairs" / "pair_results.jsonl"):
        case = (row["case_id"], _preferred(row), row["task_success_left"], row["task_success_right"])
        found.setdefault(str(row["task_id"]), set()).add(case)
    return {task: frozenset(cases) for task, cases in found.items()}


def _flaky_rows(conclusion: str) -> set[str]:
    section = conclusion.split("## History", 1)[1]
    return set(re.findall(r"^\| (m\d\d) \| 3 \| [12] \|", section, flags=re.MULTILINE))


def test_three_seeds_flag_exactly_the_tasks_that_flipped(pytester: pytest.Pytester, mini_suite: Path) -> None:
    _steady(mini_suite)
    (pytester.path / "history").mkdir()
    outs = []
    for seed in (1, 2, 3):
        history = ["--gauge-history", "history/runs.db"] if seed == 1 else ["--gauge-history=history/runs.db"]
        out = f"out{seed}"
        done = run_inprocess(
            pytester, "suites", "--gauge-seed", str(seed), "--gauge-out", out, "--gauge-gate", GATE, *history
        )
        assert done.ret in (0, 1), done.stdout.str()
        done.stdout.fnmatch_lines([f"pytest-gauge history: {seed} run*; flaky tasks *"])
        outs.append(pytester.path / out)
    runs = [_outcomes(o) for o in outs]
    flipped = {task for task in runs[0] if len({r[task] for r in runs}) > 1}
    assert flipped and flipped != set(runs[0]), "the suite should make some tasks flip and some not"

    conclusion = (outs[-1] / "mini" / "reports" / "conclusion.md").read_text()
    assert _flaky_rows(conclusion) == flipped
    assert f"Flaky tasks: {len(flipped)} of 5;" in conclusion
    assert re.search(rf"\| `{re.escape(GATE)}` \| \d/3 \| \w+ \w+ \w+ \|", conclusion)

    recorded = read_history(pytester.path / "history" / "runs.db")
    assert [r.seed for r in recorded] == [1, 2, 3]
    assert len({r.run_id for r in recorded}) == 3
    assert {t.task_id for r in recorded for t in r.tasks} == set(runs[0])


def test_the_ini_key_names_a_bad_history_before_any_case(pytester: pytest.Pytester, mini_suite: Path) -> None:
    pytester.makeini(MINI_INI + "gauge_history = runs.db\n")
    (pytester.path / "runs.db").write_text("these are notes, not a history\n" * 40)
    done = run_inprocess(pytester, "suites")
    assert done.ret == pytest.ExitCode.USAGE_ERROR
    assert "runs.db: not a pytest-gauge history" in done.stderr.str()
    assert not (pytester.path / "gauge-out").exists()

    (pytester.path / "runs.db").unlink()
    assert run_inprocess(pytester, "suites").ret == 0
    (run,) = read_history(pytester.path / "runs.db")
    assert run.suite == "mini" and len(run.tasks) == 5 and run.seed == 7


def test_a_sharded_run_records_its_merged_gates_once(pytester: pytest.Pytester, mini_suite: Path) -> None:
    """Two shards, each with its own history, joined by ``history merge``; the shards' merge appends the
    merged run: the gates are recorded once (the shards record none), and the sharded run counts once."""
    gates = ("--gauge-gate", "lrs <= 1", "--gauge-gate", "success_rate(agent_z) >= 0.99")
    whole = run_inprocess(pytester, "suites", *gates, "--gauge-out", "whole", "--gauge-history", "whole.db")
    assert whole.ret == 1, whole.stdout.str()
    for index in (1, 2):
        shard = run_inprocess(
            pytester, "suites", *gates, "--gauge-shard", f"{index}/2", "--gauge-out", f"s{index}",
            "--gauge-history", f"s{index}.db",
        )  # fmt: skip
        assert shard.ret == 0, shard.stdout.str()
    shard_runs = [run for i in (1, 2) for run in read_history(pytester.path / f"s{i}.db")]
    assert [r.shard for r in shard_runs] == ["1/2", "2/2"] and all(not r.gates for r in shard_runs)

    joined = pytester.path / "runs.db"
    buffer = io.StringIO()
    assert main(["history", "merge", "s1.db", "s2.db", "--out", str(joined)], environ={}, out=buffer) == 0
    args = ["merge", "s1", "s2", "--out", "merged", "--history", str(joined)]
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(pytester.path)
        status = main(args, environ={}, out=buffer)
    assert status == 1, buffer.getvalue()
    assert "pytest-gauge history: mini: history: 1 run; flaky tasks 0 of 5" in buffer.getvalue()

    recorded = read_history(joined)
    merged = [r for r in recorded if r.shard == "merged"]
    assert len(recorded) == 3 and len(merged) == 1
    assert merged[0].run_id == "+".join(sorted(r.run_id for r in shard_runs))
    (one,) = read_history(pytester.path / "whole.db")
    assert [(g.expr, g.status) for g in merged[0].gates] == [(g.expr, g.status) for g in one.gates]
    assert sorted(g.status for g in one.gates) == ["fail", "pass"]
    assert [(t.key, t.outcome) for t in merged[0].tasks] == [(t.key, t.outcome) for t in one.tasks]
    assert sum(len(r.gates) for r in recorded) == 2  # once, not once per shard

    conclusion = (pytester.path / "merged" / "mini" / "reports" / "conclusion.md").read_text()
    assert "1 run of this suite in `runs.db`" in conclusion
    assert "| `lrs <= 1` | 1/1 | pass |" in conclusion


FLAKY_GATE = "success_rate(agent_y) >= 0.1; exclude_flaky=0.3"


def _gate_row(out: Path, expr: str) -> dict[str, Any]:
    metrics = json.loads((out / "mini" / "reports" / "metrics.json").read_text())
    (row,) = [g for g in metrics["gates"] if g["expr"] == expr]
    return dict(row)


def test_exclude_flaky_leaves_out_the_tasks_the_history_calls_flaky(
    pytester: pytest.Pytester, mini_suite: Path
) -> None:
    """Two earlier runs in which m02 and m04 had another outcome: the gate leaves out exactly those two, and
    its figure is the one a run of the suite without them gives."""
    db = pytester.path / "h.db"
    first = run_inprocess(
        pytester, "suites", "--gauge-gate", FLAKY_GATE, "--gauge-out", "a", "--gauge-history", "h.db"
    )
    assert first.ret == 0, first.stdout.str()
    whole = _gate_row(pytester.path / "a", FLAKY_GATE)
    assert "exclude_flaky=0.3: 0 of 5 tasks left out as flaky" in whole["message"]

    (run,) = read_history(db)
    changed = {"m02", "m04"}
    past = []
    for i in (1, 2):
        tasks = tuple(
            replace(t, outcome='{"other": true}') if i == 2 and t.task_id in changed else t for t in run.tasks
        )
        past.append(replace(run, run_id=f"past-{i}", finished_at=f"2000-01-0{i}T00:00:00Z", tasks=tasks))
    append_runs(db, past)  # m02 and m04: 1 of 3 runs differ, rate 0.33 > 0.3; the others 0

    done = run_inprocess(
        pytester, "suites", "--gauge-gate", FLAKY_GATE, "--gauge-out", "b", "--gauge-history", "h.db"
    )
    assert done.ret == 0, done.stdout.str()
    kept = _gate_row(pytester.path / "b", FLAKY_GATE)
    assert "2 of 5 tasks left out as flaky (m02, m04)" in kept["message"]
    conclusion = (pytester.path / "b" / "mini" / "reports" / "conclusion.md").read_text()
    assert "2 of 5 tasks left out as flaky (m02, m04)" in conclusion

    # the same suite without m02 and m04, same seed: the same draws for the other tasks, the same figure
    tasks_file = mini_suite / "tasks.jsonl"
    lines = tasks_file.read_text().splitlines(keepends=True)
    tasks_file.write_text("".join(line for line in lines if not any(f'"{t}"' in line for t in changed)))
    plain = "success_rate(agent_y) >= 0.1"
    alone = run_inprocess(pytester, "suites", "--gauge-gate", plain, "--gauge-out", "c")
    assert alone.ret == 0, alone.stdout.str()
    three = _gate_row(pytester.path / "c", plain)
    assert (kept["value"], kept["n"]) == (three["value"], three["n"]) != (whole["value"], whole["n"])
    with_all, without = (
        float(x)
        for x in re.findall(r"decidable difference ([\d.]+) with every task, ([\d.]+)", kept["message"])[0]
    )
    assert with_all == pytest.approx(_decidable(whole), rel=1e-2)
    assert without == pytest.approx(_decidable(three), rel=1e-2)


def _decidable(row: dict[str, Any]) -> float:
    """80% power, 95% interval: (1.96 + 0.8416) / 1.96 times the interval's half-width."""
    return float((1.959964 + 0.841621) / 1.959964 * (row["high"] - row["low"]) / 2)


def test_exclude_flaky_without_a_history_keeps_every_task_and_says_so(
    pytester: pytest.Pytester, mini_suite: Path
) -> None:
    plain = "success_rate(agent_y) >= 0.1"
    done = run_inprocess(pytester, "suites", "--gauge-gate", FLAKY_GATE, "--gauge-gate", plain)
    assert done.ret == 0, done.stdout.str()
    row, base = (
        _gate_row(pytester.path / "gauge-out", FLAKY_GATE),
        _gate_row(pytester.path / "gauge-out", plain),
    )
    assert "exclude_flaky: needs --gauge-history for flake rates: every task kept" in row["message"]
    assert (row["value"], row["low"], row["high"], row["n"]) == (
        base["value"],
        base["low"],
        base["high"],
        base["n"],
    )


@pytest.mark.slow
def test_the_html_page_shows_each_gates_trend_and_the_flaky_tasks(
    pytester: pytest.Pytester, mini_suite: Path, page: Any
) -> None:
    """Three runs at three seeds with a history: the page's History section has one mark per run for each
    gate (the statuses the history recorded, oldest first) and the flaky tasks conclusion.md lists; the
    page read back from the folder is the same."""
    _steady(mini_suite)
    (pytester.path / "history").mkdir()
    gates = ("--gauge-gate", GATE, "--gauge-gate", "success_rate(agent_y) >= 0.7")
    for seed in (1, 2, 3):
        run_inprocess(
            pytester, "suites", "--gauge-seed", str(seed), *gates, "--gauge-history", "history/runs.db"
        )
    out = pytester.path / "gauge-out"
    recorded = read_history(pytester.path / "history" / "runs.db")
    expected = [[g.expr, [r.gates[i].status for r in recorded]] for i, g in enumerate(recorded[-1].gates)]
    conclusion = (out / "mini" / "reports" / "conclusion.md").read_text()

    html = out / "mini" / "reports" / "index.html"
    before = html.read_bytes()
    assert main(["report", str(out)], environ={}, out=io.StringIO()) == 0
    assert html.read_bytes() == before  # the trend view read back from reports/history.json

    _open(page, html)
    rows = page.execute_script(
        "return Array.from(document.querySelectorAll('#history-gates tbody tr')).map(r =>"
        " [r.cells[0].textContent, Array.from(r.querySelectorAll('.trend .run')).map(s => s.classList[1])])"
    )
    assert rows == expected and len(rows) == 2
    assert {s for _e, statuses in rows for s in statuses} >= {"pass"}
    flaky = page.execute_script(
        "const t = document.querySelector('#history-flaky'); return t.tagName === 'P' ? [] :"
        " Array.from(t.querySelectorAll('tbody tr')).map(r => r.cells[0].textContent)"
    )
    assert set(flaky) == _flaky_rows(conclusion)
    facts = page.execute_script("return document.querySelector('#history-h').nextElementSibling.textContent")
    assert facts.startswith("3 runs of this suite") and f"flaky tasks {len(flaky)} of 5" in facts
    page.execute_script("document.querySelector('#history-h').scrollIntoView()")
    page.save_screenshot("/tmp/history-trend.png")


def _unstable_by_design(suite: Path) -> set[str]:
    """Every rule met by agent_x, none by agent_z, and agent_y meeting every rule but the tool rules, which
    it meets half the time (tool_skill 0.5); a judge without noise. Only a task with a tool rule can change
    its outcome between seeds: the tasks returned."""
    module = suite / "test_mini.py"
    text = module.read_text()
    for old, new in (
        ("skill=0.85", "skill=1.0"),
        ("skill=0.8,", "skill=1.0, tool_skill=0.5,"),
        ("skill=0.35", "skill=0.0"),
        ("SimJudge(noise=0.15)", "SimJudge(noise=0.0, misread=0.0)"),
    ):
        assert old in text
        text = text.replace(old, new)
    module.write_text(text)
    rows = [json.loads(line) for line in (suite / "tasks.jsonl").read_text().splitlines()[1:]]
    return {r["task_id"] for r in rows if any(c["type"].startswith("tool_") for c in r["success_criteria"])}


def test_the_flaky_tasks_are_those_the_simulator_makes_unstable(
    pytester: pytest.Pytester, mini_suite: Path
) -> None:
    unstable = _unstable_by_design(mini_suite)
    assert unstable == {"m04"}
    (pytester.path / "history").mkdir()
    flaky: set[str] = set()
    seed = 0
    while seed < 3 or (not flaky and seed < 12):  # m04 differs in about every other run: 12 suffice
        seed += 1
        done = run_inprocess(
            pytester, "suites", "--gauge-seed", str(seed), "--gauge-history", "history/runs.db"
        )
        assert done.ret == 0, done.stdout.str()
        conclusion = (pytester.path / "gauge-out" / "mini" / "reports" / "conclusion.md").read_text()
        flaky = set(
            re.findall(r"^\| (m\d\d) \| \d+ \| \d+ \|", conclusion.split("## History", 1)[1], flags=re.M)
        )
        assert flaky <= unstable, f"seed {seed}: a task the simulator keeps stable was called flaky"
        assert f"stable over 2+ runs: {5 - len(flaky)};" in conclusion or seed == 1
    assert flaky == unstable


def test_a_shards_merge_leaves_out_the_same_flaky_tasks_as_one_run(
    pytester: pytest.Pytester, mini_suite: Path
) -> None:
    """A history in which m02 differed once in three runs: the merge of two shards (``--history``) leaves
    m02 out of an exclude_flaky gate as a run on one machine does, with the same figure."""
    gate = ("--gauge-gate", FLAKY_GATE)
    assert run_inprocess(pytester, "suites", *gate, "--gauge-out", "a", "--gauge-history", "h.db").ret == 0
    (run,) = read_history(pytester.path / "h.db")
    past = []
    for i in (1, 2):
        tasks = tuple(replace(t, outcome="{}") if i == 2 and t.task_id == "m02" else t for t in run.tasks)
        past.append(
            replace(run, run_id=f"past-{i}", finished_at=f"2000-01-0{i}T00:00:00Z", tasks=tasks, gates=())
        )
    append_runs(pytester.path / "h.db", past)
    shutil.copy(pytester.path / "h.db", pytester.path / "one.db")

    one = run_inprocess(pytester, "suites", *gate, "--gauge-out", "one", "--gauge-history", "one.db")
    assert one.ret == 0, one.stdout.str()
    for index in (1, 2):
        shard = run_inprocess(
            pytester, "suites", *gate, "--gauge-shard", f"{index}/2", "--gauge-out", f"s{index}"
        )
        assert shard.ret == 0, shard.stdout.str()
    buffer = io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(pytester.path)
        status = main(["merge", "s1", "s2", "--out", "merged", "--history", "h.db"], environ={}, out=buffer)
    assert status == 0, buffer.getvalue()
    single, merged = (
        _gate_row(pytester.path / "one", FLAKY_GATE),
        _gate_row(pytester.path / "merged", FLAKY_GATE),
    )
    assert "1 of 5 tasks left out as flaky (m02)" in merged["message"]
    assert (merged["value"], merged["n"], merged["message"]) == (
        single["value"],
        single["n"],
        single["message"],
    )
