"""Claude Code against Codex, both real CLIs, as agents under test (docs/protocol.md#program-agents),
and Codex at best-of-1 against best-of-4 (``codex@bo4``: four sessions per task, the rules' best kept),
whose Elo per token is in ``reports/elo.md``'s compute tiers.

Each transcript runs the CLI once per turn in a fresh copy of ``workspace/``, with a fresh
``CLAUDE_CONFIG_DIR`` / ``CODEX_HOME``, the suite's ``lookup_order`` tool offered over MCP, and the
model calls sent to the run's recording proxy: on the simulator (the default backend) the simulator
answers them, live the gateway does, and either way every call is in the ledger (role ``agent``), the
cache and the budget. The CLIs are not part of the package: without them this suite is skipped with the
install command (``npm install -g @anthropic-ai/claude-code@2.1.328 @openai/codex@0.169.0``); under CI
(``CI`` or ``GAUGE_REQUIRE_BROWSER`` set) it fails instead. Live, the models come from
``GAUGE_CLAUDE_MODEL`` and ``GAUGE_CODEX_MODEL``; ``GAUGE_CLAUDE_COMMAND`` / ``GAUGE_CODEX_COMMAND`` name
the binaries when they are not ``claude`` / ``codex`` on ``PATH``.
"""

from __future__ import annotations

import os

from pytest_gauge import Judge, SimAgent, Suite, UserSimulator, best_of, claude_code, codex, env_model

from .tools import TOOLS

COMMANDS = {c: os.environ.get(f"GAUGE_{c.upper()}_COMMAND", c) for c in ("claude", "codex")}

INSTRUCTIONS = "Answer in at most three sentences. Look orders up with the lookup_order tool; never guess."

CODEX = codex(
    env_model("GAUGE_CODEX_MODEL", "sim-codex"),
    name="codex",
    instructions=INSTRUCTIONS,
    sandbox="read-only",
    timeout=180,
    command=COMMANDS["codex"],
    sim=SimAgent(skill=0.6, tool_skill=1.0),
)

suite = Suite(
    agents=[
        claude_code(
            env_model("GAUGE_CLAUDE_MODEL", "sim-claude"),
            name="claude_code",
            instructions=INSTRUCTIONS,
            allowed_tools=("Read",),
            timeout=180,
            command=COMMANDS["claude"],
            sim=SimAgent(skill=0.9, tool_skill=1.0),
        ),
        CODEX,
        best_of(CODEX, 4),  # test-time compute for a program: four sessions per task, the best kept
    ],
    judge=Judge(env_model("TAOTOKEN_JUDGE_MODEL", "sim-judge")),
    user=UserSimulator(env_model("GAUGE_USER_MODEL", "sim-user"), max_turns=1),
    tools=TOOLS,
    workspace="workspace",
    orders="seeded",
)
