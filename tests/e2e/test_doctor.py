"""``python -m pytest_gauge doctor`` against the fault-injecting loopback server: each misconfiguration of
docs/protocol.md#gateway-failures gets the right status and fix, and the key never appears in the output."""

from __future__ import annotations

import io
import json
import socket
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_gauge._internal.gateway.doctor import (
    Check,
    Target,
    format_checks,
    print_config,
    redact,
    run_checks,
    run_doctor,
    sibling_url,
    targets_for,
)
from pytest_gauge.testing import FaultPlan, LoopbackServer, ResponderError

KEY = "sk-doctor-test-4f2a9c"
MODEL = "loopback-model"


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    plan = FaultPlan(expected_key=KEY, status_400_models=frozenset({"bad-model"}))
    with LoopbackServer(faults=plan) as srv:
        yield srv


def environ(tmp_path: Path, base_url: str, **extra: str) -> dict[str, str]:
    """A clean environment: our key and URL, a home without any Codex config."""
    env = {
        "TAOTOKEN_API_KEY": KEY,
        "TAOTOKEN_BASE_URL": base_url,
        "HOME": str(tmp_path / "home"),
        "CODEX_HOME": str(tmp_path / "codex"),
    }
    env.update(extra)
    return env


def doctor(env: dict[str, str], models: list[str] | None = None, *secrets: str) -> tuple[int, str]:
    """Run the doctor; assert that neither the key nor any given secret (nor a piece of one) was printed."""
    out = io.StringIO()
    status = run_doctor(env, out, models=models, timeout=5.0)
    text = out.getvalue()
    for secret in (KEY, env.get("TAOTOKEN_API_KEY", ""), *secrets):
        for piece in [secret.strip(), *secret.split()]:
            if len(piece) >= 4:
                assert piece not in text, f"secret leaked into the doctor output:\n{text}"
    return status, text


def lines(text: str, status: str) -> list[str]:
    """Report lines of one status (each carries its fix), with a newline after each."""
    rows = text.splitlines()
    found = []
    for i, row in enumerate(rows):
        if row.startswith(f"{status} "):
            fix = rows[i + 1] if i + 1 < len(rows) and rows[i + 1].startswith("      fix:") else ""
            found.append(row + "\n" + fix)
    return found


def test_good_key_and_url_pass_with_every_check_ok(tmp_path: Path, server: LoopbackServer) -> None:
    status, text = doctor(environ(tmp_path, server.base_url, TAOTOKEN_JUDGE_MODEL=MODEL))
    assert status == 0
    assert not lines(text, "warn") and not lines(text, "fail")
    assert len(lines(text, "ok")) == 3  # key, base URL, the judge model's call
    assert "judge model loopback-model: answered" in text
    [body] = server.bodies
    assert body["model"] == MODEL and body["max_tokens"] == 1
    assert server.headers_seen[0]["authorization"] == f"Bearer {KEY}"


def test_without_models_a_single_get_models_is_sent(tmp_path: Path, server: LoopbackServer) -> None:
    status, text = doctor(environ(tmp_path, server.base_url))
    assert status == 0
    assert server.by_path == {"/v1/models": 1}
    assert f"GET {server.base_url}/models: answered" in text


def test_models_option_overrides_the_environment_and_keeps_role_labels(
    tmp_path: Path, server: LoopbackServer
) -> None:
    env = environ(tmp_path, server.base_url, TAOTOKEN_JUDGE_MODEL=MODEL, GAUGE_USER_MODEL="bad-model")
    status, text = doctor(env, ["other-model", MODEL])
    assert status == 0  # bad-model was not asked for
    assert [b["model"] for b in server.bodies] == ["other-model", MODEL]
    assert "model other-model (--models): answered" in text and "judge model loopback-model: answered" in text


def test_key_unset_fails_naming_the_variable_and_sends_nothing(
    tmp_path: Path, server: LoopbackServer
) -> None:
    env = environ(tmp_path, server.base_url)
    del env["TAOTOKEN_API_KEY"]
    status, text = doctor(env)
    assert status == 1
    [fail] = lines(text, "fail")
    assert "TAOTOKEN_API_KEY is not set" in fail and "export TAOTOKEN_API_KEY=" in fail
    assert server.requests_total == 0
    assert "not sent: fix the key first" in text


def test_key_with_an_inner_newline_fails_without_printing_any_part(
    tmp_path: Path, server: LoopbackServer
) -> None:
    pasted = "sk-first-half\nsecond-half-77"
    status, text = doctor(environ(tmp_path, server.base_url, TAOTOKEN_API_KEY=pasted), None, pasted)
    assert status == 1
    [fail] = lines(text, "fail")
    assert fail.startswith("fail  TAOTOKEN_API_KEY:") and "newline" in fail
    assert server.requests_total == 0


