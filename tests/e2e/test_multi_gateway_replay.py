"""A response cache that has seen two gateways: the mini suite run live through two loopback servers
(two base URLs) into one cache, the cassettes exported once per gateway, and each export replayed
offline from a fresh cache folder, answering every call of the run (no miss) with the results the
live run through that gateway had."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_gauge.testing import LoopbackServer
from pytest_gauge.testing.simserver import sim_responder
from tests.e2e.test_cache_replay import (
    CASES,
    KEY,
    PRELOADED,
    cache_files,
    case_results,
    export,
    run,
    suite_out,
)
from tests.helpers import read_jsonl

_PRELOADED = PRELOADED  # numpy imported before any pytester snapshot (see tests/e2e/test_cache_replay.py)


@pytest.fixture
def servers(
    mini_suite: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[LoopbackServer, LoopbackServer]]:
    """Two gateways answering alike, each on its own loopback port."""
    one = LoopbackServer(sim_responder(mini_suite / "test_mini.py", seed=7)).start()
    two = LoopbackServer(sim_responder(mini_suite / "test_mini.py", seed=7)).start()
    monkeypatch.setenv("TAOTOKEN_API_KEY", KEY)
    monkeypatch.delenv("GAUGE_PRICES", raising=False)
    yield one, two
    one.stop()
    two.stop()


def export_gateway(pytester: pytest.Pytester, to: str, gateway: str | None) -> pytest.RunResult:
    """``cassettes export`` of the mini suite from ``cache``: ``gateway``'s entries, else the latest's."""
    if gateway is None:
        return export(pytester, "cache", to)
    return pytester.run(
        sys.executable, "-m", "pytest_gauge",
        "cassettes", "export", "--suite", "mini", "--to", to, "--cache-dir", "cache", "--gateway", gateway,
    )  # fmt: skip


@pytest.mark.slow
def test_a_cache_of_two_gateways_replays_each_from_its_own_cassettes(
    pytester: pytest.Pytester, servers: tuple[LoopbackServer, LoopbackServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    one, two = servers
    for server, out in ((one, "live-one"), (two, "live-two")):
        monkeypatch.setenv("TAOTOKEN_BASE_URL", server.base_url)
        run(pytester, "--gauge-cache-dir=cache", "--gauge-out", out).assert_outcomes(passed=CASES)
    # replay keys requests by gateway: the second gateway was asked everything again, not served the first's
    assert one.requests_total > 0 and two.requests_total == one.requests_total
    assert len(cache_files(pytester.path / "cache")) == one.requests_total + two.requests_total

    latest = export_gateway(pytester, "cassettes-two", None)
    assert latest.ret == 0, latest.stderr.str()
    recorded_two = json.loads((pytester.path / "cassettes-two" / "recording.json").read_text())
    gateway_two = recorded_two["suites"]["mini"]["gateway"]
    assert str(two.port) in gateway_two
    note = latest.stderr.str()
    assert f"{one.requests_total} entries of suite mini were recorded through another gateway" in note
    gateway_one = note.split("another gateway (", 1)[1].split(")", 1)[0]
    assert str(one.port) in gateway_one
    chosen = export_gateway(pytester, "cassettes-one", gateway_one)
    assert chosen.ret == 0, chosen.stderr.str()
    recorded_one = json.loads((pytester.path / "cassettes-one" / "recording.json").read_text())
    assert recorded_one["suites"]["mini"]["gateway"] == gateway_one
    for folder, server in (("cassettes-one", one), ("cassettes-two", two)):
        assert len(list((pytester.path / folder).glob("*/*.json"))) == server.requests_total
    one.stop()
    two.stop()

    monkeypatch.delenv("TAOTOKEN_API_KEY")
    monkeypatch.delenv("TAOTOKEN_BASE_URL")
    for cassettes, live in (("cassettes-one", "live-one"), ("cassettes-two", "live-two")):
        fresh, out = f"fresh-{cassettes}", f"replayed-{cassettes}"
        replay = ("--gauge-backend=replay", "--gauge-cassettes", cassettes)
        result = run(pytester, *replay, f"--gauge-cache-dir={fresh}", "--gauge-out", out)
        result.assert_outcomes(passed=CASES)
        ledger = read_jsonl(suite_out(pytester, out) / "agent_runs.jsonl")
        assert ledger and all(r["cache_hit"] for r in ledger), cassettes  # no call missed
        assert case_results(suite_out(pytester, out)) == case_results(suite_out(pytester, live))
        assert cache_files(pytester.path / fresh) == {}
