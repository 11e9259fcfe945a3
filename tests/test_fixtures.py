"""The fixtures offered to users' own tests: gauge_client (recorded in the ledger) and gauge_ledger;
and the --gauge-doctor flag."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_gauge.testing.server import LoopbackServer
from tests.conftest import read_jsonl


def test_gauge_client_calls_are_ledgered(pytester: pytest.Pytester, mini_suite: Path) -> None:
    (mini_suite / "test_adhoc.py").write_text(
        "def test_adhoc_call(gauge_client, gauge_ledger, gauge_options):\n"
        "    prompt = 'Name the three plan tiers: basic, pro and enterprise.'\n"
        "    reply = gauge_client.chat([{'role': 'user', 'content': prompt}],\n"
        "                              model='sim-agent-x', role='agent', task_id='m01')\n"
        "    assert reply.content and reply.usage is not None\n"
        "    assert gauge_ledger.path.is_file()  # this process's ledger file (the engine works alongside)\n"
        "    assert gauge_options.backend == 'sim'\n"
    )
    result = pytester.runpytest_subprocess(
        "suites", "-p", "no:cacheprovider", "--gauge-cache", "off", "-k", "adhoc or m01"
    )
    result.assert_outcomes(passed=7)  # the ad-hoc test + 6 cases of task m01
    ledger = read_jsonl(pytester.path / "gauge-out" / "mini" / "agent_runs.jsonl")
    adhoc = [r for r in ledger if r["work"].startswith("adhoc/")]
    assert len(adhoc) == 1 and adhoc[0]["role"] == "agent" and adhoc[0]["model"] == "sim-agent-x"


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
