"""A new user's first live run (issue 14): the judge in JSON mode with a once-per-model fallback, gates
checked before any call, and (below) token detail, self-contained replay and doctor, all against the
loopback server."""

from __future__ import annotations

import pytest

from pytest_gauge.analysis.gate_check import SuiteShape, check_gate
from pytest_gauge.analysis.gates import parse_gate
from pytest_gauge.gateway.errors import GatewayError
from pytest_gauge.gateway.prices import PriceTable
from pytest_gauge.options import parse_price_lines
from pytest_gauge.records import Usage
from pytest_gauge.run.judge import JUDGE_SYSTEM_PROMPT
from pytest_gauge.run.judge_format import JSON_OBJECT, JSON_SCHEMA, JudgeFormats, format_chain, rejects_format
from pytest_gauge.testing.server import FaultPlan, LoopbackServer
from tests import test_live
from tests.conftest import read_jsonl

CASES = test_live.CASES
server = test_live.server  # the fixture: a loopback server answering like the sim, key and URL set


def live(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("suites", "-p", "no:cacheprovider", "--gauge-backend", "live", *args)


def judge_bodies(server: LoopbackServer) -> list[dict[str, object]]:
    return [b for b in server.bodies if b["messages"][0]["content"] == JUDGE_SYSTEM_PROMPT]  # type: ignore[index]


# ----- JSON mode ---------------------------------------------------------------------------------


def test_format_chain_and_the_fallback_happen_once_per_model() -> None:
    assert format_chain("auto") == (JSON_SCHEMA, JSON_OBJECT, None)
    assert format_chain("json_object") == (JSON_OBJECT, None)
    assert format_chain(None) == (None,)
    assert format_chain({"type": "json_object"}) == (JSON_OBJECT, None)
    with pytest.raises(ValueError, match="use 'auto'"):
        format_chain("yaml")
    refused = GatewayError(
        "400 Bad Request: 'response_format' of type 'json_schema' is not supported", "x", status=400
    )
    other = GatewayError("400 Bad Request: The model `m` does not exist", "x", status=400)
    assert rejects_format(refused) and not rejects_format(other)
    assert not rejects_format(GatewayError("503 response_format", "x", status=503))
    formats = JudgeFormats()
    chain = format_chain("auto")
    assert formats.reject("m", 0, chain, refused) == 1
    assert formats.reject("m", 0, chain, refused) == 1  # a concurrent call that also saw the 400
    assert formats.level("m") == 1 and formats.level("other") == 0
    assert formats.reject("m", 1, chain, refused) == 2
    assert formats.reject("m", 2, chain, refused) is None  # the prompt alone: nothing left to drop


@pytest.mark.slow
def test_judge_asks_for_json_and_falls_back_once_when_the_gateway_refuses_the_schema(
    pytester: pytest.Pytester, server: LoopbackServer
) -> None:
    server.faults = FaultPlan(reject_response_formats=frozenset({"json_schema"}))
    result = live(pytester, "--gauge-cache", "off")
    result.assert_outcomes(passed=CASES)
    judged = judge_bodies(server)
    kinds = [b["response_format"]["type"] for b in judged]  # type: ignore[index]
    assert kinds[0] == "json_schema" and kinds.count("json_schema") == 1  # refused once, never again
    assert kinds[1:] == ["json_object"] * CASES
    assert server.requests_by_status.get(400) == 1
    out = pytester.path / "gauge-out" / "mini"
    records = read_jsonl(out / "pairs" / "pair_results.jsonl")
    assert all(r["judge_choice"] != "error" for r in records)
    assert {r["judge_response_format"] for r in records} == {"json_object"}
    note = "judge model sim-judge: the gateway refused response_format json_schema"
    assert note in (out / "reports" / "conclusion.md").read_text(encoding="utf-8")
    assert note in result.stdout.str()


# ----- gates at collection -----------------------------------------------------------------------


SHAPE = SuiteShape(
    "mini",
    agents=("agent_x", "agent_y", "solver", "solver@bo4"),
    pairs=(("agent_x", "agent_y"), ("solver", "solver@bo4")),
    tiers=("solver", "solver@bo4"),
    judges=("sim-judge",),
)


@pytest.mark.parametrize(
    ("gate", "problem"),
    [
        ("flip_rte <= 0.2", "unknown metric 'flip_rte'; did you mean 'flip_rate'?"),
        ("elo(agnet_x) >= 1000", "unknown agent 'agnet_x'; did you mean 'agent_x'?"),
        ("delta_elo(agent_x) >= 0", "unknown agent in a compute family"),
        ("flip_rate(agent_x, solver) <= 0.2", "not a declared pair"),
        ("lrs(clos) <= 0.2", "unknown class 'clos'; did you mean 'close'?"),
        ("success_rate(agent_x, agent_y) >= 0.5", "wrong number of arguments"),
        ("upper(lrs_close - lrs(agent_y, agent_x)) <= 0.5", None),
        ("lower(elo(solver@bo4) - elo(solver)) >= -20", None),
        ("judge_accuracy(sim-judge, close) >= 0.8", None),
        ("elo_per_1k_tokens(solver@bo4) >= 1", None),
        ("lower(delta(success_rate(agent_x))) >= -0.05", None),
        ("delta(success_rate(agent_q)) >= 0", "unknown agent 'agent_q'"),
    ],
)
def test_gates_are_checked_against_the_suite(gate: str, problem: str | None) -> None:
    found = check_gate(parse_gate(gate), SHAPE)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found


@pytest.mark.slow
def test_bad_gates_are_a_usage_error_before_any_request(
    pytester: pytest.Pytester, server: LoopbackServer
) -> None:
    """A misspelt metric, an unknown agent in elo(...) and a missing number: all named, nothing sent."""
    suite_file = pytester.path / "suites" / "mini" / "test_mini.py"
    text = suite_file.read_text(encoding="utf-8")
    gates = ["flip_rte <= 0.2", "elo(agent_q) >= 1000", "flip_rate <="]
    suite_file.write_text(
        text.replace("suite = Suite(\n", f"suite = Suite(\n    gates={gates!r},\n"), "utf-8"
    )
    result = live(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    for shown in ("did you mean 'flip_rate'", "elo(agent_q): unknown agent 'agent_q'", "expected a number"):
        assert "suite mini: " in err and shown in err
    assert server.requests_total == 0


# ----- token detail and prices -------------------------------------------------------------------


def test_usage_keeps_cached_and_reasoning_tokens_and_the_cached_price_applies() -> None:
    api = {
        "prompt_tokens": 1000,
        "completion_tokens": 200,
        "total_tokens": 1200,
        "prompt_tokens_details": {"cached_tokens": 600},
        "completion_tokens_details": {"reasoning_tokens": 50},
    }
    usage = Usage.from_api(api)
    assert (usage.cached_tokens, usage.reasoning_tokens) == (600, 50)
    assert Usage.from_api({"prompt_tokens": 3}) == Usage(3, 0, 0, None, None)
    assert (usage + Usage(1, 1, 2)).cached_tokens == 600
    table = PriceTable.from_rows((("m", 2.0, 8.0, 0.5, "ini gauge_prices"), ("plain", 2.0, 8.0)))
    # 400 fresh input at $2/M + 600 cached at $0.5/M + 200 output at $8/M
    assert table.usage_cost("m", usage) == pytest.approx(400 * 2e-6 + 600 * 0.5e-6 + 200 * 8e-6)
    assert table.usage_cost("plain", usage) == pytest.approx(1000 * 2e-6 + 200 * 8e-6)  # no cached price
    assert table.usage_cost("unpriced", usage) is None  # unknown, never 0
    rows = parse_price_lines(["m 2 8 0.5", "n 1 2"])
    assert rows == [("m", 2.0, 8.0, 0.5, "ini gauge_prices"), ("n", 1.0, 2.0, None, "ini gauge_prices")]
    with pytest.raises(pytest.UsageError, match="CACHED_INPUT_PER_M"):
        parse_price_lines(["m 1 2 3 4"])
