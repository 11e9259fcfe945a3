"""The sandbox's command line (run/sandbox.py, a pure function of its record), the inside URLs of the
proxy route, the bounded read of a command's output and the redaction of what programs print."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pytest_gauge._internal.gateway.redact import host_secrets, redact_output
from pytest_gauge._internal.process.program_host import inside_urls
from pytest_gauge._internal.run.sandbox import (
    HOME,
    PROXY_PORT,
    WORKSPACE,
    SandboxSpec,
    allowed_environment,
    bwrap_argv,
)
from pytest_gauge._internal.suite.file_checks import read_tail


def _pairs(argv: list[str], flag: str) -> list[tuple[str, str]]:
    """The (source, destination) pairs of every ``flag SRC DEST`` in ``argv``."""
    return [(argv[i + 1], argv[i + 2]) for i, a in enumerate(argv) if a == flag]


def test_the_command_line_namespaces_binds_and_environment(tmp_path: Path) -> None:
    env = allowed_environment(
        {"OPENAI_BASE_URL": "http://127.0.0.1:8080/w/t/v1"},
        {"PATH": "/usr/bin", "LC_ALL": "C", "TAOTOKEN_API_KEY": "sk-secret", "GITHUB_TOKEN": "ghp_x"},
    )
    spec = SandboxSpec(tmp_path / "ws", env, home=tmp_path / "home", read_only=(Path("/opt/tool"),))
    argv = bwrap_argv(spec, ["prog", "arg"])
    for flag in (
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-net",
        "--die-with-parent",
        "--new-session",
        "--clearenv",
    ):
        assert flag in argv
    assert argv[-3:] == ["--", "prog", "arg"]
    assert (str(tmp_path / "ws"), WORKSPACE) in _pairs(argv, "--bind")
    assert (str(tmp_path / "home"), HOME) in _pairs(argv, "--bind")
    assert ("/opt/tool", "/opt/tool") in _pairs(argv, "--ro-bind-try")
    assert argv[argv.index("--chdir") + 1] == WORKSPACE
    assert argv.index("--clearenv") < argv.index("--setenv")  # the environment is built after clearing
    inside = dict(_pairs(argv, "--setenv"))
    assert inside == {
        "PATH": "/usr/bin",
        "LC_ALL": "C",
        "LANG": "C.UTF-8",
        "HOME": HOME,
        "TMPDIR": "/tmp",
        "OPENAI_BASE_URL": "http://127.0.0.1:8080/w/t/v1",
    }
    assert not any(str(Path.home()) == src for src, _ in _pairs(argv, "--bind"))


def test_with_a_relay_the_inner_relay_runs_first(tmp_path: Path) -> None:
    spec = SandboxSpec(tmp_path, {}, relay=tmp_path / "proxy.sock", python="/usr/bin/python3")
    argv = bwrap_argv(spec, ["claude", "-p", "hi"])
    command = argv[argv.index("--") + 1 :]
    assert command[:4] == ["/usr/bin/python3", "-I", "-S", "-c"]
    assert command[5:] == [str(PROXY_PORT), "/run/gauge/proxy.sock", "claude", "-p", "hi"]
    assert (str(tmp_path / "proxy.sock"), "/run/gauge/proxy.sock") in _pairs(argv, "--bind")


def test_the_routes_urls_point_at_the_relay_inside() -> None:
    urls = {"a": "http://127.0.0.1:43123/w/tok/v1", "b": "http://127.0.0.1:431234/x", "c": "localhost"}
    assert inside_urls(urls, 43123) == {
        "a": f"http://127.0.0.1:{PROXY_PORT}/w/tok/v1",
        "b": "http://127.0.0.1:431234/x",
        "c": "localhost",
    }


def test_a_bounded_read_keeps_the_tail_and_counts_the_rest() -> None:
    async def read() -> tuple[bytes, int]:
        stream = asyncio.StreamReader()
        for i in range(100):
            stream.feed_data(bytes([65 + i % 26]) * 10_000)
        stream.feed_eof()
        tail = await read_tail(stream, 25_000)
        return tail.data, tail.total

    data, total = asyncio.run(read())
    assert total == 1_000_000 and len(data) == 25_000
    assert data.endswith(bytes([65 + 99 % 26]) * 10_000)


def test_output_is_redacted_of_host_secrets_and_token_shapes(monkeypatch: pytest.MonkeyPatch) -> None:
    environ = {
        "GITHUB_TOKEN": "ghp_abcdefghijklmnop1234",
        "DB_PASSWORD": "hunter2hunter2",
        "MY_SECRET": "s3cr3t-value-xyz",
        "SHORT_TOKEN": "abc",
        "PATH": "/usr/bin:/bin",
        "TAOTOKEN_BASE_URL": "http://127.0.0.1:8000/v1",  # a word of the name, not a secret's
        "KEYBOARD_LAYOUT": "dvorak-programmer",
    }
    assert set(host_secrets(environ)) == {"ghp_abcdefghijklmnop1234", "hunter2hunter2", "s3cr3t-value-xyz"}
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    text = redact_output("db hunter2hunter2, s3cr3t-value-xyz; sk-live0123456789abc; AKIAABCDEFGHIJKLMNOP")
    assert "hunter2" not in text and "s3cr3t" not in text and "0123456789abc" not in text, text
    assert "AKIA" not in text, text
    assert redact_output("basic usage of a Bearer of news") == "basic usage of a Bearer of news"


def test_without_a_sandbox_programs_refuse_in_one_line_naming_the_fix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pytest_gauge._internal.gateway.gateway import CallContext
    from pytest_gauge._internal.process.program_host import ProxyProgramHost
    from pytest_gauge._internal.run import sandbox
    from pytest_gauge._internal.run.commands import SandboxedCommands
    from pytest_gauge._internal.run.programs import ProgramMissing

    monkeypatch.setattr(sandbox, "sandbox_problem", lambda: "bubblewrap (bwrap) is not installed")
    host = ProxyProgramHost(None, unsandboxed=False)  # type: ignore[arg-type]  # refused before any route
    with pytest.raises(ProgramMissing) as info:
        host.endpoint(CallContext("s", "t", "transcript/t/a/0", "single"), None)  # type: ignore[arg-type]
    text = str(info.value)
    assert "\n" not in text and "bubblewrap (bwrap) is not installed" in text
    assert "apt-get install bubblewrap" in text and "--gauge-unsandboxed" in text
    outcome = asyncio.run(SandboxedCommands()(["true"], Path("."), 5.0))
    assert outcome.code == 127 and "apt-get install bubblewrap" in outcome.output
