"""Agents that are programs: :class:`CommandAgent`, run once per turn, and the presets
:func:`claude_code` and :func:`codex` (docs/protocol.md#program-agents).

This module only declares: the argv templates, the environment a preset asks for and the files it
writes into the transcript's private folder are pure functions of plain values (:class:`ProgramSetup`);
running the program, the proxy route it calls through and parsing its output are ``run/programs.py``'s.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli_w

from ..records import APIS, NEUTRAL_API
from ..records.json_types import JSONObject
from .sim_profiles import SimAgent
from .strategy import Strategy

__all__ = [
    "OUTPUT_FORMATS",
    "CommandAgent",
    "ProgramEndpoint",
    "ProgramSetup",
    "claude_code",
    "codex",
    "session_uuid",
]

OUTPUT_FORMATS = ("text", "jsonl", "claude", "codex")
"""How a program's stdout is read: plain text (the reply), JSON lines with ``reply``/``result`` and
``session``/``session_id`` keys, or one of the two CLIs' own JSON streams."""

PLACEHOLDERS = ("prompt", "session", "workdir", "home", "model")


@dataclass(frozen=True)
class ProgramEndpoint:
    """Where a program agent's model calls go: the recording proxy's route for its transcript.

    ``base_urls`` by wire format (``chat`` and ``responses`` end in ``/v1``, ``anthropic`` does not:
    the Anthropic SDK adds it), ``token`` the per-run proxy token (never the gateway key) and ``env``
    the proxy's client environment (``gateway/proxy.py``'s ``client_environment``)."""

    base_urls: Mapping[str, str]
    token: str
    env: Mapping[str, str] = field(default_factory=dict)
    sandboxed: bool = False  # the program runs in the sandbox (run/sandbox.py), its URLs the inside ones
    relay: Path | None = None  # the host's relay socket to the proxy, bound into the sandbox


@dataclass(frozen=True)
class ProgramSetup:
    """What a program needs for one transcript, as plain values: its working directory (the
    transcript's workspace), a private folder for its own configuration (``home``), the proxy route,
    the MCP servers offering the suite's tools (Claude Code's ``mcpServers`` shape:
    ``{name: {"command": ..., "args": [...], "env": {...}}}``) and the work key, from which the
    presets derive a deterministic session id. ``view`` maps host folders to where the program sees
    them (in the sandbox: the workspace at ``/workspace``, ``home`` at ``/home/agent``);
    ``read_only``/``writable`` are more host paths the program needs (its MCP server's)."""

    workdir: Path
    home: Path
    endpoint: ProgramEndpoint
    work: str
    mcp_servers: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    view: Mapping[Path, str] = field(default_factory=dict)
    read_only: tuple[Path, ...] = ()
    writable: tuple[Path, ...] = ()

    def visible(self, path: Path) -> str:
        """``path`` (a host path) as the program sees it: under a folder of ``view``, moved there."""
        for host, inside in self.view.items():
            if path == host or host in path.parents:
                return str(Path(inside) / path.relative_to(host))
        return str(path)


Configure = Callable[[ProgramSetup], Mapping[str, str]]
"""A preset's hook, run once per transcript before its first turn: writes the program's configuration
files under ``setup.home`` and returns the environment variables it sets."""


