"""Doctor for agent programs and their configuration (docs/protocol.md#doctor-programs):
each program a suite runs found on ``PATH`` with its version (or its install command), and the
settings the method's setup guide names as the usual sources of 401 and 404 when Claude Code or Codex
share the gateway. Every finding is one line with its fix (``format_checks``); no value of a key is ever read
into a message (only variable names and URLs, shown without credentials)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..records.json_types import JSONObject
from .endpoint import KEY_VARIABLE, URL_VARIABLE, check_base_url, fixed_path_url

__all__ = [
    "ClaudeSettings",
    "Finding",
    "Program",
    "Service",
    "anthropic_setting_findings",
    "claude_model",
    "claude_settings_findings",
    "claude_settings_paths",
    "codex_provider_findings",
    "program_findings",
    "read_claude_settings",
    "service_findings",
    "url_problem",
]

VERSION_TIMEOUT = 10.0  # seconds a program's --version may take


@dataclass(frozen=True)
class Program:
    """A program a suite's agent runs: its command (``argv[0]``), who uses it, how to install it."""

    command: str
    users: tuple[str, ...] = ()
    install: str | None = None


@dataclass(frozen=True)
class Service:
    """An agent behind HTTP a suite talks to (``HttpAgent``): its URL and the variables its headers read."""

    name: str
    url: str
    variables: tuple[str, ...] = ()


@dataclass(frozen=True)
class Finding:
    """One doctor line: status, topic, what was found and its fix (empty when ok)."""

    status: Literal["ok", "warn", "fail"]
    topic: str
    message: str
    fix: str = ""


def _line(status: Literal["ok", "warn", "fail"], topic: str, message: str, fix: str) -> Finding:
    return Finding(status, topic, message, fix)


def show_url(url: str) -> str:
    """A URL without any user:password part."""
    parts = urllib.parse.urlsplit(url.strip())
    host = parts.netloc.rsplit("@", 1)[-1]
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


def url_problem(url: str) -> tuple[str, str] | None:
    """(what is wrong, the corrected URL) when ``url`` carries tracking parameters or a fragment, a
    doubled ``/v1/v1`` or ``//``, or a pasted endpoint path; None when it is clean."""
    check = check_base_url(url)
    if not check.errors and not check.warnings:
        return None
    parts = urllib.parse.urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return "is not an http(s) URL", "an http(s) URL"
    reasons = []
    if check.errors:
        reasons.append("tracking parameters or a fragment (pasted from a link)")
    if "/v1/v1" in parts.path:
        reasons.append("a doubled '/v1/v1'")
    elif check.warnings:
        reasons.append("an odd path")
    kept = f"?{urllib.parse.urlencode(check.query)}" if check.query else ""
    return " and ".join(reasons), show_url(fixed_path_url(url)) + kept


