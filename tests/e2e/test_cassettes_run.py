"""``cassettes export --run``: two runs at two seeds into one cache, each exported alone, give each run's
own entries (those its ledger's calls used), and one run's cassettes replay that run offline."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy
import pytest

from pytest_gauge._internal.analysis import elo_report
from pytest_gauge.testing import LoopbackServer
from pytest_gauge.testing.simserver import sim_responder
from tests.helpers import read_jsonl, run_inprocess

KEY = "sk-gauge-SECRET-cassette-run-4b2a"
CASES = 5 * 3 * 2
PRELOADED = (numpy, elo_report)  # imported before any pytester snapshot (numpy cannot be imported twice)


@pytest.fixture
def server(mini_suite: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopbackServer]:
    srv = LoopbackServer(sim_responder(mini_suite / "test_mini.py", seed=7)).start()
    monkeypatch.setenv("TAOTOKEN_API_KEY", KEY)
    monkeypatch.setenv("TAOTOKEN_BASE_URL", srv.base_url)
    monkeypatch.delenv("GAUGE_PRICES", raising=False)
    yield srv
    srv.stop()


def _export(pytester: pytest.Pytester, to: str, *args: str) -> pytest.RunResult:
    return pytester.run(
        sys.executable, "-m", "pytest_gauge", "cassettes", "export", "--suite", "mini", "--to", to,
        "--cache-dir", "cache", *args,
    )  # fmt: skip


def _exported(folder: Path) -> set[str]:
    return {p.stem for p in folder.glob("*/*.json")}


def _live_keys(out: Path) -> set[str]:
    """The keys the run's live calls wrote (read from the cache entries' own run id, not the ledger)."""
    run_id = {r["run_id"] for r in read_jsonl(out / "mini" / "agent_runs.jsonl")}
    found = set()
    for path in (out.parent / "cache" / "responses").glob("*/*.json"):
        if json.loads(path.read_text(encoding="utf-8")).get("run_id") in run_id:
            found.add(path.stem)
    return found


@pytest.mark.slow
def test_two_runs_into_one_cache_export_each_runs_own_entries(
    pytester: pytest.Pytester, server: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for seed, out in ((1, "a"), (2, "b")):
        done = run_inprocess(
            pytester, "suites", "--gauge-backend", "live", "--gauge-cache-dir=cache",
            "--gauge-seed", str(seed), "--gauge-out", out,
        )  # fmt: skip
        done.assert_outcomes(passed=CASES)
    a, b = pytester.path / "a", pytester.path / "b"
    assert _live_keys(a) and _live_keys(b)

    assert _export(pytester, "all").ret == 0
    assert _export(pytester, "only-a", "--run", "a").ret == 0
    run_b = read_jsonl(b / "mini" / "agent_runs.jsonl")[0]["run_id"]
    by_id = _export(pytester, "only-b", "--run", str(run_b), "--out", "b")
    assert by_id.ret == 0, by_id.stderr.str()
    only_a, only_b = _exported(pytester.path / "only-a"), _exported(pytester.path / "only-b")

    # each run's export holds every entry it wrote, and nothing only the other run wrote
    assert _live_keys(a) <= only_a and _live_keys(b) <= only_b
    assert not only_a & (_live_keys(b) - _live_keys(a)) and not only_b & (_live_keys(a) - _live_keys(b))
    assert only_a | only_b == _exported(pytester.path / "all") and only_a != only_b

    wrong = _export(pytester, "none", "--run", "no-such-run", "--out", "a")
    assert wrong.ret == 1 and "holds no call of suite mini by run 'no-such-run'" in wrong.stderr.str()

    # run a's cassettes alone replay run a offline, with its verdicts
    server.stop()
    monkeypatch.delenv("TAOTOKEN_API_KEY")
    replayed = pytester.runpytest_subprocess(
        "suites", "-p", "no:cacheprovider", "--gauge-backend=replay", "--gauge-cassettes", "only-a",
        "--gauge-cache-dir=empty", "--gauge-seed", "1", "--gauge-out", "r",
    )  # fmt: skip
    replayed.assert_outcomes(passed=CASES)
    pairs = [
        (r["case_id"], r["judge_choice"])
        for r in read_jsonl(pytester.path / "r" / "mini" / "pairs" / "pair_results.jsonl")
    ]
    assert pairs == [
        (r["case_id"], r["judge_choice"]) for r in read_jsonl(a / "mini" / "pairs" / "pair_results.jsonl")
    ]
