"""A suite whose roles speak three wire formats: an ``api="anthropic"`` judge, an
``api="responses"`` agent and a chat agent, offline (the simulator answers every format), with the
same records and reports with ``-n 0`` and ``-n 2``; each role's ledger lines name its format."""

from __future__ import annotations

import io
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_gauge._internal.cli import main, suite_targets
from pytest_gauge.testing import LoopbackServer
from tests.helpers import DATA, MINI_INI, SharedRun, SharedRuns, normalised, read_jsonl, stable_report

CASES = 5 * 1 * 2  # tasks x pairs x orders
AGENTS = """    agents=[
        ModelAgent("agent_x", "sim-agent-x", sim=SimAgent(skill=0.85)),
        ModelAgent("agent_y", "sim-agent-y", sim=SimAgent(skill=0.8, verbosity=1.6), api="responses"),
    ],
    judge=Judge("sim-judge", sim=SimJudge(noise=0.15), api="anthropic"),"""


def three_apis(folder: Path) -> None:
    """The mini suite with a Responses agent beside a chat one and a Messages judge."""
    target = folder / "suites" / "three"
    shutil.copytree(DATA / "mini", target)
    module = (target / "test_mini.py").read_text(encoding="utf-8")
    start, end = module.index("    agents=["), module.index("    user=UserSimulator")
    (target / "test_mini.py").unlink()
    (target / "test_three.py").write_text(module[:start] + AGENTS + "\n" + module[end:], encoding="utf-8")
    (folder / "pytest.ini").write_text(MINI_INI, encoding="utf-8")


def three_run(shared_runs: SharedRuns, workers: str, pytester: pytest.Pytester | None = None) -> SharedRun:
    run = shared_runs.get(
        f"three-apis-n{workers}",
        three_apis,
        "suites",
        "-n",
        workers,
        "--gauge-cache",
        "off",
        pytester=pytester,
    )
    assert run.ret == 0, run.stdout[-3000:]
    return run


def test_each_role_calls_in_its_own_format(shared_runs: SharedRuns, pytester: pytest.Pytester) -> None:
    out = three_run(shared_runs, "0", pytester).path / "gauge-out" / "three"
    ledger = read_jsonl(out / "agent_runs.jsonl")
    apis = {(r["role"], r["work"].split("/")[2] if r["role"] == "agent" else "", r["api"]) for r in ledger}
    assert apis == {
        ("agent", "agent_x", "chat"),
        ("agent", "agent_y", "responses"),
        ("user_sim", "", "chat"),
        ("judge", "", "anthropic"),
    }
    assert len([r for r in ledger if r["role"] == "judge"]) == CASES
    judged = read_jsonl(out / "pairs" / "pair_results.jsonl")
    assert len(judged) == CASES and all(j["judge_choice"] in ("A", "B", "tie") for j in judged)
    raw = next(r["usage"]["raw"] for r in ledger if r["api"] == "anthropic")
    assert "input_tokens" in raw and "prompt_tokens" not in raw  # the Messages usage object itself
    tools = [
        t
        for t in read_jsonl(out / "agents" / "agent_y.jsonl")
        if any(turn.get("tool_calls") for turn in t["turns"])
    ]
    assert tools, "the Responses agent's tool calls came back as tool calls"


@pytest.mark.slow
def test_records_and_reports_are_the_same_with_two_workers(
    shared_runs: SharedRuns,
    pytester: pytest.Pytester,
    read_outputs: Callable[[Path], dict[str, list[str]]],
) -> None:
    runs = {n: three_run(shared_runs, n, pytester if n == "0" else None) for n in ("0", "2")}
    outs = {n: run.path / "gauge-out" / "three" for n, run in runs.items()}
    records = {n: read_outputs(out) for n, out in outs.items()}
    assert records["0"] == records["2"]
    reports = {n: sorted(p.name for p in (out / "reports").iterdir()) for n, out in outs.items()}
    assert reports["0"] == reports["2"] and "token_cost.md" in reports["0"]
    for name in reports["0"]:
        if name.endswith((".md", ".json")):
            assert stable_report(outs["0"] / "reports" / name) == stable_report(
                outs["2"] / "reports" / name
            ), name
    tasks = [normalised(read_jsonl(out / "tasks.jsonl")) for out in outs.values()]
    assert tasks[0] == tasks[1]


def test_doctor_probes_each_role_in_its_own_format(tmp_path: Path) -> None:
    three_apis(tmp_path)
    targets = {(t.roles.split(" ")[0], t.api) for t in suite_targets([str(tmp_path / "suites")])}
    assert targets == {
        ("agent", "chat"),
        ("agent", "responses"),
        ("user_sim", "chat"),
        ("judge", "anthropic"),
    }
    with LoopbackServer() as srv:
        env = {"TAOTOKEN_API_KEY": "sk-doctor-key", "TAOTOKEN_BASE_URL": srv.base_url}
        out = io.StringIO()
        status = main(["doctor", str(tmp_path / "suites")], environ=env, out=out, err=io.StringIO())
        paths = srv.by_path
        versions = [h.get("anthropic-version") for h in srv.headers_seen]
    assert status == 0, out.getvalue()
    assert paths == {"/v1/chat/completions": 2, "/v1/responses": 1, "/v1/messages": 1}
    assert versions.count("2023-06-01") == 1
    assert (
        "answered a 1-token Messages (api=anthropic) call with response_format json_schema" in out.getvalue()
    )
