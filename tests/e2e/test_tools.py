"""Tool use end to end: the agent's tool loop on the sim backend and through the real ``openai`` client
against the loopback server, located declaration errors at collection and the step limit. The executor
and declarations alone are tests/unit/suite/test_tools.py; recorded calls and the judge's view
tests/unit/run/test_tool_activity.py.

Live runs use ``tests/data/tools_suite`` (copied into a pytester folder) with a scripted responder: it
tells the three roles apart like the simulator does and plays each task's agent script exactly.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_gauge._internal.run.judge import JUDGE_SYSTEM_PROMPT
from pytest_gauge.testing import LoopbackServer, completion, message_text, tool_call
from tests.helpers import read_jsonl, run_inprocess
from tests.unit.run.test_tool_activity import STEP_LIMIT
from tests.unit.suite.test_tools import LOOKUP_RESULT

SUITE_DATA = Path(__file__).resolve().parents[1] / "data" / "tools_suite"
KEY = "sk-gauge-tools-test"


# ------------------------------------------------------------------ suite runs (sim and live)


@pytest.fixture
def tools_suite(pytester: pytest.Pytester) -> Path:
    """``tests/data/tools_suite`` as ``suites/tools`` in a fresh pytester folder (sim backend by default)."""
    target = pytester.path / "suites" / "tools"
    target.mkdir(parents=True)
    shutil.copy(SUITE_DATA / "tasks.jsonl", target / "tasks.jsonl")
    shutil.copy(SUITE_DATA / "suite_tools.py", target / "test_tools_suite.py")
    pytester.makeini("[pytest]\ngauge_backend = sim\ngauge_seed = 7\n")
    return target


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return run_inprocess(pytester, "suites", "--gauge-cache", "off", *args)


def transcripts(pytester: pytest.Pytester, agent: str) -> dict[str, dict[str, Any]]:
    rows = read_jsonl(pytester.path / "gauge-out" / "tools" / "agents" / f"{agent}.jsonl")
    return {r["task_id"]: r for r in rows}


def calls_of(transcript: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for t in transcript["turns"] if t["role"] == "assistant" for c in t["tool_calls"]]


def test_raising_and_hanging_tools_do_not_stop_a_sim_run(
    pytester: pytest.Pytester, tools_suite: Path
) -> None:
    run(pytester).assert_outcomes(passed=5 * 2)
    pairs = read_jsonl(pytester.path / "gauge-out" / "tools" / "pairs" / "pair_results.jsonl")
    assert len(pairs) == 10 and all(p["judge_choice"] != "error" for p in pairs)
    for agent in ("agent_x", "agent_y"):
        by_task = transcripts(pytester, agent)
        assert sorted(by_task) == ["b01", "f01", "h01", "l01", "r01"]
        assert {t["ended_by"] for t in by_task.values()} == {"user_done"}  # every conversation finished
        [raised] = calls_of(by_task["f01"])
        assert (raised["name"], raised["return_code"]) == ("check_stock", 1)
        assert raised["result"].startswith("error: RuntimeError: inventory service unavailable for ")
        [hung] = calls_of(by_task["h01"])
        assert (hung["name"], hung["return_code"], hung["error"]) == ("track_shipment", 124, "timeout")
        assert hung["result"] == "error: tool did not finish within 0.2s"
        for task_id, call in (("f01", raised), ("h01", hung)):
            turns = by_task[task_id]["turns"]
            tool_turns = [t for t in turns if t["role"] == "tool"]
            assert [(t["tool_call_id"], t["content"]) for t in tool_turns] == [(call["id"], call["result"])]
            assert call["result"] in by_task[task_id]["final_reply"]  # the agent saw the error and went on
        assert [(c["name"], c["return_code"]) for c in calls_of(by_task["r01"])] == [
            ("lookup_order", 0),
            ("issue_refund", 0),
        ]
        assert [c["return_code"] for c in calls_of(by_task["l01"])] == [4]  # ToolResult's own code
    # the rules decide task_success from the calls: every planned call was made and matched
    assert all(p["task_success_left"] and p["task_success_right"] for p in pairs)


def test_a_task_naming_an_unknown_tool_is_a_located_collection_error(
    pytester: pytest.Pytester, tools_suite: Path
) -> None:
    path = tools_suite / "tasks.jsonl"
    lines = path.read_text().splitlines()
    lines[3] = lines[3].replace('"tools": ["track_shipment"]', '"tools": ["track_shipment", "teleport"]')
    path.write_text("\n".join(lines) + "\n")
    result = run(pytester)
    assert result.ret != 0
    result.stdout.re_match_lines(
        [
            r".*tasks\.jsonl:4: tools: unknown tool 'teleport' "
            r"\(suite tools: lookup_order, issue_refund, check_stock, track_shipment\)"
        ]
    )
    assert "Traceback" not in result.stdout.str() and "passed" not in result.stdout.str()


def test_an_invalid_tool_schema_fails_at_suite_import_with_the_tool_and_path(
    pytester: pytest.Pytester, tools_suite: Path
) -> None:
    module = tools_suite / "test_tools_suite.py"
    source = module.read_text()
    assert '_schema(sku="string")' in source
    module.write_text(source.replace('_schema(sku="string")', '_schema(sku="strnig")'))
    result = run(pytester)
    assert result.ret != 0
    result.stdout.re_match_lines(
        [
            r"_* ERROR collecting suites/tools/test_tools_suite\.py _*",
            r".*ToolError: tool check_stock\.parameters\.properties\.sku\.type: "
            r"'strnig' is not a JSON Schema type.*",
        ]
    )
    result.assert_outcomes(errors=1)


# ---- live: the real openai client against the loopback server, with a scripted responder


def _tasks_by_prompt() -> dict[str, str]:
    rows = read_jsonl(SUITE_DATA / "tasks.jsonl")[1:]
    return {r["task_prompt"]: r["task_id"] for r in rows}


def _agent_script(task_id: str, model: str, tool_msgs: list[dict[str, Any]]) -> dict[str, Any]:
    """What the agent model answers, given the tool results it has seen so far."""
    n = len(tool_msgs)
    if task_id == "r01" and model == "model-x":  # look up, then refund the amount the lookup returned
        if n == 0:
            return completion(
                None, tool_calls=[tool_call("call_lookup", "lookup_order", {"order_id": "A123"})]
            )
        if n == 1:
            amount = json.loads(message_text(tool_msgs[0]["content"]))["amount"]
            args = {"order_id": "A123", "amount": amount}
            return completion(None, tool_calls=[tool_call("call_refund", "issue_refund", args)])
        return completion("I refunded 25 dollars on order A123.")
    if task_id == "r01":  # model-y refunds without looking the order up first
        if n == 0:
            args = {"order_id": "A123", "amount": 25}
            return completion(None, tool_calls=[tool_call("call_refund", "issue_refund", args)])
        return completion("Refund issued.")
    if task_id == "l01":  # never stops calling tools
        return completion(None, tool_calls=[tool_call(f"call_{n}", "lookup_order", {"order_id": "A123"})])
    if task_id == "b01" and n == 0:
        return completion(None, tool_calls=[tool_call("call_bad", "lookup_order", "{not json")])
    return completion("Done.")


def scripted_responder(body: dict[str, Any]) -> dict[str, Any]:
    """Judge, user simulator and agents told apart by their system prompts, like the simulator does."""
    messages = body["messages"]
    system = message_text(messages[0]["content"]) if messages[0]["role"] == "system" else ""
    if system == JUDGE_SYSTEM_PROMPT:
        verdict = {"winner": "A", "reward_a": 0.9, "reward_b": 0.4, "reason": "A followed the criteria."}
        return completion(json.dumps(verdict))
    if "You are role-playing a user" in system:
        if len(messages) == 2:  # the opening: send the task text exactly
            found = re.search(r"<task>\n(.*?)\n</task>", system, re.DOTALL)
            assert found is not None
            return completion(found.group(1))
        return completion("Thanks.\n[DONE] satisfied=yes")
    first_user = next(message_text(m["content"]) for m in messages if m["role"] == "user")
    tool_msgs = [m for m in messages if m["role"] == "tool"]
    return _agent_script(_tasks_by_prompt()[first_user], body["model"], tool_msgs)


@pytest.fixture
def server(tools_suite: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopbackServer]:
    srv = LoopbackServer(scripted_responder).start()
    monkeypatch.setenv("TAOTOKEN_API_KEY", KEY)
    monkeypatch.setenv("TAOTOKEN_BASE_URL", srv.base_url)
    yield srv
    srv.stop()


def live(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return run(pytester, "--gauge-backend", "live", *args)


def agent_bodies(server: LoopbackServer, task_prompt: str, model: str) -> list[dict[str, Any]]:
    def first_user(body: dict[str, Any]) -> str:
        return next(message_text(m["content"]) for m in body["messages"] if m["role"] == "user")

    return [b for b in server.bodies if b["model"] == model and first_user(b) == task_prompt]


def pair_rows(pytester: pytest.Pytester, task_id: str) -> list[dict[str, Any]]:
    rows = read_jsonl(pytester.path / "gauge-out" / "tools" / "pairs" / "pair_results.jsonl")
    return [r for r in rows if r["task_id"] == task_id]


def test_a_model_agent_completes_a_two_step_tool_task_through_the_real_client(
    pytester: pytest.Pytester, server: LoopbackServer
) -> None:
    live(pytester, "-k", "r01").assert_outcomes(passed=2)
    prompt = "Refund order A123, it arrived broken. The amount was 25 dollars."
    t = transcripts(pytester, "agent_x")["r01"]
    assert (t["ended_by"], t["final_reply"], t["user_satisfied"]) == (
        "user_done",
        "I refunded 25 dollars on order A123.",
        True,
    )
    assert [(c["id"], c["name"], c["arguments"], c["result"], c["return_code"]) for c in calls_of(t)] == [
        ("call_lookup", "lookup_order", {"order_id": "A123"}, LOOKUP_RESULT, 0),
        (
            "call_refund",
            "issue_refund",
            {"order_id": "A123", "amount": 25},
            '{"order_id": "A123", "refunded": 25}',
            0,
        ),
    ]
    assert [t_["role"] for t_ in t["turns"]] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    # what the gateway saw: the tools offered on every agent request, the results as tool messages
    bodies = agent_bodies(server, prompt, "model-x")
    assert len(bodies) == 3
    for body in bodies:
        assert [tool["function"]["name"] for tool in body["tools"]] == ["lookup_order", "issue_refund"]
        assert all(tool["type"] == "function" for tool in body["tools"])
    assert not [m for m in bodies[0]["messages"] if m["role"] == "tool"]
    second = bodies[1]["messages"]
    [asked] = [m for m in second if m["role"] == "assistant" and m.get("tool_calls")]
    assert [c["id"] for c in asked["tool_calls"]] == ["call_lookup"]
    assert [(m["tool_call_id"], m["content"]) for m in second if m["role"] == "tool"] == [
        ("call_lookup", LOOKUP_RESULT)
    ]
    assert second.index(asked) < next(i for i, m in enumerate(second) if m["role"] == "tool")
    assert [m["tool_call_id"] for m in bodies[2]["messages"] if m["role"] == "tool"] == [
        "call_lookup",
        "call_refund",
    ]
    # the user simulator never sees tool activity
    user_bodies = [
        b for b in server.bodies if "You are role-playing a user" in message_text(b["messages"][0]["content"])
    ]
    assert user_bodies and all(
        m["role"] != "tool" and "tool_calls" not in m for b in user_bodies for m in b["messages"]
    )
    # the judge sees the calls, name-blind
    judge_texts = [
        json.dumps(b["messages"])
        for b in server.bodies
        if message_text(b["messages"][0]["content"]) == JUDGE_SYSTEM_PROMPT
    ]
    assert len(judge_texts) == 2
    for text in judge_texts:
        assert "[tool call] lookup_order(" in text and "[tool result]" in text
        assert not any(name in text for name in ("agent_x", "agent_y", "model-x", "model-y"))
    # the rules on arguments and order decide task_success: agent_y refunded without a lookup
    rows = pair_rows(pytester, "r01")
    assert len(rows) == 2
    for row in rows:
        assert (row["agent_left"], row["task_success_left"], row["reward_left"]) == ("agent_x", True, 1.0)
        assert (row["agent_right"], row["task_success_right"], row["reward_right"]) == ("agent_y", False, 0.5)


def test_malformed_tool_arguments_from_the_model_are_a_recorded_mistake(
    pytester: pytest.Pytester, server: LoopbackServer
) -> None:
    live(pytester, "-k", "b01").assert_outcomes(passed=2)
    for agent, model in (("agent_x", "model-x"), ("agent_y", "model-y")):
        t = transcripts(pytester, agent)["b01"]
        [call] = calls_of(t)
        assert (call["raw_arguments"], call["arguments"], call["return_code"]) == ("{not json", None, 2)
        assert call["result"].startswith("error: malformed arguments: ")
        assert (t["ended_by"], t["final_reply"]) == ("user_done", "Done.")
        bodies = agent_bodies(server, "Look up order A123 for me.", model)
        assert len(bodies) == 2
        assert [(m["tool_call_id"], m["content"]) for m in bodies[1]["messages"] if m["role"] == "tool"] == [
            ("call_bad", call["result"])
        ]
    for row in pair_rows(pytester, "b01"):  # tool_args: "no call matched (first: malformed arguments)"
        assert (row["task_success_left"], row["task_success_right"]) == (False, False)
        assert row["judge_choice"] == "A"


def test_an_agent_that_never_stops_calling_tools_hits_the_step_limit(
    pytester: pytest.Pytester, server: LoopbackServer
) -> None:
    live(pytester, "-k", "l01 or r01").assert_outcomes(passed=4)
    ledger = read_jsonl(pytester.path / "gauge-out" / "tools" / "agent_runs.jsonl")
    for agent, model in (("agent_x", "model-x"), ("agent_y", "model-y")):
        t = transcripts(pytester, agent)["l01"]
        assert (t["ended_by"], t["final_reply"], t["user_satisfied"]) == ("step_limit", "", None)
        calls = calls_of(t)
        assert [(c["id"], c["return_code"]) for c in calls] == [(f"call_{i}", 0) for i in range(STEP_LIMIT)]
        # one model call per executed step, plus the one that asked for more and was refused
        bodies = agent_bodies(server, "Keep checking order A123 until its status changes.", model)
        assert len(bodies) == STEP_LIMIT + 1
        work = [r for r in ledger if r["work"] == f"transcript/l01/{agent}/0" and r["role"] == "agent"]
        assert len(work) == STEP_LIMIT + 1
        assert transcripts(pytester, agent)["r01"]["ended_by"] == "user_done"  # the run went on
    assert len(pair_rows(pytester, "l01")) == 2 and len(pair_rows(pytester, "r01")) == 2
