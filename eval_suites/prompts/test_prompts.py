"""Your own prompt tests with pytest-gauge's fixtures: plain pytest tests, no Suite needed.

Offline (this repo's default, the sim backend) the simulator answers, deterministically; with
``--gauge-backend=live`` your gateway does, through the same retries, limits, cache and ledger as a
suite. Each test's calls are in ``gauge-out/_tests/agent_runs.jsonl`` under its node id, its cost in
``--junitxml`` and in the "cost by test" table at the end of the run.
"""

from __future__ import annotations

import pytest

from pytest_gauge import GaugeClient, GaugeJudge, GaugeLedger, env_model

MODEL = env_model("GAUGE_AGENT_X_MODEL", "sim-agent-x")
SYSTEM = "You are the support agent of an online shop. Refunds are accepted within 30 days of delivery."
QUESTION = "How long do I have to send a parcel back for a refund?"


@pytest.mark.gauge_budget(usd=0.01, tokens=5000)  # this test's calls stop (and it fails) past this budget
def test_refund_reply_is_whole_and_cheap(
    gauge_client: GaugeClient, gauge_ledger: GaugeLedger, request: pytest.FixtureRequest
) -> None:
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
    reply = gauge_client.chat(messages, model=MODEL, max_tokens=300)
    assert reply.text.strip()
    assert reply.finish_reason == "stop", "the reply was cut by max_tokens"
    spent = gauge_ledger.spent(request.node)
    assert spent.calls == 1
    assert spent.cost is None or spent.cost < 0.005  # None: the model has no price configured


def test_new_reply_beats_the_old_one_in_both_orders(gauge_judge: GaugeJudge) -> None:
    new = "You can send it back within 30 days of delivery for a full refund (Orders > Return)."
    old = "Please contact our support team about returns."
    rules = [{"type": "contains_all", "phrases": ["30 days", "refund"]}]
    verdict = gauge_judge.compare(QUESTION, new, old, rules=rules)
    assert verdict.rule_rewards == (1.0, 0.0)
    assert verdict.winner == "first", verdict.reasons  # "inconsistent" would mean the orders disagreed
