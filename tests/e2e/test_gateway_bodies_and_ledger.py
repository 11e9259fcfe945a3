"""Nothing lost at the gateway, in process: any response body is handled, ``--gauge-timeout`` bounds the whole
request, a wrong model fails fast, and every attempt that may reach the server has exactly one ledger
line (write-ahead), through the real ``openai`` client against the fault-injecting loopback server."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_gauge._internal.gateway.errors import GatewayError, ModelNotFound, ModelStopped
from pytest_gauge._internal.gateway.gateway import CallContext
from pytest_gauge._internal.gateway.ledger import Ledger, read_ledger_file, resolve_sent
from pytest_gauge._internal.gateway.response import BadResponse, body_snippet, parse_completion
from pytest_gauge._internal.records import LedgerRecord
from pytest_gauge.testing import MALFORMED_BODIES, FaultPlan, LoopbackServer, completion
from tests.e2e.test_gateway import BODY, KEY, call, ledger, make_gateway, run_closing


@pytest.fixture
def server() -> Any:
    with LoopbackServer() as srv:
        yield srv


@pytest.mark.parametrize("kind", sorted(MALFORMED_BODIES))
def test_a_malformed_200_is_retried_never_cached_and_ends_in_one_line_error(
    tmp_path: Path, server: LoopbackServer, kind: str
) -> None:
    server.faults = FaultPlan(rate_malformed=1.0, malformed=kind)
    gw = make_gateway(tmp_path, server, retries=1, cache="use")
    with pytest.raises(GatewayError) as info:
        call(gw, role="judge", model="judge-m")
    message = str(info.value)
    assert "\n" not in message and "Traceback" not in message
    assert "bad response from the gateway" in message and server.base_url.lower() in message
    assert "role judge" in message and "model judge-m" in message
    rows = ledger(tmp_path)
    assert [r.status for r in rows] == ["bad_response", "bad_response"]  # retried within max-retries
    assert all(r.possibly_billed and r.http_status == 200 for r in rows)
    assert server.requests_total == 2
    assert not list((tmp_path / "cache").rglob("*.json"))  # never cached


def test_a_malformed_body_then_a_good_one_succeeds(tmp_path: Path) -> None:
    with LoopbackServer() as srv:
        srv.faults = FaultPlan(rate_malformed=1.0, malformed="html")
        gw = make_gateway(tmp_path, srv, retries=2)

        async def first_bad_then_good() -> Any:
            task = asyncio.ensure_future(gw.chat(CallContext("s", "t1", "w/1"), 1, "agent", "m", dict(BODY)))
            while srv.requests_total < 1:
                await asyncio.sleep(0.01)
            srv.faults = FaultPlan()
            return await task

        result = run_closing(gw, first_bad_then_good())
    assert result.content.startswith("ok: ")
    assert [r.status for r in ledger(tmp_path)] == ["bad_response", "ok"]


def test_body_checks_name_what_is_wrong_and_never_show_the_key() -> None:
    problems = {}
    for kind, body in MALFORMED_BODIES.items():
        with pytest.raises(BadResponse) as info:
            parse_completion(body)
        problems[kind] = info.value.problem
    assert problems == {
        "array": "the body is a JSON list, not an object",
        "choices_empty": "'choices' is empty",
        "choices_not_list": "'choices' is dict, not a list",
        "content_null": "'content' is null and there are no tool calls",
        "empty": "the body is empty",
        "html": "the body is not JSON",
        "usage_string": "'usage.prompt_tokens' is str, not a number",
    }
    leaked = b"<html>\n<p>your key " + KEY.encode() + b" is invalid</p>" + b"x" * 400
    snippet = body_snippet(leaked, (KEY,))
    assert KEY not in snippet and "***" in snippet and "\n" not in snippet and len(snippet) == 203
    ok = json.dumps(completion(None, tool_calls=[{"id": "1", "type": "function"}])).encode()
    assert parse_completion(ok)["choices"][0]["message"]["content"] is None  # tool calls without text


def test_a_body_past_the_size_bound_is_refused(tmp_path: Path) -> None:
    def huge(body: dict[str, Any]) -> dict[str, Any]:
        return completion("x" * (9 << 20))

    with LoopbackServer(huge) as srv:
        gw = make_gateway(tmp_path, srv, retries=0)
        with pytest.raises(GatewayError, match="more than the 8388608 accepted"):
            call(gw)
    assert [r.status for r in ledger(tmp_path)] == ["bad_response"]


def test_the_timeout_bounds_the_whole_request_of_a_dripping_server(tmp_path: Path) -> None:
    with LoopbackServer() as srv:
        srv.faults = FaultPlan(drip_seconds=0.05)  # each read is quick, the whole body takes ~8 s
        gw = make_gateway(tmp_path, srv, retries=1, timeout=0.25)
        start = time.monotonic()
        with pytest.raises(GatewayError, match="timed out after 2 attempts") as info:
            call(gw)
        elapsed = time.monotonic() - start
    assert elapsed < 0.25 * 2 + 5  # timeout x attempts + 5 s: a correctness bound, not a speed target
    assert "\n" not in str(info.value)
    rows = ledger(tmp_path)
    assert [r.status for r in rows] == ["timeout", "timeout"] and all(r.possibly_billed for r in rows)


def test_an_unknown_model_is_sent_once_then_every_call_for_it_stops(
    tmp_path: Path, server: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GAUGE_TEST_AGENT_MODEL", "gpt-nope")
    from pytest_gauge._internal.suite.declare import env_model

    model = env_model("GAUGE_TEST_AGENT_MODEL", "sim")
    server.faults = FaultPlan(unknown_models=frozenset({model}))
    gw = make_gateway(tmp_path, server, retries=3)

    async def many() -> list[Any]:
        calls = [gw.chat(CallContext("s", "t", f"w/{i}"), 1, "agent", model, dict(BODY)) for i in range(6)]
        calls += [
            gw.chat(CallContext("s", "t", f"u/{i}"), 1, "user_sim", "fine", dict(BODY)) for i in range(3)
        ]
        return await asyncio.gather(*calls, return_exceptions=True)

    results = run_closing(gw, many())
    errors = [r for r in results[:6] if isinstance(r, BaseException)]
    assert len(errors) == 6 and sum(isinstance(e, ModelNotFound) for e in errors) == 1
    assert all(isinstance(e, ModelStopped) for e in errors if not isinstance(e, ModelNotFound))
    assert len({str(e) for e in errors}) == 2  # the one full message, then one short "not run"
    message = str(next(e for e in errors if isinstance(e, ModelNotFound)))
    assert "404 Not Found" in message and "Bad Request" not in message
    assert "agent" in message and "gpt-nope" in message and "GAUGE_TEST_AGENT_MODEL" in message
    assert all(not isinstance(r, BaseException) for r in results[6:])  # other models go on
    assert sum(1 for b in server.bodies if b["model"] == model) == 1


def test_a_404_that_is_not_about_the_model_is_not_called_bad_request(tmp_path: Path) -> None:
    with LoopbackServer(path_prefix="/other") as srv:
        gw = make_gateway(tmp_path, srv)
        gw.client.base_url = srv.root_url + "/v1"
        with pytest.raises(GatewayError) as info:
            call(gw)
    assert "404 Not Found" in str(info.value) and "Bad Request" not in str(info.value)


def _line(call_id: str, attempt: int, status: str) -> LedgerRecord:
    return LedgerRecord(
        run_id="r", call_id=call_id, attempt=attempt, status=status, suite="s", task_id="t", role="agent",
        model="m", strategy="single", work=call_id.split("#")[0], usage=None, usage_missing=False,
        latency_s=0.0, finish_reason=None, cache_hit=False, cost=None,
    )  # fmt: skip


def test_write_ahead_lines_resolve_to_exactly_one_line_per_attempt() -> None:
    lines = [
        _line("w#1", 1, "sent"),
        _line("w#2", 1, "sent"),
        _line("w#1", 1, "http_429"),
        _line("w#1", 2, "sent"),
        _line("w#1", 2, "ok"),
        _line("w#3", 1, "sent"),  # never answered: the process died
    ]
    resolved = resolve_sent(lines)
    assert [(r.call_id, r.attempt, r.status) for r in resolved] == [
        ("w#1", 1, "http_429"),
        ("w#2", 1, "interrupted"),
        ("w#1", 2, "ok"),
        ("w#3", 1, "interrupted"),
    ]
    assert all(r.possibly_billed and r.cost is None for r in resolved if r.status == "interrupted")


def test_an_attempt_cancelled_in_flight_has_one_interrupted_line(tmp_path: Path) -> None:
    with LoopbackServer(latency=30.0) as srv:
        gw = make_gateway(tmp_path, srv)

        async def cancel_in_flight() -> None:
            task = asyncio.ensure_future(gw.chat(CallContext("s", "t1", "w/1"), 1, "agent", "m", dict(BODY)))
            while srv.in_flight < 1:
                await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        run_closing(gw, cancel_in_flight())
        received = srv.requests_total
    raw = [json.loads(line) for line in (tmp_path / "run" / "ledger-main.jsonl").read_text().splitlines()]
    assert [r["status"] for r in raw] == ["sent", "interrupted"]
    rows = ledger(tmp_path)
    assert len(rows) == received == 1 and rows[0].status == "interrupted" and rows[0].possibly_billed


def test_a_killed_process_leaves_its_sent_line_as_interrupted(tmp_path: Path) -> None:
    ledger_file = Ledger(tmp_path, "gw0")
    ledger_file.begin(_line("w#1", 1, "sent"))
    ledger_file.close()  # what kill -9 leaves: the write-ahead line and nothing after it
    (row,) = read_ledger_file(tmp_path / "ledger-gw0.jsonl")
    assert row.status == "interrupted" and row.possibly_billed and row.worker == "gw0"


def test_a_catastrophic_regex_rule_is_a_rule_error_not_a_hang(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_gauge._internal.suite import regex_bound
    from tests.unit.suite.test_rules import call as tool_call
    from tests.unit.suite.test_rules import reply, rule, tools

    monkeypatch.setattr(regex_bound, "REGEX_TIMEOUT", 0.2)
    slow = r"(a|aa)+$"  # exponential backtracking on "aaa...a!" with a backtracking engine
    result = rule(type="regex", pattern=slow).check(reply("a" * 60 + "!"))
    assert not result.passed and result.detail.startswith("rule error:") and "simplify it" in result.detail
    args = rule(type="tool_args", name="lookup", patterns={"q": slow})
    detail = args.check(tools([tool_call("lookup", {"q": "a" * 60 + "!"})])).detail
    assert "rule error:" in detail
    assert rule(type="regex", pattern=r"a+!").check(reply("aaa!")).passed  # ordinary patterns unaffected


def test_turns_cut_by_max_tokens_are_marked_in_the_transcript_and_counted(tmp_path: Path) -> None:
    from pytest_gauge._internal.report.common import truncated_turns
    from pytest_gauge._internal.run.dialogue import DialogueConfig, run_dialogue
    from pytest_gauge._internal.run.work import WorkCaller
    from pytest_gauge._internal.suite.tasks import Task

    with LoopbackServer() as srv:
        srv.faults = FaultPlan(truncate=True)  # every answer: half its text, finish_reason "length"
        gw = make_gateway(tmp_path, srv)
        caller = WorkCaller(gw, CallContext("s", "t1", "transcript/t1/a/0"))
        cfg = DialogueConfig(
            agent_name="a", agent_model="m", agent_system_prompt="be brief", agent_temperature=0.0,
            agent_max_tokens=8, agent_fn=None, user_model="u", user_temperature=0.0, user_max_tokens=8,
            user_extra_prompt="", max_turns=2, tool_step_limit=1,
        )  # fmt: skip
        transcript = run_closing(gw, run_dialogue(Task("t1", "c", "Help me please", ()), 0, cfg, caller))
    assert [(t.role, t.truncated) for t in transcript.turns] == [
        ("user", False),
        ("assistant", True),
        ("user", True),
        ("assistant", True),
    ]  # fmt: skip  (the user opens with the task verbatim: no call, nothing cut)
    assert truncated_turns(ledger(tmp_path)) == {"agent": 2, "user_sim": 2}  # the closing user turn too


def test_an_interrupted_run_is_marked_in_its_reports_and_its_gates_wait_for_the_flag() -> None:
    import dataclasses

    from pytest_gauge._internal.analysis.suite import gate_results
    from pytest_gauge._internal.options import GaugeOptions
    from pytest_gauge._internal.report.conclusion import render_conclusion
    from pytest_gauge._internal.report.summary import render_summary
    from tests.unit.report.test_report import build_ctx

    label = "interrupted: 9 of 12 cases"
    ctx = dataclasses.replace(build_ctx(drop_case=None), interrupted=label, gates=[])
    conclusion = render_conclusion(ctx)
    assert "**Interrupted: 9 of 12 cases** finished" in conclusion
    assert f"Not evaluated: {label} (`--gauge-gates-on-partial` evaluates them)." in conclusion
    summary = render_summary(ctx)
    assert summary.splitlines()[1].startswith(label)
    assert "gates: none declared" not in summary  # the suite declares gates, none were evaluated
    assert f"gates: not evaluated, {label} (--gauge-gates-on-partial evaluates them)" in summary
    meta = dataclasses.replace(ctx.meta, gates=("lrs >= 0.5",), selected=())
    stopped = gate_results(meta, GaugeOptions(), None, True, 3, deferred=False, interrupted=label)
    assert stopped == []  # not evaluated (no source needed) unless --gauge-gates-on-partial