def test_surrounding_whitespace_on_the_key_is_a_warning_only(tmp_path: Path, server: LoopbackServer) -> None:
    status, text = doctor(environ(tmp_path, server.base_url, TAOTOKEN_API_KEY=f"  {KEY}\n"))
    assert status == 0
    [warn] = lines(text, "warn")
    assert "TAOTOKEN_API_KEY" in warn and "whitespace" in warn


def test_tracking_query_fails_and_shows_the_clean_url(tmp_path: Path, server: LoopbackServer) -> None:
    status, text = doctor(environ(tmp_path, server.base_url + "?utm_source=x", TAOTOKEN_JUDGE_MODEL=MODEL))
    assert status == 1
    [fail] = lines(text, "fail")
    assert "query string" in fail and f"fix: export TAOTOKEN_BASE_URL={server.base_url}\n" in fail + "\n"
    # the request itself was sent to the clean URL, which works
    assert "judge model loopback-model: answered" in text
    assert server.by_path == {"/v1/chat/completions": 1}


def test_doubled_v1_warns_with_the_fix_and_the_sibling_probe_finds_the_working_url(
    tmp_path: Path, server: LoopbackServer
) -> None:
    status, text = doctor(environ(tmp_path, server.base_url + "/v1", TAOTOKEN_JUDGE_MODEL=MODEL))
    assert status == 1
    [warn] = lines(text, "warn")
    assert "/v1/v1" in warn and f"export TAOTOKEN_BASE_URL={server.base_url}\n" in warn + "\n"
    [fail] = lines(text, "fail")
    assert "404" in fail and f"final URL {server.base_url}/v1/chat/completions" in fail
    assert f"use TAOTOKEN_BASE_URL={server.base_url} " in fail


def test_missing_v1_404s_and_the_sibling_with_v1_is_suggested(tmp_path: Path, server: LoopbackServer) -> None:
    status, text = doctor(environ(tmp_path, server.root_url, TAOTOKEN_JUDGE_MODEL=MODEL))
    assert status == 1
    [fail] = lines(text, "fail")
    assert f"final URL {server.root_url}/chat/completions" in fail
    assert f"use TAOTOKEN_BASE_URL={server.root_url}/v1 " in fail


def test_extra_v1_against_a_server_without_prefix_suggests_dropping_it(tmp_path: Path) -> None:
    with LoopbackServer(path_prefix="", faults=FaultPlan(expected_key=KEY)) as srv:
        status, text = doctor(environ(tmp_path, srv.root_url + "/v1"))
    assert status == 1
    [fail] = lines(text, "fail")
    assert f"GET {srv.root_url}/v1/models" in fail and f"use TAOTOKEN_BASE_URL={srv.root_url} " in fail


def test_404_where_no_sibling_answers_says_so(tmp_path: Path) -> None:
    with LoopbackServer(path_prefix="/api/v1", faults=FaultPlan(expected_key=KEY)) as srv:
        status, text = doctor(environ(tmp_path, srv.root_url, TAOTOKEN_JUDGE_MODEL=MODEL))
    assert status == 1
    [fail] = lines(text, "fail")
    assert "404" in fail and "neither" in fail and "use TAOTOKEN_BASE_URL=" not in fail


def test_wrong_key_is_a_401_naming_the_variable(tmp_path: Path, server: LoopbackServer) -> None:
    wrong = "sk-wrong-key-0000"
    env = environ(tmp_path, server.base_url, TAOTOKEN_API_KEY=wrong, TAOTOKEN_JUDGE_MODEL=MODEL)
    status, text = doctor(env, None, wrong)
    assert status == 1
    [fail] = lines(text, "fail")
    assert "401" in fail and "check TAOTOKEN_API_KEY" in fail


def test_model_answered_400_names_the_model_and_the_role(tmp_path: Path, server: LoopbackServer) -> None:
    env = environ(tmp_path, server.base_url, TAOTOKEN_JUDGE_MODEL="bad-model", GAUGE_USER_MODEL=MODEL)
    status, text = doctor(env)
    assert status == 1
    [fail] = lines(text, "fail")
    assert "400" in fail and "role judge" in fail and "model bad-model" in fail
    assert "user model loopback-model: answered" in text