@dataclass(frozen=True)
class CommandAgent:
    """An agent that is a program, run once per turn (docs/protocol.md#program-agents).

    ``argv`` is a template: ``{prompt}`` (the user's message; or give ``stdin=True`` to send it on
    standard input), ``{session}`` (the session id the previous turn reported), ``{workdir}``,
    ``{home}``, ``{model}``. ``resume_argv`` is used for later turns once a session id is known (else
    ``argv`` again). ``output``: one of :data:`OUTPUT_FORMATS`. ``timeout``: seconds per turn, after
    which the program's whole process group is killed. ``env``: extra variables (templated the same
    way); the rest of the environment is built by the plugin: ``PATH``, ``HOME`` (the transcript's
    private folder), ``LANG``, the proxy's client environment, never the gateway key. ``api``: the wire
    format its model calls use (``chat``, ``anthropic``, ``responses``); ``model`` what it is asked to
    use (for the manifest and the simulator's profile). Its proxy route accepts only ``model`` and
    ``helper_models`` (any model when it names none), at most ``max_tokens`` output tokens and ``max_n``
    choices a request; anything else gets a 403 (docs/protocol.md#route-policy).
    """

    name: str
    argv: tuple[str, ...]
    resume_argv: tuple[str, ...] | None = None
    stdin: bool = False
    output: str = "text"
    timeout: float = 300.0
    env: Mapping[str, str] = field(default_factory=dict)
    model: str | None = None
    api: str = NEUTRAL_API
    configure: Configure | None = None
    drop_env: tuple[str, ...] = ()  # prefixes removed from the built environment before ``env`` is added
    sim: SimAgent = field(default_factory=SimAgent)  # how the simulator answers its model calls
    strategy: Strategy | None = None  # test-time compute (best_of / reflection): each sample its own session
    helper_models: tuple[str, ...] = ()  # other models it may call besides ``model`` (a preset's small model)
    max_tokens: int | None = None  # cap on a request's output tokens through its route (None: no cap)
    max_n: int = 1  # cap on a request's choices (Chat's ``n``) through its route

    def __post_init__(self) -> None:
        if not self.argv or not all(isinstance(a, str) for a in self.argv):
            raise ValueError(f"CommandAgent {self.name!r}: argv must be a non-empty sequence of strings")
        object.__setattr__(self, "argv", tuple(self.argv))
        object.__setattr__(self, "helper_models", tuple(self.helper_models))
        if (self.max_tokens is not None and self.max_tokens < 1) or self.max_n < 1:
            raise ValueError(f"CommandAgent {self.name!r}: max_tokens and max_n must be >= 1")
        if self.resume_argv is not None:
            object.__setattr__(self, "resume_argv", tuple(self.resume_argv))
        if self.output not in OUTPUT_FORMATS:
            known = ", ".join(OUTPUT_FORMATS)
            raise ValueError(f"CommandAgent {self.name!r}: output is one of {known}, not {self.output!r}")
        if not self.timeout > 0:
            raise ValueError(f"CommandAgent {self.name!r}: timeout must be > 0 seconds, got {self.timeout!r}")
        if self.api not in APIS:
            raise ValueError(f"CommandAgent {self.name!r}: api must be {', '.join(APIS[:-1])} or {APIS[-1]}")
        if not self.stdin and not any("{prompt}" in a for a in self.argv):
            raise ValueError(f"CommandAgent {self.name!r}: argv has no {{prompt}} and stdin=False")

    def command(self, values: Mapping[str, str], *, resume: bool) -> list[str]:
        """The argv of one turn with its placeholders filled (``resume``: a later turn with a session)."""
        template = self.resume_argv if resume and self.resume_argv is not None else self.argv
        return [fill(arg, values) for arg in template]


def fill(template: str, values: Mapping[str, str]) -> str:
    """``template`` with ``{name}`` placeholders replaced; other braces are left as they are (a JSON
    argument stays intact)."""
    out = template
    for name in PLACEHOLDERS:
        out = out.replace("{" + name + "}", values.get(name, ""))
    return out