def _version(path: str) -> str:
    """The first line ``path --version`` prints, or why there is none."""
    try:
        done = subprocess.run(
            [path, "--version"], capture_output=True, timeout=VERSION_TIMEOUT, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        return f"no version: --version took over {VERSION_TIMEOUT:g}s"
    except OSError as exc:
        return f"no version: {exc.strerror or exc}"
    text = (done.stdout or done.stderr).decode("utf-8", errors="replace").strip()
    return text.splitlines()[0] if text else f"no version (exit status {done.returncode})"


def program_findings(
    programs: Sequence[Program], environ: Mapping[str, str], which: Callable[..., str | None] = shutil.which
) -> list[Finding]:
    """Each program found on the environment's ``PATH`` with its path and version, or a failure with
    its install command (a missing program fails every case of the agents that run it)."""
    found: list[Finding] = []
    for program in programs:
        users = f" (used by {', '.join(program.users)})" if program.users else ""
        topic = f"program {program.command}"
        path = which(program.command, path=environ.get("PATH", os.defpath))
        if path is None:
            fix = program.install or f"install {program.command!r} or put it on PATH"
            found.append(_line("fail", topic, f"not found on PATH{users}", fix))
            continue
        version = _version(path)
        pinned = _pinned(program.install)
        have = re.search(r"\d+\.\d+\.\d+", version)
        if pinned and have and have.group(0) != pinned:
            message = f"{path} is {have.group(0)}, the presets are set up and tested for {pinned}{users}"
            found.append(_line("warn", topic, message, str(program.install)))
            continue
        found.append(Finding("ok", topic, f"{path} ({version}){users}"))
    return found


def service_findings(services: Sequence[Service], environ: Mapping[str, str]) -> list[Finding]:
    """Each HTTP agent's header variables: set (names only, never values), or the one to export."""
    found: list[Finding] = []
    for service in services:
        topic = f"HttpAgent {service.name}"
        missing = [v for v in service.variables if not environ.get(v, "").strip()]
        if missing:
            message = f"its headers read {', '.join(missing)}, not set: every turn of it would fail"
            found.append(_line("fail", topic, message, f"export {missing[0]}=... (the service's credential)"))
        else:
            reads = f", headers read {', '.join(service.variables)} (set)" if service.variables else ""
            found.append(Finding("ok", topic, f"{show_url(service.url)}{reads}"))
    return found


def _pinned(install: str | None) -> str | None:
    """The version an install command pins (``npm install -g pkg@1.2.3``), if any."""
    match = re.search(r"@(\d+\.\d+\.\d+)\b", install or "")
    return match.group(1) if match else None


def _gateway_root(base_url: str) -> str:
    """The gateway's URL without a trailing ``/v1``: where Claude Code (which adds ``/v1/messages``) goes."""
    base = fixed_path_url(base_url)
    return base[: -len("/v1")] if base.endswith("/v1") else base


def anthropic_setting_findings(environ: Mapping[str, str], base_url: str, codex_used: bool) -> list[Finding]:
    """Claude Code's variables: both auth variables set, a base URL elsewhere than the gateway or with
    tracking parameters / ``/v1/v1``, and any ``ANTHROPIC_*`` exported where Codex runs."""
    found: list[Finding] = []
    set_ = sorted(k for k, v in environ.items() if k.startswith("ANTHROPIC_") and v.strip())
    if "ANTHROPIC_API_KEY" in set_ and "ANTHROPIC_AUTH_TOKEN" in set_:
        message = (
            "both ANTHROPIC_API_KEY and ANTHROPIC_AUTH_TOKEN are set: Claude Code sends two credentials"
            " and the gateway rejects one (401)"
        )
        fix = "unset ANTHROPIC_API_KEY; keep the gateway key in ANTHROPIC_AUTH_TOKEN only"
        found.append(_line("warn", "ANTHROPIC_*", message, fix))
    raw = environ.get("ANTHROPIC_BASE_URL", "").strip()
    if raw:
        found += _anthropic_url(raw, _gateway_root(base_url))
    if codex_used and set_:
        message = (
            f"{', '.join(set_)} exported where Codex runs: a provider reading them sends an Anthropic key"
        )
        fix = f"unset {' '.join(set_)} in Codex's shell (keep them in Claude Code's settings.json env block)"
        found.append(
            _line("warn", "ANTHROPIC_* and Codex", message + " to an OpenAI-style endpoint (401)", fix)
        )
    return found


def _same(a: str, b: str) -> bool:
    return a.rstrip("/").lower() == b.rstrip("/").lower()


def _anthropic_url(raw: str, gateway: str) -> list[Finding]:
    """``ANTHROPIC_BASE_URL``: tracking parameters or ``/v1/v1`` (fixed to the clean URL), or another
    host than the gateway (fixed to the gateway's root); one line either way."""
    problem = url_problem(raw)
    clean = _gateway_root(problem[1]) if problem is not None else _gateway_root(raw)
    elsewhere = not _same(clean, gateway)
    if problem is None and not elsewhere:
        return []
    what = [f"has {problem[0]}"] if problem is not None else []
    if elsewhere:
        what.append(
            f"is not the configured gateway {gateway} ({URL_VARIABLE}): Claude Code's calls go elsewhere"
        )
    message = f"{show_url(raw)} {' and '.join(what)} (401/404)"
    return [
        _line(
            "warn",
            "ANTHROPIC_BASE_URL",
            message,
            f"export ANTHROPIC_BASE_URL={gateway if elsewhere else clean}",
        )
    ]


def codex_provider_findings(where: str, table: Mapping[str, Any]) -> list[Finding]:
    """One ``[model_providers.<name>]`` table: no ``env_key`` (Codex sends no key: 401), ``wire_api =
    "chat"`` (refused by current Codex), a base URL with tracking parameters or ``/v1/v1``."""
    topic = f"Codex {where}"
    found: list[Finding] = []
    if not isinstance(table.get("env_key"), str) or not str(table.get("env_key")).strip():
        found.append(
            _line(
                "warn",
                topic,
                "has no env_key: Codex sends no key to the gateway (401)",
                f'add env_key = "{KEY_VARIABLE}" to {where}',
            )
        )
    if table.get("wire_api") == "chat":
        found.append(
            _line(
                "warn",
                topic,
                'has wire_api = "chat", which Codex (0.169) refuses',
                f'set wire_api = "responses" in {where}',
            )
        )
    url = table.get("base_url")
    problem = url_problem(url) if isinstance(url, str) else None
    if problem is not None:
        found.append(
            _line(
                "warn",
                topic,
                f"base_url {show_url(str(url))} has {problem[0]}",
                f'base_url = "{problem[1]}" in {where}',
            )
        )
    return found


@dataclass(frozen=True)
class ClaudeSettings:
    """One of Claude Code's settings files as the doctor reads it: its ``env`` block, its ``model``,
    whether an ``apiKeyHelper`` supplies the key (values of keys are never kept in a message)."""

    path: str
    env: Mapping[str, str]
    model: str | None = None
    key_helper: bool = False


def claude_settings_paths(environ: Mapping[str, str], project: Path) -> list[Path]:
    """Claude Code's settings files, lowest precedence first: the user's (``$CLAUDE_CONFIG_DIR`` or
    ``~/.claude``), the project's ``.claude/settings.json`` and ``.claude/settings.local.json``."""
    home = Path(environ["HOME"]) if environ.get("HOME") else Path.home()
    user = Path(environ["CLAUDE_CONFIG_DIR"]) if environ.get("CLAUDE_CONFIG_DIR") else home / ".claude"
    return [
        user / "settings.json",
        project / ".claude" / "settings.json",
        project / ".claude" / "settings.local.json",
    ]


def read_claude_settings(path: Path) -> ClaudeSettings | Finding:
    """The file's settings, or a warning naming why it cannot be read (Claude Code ignores such a file)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return _line(
            "warn", f"Claude Code {path}", f"could not read it: {type(exc).__name__}", "fix the JSON"
        )
    data = data if isinstance(data, dict) else {}
    raw = data.get("env")
    env: JSONObject = raw if isinstance(raw, dict) else {}
    clean = {str(k): str(v) for k, v in env.items() if isinstance(v, str | int | float)}
    model = data.get("model") if isinstance(data.get("model"), str) else None
    return ClaudeSettings(str(path), clean, model, bool(data.get("apiKeyHelper")))


def claude_settings_findings(
    files: Sequence[ClaudeSettings], environ: Mapping[str, str], base_url: str
) -> list[Finding]:
    """Each settings file's ``env`` block checked as Claude Code's variables are (base URL elsewhere or
    pasted from a link, both auth variables), named by the file; then, across files and the
    environment, a base URL without any key (Claude Code sends none: 401)."""
    found: list[Finding] = []
    for f in files:
        for finding in anthropic_setting_findings(f.env, base_url, codex_used=False):
            fix = finding.fix.replace("export ", "set ").replace("unset ", "remove ")
            found.append(
                Finding(finding.status, f"{finding.topic} in {f.path}", finding.message, f"{fix} (env block)")
            )
    merged = {**environ, **{k: v for f in files for k, v in f.env.items()}}
    has_key = any(merged.get(k, "").strip() for k in ("ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_API_KEY"))
    if (
        files
        and merged.get("ANTHROPIC_BASE_URL", "").strip()
        and not has_key
        and not any(f.key_helper for f in files)
    ):
        where = files[-1].path
        message = (
            "ANTHROPIC_BASE_URL is set but no ANTHROPIC_AUTH_TOKEN: Claude Code sends no key to the"
            " gateway (401)"
        )
        fix = f'add "ANTHROPIC_AUTH_TOKEN": "<your gateway key>" to the env block of {where}'
        found.append(_line("warn", "Claude Code settings", message, fix))
    return found


def claude_model(files: Sequence[ClaudeSettings], environ: Mapping[str, str]) -> tuple[str, str] | None:
    """The model Claude Code would ask for and where it is set: ``ANTHROPIC_MODEL`` in the environment,
    else in the highest-precedence settings file's env block, else its ``model``; None when unset."""
    if environ.get("ANTHROPIC_MODEL", "").strip():
        return environ["ANTHROPIC_MODEL"].strip(), "ANTHROPIC_MODEL"
    for f in reversed(files):
        if f.env.get("ANTHROPIC_MODEL", "").strip():
            return f.env["ANTHROPIC_MODEL"].strip(), f"ANTHROPIC_MODEL in {f.path}"
        if f.model:
            return f.model, f'"model" in {f.path}'
    return None