def test_one_request_per_distinct_model_with_all_its_roles(tmp_path: Path, server: LoopbackServer) -> None:
    env = environ(
        tmp_path,
        server.base_url,
        TAOTOKEN_JUDGE_MODEL=MODEL,
        GAUGE_AGENT_MODEL=MODEL,
        GAUGE_AGENT_X_MODEL="bad-model",
    )
    status, text = doctor(env)
    assert status == 1
    assert [b["model"] for b in server.bodies] == [MODEL, "bad-model"]
    assert "judge, agent model loopback-model: answered" in text and "role agent x" in text


def test_connection_refused_is_reported_as_a_connection_error(tmp_path: Path) -> None:
    # A port bound but not listening refuses every connection, and no other test can take it meanwhile
    # (a just-closed server's port could be reused by a parallel test).
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{held.getsockname()[1]}/v1"
        status, text = doctor(environ(tmp_path, closed))
    assert status == 1
    [fail] = lines(text, "fail")
    assert "connection error" in fail and "TAOTOKEN_BASE_URL" in fail


def test_anthropic_variables_agreeing_with_the_gateway_are_only_noted(
    tmp_path: Path, server: LoopbackServer
) -> None:
    token = "anthropic-token-secret-1"
    root = server.base_url.removesuffix("/v1")
    env = environ(tmp_path, server.base_url, ANTHROPIC_AUTH_TOKEN=token, ANTHROPIC_BASE_URL=root)
    status, text = doctor(env, None, token)
    assert status == 0 and not lines(text, "warn"), text
    [note] = [line for line in lines(text, "ok") if "ANTHROPIC" in line]
    assert "ANTHROPIC_BASE_URL, ANTHROPIC_AUTH_TOKEN are set" in note and "Claude Code" in note


def test_anthropic_key_without_taotoken_key_names_the_classic_401(
    tmp_path: Path, server: LoopbackServer
) -> None:
    token = "anthropic-key-secret-2"
    env = environ(tmp_path, server.base_url, ANTHROPIC_API_KEY=token)
    del env["TAOTOKEN_API_KEY"]
    status, text = doctor(env, None, token)
    assert status == 1
    [warn] = [w for w in lines(text, "warn") if "ANTHROPIC" in w]
    assert "classic 401" in warn and "export TAOTOKEN_API_KEY=" in warn


def write_codex(tmp_path: Path, text: str) -> None:
    folder = tmp_path / "codex"
    folder.mkdir(exist_ok=True)
    (folder / "config.toml").write_text(text, encoding="utf-8")


def test_codex_provider_with_our_key_pointing_elsewhere_warns(tmp_path: Path, server: LoopbackServer) -> None:
    write_codex(
        tmp_path,
        '[model_providers.tt]\nname = "TT"\nbase_url = "https://elsewhere.test/v1"\n'
        'env_key = "TAOTOKEN_API_KEY"\nwire_api = "responses"\n',
    )
    status, text = doctor(environ(tmp_path, server.base_url))
    assert status == 0
    [warn] = lines(text, "warn")
    assert "[model_providers.tt]" in warn and "https://elsewhere.test/v1" in warn and server.base_url in warn


def test_codex_provider_at_our_url_with_another_env_key_warns(tmp_path: Path, server: LoopbackServer) -> None:
    write_codex(
        tmp_path, f'[model_providers.tt]\nbase_url = "{server.base_url}/"\nenv_key = "ANTHROPIC_AUTH_TOKEN"\n'
    )
    status, text = doctor(environ(tmp_path, server.base_url))
    assert status == 0
    [warn] = lines(text, "warn")
    assert "ANTHROPIC_AUTH_TOKEN" in warn and "classic 401" in warn and 'env_key = "TAOTOKEN_API_KEY"' in warn


def test_codex_config_that_agrees_is_ok_and_codex_home_defaults_to_home(
    tmp_path: Path, server: LoopbackServer
) -> None:
    env = environ(tmp_path, server.base_url)
    del env["CODEX_HOME"]
    folder = tmp_path / "home" / ".codex"
    folder.mkdir(parents=True)
    (folder / "config.toml").write_text(
        f'model_provider = "tt"\n[model_providers.tt]\nbase_url = "{server.base_url}"\n'
        'env_key = "TAOTOKEN_API_KEY"\n'
        '[model_providers.other]\nbase_url = "https://other.test"\nenv_key = "OTHER_KEY"\n',
        encoding="utf-8",
    )
    status, text = doctor(env)
    assert status == 0 and not lines(text, "warn")
    assert f"ok    Codex {folder / 'config.toml'}: no provider disagrees" in text