def session_uuid(work: str) -> str:
    """A session id that is the same for the same transcript in every run (a UUID from the work key),
    so a program that sends its session id in its requests sends the same bytes each time."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "pytest-gauge:" + work))


ANTHROPIC_PREFIXES = ("ANTHROPIC_", "CLAUDECODE", "CLAUDE_CODE_", "CLAUDE_CONFIG_DIR")


def claude_code(
    model: str,
    *,
    name: str | None = None,
    instructions: str | None = None,
    allowed_tools: Sequence[str] = ("Read", "Write", "Edit", "Bash"),
    permission_mode: str = "acceptEdits",
    timeout: float = 300.0,
    command: str = "claude",
    sim: SimAgent | None = None,
    small_model: str | None = None,
) -> CommandAgent:
    """Claude Code as an agent under test: ``claude -p --output-format stream-json --verbose``, later
    turns ``--resume`` the session, pointed at the run's proxy (``ANTHROPIC_BASE_URL``,
    ``ANTHROPIC_AUTH_TOKEN``, ``ANTHROPIC_MODEL``), with a fresh ``CLAUDE_CONFIG_DIR`` per transcript
    holding ``instructions`` as its ``CLAUDE.md``; every inherited ``ANTHROPIC_*`` / ``CLAUDECODE*``
    variable removed (one auth variable, no stale base URL). The suite's tools are offered over MCP
    (``--mcp-config``, allowed as ``mcp__<server>``). Its background (Haiku-class) calls use
    ``small_model`` (default: ``model``), the one helper model its proxy route accepts besides ``model``."""
    helper = small_model or model
    common: tuple[str, ...] = ("--output-format", "stream-json", "--verbose", "--model", "{model}")
    common += ("--permission-mode", permission_mode, "--mcp-config", "{home}/mcp.json", "--strict-mcp-config")
    argv = (command, "-p", "{prompt}", "--session-id", "{session}", *common)
    resume = (command, "-p", "{prompt}", "--resume", "{session}", *common)

    def configure(setup: ProgramSetup) -> Mapping[str, str]:
        config = setup.home / "claude"
        config.mkdir(parents=True, exist_ok=True)
        if instructions is not None:
            (config / "CLAUDE.md").write_text(instructions, encoding="utf-8")
        servers = {"mcpServers": {k: dict(v) for k, v in setup.mcp_servers.items()}}
        (setup.home / "mcp.json").write_text(json.dumps(servers, indent=2), encoding="utf-8")
        # the allowed tools as user settings (the suite's MCP servers' tools allowed by server name)
        allow = [*allowed_tools, *(f"mcp__{server}" for server in setup.mcp_servers)]
        settings = {"permissions": {"allow": allow}}
        (config / "settings.json").write_text(json.dumps(settings, indent=2), encoding="utf-8")
        return {
            "ANTHROPIC_BASE_URL": setup.endpoint.base_urls["anthropic"],
            "ANTHROPIC_AUTH_TOKEN": setup.endpoint.token,
            "ANTHROPIC_MODEL": model,
            "ANTHROPIC_DEFAULT_HAIKU_MODEL": helper,  # its background calls: a declared model too
            "ANTHROPIC_SMALL_FAST_MODEL": helper,
            "CLAUDE_CONFIG_DIR": setup.visible(config),
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            # the suite's MCP tools in every request, not deferred behind ToolSearch (which a model
            # must call first: the simulator, and a test of tool use, want the tool offered as such)
            "ENABLE_TOOL_SEARCH": "false",
            # one retry policy: a failed call is retried by the plugin's gateway (in the ledger), not
            # again by the CLI on top of it
            "CLAUDE_CODE_MAX_RETRIES": "0",
        }

    return CommandAgent(
        name=name or "claude-code",
        argv=argv,
        resume_argv=resume,
        output="claude",
        timeout=timeout,
        model=model,
        api="anthropic",
        configure=configure,
        drop_env=ANTHROPIC_PREFIXES,
        sim=sim or SimAgent(),
        helper_models=(helper,) if helper != model else (),
    )


CODEX_MCP_DEFAULTS = {"startup_timeout_sec": 30, "required": True, "default_tools_approval_mode": "approve"}


def codex_config(model: str, base_url: str, mcp_servers: Mapping[str, Mapping[str, Any]]) -> str:
    """Codex's ``config.toml`` for one transcript, written by a TOML library (any value round-trips
    through ``tomllib``): the model, a provider for the proxy (``base_url``, ``env_key``,
    ``wire_api = "responses"``: Codex refuses ``"chat"``) with Codex's own retries off (a failed call
    is the gateway's retries, once, in the ledger), no update check, no analytics, and the MCP servers
    offering the suite's tools."""
    provider = {
        "name": "pytest-gauge proxy",
        "base_url": base_url,
        "env_key": "GAUGE_PROXY_TOKEN",
        "wire_api": "responses",
        "request_max_retries": 0,
        "stream_max_retries": 0,
    }
    config: JSONObject = {
        "model": model,
        "model_provider": "gauge",
        "check_for_update_on_startup": False,
        "analytics": {"enabled": False},
        "model_providers": {"gauge": provider},
    }
    # each server one Codex waits for (else a slow start leaves its tools out of the first request), its
    # tools approved (else "requires approval, but approval policy is never" in exec)
    servers = {
        str(name): {k: v for k, v in dict(spec).items() if k != "type"} | CODEX_MCP_DEFAULTS
        for name, spec in mcp_servers.items()
    }
    if servers:
        config["mcp_servers"] = servers
    return tomli_w.dumps(config)


CODEX_PREFIXES = ("ANTHROPIC_", "CLAUDECODE", "OPENAI_", "CODEX_")


def codex(
    model: str,
    *,
    name: str | None = None,
    instructions: str | None = None,
    sandbox: str = "workspace-write",
    timeout: float = 300.0,
    command: str = "codex",
    sim: SimAgent | None = None,
) -> CommandAgent:
    """Codex as an agent under test: ``codex exec --json`` (later turns ``codex exec resume <id>``),
    with a fresh ``CODEX_HOME`` per transcript whose ``config.toml`` points a provider at the run's
    proxy (:func:`codex_config`) and whose ``AGENTS.md`` holds ``instructions``; the provider's key
    variable holds the proxy token; inherited ``ANTHROPIC_*``, ``OPENAI_*`` and ``CODEX_*`` removed."""
    common = ("--json", "--skip-git-repo-check", "-s", sandbox)
    argv = (command, "exec", *common, "-C", "{workdir}", "{prompt}")
    resume = (command, "exec", *common, "resume", "{session}", "{prompt}")

    def configure(setup: ProgramSetup) -> Mapping[str, str]:
        home = setup.home / "codex"
        home.mkdir(parents=True, exist_ok=True)
        text = codex_config(model, setup.endpoint.base_urls["responses"], setup.mcp_servers)
        (home / "config.toml").write_text(text, encoding="utf-8")
        if instructions is not None:
            (home / "AGENTS.md").write_text(instructions, encoding="utf-8")
        return {"CODEX_HOME": setup.visible(home), "GAUGE_PROXY_TOKEN": setup.endpoint.token}

    return CommandAgent(
        name=name or "codex",
        argv=argv,
        resume_argv=resume,
        output="codex",
        timeout=timeout,
        model=model,
        api="responses",
        configure=configure,
        drop_env=CODEX_PREFIXES,
        sim=sim or SimAgent(),
    )
