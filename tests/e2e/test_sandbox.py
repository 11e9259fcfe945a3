"""The sandbox every program the plugin starts runs in (docs/protocol.md#programs-and-sandboxing), with the
real bubblewrap: a hostile program agent in a live run (loopback gateway) finds the gateway key in no
process's environment and cannot write outside its workspace while its own model's calls still work; a
``command_succeeds`` command that prints ``$GITHUB_TOKEN`` and writes outside the workspace does
neither; one that prints 3 GB leaves the run small; a program that exits 1 on every turn fails the run;
Codex against a gateway answering 500 makes only the plugin's own retries. Without bubblewrap the tests
skip with the install command; under CI (``CI`` / ``GAUGE_REQUIRE_BROWSER``) they fail instead."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_gauge._internal.run.sandbox import sandbox_problem
from pytest_gauge.testing import LoopbackServer
from pytest_gauge.testing.responders import ResponderError
from pytest_gauge.testing.simserver import sim_responder
from tests.helpers import DATA, ROOT, read_jsonl, run_pytest_subprocess

pytestmark = pytest.mark.slow

KEY = "sk-gauge-sandbox-gateway-key-5c1e9d7a"
GITHUB_TOKEN = "ghp_sandboxTestToken0123456789abcdefABCD"
INI = "[pytest]\ngauge_backend = sim\ngauge_seed = 7\n"


@pytest.fixture(autouse=True)
def bwrap() -> None:
    """Bubblewrap present and working, or a skip naming the install (a failure under CI)."""
    problem = sandbox_problem()
    if problem is not None:
        why = f"{problem}: apt-get install bubblewrap"
        if os.environ.get("CI") or os.environ.get("GAUGE_REQUIRE_BROWSER"):
            pytest.fail(f"{why} (required under CI: .ci/run installs it)")
        pytest.skip(why)


def _suite(folder: Path, name: str, module: str, tasks: str | None = None) -> Path:
    """``tests/data/sandbox/<module>`` as the test module of ``suites/<name>`` with the shared tasks."""
    target = folder / "suites" / name
    target.mkdir(parents=True)
    (target / "tasks.jsonl").write_text(tasks or (DATA / "sandbox" / "tasks.jsonl").read_text())
    shutil.copy(DATA / "sandbox" / module, target / f"test_{name}.py")
    (folder / "pytest.ini").write_text(INI)
    return target


def _outputs_hold(folder: Path, secret: str) -> list[str]:
    """The files under ``folder`` whose bytes contain ``secret``."""
    return [str(p) for p in folder.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


@pytest.fixture
def loopback(tmp_path: Path) -> Iterator[LoopbackServer]:
    srv = LoopbackServer(sim_responder(DATA / "sandbox" / "suite_probe.py", seed=7)).start()
    yield srv
    srv.stop()


def test_a_probe_program_sees_no_key_writes_nowhere_else_and_its_calls_work(
    tmp_path: Path, loopback: LoopbackServer
) -> None:
    outside = tmp_path / "escaped.txt"
    suite = _suite(tmp_path / "run", "probe", "suite_probe.py")
    probe = (DATA / "sandbox" / "probe.py").read_text()
    (suite / "probe.py").write_text(probe.replace("@KEY@", KEY).replace("@OUTSIDE@", str(outside)))
    env = {"TAOTOKEN_API_KEY": KEY, "TAOTOKEN_BASE_URL": loopback.base_url}
    code, out = run_pytest_subprocess(
        tmp_path / "run", "suites", "--gauge-backend", "live", "--gauge-cache", "off", env=env
    )
    assert code == 0, out[-3000:]
    seen = [json.loads(p.read_text()) for p in (tmp_path / "run" / "gauge-out").rglob("probe.json")]
    assert len(seen) == 2, out[-3000:]  # one transcript per task
    for probe_saw in seen:
        assert probe_saw["key_in"] == [] and probe_saw["processes"] <= 4, probe_saw  # its own PID namespace
        assert probe_saw["own_script"] == "OSError" and probe_saw["status"] == 200, probe_saw
        assert probe_saw["cwd"] == "/workspace" and probe_saw["home"] == "/home/agent", probe_saw
        assert not any("TAOTOKEN" in name for name in probe_saw["env"]), probe_saw
    assert not outside.exists()  # what it wrote there went to its own /tmp
    assert not (suite / "probe.py").read_text().endswith("# changed")
    assert len(list((tmp_path / "run" / "gauge-out").rglob("inside.txt"))) == 2  # its workspace is its own
    rows = read_jsonl(tmp_path / "run" / "gauge-out" / "probe" / "agent_runs.jsonl")
    probe_calls = [r for r in rows if r["role"] == "agent" and r["model"] == "sim-agent-y"]
    assert len(probe_calls) == 2 and all(r["status"] == "ok" for r in probe_calls)
    assert not _outputs_hold(tmp_path / "run" / "gauge-out", KEY)


def _command_tasks(command: str, timeout: float = 60.0) -> str:
    """A one-task ``tasks.jsonl`` whose success is ``command`` (``sh -c``) succeeding in the workspace."""
    rule = {"type": "command_succeeds", "command": ["sh", "-c", command], "timeout": timeout}
    task = {"task_id": "c1", "category": "information_retrieval", "task_prompt": "Name the plan tiers."}
    return json.dumps({"format_version": 1}) + "\n" + json.dumps({**task, "success_criteria": [rule]}) + "\n"


def test_a_workspace_command_gets_no_secret_and_cannot_write_outside(tmp_path: Path) -> None:
    outside = tmp_path / "escaped.txt"
    _suite(
        tmp_path / "run",
        "cmds",
        "suite_commands.py",
        _command_tasks(f"env; touch {outside}; echo token=$GITHUB_TOKEN; exit 3"),
    )
    env = {
        "GITHUB_TOKEN": GITHUB_TOKEN,
        "NPM_TOKEN": "npm-secret-value-0123456789",
        "DB_PASSWORD": "hunter2hunter2",
    }
    code, out = run_pytest_subprocess(tmp_path / "run", "suites", "--gauge-cache", "off", env=env)
    assert code == 0, out[-3000:]
    assert not outside.exists()
    [row] = read_jsonl(tmp_path / "run" / "gauge-out" / "cmds" / "agents" / "model_agent.jsonl")
    [check] = row["workspace_checks"].values()
    assert not check["passed"] and "exited with 3, expected 0: " in check["detail"], check
    assert check["detail"].endswith("PWD=/workspace\ntoken="), check  # no token in its environment
    for secret in env.values():
        assert not _outputs_hold(tmp_path / "run" / "gauge-out", secret), secret


def test_a_command_printing_3_gb_leaves_the_run_under_500_mb(tmp_path: Path) -> None:
    _suite(
        tmp_path / "run", "cmds", "suite_commands.py", _command_tasks("yes | head -c 3G; echo the-end", 600)
    )
    runner = (
        "import resource, subprocess, sys\n"
        "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
        "print(done.returncode, peak)\n"
        "print(done.stdout[-3000:] + done.stderr[-2000:])\n"
    )
    argv = [sys.executable, "-c", runner, sys.executable, "-m", "pytest", "-p", "no:randomly", "suites"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTEST_ADDOPTS": "--gauge-cache off"}
    env = {k: v for k, v in env.items() if not k.startswith("PYTEST_XDIST")}
    done = subprocess.run(argv, cwd=tmp_path / "run", env=env, capture_output=True, text=True, timeout=900)
    code, peak_kb = (int(x) for x in done.stdout.splitlines()[0].split())
    print("peak RSS of the run (kB):", peak_kb)
    assert code == 0, done.stdout
    assert peak_kb < 500 * 1024, f"peak RSS {peak_kb} kB"
    [row] = read_jsonl(tmp_path / "run" / "gauge-out" / "cmds" / "agents" / "model_agent.jsonl")
    [check] = row["workspace_checks"].values()
    assert check["passed"], check


def test_a_program_failing_every_turn_fails_the_run_naming_its_error(tmp_path: Path) -> None:
    _suite(tmp_path / "run", "broken", "suite_broken_program.py")
    code, out = run_pytest_subprocess(tmp_path / "run", "suites", "--gauge-cache", "off")
    assert code == 1, out[-3000:]
    cause = "fatal: the service rejected our credentials"
    assert "4 failed" in out and out.count("gateway failure: broken: sh exited with status 1") == 1, out
    assert "agent broken: 2 transcript(s) failed, not scored" in out and cause in out
    conclusion = (tmp_path / "run" / "gauge-out" / "broken" / "reports" / "conclusion.md").read_text()
    assert "agent broken: 2 transcript(s) failed, not scored: broken: sh exited with status 1" in conclusion
    assert cause in conclusion


def test_http_agents_that_cannot_be_reached_or_configured_fail_the_run(tmp_path: Path) -> None:
    _suite(tmp_path / "run", "dead", "suite_dead_service.py")
    code, out = run_pytest_subprocess(tmp_path / "run", "suites", "--gauge-cache", "off")
    assert code == 1, out[-3000:]
    assert "agent dead: 2 transcript(s) failed, not scored" in out and "could not reach" in out, out[-3000:]
    assert "agent unset: 2 transcript(s) failed, not scored" in out and "GAUGE_SANDBOX_TEST_UNSET" in out
    pairs = tmp_path / "run" / "gauge-out" / "dead" / "pairs" / "pair_results.jsonl"
    assert not pairs.exists() or read_jsonl(pairs) == []  # every pair has a failing agent: no verdict


def test_an_unsandboxed_run_says_so_in_every_report(tmp_path: Path) -> None:
    _suite(tmp_path / "run", "broken", "suite_broken_program.py")
    code, out = run_pytest_subprocess(
        tmp_path / "run", "suites", "--gauge-unsandboxed", "--gauge-cache", "off"
    )
    assert code == 1 and "agent broken: 2 transcript(s) failed" in out, out[-3000:]  # it ran, and failed
    said = "unsandboxed: programs and workspace commands ran without the sandbox (--gauge-unsandboxed)"
    assert said in out
    assert said in (tmp_path / "run" / "gauge-out" / "broken" / "reports" / "conclusion.md").read_text()


CODEX = "npm install -g @openai/codex@0.169.0"


def _failing_codex(body: dict[str, Any]) -> dict[str, Any]:
    """The simulator's answers, except a 500 for every call of Codex's model."""
    if body.get("model") == "sim-codex":
        raise ResponderError(500, "the model is down", type="server_error")
    return SIM(body)


SIM = sim_responder(DATA / "sandbox" / "suite_codex.py", seed=7)


def test_codex_against_a_failing_gateway_makes_only_the_plugins_retries(tmp_path: Path) -> None:
    if shutil.which("codex") is None:
        if os.environ.get("CI") or os.environ.get("GAUGE_REQUIRE_BROWSER"):
            pytest.fail(f"codex not installed: {CODEX} (required under CI)")
        pytest.skip(f"codex not installed: {CODEX}")
    _suite(tmp_path / "run", "codexdown", "suite_codex.py")
    srv = LoopbackServer(_failing_codex).start()
    try:
        env = {"TAOTOKEN_API_KEY": KEY, "TAOTOKEN_BASE_URL": srv.base_url}
        args = ("--gauge-backend", "live", "--gauge-cache", "off", "--gauge-max-retries", "2")
        code, out = run_pytest_subprocess(tmp_path / "run", "suites", *args, env=env)
        codex_calls = [b for b in srv.bodies if b.get("model") == "sim-codex"]
    finally:
        srv.stop()
    assert code == 1, out[-3000:]
    # two transcripts (one per task), one call each before Codex gives up: at most 3 attempts per call
    print("codex calls at the server:", len(codex_calls))
    assert 2 <= len(codex_calls) <= 2 * 3, (len(codex_calls), out[-3000:])
    assert "agent codex: 2 transcript(s) failed, not scored" in out, out[-3000:]


CLAUDE = "npm install -g @anthropic-ai/claude-code@2.1.328"
CLAUDE_SIM = sim_responder(DATA / "sandbox" / "suite_claude.py", seed=7)


def _refusing_claude(body: dict[str, Any]) -> dict[str, Any]:
    """The simulator's answers, except a 401 for every call of Claude Code's model."""
    if body.get("model") == "sim-claude":
        raise ResponderError(401, "invalid x-api-key", type="authentication_error")
    return CLAUDE_SIM(body)


def test_a_claude_code_401_fails_its_cases_never_reads_as_a_loss(tmp_path: Path) -> None:
    if shutil.which("claude") is None:
        if os.environ.get("CI") or os.environ.get("GAUGE_REQUIRE_BROWSER"):
            pytest.fail(f"claude not installed: {CLAUDE} (required under CI)")
        pytest.skip(f"claude not installed: {CLAUDE}")
    _suite(tmp_path / "run", "claude401", "suite_claude.py")
    srv = LoopbackServer(_refusing_claude).start()
    try:
        env = {"TAOTOKEN_API_KEY": KEY, "TAOTOKEN_BASE_URL": srv.base_url}
        args = ("--gauge-backend", "live", "--gauge-cache", "off")
        code, out = run_pytest_subprocess(tmp_path / "run", "suites", *args, env=env)
    finally:
        srv.stop()
    assert code != 0 and "401" in out, out[-3000:]
    pairs = tmp_path / "run" / "gauge-out" / "claude401" / "pairs" / "pair_results.jsonl"
    assert not pairs.exists() or read_jsonl(pairs) == [], read_jsonl(pairs)  # no verdict on a failure
    assert KEY not in out


def _git(folder: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=folder, check=True, capture_output=True, timeout=60)


def test_program_agents_in_a_git_checkout_are_answered_from_the_cache_anywhere(tmp_path: Path) -> None:
    """The example of program agents with its default output folder inside a git checkout: a run in a
    clone at another path with an untracked file in it sends the same requests (the CLIs see /workspace
    and /home/agent, in no repository), so the cache answers every call (either change alone would
    show as simulated calls: one replay covers both, the suite's CLIs take seconds a run)."""
    if shutil.which("claude") is None or shutil.which("codex") is None or shutil.which("git") is None:
        why = f"claude, codex and git needed: {CLAUDE} {CODEX.split()[-1]}"
        if os.environ.get("CI") or os.environ.get("GAUGE_REQUIRE_BROWSER"):
            pytest.fail(why)
        pytest.skip(why)
    first = tmp_path / "checkout"
    shutil.copytree(
        ROOT / "eval_suites" / "program_agents",
        first / "eval_suites" / "program_agents",
        ignore=shutil.ignore_patterns("__pycache__", "gauge-*"),
    )
    (first / "pytest.ini").write_text("[pytest]\ngauge_backend = sim\ngauge_seed = 20261129\n")
    _git(first, "init", "-q")
    _git(first, "add", "-A")
    _git(first, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "suite")
    cache = ("--gauge-cache-dir", str(tmp_path / "cache"))

    def run(folder: Path) -> str:
        code, out = run_pytest_subprocess(folder, "eval_suites/program_agents", *cache)
        assert code == 0, out[-3000:]
        return out

    assert "(0 simulated" not in run(first)
    clone = tmp_path / "elsewhere" / "clone"
    _git(tmp_path, "clone", "-q", str(first), str(clone))
    (clone / "untracked.txt").write_text("new")
    assert "(0 simulated, " in run(clone)
