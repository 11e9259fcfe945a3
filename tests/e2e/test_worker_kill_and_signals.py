"""Nothing lost under ``-n 2``: a fault mix, a ``kill -9`` of one worker, SIGINT and SIGTERM to
pytest mid-run. In every run the ledger's live attempt lines equal the requests the loopback server
received, every JSON-lines file parses, the finished cases have their outputs and reports, and a re-run
from the cache completes with results identical to a fault-free run.

When to stop a run is decided from the server's side, never by sleeping: the server holds every chat
request after the first ``HOLD_AFTER`` (``FaultPlan.hold_after``), and the signal is sent once all
``CONCURRENCY`` cross-process slots are held there, so every attempt with a write-ahead line has reached
the server and none can start. Bounded waits (generous deadlines) only guard against a hang.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_gauge.testing import FaultPlan, LoopbackServer
from pytest_gauge.testing.simserver import sim_responder
from tests.helpers import run_inprocess

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
MINI = Path(__file__).resolve().parents[1] / "data" / "mini"
CONCURRENCY = 3
HOLD_AFTER = 40  # a run of the mini suite sends about 55 requests
DEADLINE = 120.0  # a hang guard, not a speed target
RESULT_FILES = (
    "pairs/pair_results.jsonl",
    "agents/agent_x.jsonl",
    "agents/agent_y.jsonl",
    "agents/agent_z.jsonl",
)


@pytest.fixture(scope="module")
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer(sim_responder(MINI / "test_mini.py", seed=7)) as srv:
        yield srv


def _folder(root: Path, name: str) -> Path:
    folder = root / name
    shutil.copytree(MINI, folder / "suites" / "mini")
    (folder / "pytest.ini").write_text("[pytest]\ngauge_seed = 7\n", encoding="utf-8")
    return folder


def _start(
    folder: Path, server: LoopbackServer, workers: int = 2, *extra: str, group: bool = False
) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "TAOTOKEN_API_KEY": "sk-stops",
        "TAOTOKEN_BASE_URL": server.base_url,
        "PYTHONPATH": str(ROOT),
    }
    command = [sys.executable, "-m", "pytest", "suites", "-p", "no:cacheprovider", *_options(workers), *extra]
    return subprocess.Popen(
        command, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        start_new_session=group,
    )  # fmt: skip


def _finish(proc: subprocess.Popen[bytes]) -> tuple[int, str]:
    output, _ = proc.communicate(timeout=DEADLINE)
    return proc.returncode, output.decode(errors="replace")


def _run(
    folder: Path,
    server: LoopbackServer,
    faults: FaultPlan,
    workers: int = 2,
    pytester: pytest.Pytester | None = None,
) -> tuple[int, str, int]:
    """A whole run against a fresh fault plan: exit code, output, chat requests the server received. With
    ``pytester`` the run (its controller under ``-n 2``) is made in this process: a run that no test
    signals or kills needs no process of its own, and saves an interpreter start and the imports."""
    server.faults = faults
    server.reset_counters()
    if pytester is None:
        code, text = _finish(_start(folder, server, workers))
    else:
        code, text = _inprocess(pytester, folder, server, workers)
    return code, text, server.stats()["chat_requests_total"]


def _inprocess(
    pytester: pytest.Pytester, folder: Path, server: LoopbackServer, workers: int
) -> tuple[int, str]:
    """``_start``'s run inside this process: its variables set for the run only, output and errors joined."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TAOTOKEN_API_KEY", "sk-stops")
        mp.setenv("TAOTOKEN_BASE_URL", server.base_url)
        result = run_inprocess(pytester, "suites", *_options(workers), folder=folder)
    return int(result.ret), f"{result.stdout.str()}\n{result.stderr.str()}"


def _options(workers: int) -> list[str]:
    """The run's options after ``suites``: workers, the live backend against the server, its limits."""
    command = ["-n", str(workers), "--gauge-backend", "live", "--gauge-max-concurrency", str(CONCURRENCY)]
    return [*command, "--gauge-no-progress", "--gauge-max-retries", "8"]


