"""A suite's ``api="responses"`` agent on the live path (``--gauge-backend=live``) against the loopback
server's ``/v1/responses``, answering like the simulator, with 429s and cached/reasoning token details:
the agent's calls are Responses requests, retried through the one gateway path, and its ledger lines
carry the usage convention with the Responses usage object as ``raw``."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from pytest_gauge.testing import FaultPlan, LoopbackServer
from pytest_gauge.testing.simserver import sim_responder
from tests.helpers import DATA, MINI_INI, read_jsonl, run_inprocess

KEY = "sk-gauge-SECRET-responses-7d1e"
CASES = 5 * 1 * 2  # tasks x pairs x orders
# 429s on the Responses route only, drawn by that route's own request index (fault_apis): drawn over
# every request they could all fall on the chat calls when concurrent calls arrive in another order,
# leaving the Responses agent's retries untested; this seed's schedule 429s Responses requests 1, 3, 7,
# 11, 13, 17 (the first call is always retried), and --gauge-max-retries 10 outlasts any run of them
PLAN = FaultPlan(
    rate_429=0.3,
    retry_after="0",
    cached_tokens=2,
    reasoning_tokens=1,
    seed=11,
    fault_apis=frozenset({"responses"}),
)


@pytest.fixture
def server(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopbackServer]:
    """The mini suite with agent_y on the Responses API (agent_z left out), served by its simulator."""
    target = pytester.path / "suites" / "mini"
    shutil.copytree(DATA / "mini", target)
    module = target / "test_mini.py"
    text = module.read_text(encoding="utf-8")
    y = 'ModelAgent("agent_y", "sim-agent-y", sim=SimAgent(skill=0.8, verbosity=1.6, self_name=True))'
    z = '        ModelAgent("agent_z", "sim-agent-z", sim=SimAgent(skill=0.35)),\n'
    assert y in text and z in text
    module.write_text(text.replace(y, y[:-1] + ', api="responses")').replace(z, ""), encoding="utf-8")
    pytester.makeini(MINI_INI)
    srv = LoopbackServer(sim_responder(module, seed=7), faults=PLAN).start()
    monkeypatch.setenv("TAOTOKEN_API_KEY", KEY)
    monkeypatch.setenv("TAOTOKEN_BASE_URL", srv.base_url)
    yield srv
    srv.stop()


def test_a_responses_agent_live(pytester: pytest.Pytester, server: LoopbackServer) -> None:
    live = ("suites", "--gauge-backend", "live", "--gauge-cache", "off", "--gauge-max-retries", "10")
    result = run_inprocess(pytester, *live)
    result.assert_outcomes(passed=CASES)
    out = pytester.path / "gauge-out" / "mini"
    ledger = read_jsonl(out / "agent_runs.jsonl")
    mine = [r for r in ledger if r["role"] == "agent" and r["work"].split("/")[2] == "agent_y"]
    assert mine and {r["api"] for r in mine} == {"responses"}
    assert {r["api"] for r in ledger if r not in mine} == {"chat"}
    assert all(r["status"] == "ok" for r in ledger if r not in mine)  # the faults hit only /v1/responses
    assert server.by_path["/v1/responses"] == len(mine)  # every attempt on the ledger, none twice
    retried = {r["call_id"] for r in mine if r["status"] == "http_429"}
    assert retried and retried <= {r["call_id"] for r in mine if r["status"] == "ok" and r["attempt"] > 1}
    for line in (r for r in mine if r["status"] == "ok"):
        usage, raw = line["usage"], line["usage"]["raw"]
        assert raw["input_tokens_details"]["cached_tokens"] == 2 and "prompt_tokens" not in raw
        assert (usage["cached_input_tokens"], usage["reasoning_tokens"]) == (2, 1)
        assert usage["input_tokens"] == raw["input_tokens"] - 2
        assert usage["output_tokens"] == raw["output_tokens"]
    sent = [b for b in server.bodies if "input" in b]
    assert sent and all(b["store"] is False and "messages" not in b for b in sent)
    assert any(i.get("type") == "function_call_output" for b in sent for i in b["input"])
    transcripts = read_jsonl(out / "agents" / "agent_y.jsonl")
    assert any(turn.get("tool_calls") for t in transcripts for turn in t["turns"])
    assert KEY not in result.stdout.str() + (out / "agent_runs.jsonl").read_text(encoding="utf-8")
