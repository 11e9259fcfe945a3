"""The fixtures for users' own tests (gauge_client, gauge_ledger, gauge_judge, the gauge_budget marker),
with no Suite in the run, on the sim backend and live against the loopback server; and --gauge-doctor."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pytest_gauge._internal.fixtures import (
    JudgedOrder,
    Spent,
    combine,
    render_cost_by_test,
    spent_of,
)
from pytest_gauge._internal.gateway.cassettes import export_cassettes
from pytest_gauge._internal.records import LedgerRecord, Usage
from pytest_gauge.testing import FaultPlan, LoopbackServer
from tests.helpers import read_jsonl

KEY = "sk-fixtures-secret-123"

# A plain test module, no Suite: MODEL, WINNER and the budget are filled in per backend.
PLAIN = """
import pytest

from pytest_gauge import GaugeBudgetExceeded, GaugeClient, GaugeJudge, GaugeLedger

TASK = "How long do customers have to ask for a refund?"
RULES = [{{"type": "contains_all", "phrases": ["30 days"]}}]


def test_chat(gauge_client: GaugeClient, gauge_ledger: GaugeLedger, request: pytest.FixtureRequest) -> None:
    reply = gauge_client.chat([{{"role": "user", "content": TASK}}], model="{model}", max_tokens=64)
    assert reply.text and reply.usage.total_tokens > 0 and reply.finish_reason in ("stop", "length")
    spent = gauge_ledger.spent(request.node)
    assert spent.calls == 1 and reply.cost > 0
    if spent.cached:  # replayed: nothing was spent now
        assert spent.tokens == 0 and spent.cost == 0
    else:
        assert spent.tokens == reply.usage.total_tokens and spent.cost == pytest.approx(reply.cost)
    assert gauge_ledger.spent().calls >= 1  # the whole run so far


def test_compare(gauge_judge: GaugeJudge, gauge_ledger: GaugeLedger, request: pytest.FixtureRequest) -> None:
    verdict = gauge_judge.compare(
        TASK, "Refunds are accepted within 30 days of delivery.", "Please contact support.", rules=RULES
    )
    assert verdict.winner == "{winner}", verdict
    assert verdict.rule_rewards == (1.0, 0.0)
    assert len(verdict.raw) == 2 and all(verdict.raw) and all(verdict.reasons)
    assert gauge_ledger.spent(request.node).calls == 2


@pytest.mark.gauge_budget(tokens={tokens})
def test_over_budget(gauge_client: GaugeClient) -> None:
    for i in range(50):
        gauge_client.chat([{{"role": "user", "content": f"note {{i}}"}}], model="{model}", max_tokens=150)
"""

EXTRA_SIM = """

@pytest.mark.gauge_budget(usd=0.0)
def test_caught_refusal_still_fails(gauge_client: GaugeClient) -> None:
    try:
        gauge_client.chat([{"role": "user", "content": "hi"}], model="sim-agent-x")
    except GaugeBudgetExceeded:
        pass


@pytest.mark.anyio
async def test_async_chat(gauge_client: GaugeClient) -> None:
    first = await gauge_client.achat([{"role": "user", "content": "Say hi."}], model="any-model")
    again = await gauge_client.achat([{"role": "user", "content": "Say hi."}], model="any-model")
    assert first.text and first.text == again.text  # the simulator is deterministic
