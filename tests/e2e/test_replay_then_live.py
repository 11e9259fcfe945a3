"""``--gauge-cache replay-then-live``: after one agent's prompt changes, a run answers every recorded request
from the cache (or exported cassettes) and sends only that agent's calls and the judge calls that depend on
them, named, counted and priced apart; counted at the loopback server answering like the simulator."""

from __future__ import annotations

import copy
import io
import json
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy
import pytest

from pytest_gauge._internal.analysis import elo_report
from pytest_gauge._internal.cli import main
from pytest_gauge._internal.report.format import fmt_usd
from pytest_gauge.testing import LoopbackServer
from pytest_gauge.testing.simserver import sim_responder
from tests.helpers import read_jsonl, run_inprocess

CASES = 5 * 3 * 2
CHANGED = "agent_y"
PROMPT = "Answer in the fewest words you can."
PRICES = {m: [1.0, 2.0] for m in ("sim-agent-x", "sim-agent-y", "sim-agent-z", "sim-user", "sim-judge")}
PRELOADED = (numpy, elo_report)  # imported before any pytester snapshot (see test_cache_replay.py)


class Counting:
    """The simulator's responder, counting the requests per model it answers; a model told ``PROMPT`` in its
    system message says so in its reply (the simulator itself ignores system prompts), as a real model
    would answer differently: what the user simulator and the judge then read changes too."""

    def __init__(self, module: Path) -> None:
        self.respond = sim_responder(module, seed=7)
        self.models: Counter[str] = Counter()

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        self.models[str(body.get("model"))] += 1
        payload = self.respond(body)
        system = [m for m in body.get("messages", []) if m.get("role") == "system"]
        message = payload["choices"][0]["message"]
        if any(PROMPT in str(m.get("content")) for m in system) and message.get("content"):
            payload = copy.deepcopy(payload)
            payload["choices"][0]["message"]["content"] = "In short: " + message["content"]
        return payload


@pytest.fixture
def counted(mini_suite: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[LoopbackServer, Counting]]:
    counting = Counting(mini_suite / "test_mini.py")
    srv = LoopbackServer(counting).start()
    monkeypatch.setenv("TAOTOKEN_API_KEY", "sk-gauge-replay-then-live")
    monkeypatch.setenv("TAOTOKEN_BASE_URL", srv.base_url)
    monkeypatch.setenv("GAUGE_PRICES", json.dumps(PRICES))
    yield srv, counting
    srv.stop()


def _change_prompt(suite: Path) -> None:
    module = suite / "test_mini.py"
    text = module.read_text()
    old = 'ModelAgent("agent_y", "sim-agent-y", '
    assert old in text
    module.write_text(text.replace(old, old + f"system_prompt={PROMPT!r}, "))


def _belongs_to_changed(work: str, pairs: dict[str, tuple[str, str]]) -> bool:
    kind, rest = work.split("/", 1)
    if kind == "transcript":
        return rest.split("/")[1] == CHANGED
    case = rest.rsplit("/", 2)[0]
    return CHANGED in pairs[case]


@pytest.mark.slow
@pytest.mark.parametrize("source", ["cache", "cassettes"])
def test_only_the_changed_agent_and_its_judge_calls_are_sent(
    pytester: pytest.Pytester, mini_suite: Path, counted: tuple[LoopbackServer, Counting], source: str
) -> None:
    """Recorded in the cache, replayed from it; or exported as cassettes and replayed from them into an
    empty cache."""
    server, counting = counted
    backend = ("suites", "--gauge-backend", "live")
    run_inprocess(pytester, *backend, "--gauge-cache-dir=cache", "--gauge-out", "first").assert_outcomes(
        passed=CASES
    )
    replay = [*backend, "--gauge-cache-dir=cache"]
    if source == "cassettes":
        said = io.StringIO()
        argv = ["cassettes", "export", "--suite", "mini", "--to", str(pytester.path / "cass")]
        argv += ["--cache-dir", str(pytester.path / "cache"), "--out", str(pytester.path / "first")]
        assert main(argv, environ={}, out=said, err=said) == 0, said.getvalue()
        replay = [*backend, "--gauge-cache-dir=empty", "--gauge-cassettes", "cass"]
    recorded = Counter(counting.models)
    assert recorded["sim-agent-x"] and recorded[f"sim-agent-{CHANGED[-1]}"] and recorded["sim-judge"]

    _change_prompt(mini_suite)
    server.reset_counters()
    counting.models.clear()
    done = run_inprocess(pytester, *replay, "--gauge-cache-mode", "replay-then-live", "--gauge-out", "second")
    done.assert_outcomes(passed=CASES)

    sent = counting.models
    assert sent["sim-agent-x"] == 0 and sent["sim-agent-z"] == 0  # unchanged agents: all replayed
    assert sent["sim-agent-y"] == recorded["sim-agent-y"]  # every call of the changed agent was sent
    out = pytester.path / "second" / "mini"
    pairs = {
        r["case_id"]: (r["agent_left"], r["agent_right"])
        for r in read_jsonl(out / "pairs/pair_results.jsonl")
    }
    ledger = read_jsonl(out / "agent_runs.jsonl")
    live = [r for r in ledger if not r["cache_hit"]]
    assert len(live) == server.requests_total == sum(sent.values())
    strays = [r["work"] for r in live if not _belongs_to_changed(r["work"], pairs)]
    assert strays == [], "calls sent that the changed prompt does not touch"
    judged = [r for r in ledger if r["role"] == "judge"]
    depending = [r for r in judged if _belongs_to_changed(r["work"], pairs)]
    assert depending and all(not r["cache_hit"] for r in depending)  # the changed agent's cases: judged anew
    assert all(r["cache_hit"] for r in judged if r not in depending)  # the other pair's: replayed
    assert sent["sim-judge"] == len(depending) and sent["sim-user"] > 0

    calls = len({r["call_id"] for r in live})
    replayed = len({r["call_id"] for r in ledger if r["cache_hit"]} - {r["call_id"] for r in live})
    cost = sum(r["cost"] for r in live)
    done.stdout.fnmatch_lines(
        [f"pytest-gauge replay-then-live: {calls} calls sent live (*), {replayed} replayed;*"]
    )
    token_cost = (out / "reports" / "token_cost.md").read_text(encoding="utf-8")
    section = token_cost.split("## Sent live: not recorded", 1)[1]
    assert f"{calls} calls had no recorded answer" in section and f"{replayed} were replayed" in section
    assert f"Spent on them: {fmt_usd(cost)}," in section
    listed = set(re.findall(r"^- `([^`]+)`$", section, flags=re.MULTILINE))
    assert listed == {r["work"] for r in live}