def _wait_until_held(server: LoopbackServer, proc: subprocess.Popen[bytes]) -> None:
    end = time.monotonic() + DEADLINE
    while server.held < CONCURRENCY and proc.poll() is None and time.monotonic() < end:
        time.sleep(0.02)
    assert server.held == CONCURRENCY, "the run never filled every slot at the server"


def _stopped_run(
    folder: Path, server: LoopbackServer, act: Callable[[subprocess.Popen[bytes]], None], group: bool = False
) -> tuple[int, str, int, int]:
    """A run that ``act`` stops once every slot is held at the server: its exit code and output, the
    chat requests received when ``act`` ran and at the end (``group``: pytest in a process group of its
    own, as a terminal's Ctrl-C reaches it and its workers)."""
    server.faults = FaultPlan(hold_after=HOLD_AFTER)
    server.reset_counters()
    proc = _start(folder, server, group=group)
    try:
        _wait_until_held(server, proc)
        at_act = server.stats()["chat_requests_total"]
        act(proc)
        code, text = _finish(proc)
    finally:
        server.release()
        if proc.poll() is None:
            proc.kill()
    return code, text, at_act, server.stats()["chat_requests_total"]


def _jsonl_rows(folder: Path) -> dict[str, list[dict[str, Any]]]:
    """Every JSON-lines file the run left (outputs), each line parsed (a cut line fails here)."""
    return {
        str(path.relative_to(folder)): [json.loads(line) for line in path.read_text().splitlines() if line]
        for path in sorted((folder / "gauge-out").rglob("*.jsonl"))
    }


def _live_attempts(folder: Path) -> list[dict[str, Any]]:
    ledger = folder / "gauge-out" / "mini" / "agent_runs.jsonl"
    return [r for r in _jsonl_rows(folder)[str(ledger.relative_to(folder))] if not r["cache_hit"]]


def _check_run(folder: Path, received: int) -> dict[str, Any]:
    """The acceptance checks every run shares; returns the manifest."""
    rows = _jsonl_rows(folder)
    assert rows, "no outputs"
    live = _live_attempts(folder)
    assert len(live) == received  # exactly one ledger line per request that reached the server
    assert len({(r["worker"], r["call_id"], r["attempt"], r["request"]) for r in live}) == len(live)
    every = rows["gauge-out/mini/agent_runs.jsonl"]  # one line per attempt, always
    assert len({(r["call_id"], r["attempt"]) for r in every}) == len(every)
    manifest: dict[str, Any] = json.loads((folder / "gauge-out" / "mini" / "manifest.json").read_text())
    assert manifest["cases_recorded"] == len(rows["gauge-out/mini/pairs/pair_results.jsonl"])
    assert (folder / "gauge-out" / "mini" / "reports" / "conclusion.md").is_file()
    for entry in (folder / ".gauge-cache").rglob("*.json"):
        json.loads(entry.read_text())  # every cache entry whole
    return manifest


def _stable(value: Any) -> Any:
    """A record without its timings (``latency_s`` of tool calls), the one field that varies run to run."""
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k != "latency_s"}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def _results(folder: Path) -> dict[str, list[Any]]:
    """The run's results: case records and transcripts, each line parsed, timings left out."""
    out = folder / "gauge-out" / "mini"
    return {
        name: [_stable(json.loads(x)) for x in (out / name).read_text().splitlines()] for name in RESULT_FILES
    }


@pytest.fixture(scope="module")
def fault_free(server: LoopbackServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Any]]:
    folder = _folder(tmp_path_factory.mktemp("stops"), "fault_free")
    code, text, received = _run(folder, server, FaultPlan(), workers=0)
    assert code == 0, text[-3000:]
    _check_run(folder, received)
    return _results(folder)


def _resumes_from_cache(
    folder: Path, server: LoopbackServer, fault_free: dict[str, list[Any]], pytester: pytest.Pytester
) -> None:
    """A re-run (in this process) completes the suite with the fault-free results, and pays no finished
    call again."""
    paid = {r["request"] for r in _live_attempts(folder) if r["status"] == "ok"}
    code, text, received = _run(folder, server, FaultPlan(), workers=0, pytester=pytester)
    assert code == 0, text[-3000:]
    manifest = _check_run(folder, received)
    assert "interrupted" not in manifest
    assert not paid & {r["request"] for r in _live_attempts(folder)}
    assert _results(folder) == fault_free


