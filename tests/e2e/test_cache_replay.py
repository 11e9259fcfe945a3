"""The response cache, offline replay, cassettes, prices as configuration and budgets,
each through real pytest runs of the mini suite against the loopback server answering like the simulator."""

from __future__ import annotations

import json
import re
import socket
import sys
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy
import pytest

from pytest_gauge._internal.analysis import elo_report
from pytest_gauge._internal.gateway import backends
from pytest_gauge._internal.report.format import without_volatile
from pytest_gauge.testing import LoopbackServer
from pytest_gauge.testing.simserver import sim_responder
from tests.helpers import normalised, read_jsonl, run_inprocess

CASES = 5 * 3 * 2
KEY = "sk-gauge-SECRET-cache-7d1e"
MODELS = ("sim-agent-x", "sim-agent-y", "sim-agent-z", "sim-user", "sim-judge")
# input and output USD per million tokens; distinct per model so a mix-up changes the totals
PRICES: dict[str, list[float]] = {
    "sim-agent-x": [1.0, 2.0],
    "sim-agent-y": [1.5, 3.0],
    "sim-agent-z": [0.5, 1.0],
    "sim-user": [0.25, 0.5],
    "sim-judge": [2.0, 4.0],
}
SPENT_HEADING = "## Spent this run"
# Imported before any pytester snapshot: a snapshot's restore drops modules first imported during a test, and
# numpy cannot be imported twice in one process (the in-process run's finish imports it through elo_report).
PRELOADED = (numpy, elo_report)


@pytest.fixture
def server(mini_suite: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopbackServer]:
    srv = LoopbackServer(sim_responder(mini_suite / "test_mini.py", seed=7)).start()
    monkeypatch.setenv("TAOTOKEN_API_KEY", KEY)
    monkeypatch.setenv("TAOTOKEN_BASE_URL", srv.base_url)
    monkeypatch.delenv("GAUGE_PRICES", raising=False)
    yield srv
    srv.stop()


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """A pytest run of the mini suite (the live backend unless ``args`` says otherwise): in this process
    (seconds cheaper) unless it starts xdist workers or replays (replay guards the process's sockets)."""
    if "-n" in args or any("replay" in a for a in args):
        return pytester.runpytest_subprocess(
            "suites", "-p", "no:cacheprovider", "--gauge-backend", "live", *args
        )
    return run_inprocess(pytester, "suites", "--gauge-backend", "live", *args)


def suite_out(pytester: pytest.Pytester, out: str) -> Path:
    return pytester.path / out / "mini"


def cache_files(folder: Path) -> dict[str, bytes]:
    """Every response entry under a cache folder, by key, with its bytes."""
    root = folder / "responses"
    return {p.stem: p.read_bytes() for p in sorted(root.glob("*/*.json"))} if root.is_dir() else {}


def without_spent_section(token_cost: str) -> str:
    """``token_cost.md`` without its "Spent this run" sections (each up to the next ``## `` heading):
    the spending itself and, when the run sent live attempts, their split by key variable."""
    assert SPENT_HEADING in token_cost, "token_cost.md has no 'Spent this run' section"
    while SPENT_HEADING in token_cost:
        head, _, tail = token_cost.partition(SPENT_HEADING)
        rest = tail.split("\n## ", 1)
        token_cost = head + ("## " + rest[1] if len(rest) == 2 else "")
    return token_cost


def case_results(folder: Path) -> list[str]:
    """The per-case records, without the fields allowed to differ between runs."""
    return normalised(read_jsonl(folder / "pairs/pair_results.jsonl"))


def ledger_cost(rows: list[dict[str, Any]]) -> float:
    return float(sum(r["cost"] for r in rows if r["status"] == "ok" and not r["cache_hit"]))


# --------------------------------------------------------------------------------------------- 1. cache


