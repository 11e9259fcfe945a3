"""One collected suite exercising every declaration feature: ``CallableAgent``,
``reflection()``, ``best_of(selector="judge")``, judge ``repeats`` and ``extra_models``, ``samples=2``,
``orders="seeded"`` and ``checks=``, each asserted in the records the run writes (sim backend).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import read_jsonl

SUITE_DATA = Path(__file__).resolve().parents[1] / "data" / "features_suite"
BOT_REPLY = (
    "Our plans are basic, pro and enterprise; enterprise includes single sign-on."  # suite's BOT_REPLY
)
MAX_WORDS = 12  # the suite's short_reply limit
pytestmark = pytest.mark.slow  # one plugin run in a subprocess (~7 s)

NO_EXTRAS = ("-p", "no:randomly", "--gauge-cache", "off", "-n", "0")
TASKS = ("f01", "f02")
PAIRS = ("bot-vs-writer@reflect1", "solver@bo2-vs-bot")


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Run the suite once (module scope: every test below reads the same records)."""
    root = tmp_path_factory.mktemp("features")
    target = root / "suites" / "features"
    target.mkdir(parents=True)
    shutil.copy(SUITE_DATA / "tasks.jsonl", target / "tasks.jsonl")
    shutil.copy(SUITE_DATA / "suite_features.py", target / "test_features_suite.py")
    (root / "pytest.ini").write_text("[pytest]\ngauge_backend = sim\ngauge_seed = 11\n")
    env = {k: v for k, v in os.environ.items() if k != "CI" and not k.startswith("PYTEST_")}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "suites", "-p", "no:cacheprovider", *NO_EXTRAS],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "8 passed" in done.stdout  # 2 tasks x 2 pairs x 2 samples x 1 seeded order
    return root / "gauge-out" / "features"


def agents(out: Path, name: str) -> dict[tuple[str, int], dict[str, Any]]:
    return {(r["task_id"], r["sample"]): r for r in read_jsonl(out / "agents" / f"{name}.jsonl")}


def test_samples_and_seeded_orders_give_one_case_per_task_pair_and_sample(out: Path) -> None:
    rows = read_jsonl(out / "pairs" / "pair_results.jsonl")
    groups = Counter((r["task_id"], r["pair_id"], r["sample"]) for r in rows)
    assert sorted(groups) == [(t, p, s) for t in TASKS for p in PAIRS for s in (0, 1)]
    assert set(groups.values()) == {1}  # orders="seeded": one blind order per (task, pair, sample)
    assert {r["blind_order"] for r in rows} <= {"A=left", "A=right"}


def test_judge_repeats_and_extra_models_are_every_cases_judgments(out: Path) -> None:
    for row in read_jsonl(out / "pairs" / "pair_results.jsonl"):
        judged = sorted((j["judge"], j["repeat"]) for j in row["judgments"])
        assert judged == [("sim-judge", 0), ("sim-judge", 1), ("sim-judge-b", 0), ("sim-judge-b", 1)]
        assert all(j["choice"] in ("A", "B", "tie") for j in row["judgments"])


def test_the_callable_agent_answers_with_its_own_code_and_calls_no_model(out: Path) -> None:
    bot = agents(out, "bot")
    assert sorted(bot) == [(t, s) for t in TASKS for s in (0, 1)]
    assert {r["final_reply"] for r in bot.values()} == {BOT_REPLY}
    assert {r["strategy"] for r in bot.values()} == {"single"}
    ledger = read_jsonl(out / "agent_runs.jsonl")
    assert not [r for r in ledger if r["role"] == "agent" and "/bot/" in r["work"]]


def test_reflection_and_judge_selected_best_of_make_their_extra_calls(out: Path) -> None:
    ledger = read_jsonl(out / "agent_runs.jsonl")
    for task in TASKS:
        for sample in (0, 1):
            writer = [r for r in ledger if r["work"] == f"transcript/{task}/writer@reflect1/{sample}"]
            solver = [r for r in ledger if r["work"] == f"transcript/{task}/solver@bo2/{sample}"]
            # max_turns=1: one reply, then one revision round
            assert [r["role"] for r in writer if r["role"] != "user_sim"] == ["agent", "agent"]
            # two candidates, then one judge comparison picks between them (selector="judge")
            assert sorted(r["role"] for r in solver if r["role"] != "user_sim") == ["agent", "agent", "judge"]
    assert {r["strategy"] for r in agents(out, "writer@reflect1").values()} == {"reflect1"}
    assert {r["strategy"] for r in agents(out, "solver@bo2").values()} == {"bo2"}


def test_checks_decide_the_python_rule_from_the_transcript(out: Path) -> None:
    seen: list[bool] = []
    for name in ("bot", "writer@reflect1", "solver@bo2"):
        for transcript in agents(out, name).values():
            [check] = [c for c in transcript["score"]["criteria"] if "short_reply" in c["rule"]]
            assert check["passed"] == (len(transcript["final_reply"].split()) <= MAX_WORDS)
            seen.append(check["passed"])
    assert True in seen and False in seen  # the check really discriminates in this run