"""

PRICES = "gauge_prices =\n    sim-agent-x 0.5 1.5\n    sim-judge 2.5 10\n    loopback-model 1 2\n"


def _properties(junit: Path) -> dict[str, dict[str, str]]:
    """Per test case name, its <property> elements."""
    out: dict[str, dict[str, str]] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        out[case.get("name", "")] = {p.get("name", ""): p.get("value", "") for p in case.iter("property")}
    return out


def _check_ledger(pytester: pytest.Pytester, junit: Path) -> dict[str, list[LedgerRecord]]:
    """The tests' merged ledger: every line carries its test's node id, and each test's junit
    properties sum exactly its lines."""
    rows = read_jsonl(pytester.path / "gauge-out" / "_tests" / "agent_runs.jsonl")
    by_test: dict[str, list[LedgerRecord]] = {}
    for row in rows:
        record = LedgerRecord.from_json(row)
        assert record.suite == "_tests" and record.task_id == record.work
        assert record.call_id.startswith(record.work + "#")
        by_test.setdefault(record.work, []).append(record)
    props = _properties(junit)
    for node, records in by_test.items():
        spent = spent_of(records)
        shown = props[node.split("::")[-1]]
        assert shown["gauge_calls"] == str(spent.calls)
        assert shown["gauge_input_tokens"] == str(spent.input_tokens)
        if spent.cost is None:
            assert shown["gauge_cost_usd"] == "unknown"
        else:
            assert float(shown["gauge_cost_usd"]) == pytest.approx(spent.cost, abs=1e-8)
    return by_test


def _refusal(output: str) -> tuple[int, int]:
    """(calls made, the number of the call not sent) from a budget failure."""
    match = re.search(
        r"gauge_budget of test_plain.py::test_over_budget is (\d+) tokens; spent \$[\d.]+ and (\d+) tokens"
        r" in (\d+) calls; not sent: agent call #(\d+) to model ",
        output,
    )
    assert match, output
    budget, spent, calls, refused = (int(g) for g in match.groups())
    assert spent <= budget and refused == calls + 1
    return calls, refused


def test_plain_tests_on_the_sim_backend(pytester: pytest.Pytester) -> None:
    pytester.makeini(f"[pytest]\ngauge_backend = sim\ngauge_seed = 7\n{PRICES}")
    pytester.makepyfile(test_plain=PLAIN.format(model="sim-agent-x", winner="first", tokens=400) + EXTRA_SIM)
    junit = pytester.path / "junit.xml"
    result = pytester.runpytest_subprocess(  # its async test runs under anyio's plugin, on both backends
        "-p", "no:cacheprovider", "-p", "anyio", "-n", "0", f"--junitxml={junit}"
    )
    result.assert_outcomes(passed=4, failed=2)
    out = result.stdout.str()
    calls, _ = _refusal(out)
    assert "the test caught the refusal; it still fails" in out
    assert re.search(
        r"is \$0\.000000; spent \$0\.000000 and 0 tokens in 0 calls; not sent: agent call #1", out
    )
    assert "pytest-gauge: cost by test" in out
    assert re.search(r"test_plain.py::test_compare\s+2\s+\d+\s+\$", out)
    by_test = _check_ledger(pytester, junit)
    assert {n: len(r) for n, r in by_test.items()} == {
        "test_plain.py::test_async_chat[asyncio]": 2,
        "test_plain.py::test_async_chat[trio]": 2,
        "test_plain.py::test_chat": 1,
        "test_plain.py::test_compare": 2,
        "test_plain.py::test_over_budget": calls,
    }


@pytest.mark.slow
def test_plain_tests_live_against_the_loopback_server_then_replayed(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Live: a judge that always prefers slot A is inconsistent; nothing past a budget reaches the server;
    the key appears nowhere. Replay: the same tests from their exported cassettes, no request sent."""
    pytester.makeini(f"[pytest]\n{PRICES}")
    pytester.makepyfile(test_plain=PLAIN.format(model="loopback-model", winner="inconsistent", tokens=200))
    junit = pytester.path / "junit.xml"
    with LoopbackServer(faults=FaultPlan(expected_key=KEY, judge_prefers="A")) as server:
        monkeypatch.setenv("TAOTOKEN_API_KEY", KEY)
        monkeypatch.setenv("TAOTOKEN_BASE_URL", server.base_url)
        monkeypatch.setenv("TAOTOKEN_JUDGE_MODEL", "loopback-model")
        live = pytester.runpytest_subprocess(
            "-p", "no:cacheprovider", "-n", "0", "--gauge-backend=live", f"--junitxml={junit}"
        )
        live.assert_outcomes(passed=2, failed=1)
        calls, _ = _refusal(live.stdout.str())
        assert server.requests_total == 1 + 2 + calls  # chat, both judge orders, the budgeted calls
        assert KEY not in live.stdout.str() + live.stderr.str() + junit.read_text()
        written = [p for p in (pytester.path / "gauge-out").rglob("*") if p.is_file()]
        assert written and not any(KEY in p.read_text(encoding="utf-8") for p in written)
        by_test = _check_ledger(pytester, junit)
        assert len(by_test["test_plain.py::test_over_budget"]) == calls
        cassettes = pytester.path / "cassettes"
        exported = export_cassettes(pytester.path / ".gauge-cache", "_tests", cassettes)
        assert len(exported.exported) == 1 + 2 + calls
        replay = pytester.runpytest_subprocess(
            "-p",
            "no:cacheprovider",
            "-n",
            "0",
            "--gauge-backend=replay",
            f"--gauge-cassettes={cassettes}",
            "-k",
            "chat or compare",
        )
        replay.assert_outcomes(passed=2)
        assert server.requests_total == 1 + 2 + calls