@pytest.mark.slow
def test_second_run_is_fully_cached_and_only_spending_differs(
    pytester: pytest.Pytester, server: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GAUGE_PRICES", json.dumps(PRICES))  # so costs are figures, not "unknown"
    cache = "--gauge-cache-dir=cache"
    run(pytester, "--gauge-cache", "use", cache, "--gauge-out", "first").assert_outcomes(passed=CASES)
    first_requests = server.requests_total
    assert first_requests > CASES  # agents, users and judges all went out
    server.reset_counters()
    run(pytester, "--gauge-cache", "use", cache, "--gauge-out", "second").assert_outcomes(passed=CASES)
    assert server.requests_total == 0

    first, second = suite_out(pytester, "first"), suite_out(pytester, "second")
    for name in ("pairs/pair_results.jsonl", "reports/pairwise_table.md", "reports/conclusion.md"):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name

    cost1 = (first / "reports/token_cost.md").read_text(encoding="utf-8")
    cost2 = (second / "reports/token_cost.md").read_text(encoding="utf-8")
    assert cost1 != cost2  # the spent-this-run figures differ ...
    assert without_spent_section(without_volatile(cost1)) == without_spent_section(without_volatile(cost2))
    assert "Fully cached run: nothing was spent ($0)." in cost2

    m1 = json.loads((first / "reports/metrics.json").read_text(encoding="utf-8"))
    m2 = json.loads((second / "reports/metrics.json").read_text(encoding="utf-8"))
    spent1, spent2 = m1.pop("spent_this_run"), m2.pop("spent_this_run")
    assert m1.pop("volatile")["latency_s"] and m2.pop("volatile")["latency_s"] == []  # no live attempt
    assert m1 == m2
    ledger1 = read_jsonl(first / "agent_runs.jsonl")
    ledger2 = read_jsonl(second / "agent_runs.jsonl")
    assert len(ledger2) == len(ledger1)
    assert all(r["cache_hit"] is True for r in ledger2)
    # run 1: what reached the server is live; identical requests of other cases were shared within the run
    assert sum(1 for r in ledger1 if not r["cache_hit"]) == first_requests
    assert spent1["live_calls"] == first_requests and spent1["cached_calls"] == len(ledger1) - first_requests
    assert spent2["live_calls"] == 0 and spent2["cached_calls"] == len(ledger1)
    assert spent2["live_tokens"] == 0 and spent2["spent_usd"] == 0 < spent1["spent_usd"]
    assert spent1["spent_usd"] == pytest.approx(ledger_cost(ledger1), abs=1e-6)
    nominal = sum(r["cost"] for r in ledger1)  # every call at what it cost when made, cached or not
    assert m2["costs"]["total_cost"] == pytest.approx(nominal, abs=1e-6) and nominal > spent1["spent_usd"]
    assert spent2["cached_tokens"] == spent1["live_tokens"] + spent1["cached_tokens"] > 0


# --------------------------------------------------------------------------------------- 2. cassettes


def export(pytester: pytest.Pytester, cache_dir: str, to: str) -> pytest.RunResult:
    return pytester.run(
        sys.executable,
        "-m",
        "pytest_gauge",
        "cassettes",
        "export",
        "--suite",
        "mini",
        "--to",
        to,
        "--cache-dir",
        cache_dir,
    )


GUARD_MESSAGE = "network access is disabled"


@pytest.mark.slow
def test_cassettes_replay_offline_and_a_missing_one_is_named_without_any_socket(
    pytester: pytest.Pytester, server: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    run(pytester, "--gauge-cache-dir=cache", "--gauge-out", "live").assert_outcomes(passed=CASES)
    recorded = server.requests_total
    exported = export(pytester, "cache", "cassettes")
    assert exported.ret == 0, exported.stderr.str()
    cassettes = pytester.path / "cassettes"
    files = sorted(cassettes.glob("*/*.json"))
    assert len(files) == recorded
    assert not any(KEY.encode() in p.read_bytes() for p in cassettes.rglob("*") if p.is_file())
    port = server.port
    server.stop()

    monkeypatch.delenv("TAOTOKEN_API_KEY")
    replay = ("--gauge-backend=replay", "--gauge-cassettes", "cassettes")
    result = run(pytester, *replay, "--gauge-cache-dir=empty-cache", "--gauge-out", "replayed")
    result.assert_outcomes(passed=CASES)
    assert case_results(suite_out(pytester, "replayed")) == case_results(suite_out(pytester, "live"))
    assert all(r["cache_hit"] for r in read_jsonl(suite_out(pytester, "replayed") / "agent_runs.jsonl"))
    assert cache_files(pytester.path / "empty-cache") == {}  # replay reads the cassettes only, writes nothing

    judge = next(p for p in files if json.loads(p.read_text(encoding="utf-8"))["meta"]["role"] == "judge")
    meta = json.loads(judge.read_text(encoding="utf-8"))["meta"]
    judge.unlink()

    # a listener on the old port would count any connection the replay run made to the gateway's address
    sentinel = LoopbackServer(port=port).start()
    connects: list[Any] = []
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def counted_connect(self: socket.socket, address: Any) -> None:
        connects.append(address)
        real_connect(self, address)

    def counted_connect_ex(self: socket.socket, address: Any) -> int:
        connects.append(address)
        return real_connect_ex(self, address)

    monkeypatch.setattr(socket.socket, "connect", counted_connect)
    monkeypatch.setattr(socket.socket, "connect_ex", counted_connect_ex)
    try:
        missed = pytester.runpytest_inprocess(  # importlib: this process may hold another `test_mini`
            "suites",
            "-p",
            "no:cacheprovider",
            "--import-mode=importlib",
            *replay,
            "--gauge-cache-dir=empty-cache",
            "--gauge-out",
            "missed",
        )
    finally:
        monkeypatch.undo()
        sentinel.stop()
    assert backends.replay_guard.active is False  # switched off again at the end of the run
    assert missed.ret == pytest.ExitCode.TESTS_FAILED
    outcomes = missed.parseoutcomes()
    assert outcomes.get("failed", 0) >= 1 and outcomes["failed"] + outcomes.get("passed", 0) == CASES
    out = missed.stdout.str()
    assert "no recorded response for judge call" in out
    for part in (f"role {meta['role']}", f"model {meta['model']}", f"task {meta['task_id']}", meta["work"]):
        assert part in out, part
    assert "--gauge-backend=live" in out and "cassettes export" in out  # how to record it
    assert connects == []
    assert GUARD_MESSAGE not in out
    assert sentinel.connections_total == 0 and sentinel.requests_total == 0


def test_replay_guard_refuses_socket_connections() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    was_active = backends.replay_guard.active
    try:
        backends.install_replay_guard()
        assert backends.replay_guard.active
        with pytest.raises(ConnectionRefusedError, match=GUARD_MESSAGE):
            socket.create_connection(("127.0.0.1", port), timeout=5)
    finally:
        backends.replay_guard.active = was_active
    with socket.create_connection(("127.0.0.1", port), timeout=5):  # the listener itself was fine
        pass
    listener.close()


# ------------------------------------------------------------------------------------------- 3. xdist


@pytest.mark.slow
def test_cold_cache_with_two_workers_sends_each_distinct_request_once(
    pytester: pytest.Pytester, server: LoopbackServer
) -> None:
    """Two workers racing for the same requests (each extra worker costs a process and its imports)."""
    run(pytester, "--gauge-cache-dir=cold", "-n", "2").assert_outcomes(passed=CASES)
    distinct = {json.dumps(b, sort_keys=True) for b in server.bodies}
    assert len(server.bodies) == server.requests_total
    assert server.requests_total == len(distinct)
    ledger = read_jsonl(suite_out(pytester, "gauge-out") / "agent_runs.jsonl")
    assert sum(1 for r in ledger if r["status"] == "ok" and not r["cache_hit"]) == len(distinct)
    assert len(ledger) > len(distinct)  # the suite does repeat requests: they were answered once
    assert len(cache_files(pytester.path / "cold")) == len(distinct)


# ------------------------------------------------------------------------------------------ 4. budget


@pytest.mark.slow
def test_budget_of_a_quarter_stops_spending(
    pytester: pytest.Pytester, server: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GAUGE_PRICES", json.dumps(PRICES))
    run(pytester, "--gauge-cache", "off", "--gauge-out", "full").assert_outcomes(passed=CASES)
    full_ledger = read_jsonl(suite_out(pytester, "full") / "agent_runs.jsonl")
    assert {r["model"] for r in full_ledger} == set(MODELS) == set(PRICES)  # every call priced
    metrics = json.loads((suite_out(pytester, "full") / "reports/metrics.json").read_text(encoding="utf-8"))
    full_cost = metrics["costs"]["total_cost"]
    assert full_cost == pytest.approx(ledger_cost(full_ledger), abs=1e-6) and full_cost > 0  # 6 decimals
    largest_call = max(r["cost"] for r in full_ledger)

    server.reset_counters()
    budget = full_cost / 4
    concurrency = 4
    result = run(
        pytester,
        "--gauge-cache",
        "off",
        "--gauge-out",
        "capped",
        "--junitxml",
        "capped.xml",
        f"--gauge-budget-usd={budget!r}",
        f"--gauge-max-concurrency={concurrency}",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    assert re.search(r"budget exhausted: run budget \$\d+\.\d+: spent \$\d+\.\d+ so far", out), out
    capped_ledger = read_jsonl(suite_out(pytester, "capped") / "agent_runs.jsonl")
    assert len([r for r in capped_ledger if r["status"] == "ok"]) == server.requests_total
    spent = ledger_cost(capped_ledger)
    assert 0 < spent <= budget + concurrency * largest_call
    assert server.requests_total < len(full_ledger)

    cases = ElementTree.parse(pytester.path / "capped.xml").getroot().iter("testcase")
    failures = [f for c in cases for f in c.findall("failure") + c.findall("error")]
    assert failures and all("budget exhausted" in (f.get("message", "") + (f.text or "")) for f in failures)
    outcomes = result.parseoutcomes()
    assert outcomes["failed"] == len(failures) and outcomes.get("passed", 0) + len(failures) == CASES


# ------------------------------------------------------------------------------------------ 5. prices


def md_tables(text: str) -> list[list[dict[str, str]]]:
    """Every markdown table of a report, as rows of {header: cell}."""
    tables: list[list[dict[str, str]]] = []
    header: list[str] | None = None
    for line in text.splitlines():
        if not line.startswith("| "):
            header = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
            tables.append([])
        elif not set(cells[0]) <= {"-", ":"}:
            tables[-1].append(dict(zip(header, cells, strict=True)))
    return tables


def test_model_without_a_price_costs_unknown_and_is_warned_about(
    pytester: pytest.Pytester, server: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GAUGE_PRICES", json.dumps({m: p for m, p in PRICES.items() if m != "sim-user"}))
    result = run(pytester, "--gauge-cache", "off")
    result.assert_outcomes(passed=CASES)
    text = (suite_out(pytester, "gauge-out") / "reports/token_cost.md").read_text(encoding="utf-8")
    by_role, by_model = md_tables(text)[:2]
    role_cost = {r["role"]: r["cost"] for r in by_role}
    assert role_cost["user_sim"] == "unknown"
    assert role_cost["**total**"].startswith("unknown")
    assert role_cost["agent"].startswith("$") and role_cost["judge"].startswith("$")
    models = {r["model"]: r for r in by_model}
    assert models["sim-user"]["cost"] == "unknown"
    for model in ("sim-agent-x", "sim-agent-y", "sim-agent-z", "sim-judge"):  # the priced ones, by hand
        row = models[model]
        tokens_in, tokens_out = (int(row[k].replace(",", "")) for k in ("input tokens", "output tokens"))
        expected = tokens_in / 1e6 * PRICES[model][0] + tokens_out / 1e6 * PRICES[model][1]
        assert float(row["cost"].lstrip("$")) == pytest.approx(expected, abs=1e-6), model
    warnings = [line for line in result.stdout.lines if "no price" in line]
    assert len(warnings) == 1 and "'sim-user'" in warnings[0] and "unknown" in warnings[0]
    assert any("GAUGE_PRICES" in line for line in result.stdout.lines)  # and where to set it


# ------------------------------------------------------------------------------------------- 6. modes


@pytest.mark.slow
def test_refresh_calls_again_and_overwrites_and_off_keeps_nothing(
    pytester: pytest.Pytester, server: LoopbackServer
) -> None:
    run(pytester, "--gauge-cache-dir=cache", "--gauge-out", "cold").assert_outcomes(passed=CASES)
    cold = server.requests_total
    before = cache_files(pytester.path / "cache")
    assert len(before) == cold

    server.reset_counters()
    refresh = run(pytester, "--gauge-cache=refresh", "--gauge-cache-dir=cache", "--gauge-out", "refreshed")
    refresh.assert_outcomes(passed=CASES)
    assert server.requests_total == cold
    after = cache_files(pytester.path / "cache")
    assert after.keys() == before.keys()
    old_runs = {json.loads(v)["run_id"] for v in before.values()}
    new_runs = {json.loads(v)["run_id"] for v in after.values()}
    assert len(old_runs) == len(new_runs) == 1 and old_runs != new_runs  # every entry rewritten by run 2
    refreshed = read_jsonl(suite_out(pytester, "refreshed") / "agent_runs.jsonl")
    assert sum(1 for r in refreshed if not r["cache_hit"]) == cold  # no answer came from the old entries

    server.reset_counters()
    off = run(pytester, "--gauge-cache=off", "--gauge-cache-dir=cache", "--gauge-out", "off")
    off.assert_outcomes(passed=CASES)
    calls = len(read_jsonl(suite_out(pytester, "cold") / "agent_runs.jsonl"))
    assert calls > cold  # the cold run shared identical requests within the run ...
    assert server.requests_total == calls  # ... with the cache off every call goes out: nothing was read
    assert not any(r["cache_hit"] for r in read_jsonl(suite_out(pytester, "off") / "agent_runs.jsonl"))
    assert cache_files(pytester.path / "cache") == after  # and nothing was written


def _truncating(responder: Any, share: int = 5) -> Any:
    """The responder with one agent answer in ``share`` cut by ``max_tokens`` (finish_reason ``length``),
    chosen by the request's content so a re-run asks the same (a cut verdict would fail its case)."""
    import hashlib

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        out = responder(body)
        digest = hashlib.sha256(json.dumps(body["messages"], sort_keys=True).encode()).digest()
        choice = (out.get("choices") or [{}])[0]
        content = (choice.get("message") or {}).get("content")
        agent = str(body.get("model", "")).startswith("sim-agent")
        if agent and digest[0] % share == 0 and isinstance(content, str) and content:
            choice["message"]["content"] = content[: len(content) // 2]
            choice["finish_reason"] = "length"
        return dict(out)

    return answer


@pytest.mark.slow
def test_truncated_answers_are_cached_and_replay_from_exported_cassettes(
    pytester: pytest.Pytester, server: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.responder = _truncating(server.responder)
    run(pytester, "--gauge-cache-dir=cache", "--gauge-out", "live").assert_outcomes(passed=CASES)
    rows = read_jsonl(suite_out(pytester, "live") / "agent_runs.jsonl")
    assert any(r["finish_reason"] == "length" for r in rows)  # some answers were cut
    sent = server.requests_total
    run(pytester, "--gauge-cache-dir=cache", "--gauge-out", "again").assert_outcomes(passed=CASES)
    assert server.requests_total == sent  # the re-run sends nothing, cut answers included
    assert export(pytester, "cache", "cassettes").ret == 0
    server.stop()
    monkeypatch.delenv("TAOTOKEN_API_KEY")
    replay = ("--gauge-backend=replay", "--gauge-cassettes", "cassettes", "--gauge-cache-dir=clean")
    result = run(pytester, *replay, "--gauge-out", "replayed")
    result.assert_outcomes(passed=CASES)
    assert "no recorded response" not in result.stdout.str()
    assert case_results(suite_out(pytester, "replayed")) == case_results(suite_out(pytester, "live"))


@pytest.mark.slow  # the full tier only: five plugin runs in one test (~5 s CPU)
def test_a_poisoned_or_damaged_cache_entry_is_a_miss_reported_once(
    pytester: pytest.Pytester, server: LoopbackServer
) -> None:
    """An edited reply, another key's entry copied over this one, a changed stored
    request, an entry of the wrong shape and garbage bytes are each refused as a miss (sent again, so
    the results equal the clean run's), with one warning line for the run and no traceback."""
    cache = "--gauge-cache-dir=cache"
    run(pytester, "--gauge-cache", "use", cache, "--gauge-out", "first").assert_outcomes(passed=CASES)
    files = sorted((pytester.path / "cache" / "responses").glob("*/*.json"))
    edited, copied, changed, shaped, garbage, source = files[:6]
    entry = json.loads(edited.read_text())
    entry["response"]["choices"][0]["message"]["content"] = "<script>alert(1)</script>"
    edited.write_text(json.dumps(entry))
    copied.write_bytes(source.read_bytes())
    entry = json.loads(changed.read_text())
    entry["request"]["messages"][-1]["content"] = "something else"
    changed.write_text(json.dumps(entry))
    entry = json.loads(shaped.read_text())
    entry["response"] = {"choices": "not a list"}
    shaped.write_text(json.dumps(entry))
    garbage.write_bytes(b"\xff\xfe garbage")
    server.reset_counters()
    result = pytester.runpytest_subprocess(  # a process of its own: the warning goes to its stderr
        "suites", "-p", "no:cacheprovider", "--gauge-backend", "live", "--gauge-cache", "use", cache,
        "--gauge-out", "second",
    )  # fmt: skip
    result.assert_outcomes(passed=CASES)
    text = result.stdout.str() + result.stderr.str()
    assert text.count("pytest-gauge warning: 5 cache entries refused") == 1 and "Traceback" not in text
    assert server.requests_total == 5  # exactly the five refused entries were sent again
    assert case_results(suite_out(pytester, "first")) == case_results(suite_out(pytester, "second"))


def _strip_digest_and_edit(path: Path) -> None:
    """The reply edited and its ``response_digest`` deleted: what the tamper check once let through."""
    entry = json.loads(path.read_text(encoding="utf-8"))
    entry["response"]["choices"][0]["message"]["content"] = "edited: nothing to prove it"
    del entry["response_digest"]
    path.write_text(json.dumps(entry), encoding="utf-8")


def test_an_entry_without_its_digest_is_sent_again_not_served_and_not_replayed(
    pytester: pytest.Pytester, server: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Entries of this version always carry ``response_digest``: one without it (edited, or an older
    version's) is a miss, said in one line; a replay sends nothing, and its line says so."""
    cache = "--gauge-cache-dir=cache"
    run(pytester, cache, "--gauge-out", "first").assert_outcomes(passed=CASES)
    files = sorted((pytester.path / "cache" / "responses").glob("*/*.json"))
    assert all("response_digest" in json.loads(p.read_text()) for p in files)
    assert export(pytester, "cache", "cassettes").ret == 0
    _strip_digest_and_edit(files[0])
    server.reset_counters()
    again = run(pytester, cache, "--gauge-out", "second")
    again.assert_outcomes(passed=CASES)
    assert server.requests_total == 1  # the entry was sent again, not served
    assert case_results(suite_out(pytester, "first")) == case_results(suite_out(pytester, "second"))
    assert (
        "edited: nothing to prove it" not in (suite_out(pytester, "second") / "agent_runs.jsonl").read_text()
    )

    cassette = pytester.path / "cassettes" / files[0].parent.name / files[0].name
    _strip_digest_and_edit(cassette)
    server.stop()
    monkeypatch.delenv("TAOTOKEN_API_KEY")
    replay = ("--gauge-backend=replay", "--gauge-cassettes", "cassettes", "--gauge-cache-dir=clean")
    result = run(pytester, *replay, "--gauge-out", "replayed")
    text = result.stdout.str() + result.stderr.str()
    assert text.count("pytest-gauge warning: 1 cache entries refused") == 1, text[-3000:]
    assert "sent again" not in text and "not replayed" in text
    assert (
        "edited: nothing to prove it"
        not in (suite_out(pytester, "replayed") / "agent_runs.jsonl").read_text()
    )