def test_a_fault_mix_loses_nothing_and_gives_the_fault_free_results(
    server: LoopbackServer, fault_free: dict[str, list[Any]], tmp_path: Path, pytester: pytest.Pytester
) -> None:
    folder = _folder(tmp_path, "faults")
    mix = FaultPlan(
        rate_429=0.10, retry_after="0", rate_500=0.05, rate_malformed=0.02, rate_reset=0.01, seed=5
    )
    code, text, received = _run(folder, server, mix, pytester=pytester)
    assert code == 0, text[-3000:]
    _check_run(folder, received)
    statuses = {r["status"] for r in _live_attempts(folder)}
    assert {"ok", "http_429", "http_500"} <= statuses
    assert "Traceback" not in text
    assert _results(folder) == fault_free


@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM"])
def test_a_signal_to_pytest_stops_the_run_with_reports_and_a_resumable_cache(
    server: LoopbackServer,
    fault_free: dict[str, list[Any]],
    tmp_path: Path,
    pytester: pytest.Pytester,
    how: str,
) -> None:
    folder = _folder(tmp_path, how)
    code, text, at_signal, received = _stopped_run(
        folder, server, lambda proc: proc.send_signal(getattr(signal, how))
    )
    assert code != 0, text[-3000:]
    assert received == at_signal  # no request started after the signal (the held ones were abandoned)
    manifest = _check_run(folder, received)
    label = manifest["interrupted"]
    assert label.startswith("interrupted: ") and label.endswith(" cases")
    assert label in text  # the terminal says so too
    conclusion = (folder / "gauge-out" / "mini" / "reports" / "conclusion.md").read_text()
    assert label[0].upper() + label[1:] in conclusion
    interrupted = [r for r in _live_attempts(folder) if r["status"] == "interrupted"]
    assert len(interrupted) == CONCURRENCY and all(r["possibly_billed"] for r in interrupted)
    _resumes_from_cache(folder, server, fault_free, pytester)


@pytest.mark.parametrize("signals", [("SIGINT", "SIGINT"), ("SIGINT", "SIGTERM", "SIGINT")])
def test_a_second_signal_during_the_stop_loses_nothing(
    server: LoopbackServer,
    fault_free: dict[str, list[Any]],
    tmp_path: Path,
    pytester: pytest.Pytester,
    signals: tuple[str, ...],
) -> None:
    """Ctrl-C pressed twice (0.3 s apart, to the process group, controller and
    workers): the second is absorbed ("stopping, please wait"), a third forces the exit; either way the
    ledger has one line per request the server received, the reports are written and marked
    interrupted, and the re-run sends only what is missing."""
    folder = _folder(tmp_path, "-".join(signals))

    def press(proc: subprocess.Popen[bytes]) -> None:
        for i, name in enumerate(signals):
            if i:
                time.sleep(0.3)
            os.killpg(proc.pid, getattr(signal, name))

    code, text, at_signal, received = _stopped_run(folder, server, press, group=True)
    assert code != 0, text[-3000:]
    assert "stopping, please wait" in text, text[-3000:]
    assert received == at_signal
    manifest = _check_run(folder, received)
    assert manifest["interrupted"].startswith("interrupted: ") and manifest["interrupted"] in text
    assert "Traceback" not in text
    _resumes_from_cache(folder, server, fault_free, pytester)


