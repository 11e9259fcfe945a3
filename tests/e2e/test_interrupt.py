"""Ctrl-C during a live run stops promptly and leaves whole files behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_gauge.testing import LoopbackServer
from pytest_gauge.testing.simserver import sim_responder


@pytest.mark.slow
def test_ctrl_c_stops_promptly_without_corrupting_ledger_or_cache(
    pytester: pytest.Pytester, mini_suite: Path
) -> None:
    with LoopbackServer(sim_responder(mini_suite / "test_mini.py", seed=7), latency=0.3) as server:
        env = {**os.environ, "TAOTOKEN_API_KEY": "sk-interrupt", "TAOTOKEN_BASE_URL": server.base_url}
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pytest",
                "suites",
                "-p",
                "no:cacheprovider",
                "--gauge-backend",
                "live",
                "--gauge-max-concurrency",
                "2",
            ],
            cwd=pytester.path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        # bounded wait for the run to start: generous, since starting pytest on a loaded machine is slow
        deadline = time.monotonic() + 300
        while server.requests_total < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.requests_total >= 3
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=300)  # bounds a hang; no timing assertion
        requests_at_exit = server.requests_total
    text = output.decode()
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, text[-2000:]
    assert "KeyboardInterrupt" in text
    assert requests_at_exit < 5 * 3 * 2 * 4  # far from a full run: the work stopped
    out = pytester.path / "gauge-out" / "mini"
    ledger_lines = (out / "agent_runs.jsonl").read_text().splitlines()
    assert ledger_lines and all(json.loads(line)["call_id"] for line in ledger_lines)
    for entry in (pytester.path / ".gauge-cache" / "responses").rglob("*.json"):
        json.loads(entry.read_text())  # every cache entry is whole
    assert not list((pytester.path / ".gauge-cache").rglob("*.tmp"))
    assert not (pytester.path / "gauge-out" / ".gauge-run").exists()
