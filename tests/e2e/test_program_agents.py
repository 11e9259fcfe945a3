"""The example of program agents end to end: the real ``claude`` and ``codex``
binaries against the run's recording proxy on the simulator, ``-n 0`` then ``-n 2``.

One cold run and one warm run of ``eval_suites/program_agents`` (each CLI wrapped by a script that
writes its environment into the transcript's private folder, then execs the CLI): every model call the
CLIs made is in the ledger as a role ``agent`` call of its transcript with its wire format, their MCP
tool calls are in the transcripts and scored by the ``tool_args`` rule, cost per success and the Elo
report's tokens include theirs, no process saw the gateway key or an inherited ``ANTHROPIC_*`` variable,
and a replay of the exported cassettes with ``-n 2``, in a folder of its own and without a key, is
answered wholly from them with the same records: both runs are in git checkouts (another path, branch,
git status and untracked file) on different days (time zones a day apart), which the CLIs put in their
prompts, and none of which is in the cache key. The
CLIs and their MCP servers are heavy (about 4 s of CPU a transcript): two tasks, one turn each, two
runs. Without them the test is skipped with the install command, and under CI (``CI`` /
``GAUGE_REQUIRE_BROWSER``) it fails instead (``.ci/run`` installs them).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import ROOT, read_jsonl, run_pytest_subprocess

pytestmark = pytest.mark.slow

INSTALL = "npm install -g @anthropic-ai/claude-code@2.1.328 @openai/codex@0.169.0"
SEARCH = os.pathsep.join([os.environ.get("PATH", ""), str(ROOT / ".node" / "node_modules" / ".bin")])
INI = """[pytest]
gauge_backend = sim
gauge_seed = 20261129
gauge_prices =
    sim-claude 3.00 15.00
    sim-codex 1.25 10.00
    sim-user 0.10 0.40
    sim-judge 0.10 0.40