def test_kill_9_of_a_worker_loses_no_ledger_line(
    server: LoopbackServer, fault_free: dict[str, list[Any]], tmp_path: Path, pytester: pytest.Pytester
) -> None:
    folder = _folder(tmp_path, "kill")

    def kill_a_busy_worker(proc: subprocess.Popen[bytes]) -> None:
        """Kill -9 a worker with a request held at the server (a write-ahead line without its outcome:
        every slot is held, so one worker at least has one), then let the other go on."""
        (run_dir,) = (folder / "gauge-out" / ".gauge-run").glob("*")
        for worker in ("gw0", "gw1"):
            text = (run_dir / f"ledger-{worker}.jsonl").read_text()
            rows = [json.loads(line) for line in text.splitlines() if line.endswith("}")]  # whole lines
            sent = sum(1 for r in rows if r.get("status") == "sent")
            if sent > len(rows) - sent:
                os.kill(int((run_dir / f"worker-{worker}.pid").read_text()), signal.SIGKILL)
                break
        server.release()  # the other worker goes on; xdist reports the crash

    code, text, _, received = _stopped_run(folder, server, kill_a_busy_worker)
    assert code != 0 and "crashed" in text, text[-3000:]
    _check_run(folder, received)
    assert any(r["status"] == "interrupted" for r in _live_attempts(folder))
    _resumes_from_cache(folder, server, fault_free, pytester)


def test_an_unknown_model_sends_at_most_one_request_per_worker(
    server: LoopbackServer, tmp_path: Path, pytester: pytest.Pytester
) -> None:
    folder = _folder(tmp_path, "unknown")
    code, text, _ = _run(
        folder, server, FaultPlan(unknown_models=frozenset({"sim-agent-z"})), pytester=pytester
    )
    assert code != 0
    assert sum(1 for b in server.bodies if b["model"] == "sim-agent-z") <= 2
    assert "does not know the agent model 'sim-agent-z'" in text and "Bad Request" not in text
    assert "Traceback" not in text


def test_a_dripping_server_stops_the_run_after_the_first_call_times_out(
    server: LoopbackServer, tmp_path: Path
) -> None:
    folder = _folder(tmp_path, "drip")
    server.faults = FaultPlan(drip_seconds=0.5)  # headers at once, then a byte every 0.5 s
    server.reset_counters()
    code, text = _finish(_start(folder, server, 2, "--gauge-timeout", "1", "--gauge-max-retries", "1"))
    received = server.stats()["chat_requests_total"]
    assert code != 0
    # each worker's first call: 2 attempts of at most 1 s, then the run stops (timeout x attempts, not
    # one timeout per call of the suite); nothing else was sent
    assert received <= 2 * 2, received
    assert "before any call of this run was answered" in text and "Traceback" not in text
    assert len(_live_attempts(folder)) == received


def test_a_model_that_will_not_answer_in_time_is_stopped_once_and_the_others_run(tmp_path: Path) -> None:
    """One agent's model drips its answers under --gauge-timeout 5; after 3 timeouts
    in a row it is stopped run-wide (one message), its cases are not run, the other models' are. A
    server of its own: its dripping connections outlive the run."""
    folder = _folder(tmp_path, "slow-model")
    with LoopbackServer(sim_responder(MINI / "test_mini.py", seed=7)) as server:
        server.faults = FaultPlan(drip_seconds=0.5, drip_models=frozenset({"sim-agent-z"}))
        proc = _start(folder, server, 2, "--gauge-timeout", "5", "-rs")
        output, _ = proc.communicate(timeout=90.0)  # a bound on the wait (about 45 s here), not a target
        dripped = sum(1 for b in server.bodies if b["model"] == "sim-agent-z")
        received = server.stats()["chat_requests_total"]
    code, text = proc.returncode, output.decode(errors="replace")
    assert code != 0, text[-3000:]
    assert "Traceback" not in text
    section = text.split("pytest-gauge: stopped models", 1)[1]
    stops = [line for line in section.splitlines() if "transcript(s) failed, not scored" not in line]
    assert "\n".join(stops).count("timed out 3 times in a row") == 1, text[-4000:]  # the per-agent
    # count of failed transcripts below quotes the same cause once more, as its first cause
    assert "not run: the agent model 'sim-agent-z' was stopped" in text
    path = folder / "gauge-out/mini/pairs/pair_results.jsonl"
    pairs = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert len(pairs) == 10 and all("agent_z" not in json.dumps(p) for p in pairs)  # x-y: 5 tasks, 2 orders
    assert dripped <= 2 * (3 + CONCURRENCY), dripped  # at most one row of timeouts per worker
    assert len(_live_attempts(folder)) == received
