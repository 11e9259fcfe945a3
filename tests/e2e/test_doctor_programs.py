"""Doctor for agent programs and their configuration: each program a suite runs is
found with its path and version or named with its install command, and each misconfiguration the
setup guide names as a source of 401/404 is reported, set up one at a time, as exactly one line that
carries its fix; keys are never printed. The gateway's own checks: tests/e2e/test_doctor.py."""

from __future__ import annotations

import io
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_gauge._internal.cli import main
from pytest_gauge._internal.gateway.doctor import Program, run_doctor
from pytest_gauge.testing import FaultPlan, LoopbackServer
from tests.e2e.test_doctor import KEY, environ, lines, write_codex

TOKEN = "anthropic-token-secret-77"
AGREEING_CODEX = (
    'model_provider = "tt"\n[model_providers.tt]\nbase_url = "{url}"\n'
    'env_key = "TAOTOKEN_API_KEY"\nwire_api = "responses"\n'
)


@pytest.fixture(scope="module")
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer(faults=FaultPlan(expected_key=KEY)) as srv:
        yield srv


def doctor(env: dict[str, str], programs: tuple[Program, ...] = ()) -> str:
    out = io.StringIO()
    run_doctor(env, out, timeout=5.0, programs=programs)
    text = out.getvalue()
    for secret in (KEY, TOKEN, "token-secret-77"):
        assert secret not in text, text
    return text


def only_warning(text: str) -> str:
    """The report's one non-ok finding, as printed: one line, with its fix on it."""
    found = [*lines(text, "warn"), *lines(text, "fail")]
    assert len(found) == 1, text
    line = found[0].rstrip("\n")
    assert "\n" not in line and "; fix: " in line
    return line


def test_a_clean_setup_has_no_warning(tmp_path: Path, server: LoopbackServer) -> None:
    write_codex(tmp_path, AGREEING_CODEX.format(url=server.base_url))
    text = doctor(environ(tmp_path, server.base_url))  # Claude Code's settings live in its settings.json
    assert not lines(text, "warn") and not lines(text, "fail"), text


def test_both_anthropic_auth_variables(tmp_path: Path, server: LoopbackServer) -> None:
    env = environ(tmp_path, server.base_url, ANTHROPIC_API_KEY=TOKEN, ANTHROPIC_AUTH_TOKEN=TOKEN + "x")
    line = only_warning(doctor(env))
    assert "both ANTHROPIC_API_KEY and ANTHROPIC_AUTH_TOKEN are set" in line
    assert line.endswith("fix: unset ANTHROPIC_API_KEY; keep the gateway key in ANTHROPIC_AUTH_TOKEN only")


def test_anthropic_base_url_elsewhere(tmp_path: Path, server: LoopbackServer) -> None:
    line = only_warning(
        doctor(environ(tmp_path, server.base_url, ANTHROPIC_BASE_URL="https://api.anthropic.com"))
    )
    root = server.base_url.removesuffix("/v1")
    assert "https://api.anthropic.com is not the configured gateway" in line
    assert line.endswith(f"fix: export ANTHROPIC_BASE_URL={root}")


@pytest.mark.parametrize(
    ("suffix", "reason"), [("?utm_source=docs", "tracking parameters"), ("/v1/v1", "a doubled '/v1/v1'")]
)
def test_anthropic_base_url_with_tracking_or_doubled_v1(
    tmp_path: Path, server: LoopbackServer, suffix: str, reason: str
) -> None:
    root = server.base_url.removesuffix("/v1")
    line = only_warning(doctor(environ(tmp_path, server.base_url, ANTHROPIC_BASE_URL=root + suffix)))
    assert "ANTHROPIC_BASE_URL" in line and reason in line
    assert line.endswith(f"fix: export ANTHROPIC_BASE_URL={root}")


def test_anthropic_variables_where_codex_runs(tmp_path: Path, server: LoopbackServer) -> None:
    write_codex(tmp_path, AGREEING_CODEX.format(url=server.base_url))
    line = only_warning(doctor(environ(tmp_path, server.base_url, ANTHROPIC_AUTH_TOKEN=TOKEN)))
    assert "ANTHROPIC_AUTH_TOKEN exported where Codex runs" in line
    assert "fix: unset ANTHROPIC_AUTH_TOKEN in Codex's shell" in line