"""
GATEWAY_KEY = "sk-gauge-gateway-key-0123456789abcdef"
OUTER = {
    "TAOTOKEN_API_KEY": GATEWAY_KEY,
    "ANTHROPIC_API_KEY": "sk-ant-outer-key-0123456789abcdef",
    "ANTHROPIC_BASE_URL": "https://stale.example/api",
    "ANTHROPIC_AUTH_TOKEN": "stale-outer-token-0123456789",
    "CLAUDECODE": "1",
    "OPENAI_API_KEY": "sk-openai-outer-0123456789abcdef",
}


def _binaries() -> dict[str, str]:
    found = {name: shutil.which(name, path=SEARCH) for name in ("claude", "codex")}
    missing = [n for n, p in found.items() if p is None]
    if missing:
        why = f"{' and '.join(missing)} not installed: {INSTALL}"
        if os.environ.get("CI") or os.environ.get("GAUGE_REQUIRE_BROWSER"):
            pytest.fail(f"{why} (required under CI: .ci/run installs them)")
        pytest.skip(why)
    return {n: str(p) for n, p in found.items()}


def _wrappers(folder: Path, binaries: dict[str, str]) -> dict[str, str]:
    """A script per CLI that writes the environment it was started with to ``$HOME/env-<cli>.json``
    (``HOME`` is the transcript's private folder), then runs the CLI."""
    folder.mkdir()
    env: dict[str, str] = {}
    for name, real in binaries.items():
        script = folder / name
        dump = (
            "import json, os; "
            f"json.dump(dict(os.environ), open(os.environ['HOME'] + '/env-{name}.json', 'x'))"
        )
        script.write_text(
            f'#!/bin/sh\n{shutil.which("python3") or "python3"} -c "{dump}"\nexec {real} "$@"\n'
        )
        script.chmod(script.stat().st_mode | stat.S_IEXEC)
        env[f"GAUGE_{name.upper()}_COMMAND"] = str(script)
    return env


def _suite_copy(folder: Path) -> None:
    shutil.copytree(
        ROOT / "eval_suites" / "program_agents",
        folder / "program_agents",
        ignore=shutil.ignore_patterns("__pycache__", "gauge-*"),
    )
    (folder / "pytest.ini").write_text(INI, encoding="utf-8")


def _checkout(folder: Path, branch: str, untracked: str) -> None:
    """``folder`` as a git checkout of its own (one commit on ``branch``) with an untracked file: Claude
    Code then puts the checkout's git status into its prompt, which differs from clone to clone."""
    import subprocess

    git = ["git", "-c", "user.name=gauge", "-c", "user.email=gauge@localhost"]
    for args in (["init", "-q", "-b", branch], ["add", "-A"], ["commit", "-q", "-m", f"suite on {branch}"]):
        subprocess.run([*git, *args], cwd=folder, check=True, capture_output=True, timeout=60)
    (folder / untracked).write_text("not committed\n", encoding="utf-8")


def _run(folder: Path, env: dict[str, str], *args: str) -> str:
    code, out = run_pytest_subprocess(
        folder, "program_agents", "--gauge-no-progress", *args, env={**OUTER, **env, "PATH": SEARCH}
    )
    assert code == 0, out[-4000:]
    return out


def _program_envs(out: Path) -> list[dict[str, str]]:
    found = [json.loads(p.read_text()) for p in (out / "program_agents").rglob("env-*.json")]
    assert len(found) == 12, found  # 2 tasks x (claude_code, codex, 4 sessions of codex@bo4), one turn each
    return found


def _check_ledger(rows: list[dict[str, Any]]) -> None:
    agent = [r for r in rows if r["role"] == "agent"]
    apis = {r["call_id"].split("/")[2]: r["api"] for r in agent}
    assert apis == {"claude_code": "anthropic", "codex": "responses", "codex@bo4": "responses"}
    for r in agent:  # every call the CLIs made, attributed to its transcript, answered and counted
        assert r["call_id"].startswith("transcript/pa0") and r["status"] == "ok", r
        assert r["usage"]["input_tokens"] > 1000
    per_transcript = {r["call_id"].split("#")[0] for r in agent}
    assert len(per_transcript) == 6  # each transcript's program reached the proxy


def test_claude_code_and_codex_through_the_proxy_cached_and_replayed(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    env = _wrappers(tmp_path / "bin", _binaries())
    _suite_copy(pytester.path)
    _checkout(pytester.path, "main", "notes.txt")
    # a time zone a day ahead of the replay's below: the CLIs' date lines differ between the two runs
    cold = _run(pytester.path, {**env, "TZ": "Etc/GMT-14"}, "-n", "0", "--gauge-out", "cold")
    out = pytester.path / "cold" / "program_agents"
    _check_ledger(read_jsonl(out / "agent_runs.jsonl"))
    for seen in _program_envs(pytester.path / "cold"):
        assert not any(GATEWAY_KEY in v or "outer" in v or "stale" in v for v in seen.values()), seen
        assert "TAOTOKEN_API_KEY" not in seen and "PYTEST_CURRENT_TEST" not in seen  # built from nothing
        assert seen["HOME"] == "/home/agent" and seen["PWD"] == "/workspace", seen  # in the sandbox
        anthropic = {k for k in seen if k.startswith(("ANTHROPIC_", "CLAUDECODE"))}
        claude = {"ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_MODEL"}
        claude |= {"ANTHROPIC_DEFAULT_HAIKU_MODEL", "ANTHROPIC_SMALL_FAST_MODEL"}
        assert anthropic in (set(), claude)
        assert anthropic or "CODEX_HOME" in seen  # Codex gets none of them
    transcripts = [
        t for a in ("claude_code", "codex", "codex@bo4") for t in read_jsonl(out / "agents" / f"{a}.jsonl")
    ]
    for t in transcripts:  # the suite's tool over MCP, as its executor ran it, scored by the rule
        assert [c["name"] for turn in t["turns"] for c in turn.get("tool_calls", [])] == ["lookup_order"]
        assert t["program_turns"] and t["ended_by"] == "user_done"
    costs = json.loads((out / "reports" / "metrics.json").read_text())["costs"]
    agent_cost = sum(m["cost"] for m in costs["per_model"] if m["role"] == "agent")
    assert costs["cost_per_success"] > 0 and agent_cost > 0.9 * sum(m["cost"] for m in costs["per_model"])
    elo = json.loads((out / "reports" / "elo.json").read_text())["agents"]
    assert all(elo[a]["agent_tokens_per_task"] > 1000 for a in ("claude_code", "codex"))
    # best-of-4 spends about four sessions' tokens per task and is a tier of Codex's family
    assert elo["codex@bo4"]["agent_tokens_per_task"] > 3 * elo["codex"]["agent_tokens_per_task"]
    tiers = json.loads((out / "reports" / "elo.json").read_text())["tiers"]
    assert [(t["tier"], t["agent"]) for t in tiers] == [("base", "codex"), ("bo4", "codex@bo4")]
    assert "(0 simulated," not in cold

    replay = tmp_path / "replay"  # another clone: another path, branch, git status, date and time zone
    _suite_copy(replay)
    _checkout(replay, "feature", "scratch.txt")
    code, text = _cassettes(pytester.path, replay / "cassettes")
    assert code == 0, text
    replayed = _run(
        replay,
        {**env, "TAOTOKEN_API_KEY": "", "TZ": "Etc/GMT+12"},
        "-n", "2", "--gauge-backend", "replay", "--gauge-cassettes", "cassettes", "--gauge-out", "out",
    )  # fmt: skip
    assert "2 workers" in replayed, replayed[-3000:]
    ledger = read_jsonl(replay / "out" / "program_agents" / "agent_runs.jsonl")
    assert ledger and all(r["cache_hit"] for r in ledger), replayed[-3000:]  # nothing sent
    pairs = read_jsonl(out / "pairs" / "pair_results.jsonl")
    assert read_jsonl(replay / "out" / "program_agents" / "pairs" / "pair_results.jsonl") == pairs


def _cassettes(folder: Path, to: Path) -> tuple[int, str]:
    import subprocess
    import sys

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_gauge",
            "cassettes",
            "export",
            "--suite",
            "program_agents",
            "--to",
            str(to),
            "--out",
            "cold",
        ],
        cwd=folder,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr
