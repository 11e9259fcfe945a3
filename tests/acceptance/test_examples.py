"""Examples that teach: every suite folder is a package, so a suite imports its
sibling modules plainly (``from .tools import TOOLS``) and two suites with their own ``tools.py`` run
side by side; ``eval_suites/in_house`` (a ``CallableAgent`` with ``checks=``) passes offline.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.helpers import read_jsonl

ROOT = Path(__file__).resolve().parents[2]
EVAL_SUITES = ROOT / "eval_suites"

# A second suite with its own tools.py: same module name as in_house's, different tool.
OTHER_TOOLS = """
from pytest_gauge import Tool

TOOLS = [Tool("weather", "Weather of a city", {"type": "object", "properties": {}}, lambda: {"sky": "clear"})]
"""
OTHER_SUITE = """
from pytest_gauge import Judge, ModelAgent, SimAgent, Suite, UserSimulator

from .tools import TOOLS

suite = Suite(
    agents=[ModelAgent("a", "m-a", sim=SimAgent(skill=1.0)), ModelAgent("b", "m-b", sim=SimAgent(skill=1.0))],
    judge=Judge("judge-model"),
    user=UserSimulator("user-model", max_turns=1),
    tools=TOOLS,
    orders="seeded",
)
"""
OTHER_TASKS = (
    '{"format_version": 1}\n'
    '{"task_id": "w01", "category": "tool_call", "task_prompt": "Is it sunny in Oslo?", '
    '"tools": ["weather"], "success_criteria": [{"type": "tool_called", "name": "weather"}]}\n'
)


def test_no_example_suite_imports_its_modules_through_importlib() -> None:
    sources = {p.relative_to(ROOT): p.read_text(encoding="utf-8") for p in EVAL_SUITES.rglob("*.py")}
    assert sources and not [p for p, text in sources.items() if "importlib" in text]
    for suite_dir in {p.parent for p in EVAL_SUITES.rglob("tools.py")}:
        assert (suite_dir / "__init__.py").is_file(), f"{suite_dir} has a tools.py but is no package"


@pytest.mark.slow
def test_two_suites_with_their_own_tools_module_run_together_and_the_in_house_example_passes(
    pytester: pytest.Pytester,
) -> None:
    shutil.copytree(EVAL_SUITES / "in_house", pytester.path / "suites" / "in_house")
    other = pytester.path / "suites" / "weather"
    other.mkdir()
    (other / "__init__.py").write_text("")
    (other / "tools.py").write_text(OTHER_TOOLS)
    (other / "test_weather.py").write_text(OTHER_SUITE)
    (other / "tasks.jsonl").write_text(OTHER_TASKS)
    pytester.makeini("[pytest]\ngauge_backend = sim\ngauge_seed = 5\n")
    result = pytester.runpytest_subprocess("suites", "-p", "no:cacheprovider", "--gauge-cache", "off")
    # in_house: 3 tasks x 1 pair x 2 orders and its gate; weather: 1 seeded case
    result.assert_outcomes(passed=6 + 1 + 1)
    result.stdout.fnmatch_lines(["suite in_house: 6/6 cases recorded, 3 tasks, 1 pair, orders both"])
    out = pytester.path / "gauge-out"
    support = {r["task_id"]: r for r in read_jsonl(out / "in_house" / "agents" / "support_bot.jsonl")}
    assert sorted(support) == ["o01", "o02", "p01"]
    for task_id in ("o01", "o02"):  # the in-house agent used its own suite's tool
        calls = [c for t in support[task_id]["turns"] if t["role"] == "assistant" for c in t["tool_calls"]]
        assert [(c["name"], c["return_code"]) for c in calls] == [("order_status", 0)]
    assert all(r["score"]["task_success"] for r in support.values())
    checks = [
        rule
        for r in support.values()
        for rule in r["score"]["criteria"]
        if rule["rule"] == 'The custom check "names_the_order" passes.'
    ]
    assert len(checks) == 2 and all(rule["passed"] for rule in checks)
    faq = {r["task_id"]: r for r in read_jsonl(out / "in_house" / "agents" / "faq_bot.jsonl")}
    assert [faq[t]["score"]["task_success"] for t in ("o01", "o02", "p01")] == [False, False, True]
    [weather] = read_jsonl(out / "weather" / "agents" / "a.jsonl")
    calls = [c for t in weather["turns"] if t["role"] == "assistant" for c in t["tool_calls"]]
    assert [(c["name"], c["return_code"]) for c in calls] == [("weather", 0)]


def test_loading_a_suite_module_leaves_no_module_name_taken(tmp_path: Path) -> None:
    """``load_suite`` (doctor, the loopback server's responder) imports a package's test module by its
    dotted name, then gives the name back: a later pytest run in the same process imports its own copy
    (an edited one) instead of being handed this one, and a second copy loads too."""
    import sys

    from pytest_gauge import ModelAgent
    from pytest_gauge.suite.discover import load_suite

    source = Path(__file__).resolve().parents[2] / "eval_suites" / "example"
    first, second = tmp_path / "a" / "example", tmp_path / "b" / "example"
    shutil.copytree(source, first, ignore=shutil.ignore_patterns("__pycache__", "gauge-*"))
    shutil.copytree(source, second, ignore=shutil.ignore_patterns("__pycache__", "gauge-*"))
    module = second / "test_example.py"
    module.write_text(module.read_text().replace("SimAgent(skill=0.3", "SimAgent(skill=0.31"))
    before = set(sys.modules)
    skills = []
    for folder in (first, second):
        (agent,) = [a for a in load_suite(folder / "test_example.py").agents if a.name == "agent_z"]
        assert isinstance(agent, ModelAgent) and agent.sim is not None
        skills.append(agent.sim.skill)
    assert skills == [0.3, 0.31]
    assert not {k for k in set(sys.modules) - before if k.split(".")[0] == "example"}
    assert str(tmp_path / "a") not in sys.path and str(tmp_path / "b") not in sys.path