def test_unparsable_codex_config_warns(tmp_path: Path, server: LoopbackServer) -> None:
    write_codex(tmp_path, "[model_providers.tt\n")
    status, text = doctor(environ(tmp_path, server.base_url))
    assert status == 0
    [warn] = lines(text, "warn")
    assert "could not read it" in warn and "TOML" in warn


def test_print_config_has_placeholders_and_never_the_key() -> None:
    env = {"TAOTOKEN_API_KEY": KEY, "TAOTOKEN_BASE_URL": "https://gw.example/v1/?utm_source=x"}
    text = print_config("all", env)
    assert KEY not in text
    assert text.count("<your TAOTOKEN_API_KEY>") == 1  # Claude Code's token (CC Switch names the variable)
    claude = json.loads(text[text.index("{") : text.index("}\n}") + 3])
    assert claude == {
        "env": {"ANTHROPIC_BASE_URL": "https://gw.example", "ANTHROPIC_AUTH_TOKEN": "<your TAOTOKEN_API_KEY>"}
    }
    codex = tomllib.loads(print_config("codex", env))
    assert codex == {
        "model_provider": "taotoken",
        "model_providers": {
            "taotoken": {
                "name": "TaoToken",
                "base_url": "https://gw.example/v1",
                "env_key": "TAOTOKEN_API_KEY",
                "wire_api": "responses",
            }
        },
    }
    switch = print_config("cc-switch", env)
    assert "provider name: TaoToken" in switch and "base URL: https://gw.example/v1" in switch
    assert "key variable: TAOTOKEN_API_KEY" in switch
    assert "taotoken.net/api" in print_config("codex", {})  # the default gateway when nothing is set
    with pytest.raises(ValueError, match="claude-code"):
        print_config("vscode", env)


def test_sibling_url_toggles_a_trailing_v1() -> None:
    assert sibling_url("https://x.test/api") == "https://x.test/api/v1"
    assert sibling_url("https://x.test/api/v1/") == "https://x.test/api"
    assert sibling_url("https://x.test/v1/v1") == "https://x.test/v1"


def test_targets_deduplicate_models_and_label_roles() -> None:
    env = {
        "TAOTOKEN_JUDGE_MODEL": "a",
        "GAUGE_AGENT_MODEL": " a ",
        "GAUGE_USER_MODEL": "b",
        "GAUGE_AGENT_Z_MODEL": "c",
    }
    expected = [Target("a", "judge, agent"), Target("b", "user"), Target("c", "agent z")]
    assert targets_for(env, None) == expected
    assert targets_for(env, ["b", "d", "b", " "]) == [Target("b", "user"), Target("d", "")]
    assert targets_for({}, None) == []


def test_redact_hides_secrets_and_their_pieces() -> None:
    assert redact("key sk-abcdef and sk-abcdef!", ["sk-abcdef"]) == "key *** and ***!"
    assert redact("part second-part", ["first\nsecond-part"]) == "part ***"
    assert redact("abc", ["abc"]) == "abc"  # too short to redact safely


def test_format_checks_summary_and_fix_lines() -> None:
    text = format_checks([Check("ok", "a", "fine", "unused"), Check("fail", "b", "broken", "do x")])
    assert text.splitlines() == [
        "pytest-gauge doctor",
        "ok    a: fine",
        "fail  b: broken; fix: do x",
        "doctor FAILED: 1 ok, 0 warn, 1 fail",
    ]


def test_run_checks_skips_requests_for_a_non_http_url(tmp_path: Path) -> None:
    checks = run_checks(
        {"TAOTOKEN_API_KEY": KEY, "TAOTOKEN_BASE_URL": "taotoken.net/api", "CODEX_HOME": str(tmp_path)}
    )
    assert [c.status for c in checks] == ["ok", "fail", "warn"]
    assert checks[2].message == "not sent: fix the base URL first"


def test_404_about_the_model_is_not_taken_for_a_url_problem(tmp_path: Path) -> None:
    def responder(body: dict[str, object]) -> dict[str, object]:
        raise ResponderError(404, f"The model `{body['model']}` does not exist", code="model_not_found")

    with LoopbackServer(responder, faults=FaultPlan(expected_key=KEY)) as srv:
        status, text = doctor(environ(tmp_path, srv.base_url, GAUGE_USER_MODEL="gone-model"))
        assert srv.by_path == {"/v1/chat/completions": 1}  # no sibling probing
    assert status == 1
    [fail] = lines(text, "fail")
    assert "role user" in fail and "model gone-model" in fail and "use TAOTOKEN_BASE_URL" not in fail