@pytest.mark.slow
def test_calls_are_attributed_to_their_tests_under_xdist(pytester: pytest.Pytester, mini_suite: Path) -> None:
    """With a Suite in the run and two workers: each test's calls land once, under its node id, and not
    in the suite's ledger; a suite agent's model answers a suite task as that agent."""
    (mini_suite / "test_own.py").write_text(
        "import pytest\n\n"
        "@pytest.mark.parametrize('n', [1, 2, 3, 4])\n"
        "def test_own(gauge_client, gauge_ledger, request, n):\n"
        "    prompt = 'Name the three plan tiers: basic, pro and enterprise.'\n"
        "    for _ in range(n):\n"
        "        reply = gauge_client.chat([{'role': 'user', 'content': prompt}], model='sim-agent-x')\n"
        "    assert gauge_ledger.spent(request.node).calls == n\n"
    )
    result = pytester.runpytest_subprocess("suites", "-p", "no:cacheprovider", "-n", "2", "-k", "own or m01")
    result.assert_outcomes(passed=4 + 6)
    rows = read_jsonl(pytester.path / "gauge-out" / "_tests" / "agent_runs.jsonl")
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["work"]] = counts.get(row["work"], 0) + 1
    assert counts == {f"suites/mini/test_own.py::test_own[{n}]": n for n in (1, 2, 3, 4)}
    assert len({row["call_id"] for row in rows}) == len(rows) == 10
    suite_ledger = read_jsonl(pytester.path / "gauge-out" / "mini" / "agent_runs.jsonl")
    assert suite_ledger and all(r["suite"] == "mini" for r in suite_ledger)


# ----- pure parts ------------------------------------------------------------------------------


def _order(first_in_a: bool, preferred: str) -> JudgedOrder:
    return JudgedOrder(first_in_a, preferred, 0.8, 0.4, "why", "{}", None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("ab", "ba", "winner"),
    [
        ("first", "first", "first"),
        ("second", "second", "second"),
        ("tie", "tie", "tie"),
        ("first", "second", "inconsistent"),  # a judge that always picks slot A
        ("tie", "first", "inconsistent"),
        ("error", "first", "error"),
    ],
)
def test_both_orders_combine_into_one_winner(ab: str, ba: str, winner: str) -> None:
    comparison = combine(_order(True, ab), _order(False, ba))
    assert comparison.winner == winner
    assert comparison.rewards == ((None, None) if winner == "error" else (0.8, 0.4))


def _record(
    call: str, attempt: int, usage: Usage | None, cost: float | None, cached: bool = False
) -> LedgerRecord:
    return LedgerRecord(
        run_id="r",
        call_id=call,
        attempt=attempt,
        status="ok" if usage else "http_503",
        suite="_tests",
        task_id="t.py::a",
        role="agent",
        model="m",
        strategy="single",
        work="t.py::a",
        usage=usage,
        usage_missing=False,
        latency_s=0.0,
        finish_reason="stop",
        cache_hit=cached,
        cost=cost,
    )


def test_spend_counts_calls_attempts_and_only_what_was_sent() -> None:
    records = [
        _record("t.py::a#1", 1, None, None),  # a 503, retried
        _record("t.py::a#1", 2, Usage(10, 5), 0.25),
        _record("t.py::a#2", 1, Usage(10, 5), 0.25, cached=True),  # costs nothing now
    ]
    assert spent_of(records) == Spent(
        calls=2, attempts=2, cached=1, input_tokens=10, output_tokens=5, cost=0.25
    )
    unpriced = [*records, _record("t.py::a#3", 1, Usage(1, 1), None)]
    assert spent_of(unpriced).cost is None and spent_of(unpriced).tokens == 17


def test_cost_by_test_table_lists_the_costliest_tests_and_the_total() -> None:
    spends = {f"t.py::t{i}": Spent(1, 1, 0, 10 * i, 0, 0.001 * i) for i in range(1, 13)}
    lines = render_cost_by_test(spends, limit=2)
    assert lines[1].split() == ["t.py::t12", "1", "120", "$0.012000"]
    assert lines[2].startswith("t.py::t11") and lines[3] == "... 10 more tests"
    assert lines[4].split() == ["total", "12", "780", "$0.078000"]


@pytest.mark.slow  # two pytest subprocesses; the doctor's checks run in process in test_doctor.py
def test_gauge_doctor_flag_runs_the_doctor(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    with LoopbackServer() as server:
        monkeypatch.setenv("TAOTOKEN_API_KEY", "sk-doctor-secret")
        monkeypatch.setenv("TAOTOKEN_BASE_URL", server.base_url)
        ok = pytester.runpytest_subprocess("--gauge-doctor", "-p", "no:cacheprovider")
        assert ok.ret == 0
        assert "sk-doctor-secret" not in ok.stdout.str()
        monkeypatch.setenv("TAOTOKEN_BASE_URL", server.base_url + "/v1")  # doubled /v1
        bad = pytester.runpytest_subprocess("--gauge-doctor", "-p", "no:cacheprovider")
        assert bad.ret != 0
        assert server.base_url in bad.stdout.str()
