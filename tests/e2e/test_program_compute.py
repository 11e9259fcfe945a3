"""Test-time compute around program agents on the simulator: ``best_of`` wraps a :class:`CommandAgent`
and the real ``claude`` CLI, ``reflection`` the real ``codex`` CLI; each sample is its own session (its
own workspace, program folder and proxy route, seeded per sample) and draws its own answers.

The CLIs are not part of the package: without them the test is skipped with the install command, and
under CI (``CI`` / ``GAUGE_REQUIRE_BROWSER``) it fails instead (``.ci/run`` installs them).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.helpers import ROOT, read_jsonl, run_pytest_subprocess

pytestmark = pytest.mark.slow

INSTALL = "npm install -g @anthropic-ai/claude-code@2.1.328 @openai/codex@0.169.0"
SEARCH = os.pathsep.join([os.environ.get("PATH", ""), str(ROOT / ".node" / "node_modules" / ".bin")])

AGENT = '''"""One Chat Completions call to the run's proxy; the reply printed and appended to reply.txt."""
import json, os, sys, urllib.request
body = {"model": "sim-cmd", "messages": [{"role": "user", "content": sys.argv[1]}], "max_tokens": 200}
request = urllib.request.Request(
    os.environ["OPENAI_BASE_URL"] + "/chat/completions",
    json.dumps(body).encode(),
    {"content-type": "application/json", "authorization": "Bearer " + os.environ["OPENAI_API_KEY"]},
)
reply = json.load(urllib.request.urlopen(request, timeout=60))["choices"][0]["message"]["content"]
with open("reply.txt", "a", encoding="utf-8") as out:
    out.write(reply + "\\n")
print(reply)
'''

SUITE = """
import sys
from pathlib import Path

from pytest_gauge import CommandAgent, SimAgent, Suite, UserSimulator, best_of, claude_code, codex, reflection

SIM = SimAgent(skill=0.5)
AGENT = (sys.executable, str(Path(__file__).with_name("agent.py")), "{prompt}")
suite = Suite(
    agents=[
        best_of(CommandAgent("cmd", AGENT, model="sim-cmd", sim=SIM), 4),
        best_of(claude_code("sim-claude", name="claude", command=CLAUDE, sim=SIM), 4),
        reflection(codex("sim-codex", sandbox="read-only", command=CODEX, sim=SIM)),
    ],
    user=UserSimulator("sim-user", max_turns=1),
    orders="seeded",
    samples=2,
)
"""

TASKS = [
    {"format_version": 1},
    {
        "task_id": "colors",
        "category": "constraint",
        "task_prompt": "Name three primary colors and say why they are primary.",
        "success_criteria": [
            {"type": "contains_all", "phrases": ["red", "blue"]},
            {"type": "contains_any", "phrases": ["yellow", "green"]},
        ],
        "hard_constraints": [{"type": "max_words", "limit": 60}],
    },
]


def _binaries() -> dict[str, str]:
    found = {name: shutil.which(name, path=SEARCH) for name in ("claude", "codex")}
    missing = [n for n, p in found.items() if p is None]
    if missing:
        why = f"{' and '.join(missing)} not installed: {INSTALL}"
        if os.environ.get("CI") or os.environ.get("GAUGE_REQUIRE_BROWSER"):
            pytest.fail(f"{why} (required under CI: .ci/run installs them)")
        pytest.skip(why)
    return {n: str(p) for n, p in found.items()}


def _suite(folder: Path, binaries: dict[str, str]) -> None:
    suite = folder / "compute"
    suite.mkdir()
    (suite / "agent.py").write_text(AGENT, encoding="utf-8")
    head = f"CLAUDE = {binaries['claude']!r}\nCODEX = {binaries['codex']!r}\n"
    (suite / "test_compute.py").write_text(head + SUITE, encoding="utf-8")
    (suite / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in TASKS), encoding="utf-8")
    (folder / "pytest.ini").write_text("[pytest]\ngauge_backend = sim\ngauge_seed = 7\n", encoding="utf-8")


def test_best_of_and_reflection_wrap_program_agents_and_samples_differ(tmp_path: Path) -> None:
    _suite(tmp_path, _binaries())
    code, out = run_pytest_subprocess(
        tmp_path, "compute", "--gauge-no-progress", "-n", "0", env={"PATH": SEARCH}
    )
    assert code == 0, out[-4000:]
    folder = tmp_path / "gauge-out" / "compute"
    # each best-of candidate of the command ran in its own workspace and drew its own reply
    for sample in (0, 1):
        replies = [
            (folder / "work" / "colors" / "cmd@bo4" / slot / "reply.txt").read_text(encoding="utf-8")
            for slot in (str(sample), *(f"{sample}-c{k}" for k in (1, 2, 3)))
        ]
        assert all(r.count("\n") == 1 for r in replies), replies  # one session each, one turn
        assert len(set(replies)) > 1, replies
    ledger = [r for r in read_jsonl(folder / "agent_runs.jsonl") if r["role"] == "agent"]
    claude = [r for r in ledger if "/claude@bo4/" in r["call_id"]]
    # Claude Code's main-model calls: 4 candidates x 2 samples, each its own session, answered apart
    assert len({r["call_id"].split("#")[0] for r in claude}) == 2
    for slot in ("0", "1"):
        main = [r for r in claude if r["model"] == "sim-claude" and r["call_id"].split("/")[3][0] == slot]
        assert len(main) == 4 and not any(r["cache_hit"] for r in main), main
        assert len({r["usage"]["output_tokens"] for r in main}) > 1, main
    # reflection gives Codex one more turn of its own session; its two samples differ
    codex = read_jsonl(folder / "agents" / "codex@reflect1.jsonl")
    assert len(codex) == 2 and all(len(t["program_turns"]) == 2 for t in codex), codex
    assert codex[0]["final_reply"] != codex[1]["final_reply"]
    assert all(t["strategy"] == "reflect1" and t["error"] is None for t in codex)
    assert {r["strategy"] for r in ledger} == {"bo4", "reflect1"}