@pytest.mark.parametrize(
    ("table", "expected", "fix"),
    [
        (
            'base_url = "{url}"\nwire_api = "responses"\n',
            "has no env_key",
            'add env_key = "TAOTOKEN_API_KEY"',
        ),
        (
            'base_url = "{url}"\nenv_key = "TAOTOKEN_API_KEY"\nwire_api = "chat"\n',
            'wire_api = "chat"',
            'set wire_api = "responses"',
        ),
        (
            'base_url = "{url}/v1?utm_campaign=x"\nenv_key = "TAOTOKEN_API_KEY"\n',
            "'/v1/v1'",
            'base_url = "{url}"',
        ),
    ],
    ids=["no-env-key", "wire-api-chat", "doubled-v1-and-tracking"],
)
def test_codex_provider_misconfigurations(
    tmp_path: Path, server: LoopbackServer, table: str, expected: str, fix: str
) -> None:
    write_codex(tmp_path, "[model_providers.tt]\n" + table.format(url=server.base_url))
    line = only_warning(doctor(environ(tmp_path, server.base_url)))
    assert "Codex" in line and "[model_providers.tt]" in line and expected in line
    assert f"fix: {fix.format(url=server.base_url)}" in line


def fake_program(folder: Path, name: str, version: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f"#!{sys.executable}\nprint({version!r})\n", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_programs_found_with_version_or_named_with_their_install(
    tmp_path: Path, server: LoopbackServer
) -> None:
    fake_program(tmp_path / "bin", "claude", "2.1.328 (Claude Code)")
    env = environ(tmp_path, server.base_url, PATH=str(tmp_path / "bin"))
    programs = (
        Program("claude", ("s/cc",), "npm install -g @anthropic-ai/claude-code@2.1.328"),
        Program("codex", ("s/cx",), "npm install -g @openai/codex@0.169.0"),
    )
    text = doctor(env, programs)
    [found] = [line for line in lines(text, "ok") if "program claude" in line]
    assert f"{tmp_path / 'bin' / 'claude'} (2.1.328 (Claude Code)) (used by s/cc)" in found
    fake_program(tmp_path / "old", "codex", "codex-cli 0.100.0")
    old = doctor(environ(tmp_path, server.base_url, PATH=str(tmp_path / "old")), programs[1:])
    outdated = only_warning(old)
    assert "codex is 0.100.0, the presets are set up and tested for 0.169.0 (used by s/cx)" in outdated
    assert outdated.endswith("fix: npm install -g @openai/codex@0.169.0")
    [missing] = lines(text, "fail")
    assert missing.rstrip("\n").endswith(
        "program codex: not found on PATH (used by s/cx); fix: npm install -g @openai/codex@0.169.0"
    )


def test_the_cli_finds_the_programs_of_a_suite(tmp_path: Path, server: LoopbackServer) -> None:
    suite = tmp_path / "suites" / "prog"
    suite.mkdir(parents=True)
    (suite / "tasks.jsonl").write_text('{"format_version": 1}\n', encoding="utf-8")
    (suite / "test_prog.py").write_text(
        "from pytest_gauge import CommandAgent, ModelAgent, Suite\n"
        "from pytest_gauge import HttpAgent\n"
        "suite = Suite(agents=[ModelAgent('m', 'model-m'),"
        " CommandAgent('tool', ('gauge-no-such-program', '{prompt}')),"
        " HttpAgent('svc', 'http://127.0.0.1:9/chat',"
        " headers={'Authorization': 'Bearer ${SVC_GAUGE_TOKEN}'})])\n",
        encoding="utf-8",
    )
    env = environ(tmp_path, server.base_url, PATH="/usr/bin:/bin")
    out = io.StringIO()
    main(["doctor", str(suite), "--models", "loopback-model"], environ=env, out=out)
    [missing, unset] = lines(out.getvalue(), "fail")
    assert "program gauge-no-such-program: not found on PATH (used by prog/tool)" in missing
    assert "fix: install 'gauge-no-such-program' or put it on PATH" in missing
    assert "HttpAgent prog/svc: its headers read SVC_GAUGE_TOKEN, not set" in unset
    assert "fix: export SVC_GAUGE_TOKEN=..." in unset
    out = io.StringIO()
    main(
        ["doctor", str(suite), "--models", "loopback-model"],
        environ={**env, "SVC_GAUGE_TOKEN": TOKEN},
        out=out,
    )
    assert (
        "ok    HttpAgent prog/svc: http://127.0.0.1:9/chat, headers read SVC_GAUGE_TOKEN (set)"
        in out.getvalue()
    )
    assert TOKEN not in out.getvalue()


def test_anthropic_base_url_with_a_doubled_v1_elsewhere_is_fixed_to_the_gateway(
    tmp_path: Path, server: LoopbackServer
) -> None:
    env = environ(tmp_path, server.base_url, ANTHROPIC_BASE_URL="https://api.anthropic.com/v1/v1")
    line = only_warning(doctor(env))
    assert "has a doubled '/v1/v1' and is not the configured gateway" in line
    assert line.endswith(f"fix: export ANTHROPIC_BASE_URL={server.base_url.removesuffix('/v1')}")


def _settings(path: Path, data: dict[str, object]) -> None:
    import json

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")


def _doctor_in(project: Path, env: dict[str, str]) -> str:
    out = io.StringIO()
    run_doctor(env, out, timeout=5.0, project=project)
    text = out.getvalue()
    assert TOKEN not in text and KEY not in text, text
    return text


def test_claude_codes_settings_files_are_read_and_named(tmp_path: Path, server: LoopbackServer) -> None:
    """User settings with a tracking link, project settings without a key: one line each, naming the
    file; the local settings' model is probed with one Messages request at the SDK's path."""
    env = environ(tmp_path, server.base_url)
    user = tmp_path / "home" / ".claude" / "settings.json"
    root = server.base_url.removesuffix("/v1")
    _settings(user, {"env": {"ANTHROPIC_BASE_URL": root + "/?utm_source=newsletter"}})
    _settings(tmp_path / "proj" / ".claude" / "settings.local.json", {"model": "claude-local"})
    before = dict(server.by_path)
    text = _doctor_in(tmp_path / "proj", env)
    [link] = [line for line in lines(text, "warn") if "ANTHROPIC_BASE_URL in" in line]
    assert str(user) in link and "tracking parameters" in link
    assert link.rstrip().endswith(f"fix: set ANTHROPIC_BASE_URL={root} (env block)")
    [keyless] = [line for line in lines(text, "warn") if "sends no key" in line]
    assert "settings.local.json" in keyless and '"ANTHROPIC_AUTH_TOKEN"' in keyless
    [probe] = [line for line in lines(text, "ok") if "model claude-local" in line]
    assert probe.startswith('ok    Claude Code ("model" in ') and "answered" in probe
    assert server.by_path.get("/v1/messages", 0) == before.get("/v1/messages", 0) + 1


def test_codexs_configured_model_is_probed_once(tmp_path: Path, server: LoopbackServer) -> None:
    write_codex(tmp_path, 'model = "gpt-codex"\n' + AGREEING_CODEX.format(url=server.base_url))
    before = dict(server.by_path)
    text = _doctor_in(tmp_path, environ(tmp_path, server.base_url))
    [probe] = [line for line in lines(text, "ok") if "model gpt-codex" in line]
    assert "Codex (model in " in probe and "answered" in probe
    assert server.by_path.get("/v1/responses", 0) == before.get("/v1/responses", 0) + 1
    assert not lines(text, "warn") and not lines(text, "fail"), text


def test_a_tracking_links_fix_keeps_the_gateways_path() -> None:
    from pytest_gauge._internal.gateway.program_doctor import (
        ClaudeSettings,
        claude_settings_findings,
        url_problem,
    )

    assert url_problem("https://gw.example/api?utm_source=x") == (
        "tracking parameters or a fragment (pasted from a link)",
        "https://gw.example/api",
    )
    assert url_problem("https://gw.example/api/v1?fbclid=1#top")[1] == "https://gw.example/api/v1"  # type: ignore[index]
    settings = ClaudeSettings(
        "s.json", {"ANTHROPIC_BASE_URL": "https://gw.example/api?utm_source=x", "ANTHROPIC_AUTH_TOKEN": "t"}
    )
    [finding] = claude_settings_findings([settings], {}, "https://gw.example/api/v1")
    assert finding.fix == "set ANTHROPIC_BASE_URL=https://gw.example/api (env block)"
