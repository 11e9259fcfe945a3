"""``python -m pytest_gauge doctor``: check the gateway setup before a paid run
(docs/protocol.md#gateway-failures).

Every check is a pure-ish function returning :class:`Check` results (ok / warn / fail, each with its
fix), so the CLI and the ``--gauge-doctor`` pytest flag print the same thing. The key is never printed,
nor any part of it: every line goes through :func:`redact` as a last line of defence.
"""

from __future__ import annotations

import json
import re
import tomllib
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TextIO

from ..records import NEUTRAL_API
from ..records.json_types import JSONObject
from .batch_doctor import batch_checks
from .diagnosis import diagnose
from .endpoint import (
    KEY_VARIABLE,
    ROLE_KEY_VARIABLES,
    URL_VARIABLE,
    UrlCheck,
    check_base_url,
    check_key,
    configured_base_url,
    fixed_path_url,
    key_variables,
    role_keys,
)
from .endpoint import read_key as _read_key
from .errors import rejects_format
from .program_doctor import (
    ClaudeSettings,
    Finding,
    Program,
    Service,
    anthropic_setting_findings,
    claude_model,
    claude_settings_findings,
    claude_settings_paths,
    codex_provider_findings,
    program_findings,
    read_claude_settings,
    service_findings,
)
from .redact import redact as _redact
from .transport import APIConnectionError, APITimeoutError, CallError, status_error, tls_context
from .wire import wire_format
from .wire.anthropic import MESSAGES
from .wire.responses import RESPONSES

if TYPE_CHECKING:  # openai is imported where a check runs: the CLI's other commands start without it
    import openai

__all__ = [
    "ANTHROPIC_VARIABLES",
    "CONFIG_KINDS",
    "DEFAULT_TIMEOUT",
    "KEY_PLACEHOLDER",
    "ROLE_VARIABLES",
    "Check",
    "Program",
    "Service",
    "Target",
    "anthropic_checks",
    "base_url_checks",
    "codex_checks",
    "codex_config_path",
    "configured_base_url",
    "format_checks",
    "key_checks",
    "print_config",
    "probe_checks",
    "redact",
    "run_checks",
    "run_doctor",
    "sibling_url",
    "targets_for",
]

Status = Literal["ok", "warn", "fail"]

ROLE_VARIABLES: tuple[tuple[str, str], ...] = (
    ("judge", "TAOTOKEN_JUDGE_MODEL"),
    ("agent", "GAUGE_AGENT_MODEL"),
    ("user", "GAUGE_USER_MODEL"),
)
"""(role, environment variable) pairs read when ``--models`` is not given."""

_AGENT_VARIABLE = re.compile(r"^GAUGE_AGENT_([A-Z0-9]+)_MODEL$")
ANTHROPIC_VARIABLES = ("ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_API_KEY")
CONFIG_KINDS = ("claude-code", "codex", "cc-switch", "all")
KEY_PLACEHOLDER = f"<your {KEY_VARIABLE}>"
DEFAULT_TIMEOUT = 10.0


@dataclass(frozen=True)
class Check:
    """One doctor finding: its status, what it is about, what was found, and the fix (empty when ok)."""

    status: Status
    topic: str
    message: str
    fix: str = ""


@dataclass(frozen=True)
class Target:
    """A model to try with one minimal chat call, and the role label(s) it serves ("" if only --models)."""

    model: str
    roles: str
    response_formats: tuple[JSONObject | None, ...] = (None,)
    """The formats to try in order (a judge's JSON-mode chain); the first one accepted is reported."""
    origin: str | None = None
    """The environment variable the model name was read from (``env_model``), for the fix."""
    api: str = NEUTRAL_API
    """The wire format the role calls the model in (``api=``): the probe is sent in it."""


# ------------------------------------------------------------------------------------------ helpers


def redact(text: str, secrets: Sequence[str]) -> str:
    """``text`` with every secret (and every 6+ character piece of one) replaced by ``***``, then
    through the run's one redactor (:func:`.redact.redact`: every known key, token shapes)."""
    pieces: set[str] = set()
    for secret in secrets:
        if len(secret.strip()) >= 4:
            pieces.add(secret.strip())
        pieces.update(p for p in secret.split() if len(p) >= 6)
    for piece in sorted(pieces, key=len, reverse=True):
        text = text.replace(piece, "***")
    return _redact(text, secrets)


def _show_url(url: str) -> str:
    """The URL without any user:password part (safe to print)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


def _same_url(a: str, b: str) -> bool:
    return a.strip().rstrip("/").lower() == b.strip().rstrip("/").lower()


def sibling_url(url: str) -> str:
    """The same base URL with its trailing ``/v1`` removed, or with ``/v1`` appended when it has none."""
    base = url.rstrip("/")
    return base[: -len("/v1")] if base.endswith("/v1") else base + "/v1"


def host_urls(url: str) -> tuple[str, str]:
    """The bare host of a base URL, with ``/v1`` and without (a gateway path such as ``/api`` that does
    not answer where the host itself does)."""
    parts = urllib.parse.urlsplit(url.strip())
    host = urllib.parse.urlunsplit((parts.scheme, parts.netloc, "", "", ""))
    return host + "/v1", host


# --------------------------------------------------------------------------------------- the checks


def key_checks(environ: Mapping[str, str]) -> list[Check]:
    """Is ``TAOTOKEN_API_KEY`` present and clean? Never looks further than its shape."""
    problem = check_key(environ)
    if problem is not None:
        fix = f"export {KEY_VARIABLE}=<your gateway key> (one line, no spaces)"
        return [Check("fail", KEY_VARIABLE, problem, fix)]
    raw = environ.get(KEY_VARIABLE, "")
    if raw != raw.strip():
        return [
            Check(
                "warn",
                KEY_VARIABLE,
                "is set but has leading or trailing whitespace (pytest-gauge strips it;"
                " other clients such as Codex send it as is)",
                f"export {KEY_VARIABLE} again without the spaces/newline",
            )
        ]
    return [Check("ok", KEY_VARIABLE, "is set (value not shown)"), *role_key_checks(environ)]


def role_key_checks(environ: Mapping[str, str]) -> list[Check]:
    """Each role's own key variable that is set (``TAOTOKEN_JUDGE_API_KEY``, ...): its shape, never its
    value; the role's requests below are sent with it."""
    checks: list[Check] = []
    for role, name in ROLE_KEY_VARIABLES.items():
        raw = environ.get(name)
        if raw is None or not raw.strip():
            continue
        if any(ch.isspace() for ch in raw.strip()):
            fix = f"export {name}=<the {role} key> (one line, no spaces)"
            checks.append(Check("fail", name, "contains whitespace or a newline inside the key", fix))
        else:
            checks.append(Check("ok", name, f"is set (value not shown): {role} calls send it"))
    return checks


def base_url_checks(environ: Mapping[str, str]) -> tuple[UrlCheck, list[Check]]:
    """Base URL hygiene: errors fail, path oddities warn with the corrected value."""
    raw = configured_base_url(environ)
    check = check_base_url(raw)
    found: list[Check] = []
    for error in check.errors:
        if check.url != raw:
            kept = check.full_url[len(check.url) :]
            fix = f"export {URL_VARIABLE}={_show_url(fixed_path_url(check.url))}{kept}"
        else:
            fix = f"set {URL_VARIABLE} to an http(s) URL"
        found.append(Check("fail", URL_VARIABLE, error, fix))
    for warning in check.warnings:
        fix = f"export {URL_VARIABLE}={_show_url(fixed_path_url(check.url))}"
        found.append(Check("warn", URL_VARIABLE, warning, fix))
    if not found:
        origin = "" if environ.get(URL_VARIABLE) else " (not set; the default)"
        found.append(Check("ok", URL_VARIABLE, f"{_show_url(check.url)}{origin}"))
    return check, found


def anthropic_checks(environ: Mapping[str, str]) -> list[Check]:
    """Claude Code's variables are not read here: noted when set, a warning naming the classic 401 when
    they stand in for the gateway key (program_checks looks at their values' agreement)."""
    present = [name for name in ANTHROPIC_VARIABLES if environ.get(name, "").strip()]
    if not present:
        return []
    one = len(present) == 1
    message = (
        f"{', '.join(present)} {'is' if one else 'are'} set: Claude Code reads {'it' if one else 'those'},"
        f" pytest-gauge does not (it reads {KEY_VARIABLE} and {URL_VARIABLE})"
    )
    if environ.get(KEY_VARIABLE, "").strip():  # both configured: fine (program_checks looks closer)
        return [Check("ok", "ANTHROPIC_*", message)]
    message += (
        f"; {KEY_VARIABLE} is not set, and mixing the Anthropic variables into an OpenAI-compatible"
        " client is the classic 401"
    )
    fix = f"export {KEY_VARIABLE}=<your gateway key> (the gateway key, under the name this plugin reads)"
    return [Check("warn", "ANTHROPIC_*", message, fix)]


def codex_config_path(environ: Mapping[str, str]) -> Path:
    """``$CODEX_HOME/config.toml``, else ``~/.codex/config.toml`` (home from ``HOME`` when given)."""
    if environ.get("CODEX_HOME"):
        return Path(environ["CODEX_HOME"]) / "config.toml"
    home = Path(environ["HOME"]) if environ.get("HOME") else Path.home()
    return home / ".codex" / "config.toml"


def codex_checks(environ: Mapping[str, str], base_url: str) -> list[Check]:
    """Does a Codex provider use our key against another URL, or our URL with another key variable?"""
    path = codex_config_path(environ)
    if not path.is_file():
        return []
    topic = f"Codex {path}"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        reason = f"could not read it: {type(exc).__name__}: {exc}"
        return [Check("warn", topic, reason, "fix the TOML syntax")]
    providers = data.get("model_providers")
    found: list[Check] = []
    if isinstance(providers, dict):
        for name, table in sorted(providers.items()):
            if not isinstance(table, dict):
                continue
            env_key = table.get("env_key")
            url = table.get("base_url")
            where = f"[model_providers.{name}]"
            found += [_check(f) for f in codex_provider_findings(where, table)]
            fixed = isinstance(url, str) and _same_url(fixed_path_url(url), base_url)  # said above
            if (
                env_key == KEY_VARIABLE
                and isinstance(url, str)
                and not _same_url(url, base_url)
                and not fixed
            ):
                found.append(
                    Check(
                        "warn",
                        topic,
                        f"{where} reads {KEY_VARIABLE} but sends it to {_show_url(url)},"
                        f" while {URL_VARIABLE} is {_show_url(base_url)}",
                        f'make them agree: base_url = "{_show_url(base_url)}" in {where},'
                        f" or change {URL_VARIABLE}",
                    )
                )
            elif isinstance(url, str) and _same_url(url, base_url) and env_key not in (KEY_VARIABLE, None):
                other = f"env_key = {env_key!r}" if isinstance(env_key, str) else "no env_key"
                anthropic = str(env_key).startswith("ANTHROPIC")
                classic = " (an ANTHROPIC_* key in Codex is the classic 401)" if anthropic else ""
                found.append(
                    Check(
                        "warn",
                        topic,
                        f"{where} points at the same gateway but has {other}{classic}",
                        f'set env_key = "{KEY_VARIABLE}" in {where}',
                    )
                )
    return found or [Check("ok", topic, "no provider disagrees with this configuration")]


def claude_settings_checks(
    environ: Mapping[str, str], base_url: str, project: Path
) -> tuple[list[Check], Target | None]:
    """Claude Code's settings files (user, project, project-local): what is misconfigured in them, each
    line naming its file, and the model Claude Code would ask for (probed with one Messages request)."""
    files: list[ClaudeSettings] = []
    checks: list[Check] = []
    for path in claude_settings_paths(environ, project):
        if not path.is_file():
            continue
        read = read_claude_settings(path)
        if isinstance(read, Finding):
            checks.append(_check(read))
        else:
            files.append(read)
    checks += [_check(f) for f in claude_settings_findings(files, environ, base_url)]
    if files and not checks:
        checks.append(Check("ok", "Claude Code settings", ", ".join(f.path for f in files)))
    model = claude_model(files, environ)
    target = None if model is None else Target(model[0], f"Claude Code ({model[1]})", api=MESSAGES.api)
    return checks, target


def codex_model_target(environ: Mapping[str, str]) -> Target | None:
    """The model Codex's ``config.toml`` asks for (top-level ``model``), probed with one Responses
    request; None without a config or a model."""
    path = codex_config_path(environ)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None  # codex_checks names the problem
    model = data.get("model")
    return Target(model, f"Codex (model in {path})", api=RESPONSES.api) if isinstance(model, str) else None


def _check(finding: Finding) -> Check:
    """A program-doctor finding as a doctor line."""
    return Check(finding.status, finding.topic, finding.message, finding.fix)


def program_checks(
    environ: Mapping[str, str], base_url: str, programs: Sequence[Program], services: Sequence[Service] = ()
) -> list[Check]:
    """The agent programs the suites run (path and version, or the install command) and Claude Code's
    settings; ``ANTHROPIC_*`` is checked against Codex when a suite runs it or a Codex config exists."""
    names = {Path(p.command).name for p in programs}
    codex_used = "codex" in names or codex_config_path(environ).is_file()
    found = program_findings(programs, environ) + service_findings(services, environ)
    found += anthropic_setting_findings(environ, base_url, codex_used)
    return [_check(f) for f in found]


def targets_for(
    environ: Mapping[str, str], models: Sequence[str] | None, origins: Mapping[str, str] | None = None
) -> list[Target]:
    """The models to try: ``models`` if given, else the role variables that are set (deduplicated);
    ``origins``: model -> the variable a suite's ``env_model`` read it from."""
    origins = origins or {}
    roles: dict[str, list[str]] = {}
    for role, variable in ROLE_VARIABLES:
        value = environ.get(variable, "").strip()
        if value:
            roles.setdefault(value, []).append(role)
    for variable in sorted(environ):
        match = _AGENT_VARIABLE.match(variable)
        value = environ[variable].strip()
        if match and value:
            roles.setdefault(value, []).append(f"agent {match.group(1).lower()}")
    if models:
        names = list(dict.fromkeys(m.strip() for m in models if m.strip()))
        return [Target(m, ", ".join(roles.get(m, [])), origin=origins.get(m)) for m in names]
    return [Target(model, ", ".join(labels), origin=origins.get(model)) for model, labels in roles.items()]


def _client(base_url: str, key: str, timeout: float) -> openai.OpenAI:
    """A client for ``base_url``; a query it carries (``?api-version=...``) is sent on every request."""
    import openai  # deferred: openai, about 1 s of imports every CLI command would pay

    base, _, query = base_url.partition("?")
    params = dict(urllib.parse.parse_qsl(query)) or None
    http = openai.DefaultHttpxClient(verify=tls_context())  # the CA bundle loaded once, not per model
    return openai.OpenAI(
        api_key=key, base_url=base, max_retries=0, timeout=timeout, default_query=params, http_client=http
    )


def _ping(
    client: openai.OpenAI,
    model: str | None,
    response_format: JSONObject | None = None,
    api: str = NEUTRAL_API,
) -> None:
    """One minimal call (``max_tokens=1``) in the wire format ``api`` or, without a model, ``GET /models``.
    Raises on failure."""
    if model is None:
        client.models.list()
    elif api != NEUTRAL_API:
        fmt = wire_format(api)
        chat: JSONObject = {"model": model, "messages": [{"role": "user", "content": "ping"}]}
        chat["max_tokens"] = fmt.ping_tokens
        if response_format:
            chat["response_format"] = response_format
        headers = dict(fmt.request_headers)
        path = fmt.request_path(str(client.base_url))
        client.post(path, body=fmt.request_body(chat), cast_to=object, options={"headers": headers})
    else:
        client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": "ping"}],
            max_tokens=1,
            extra_body={"response_format": response_format} if response_format else None,
        )


def _ping_formats(client: openai.OpenAI, target: Target, role: str) -> list[str]:
    """Try the target's formats in order until one is accepted; the formats refused on the way (as
    ``'json_schema' refused: <cause>``). Raises the last failure when none is accepted or on any other
    error."""
    import openai  # deferred: openai, about 1 s of imports every CLI command would pay

    refused: list[str] = []
    for i, fmt in enumerate(target.response_formats):
        try:
            _ping(client, target.model, fmt, target.api)
            return refused
        except openai.APIStatusError as exc:
            error = diagnose(_typed(exc), role, target.model, 1, target.origin)
            if i + 1 == len(target.response_formats) or not rejects_format(error):
                raise
            kind = (fmt or {}).get("type", "none")
            refused.append(f"response_format {kind} refused ({_short(error.cause)})")
    return refused


def _short(cause: str, limit: int = 100) -> str:
    """A refusal's cause as one short clause: its first line, cut at ``limit`` characters (a server's
    whole validation error, with the paths of its installation, is no help on a doctor line)."""
    first = cause.strip().splitlines()[0] if cause.strip() else cause
    return first if len(first) <= limit else first[: limit - 1].rstrip() + "…"


def _answers(base_url: str, key: str, model: str | None, timeout: float) -> bool:
    """Does ``base_url`` answer 2xx on ``GET /models`` or on the chat call?"""
    import openai  # deferred: openai, about 1 s of imports every CLI command would pay

    with _client(base_url, key, timeout) as client:
        for attempt in (None, model) if model is not None else (None,):
            try:
                _ping(client, attempt)
            except openai.APIError:
                continue
            return True
    return False


def _typed(exc: openai.APIError) -> Exception:
    """The SDK's error as the gateway's own (:mod:`.transport`), so :func:`diagnose` reads it alike."""
    import openai  # deferred: keeps openai off the import of gateway.doctor

    url = str(exc.request.url) if exc.request is not None else ""
    if isinstance(exc, openai.APIStatusError):
        kind = type(status_error(exc.status_code, {}, "", url))
        return kind(exc.message, url, exc.status_code, exc.response.headers, exc.body)
    timed_out = isinstance(exc, openai.APITimeoutError)
    typed: CallError = APITimeoutError(url) if timed_out else APIConnectionError(url)
    typed.__cause__ = exc.__cause__
    return typed if isinstance(exc, openai.APIConnectionError) else exc


def _status_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    error = body.get("error", body) if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    return str(exc.message)


def _url_not_found(exc: openai.APIStatusError, model: str | None) -> bool:
    """A 404 about the path, not about the model (a model-not-found 404 names the model)."""
    return model is None or model.lower() not in _status_message(exc).lower()


def _probe(base_url: str, key: str, target: Target | None, timeout: float) -> Check:
    import openai  # deferred: openai, about 1 s of imports every CLI command would pay

    model = target.model if target is not None else None
    if target is not None:
        topic = f"{target.roles} model {target.model}" if target.roles else f"model {target.model} (--models)"
    else:
        topic = f"GET {_show_url(base_url)}/models"
    refused: list[str] = []
    try:
        with _client(base_url, key, timeout) as client:
            if target is None:
                _ping(client, None)
            else:
                refused = _ping_formats(client, target, target.roles or "--models")
    except openai.APIError as exc:
        role = (target.roles or "--models") if target is not None else ""
        error = diagnose(_typed(exc), role, model or "", 1, target.origin if target is not None else None)
        if isinstance(exc, openai.APIStatusError) and exc.status_code == 404 and _url_not_found(exc, model):
            shown = _show_url(str(exc.request.url))
            tries = (sibling_url(base_url), fixed_path_url(base_url), *host_urls(base_url))
            candidates = list(dict.fromkeys(u for u in tries if not _same_url(u, base_url)))
            working = next((u for u in candidates if _answers(u, key, model, timeout)), None)
            if working is not None:
                fix = f"use {URL_VARIABLE}={_show_url(working)} (it answers; {_show_url(base_url)} does not)"
            else:
                tried = " or ".join(_show_url(u) for u in candidates)
                fix = (
                    f"neither {_show_url(base_url)} nor {tried} answered; check the gateway's documented "
                    "OpenAI-compatible base URL"
                )
                if target is None:
                    fix += " (or set TAOTOKEN_JUDGE_MODEL or pass --models: some gateways have no /models)"
            return Check("fail", topic, f"404 Not Found: {_status_message(exc)} (final URL {shown})", fix)
        if isinstance(exc, openai.APIConnectionError) and not isinstance(exc, openai.APITimeoutError):
            cause = type(exc.__cause__ or exc).__name__
            reason = f"connection error: could not connect to {_show_url(base_url)} ({cause})"
            return Check("fail", topic, reason, error.fix)
        where = f" (role {error.role}, model {error.model})" if error.role and error.model else ""
        return Check("fail", topic, f"{error.cause}{where}", error.fix)
    if target is None:
        return Check("ok", topic, "answered")
    fmt = target.response_formats[len(refused)]
    call = wire_format(target.api).title
    what = f"answered a 1-token {call} call" + (f" with response_format {fmt['type']}" if fmt else "")
    if refused:
        fix = "nothing to do: the judge falls back the same way once per run (said in the summary)"
        return Check("warn", topic, f"{what}; {'; '.join(refused)}", fix)
    return Check("ok", topic, what)


def probe_checks(
    base_url: str,
    key: str,
    targets: Sequence[Target],
    timeout: float = DEFAULT_TIMEOUT,
    environ: Mapping[str, str] | None = None,
) -> list[Check]:
    """One minimal request per target model (or one ``GET /models`` when there are none)."""
    if not targets:
        return [_probe(base_url, key, None, timeout)]
    own = {role: k for role, (_, k) in role_keys(environ or {}).items()}
    return [_probe(base_url, own.get(_role_of(t), key), t, timeout) for t in targets]


def _role_of(target: Target) -> str:
    """The role a doctor target is probed for (``judge (suite)`` -> ``judge``)."""
    return target.roles.split(" ", 1)[0] if target.roles else ""


def run_checks(
    environ: Mapping[str, str],
    models: Sequence[str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    targets: Sequence[Target] | None = None,
    origins: Mapping[str, str] | None = None,
    programs: Sequence[Program] = (),
    services: Sequence[Service] = (),
    project: Path | None = None,
    batch: bool = False,
) -> list[Check]:
    """Every doctor check in order: key, base URL, Claude Code and Codex settings (``project``: the
    folder whose ``.claude/`` is read, default the current one), the agent programs, then live
    requests, the models Claude Code's and Codex's settings name included (one request each), and with
    ``batch`` the batch endpoints the judge would use (:mod:`.batch_doctor`)."""
    checks = key_checks(environ)
    url_check, url_found = base_url_checks(environ)
    checks += url_found
    checks += anthropic_checks(environ)
    checks += codex_checks(environ, url_check.url)
    checks += program_checks(environ, url_check.url, programs, services)
    claude, claude_target = claude_settings_checks(environ, url_check.url, project or Path.cwd())
    checks += claude
    scheme = urllib.parse.urlsplit(url_check.url).scheme
    if check_key(environ) is not None:
        checks.append(Check("warn", "requests", "not sent: fix the key first"))
    elif scheme not in ("http", "https"):
        checks.append(Check("warn", "requests", "not sent: fix the base URL first"))
    else:
        chosen = (
            list(targets) if targets is not None and not models else targets_for(environ, models, origins)
        )
        clis = [t for t in (claude_target, codex_model_target(environ)) if t is not None]
        chosen += [t for t in clis if all((c.model, c.api) != (t.model, t.api) for c in chosen)]
        checks += probe_checks(url_check.full_url, _read_key(environ), chosen, timeout, environ)
        if batch:
            judge_key = {r: k for r, (_, k) in role_keys(environ).items()}.get("judge", _read_key(environ))
            checks += [
                Check(*found) for found in batch_checks(url_check.full_url, judge_key, chosen, timeout)
            ]
    return checks


def format_checks(checks: Sequence[Check], secrets: Sequence[str] = ()) -> str:
    """The report: one ``ok``/``warn``/``fail`` line per check ending with its fix (``; fix: ...``),
    then a summary line: a finding and its fix are one line to copy or grep."""
    lines = ["pytest-gauge doctor"]
    for check in checks:
        fix = f"; fix: {check.fix}" if check.fix and check.status != "ok" else ""
        lines.append(f"{check.status:<4}  {check.topic}: {check.message}{fix}")
    counts = {s: sum(c.status == s for c in checks) for s in ("ok", "warn", "fail")}
    verdict = "FAILED" if counts["fail"] else "passed"
    lines.append(f"doctor {verdict}: {counts['ok']} ok, {counts['warn']} warn, {counts['fail']} fail")
    return redact("\n".join(lines) + "\n", secrets)


def run_doctor(
    environ: Mapping[str, str],
    out: TextIO,
    models: Sequence[str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    targets: Sequence[Target] | None = None,
    origins: Mapping[str, str] | None = None,
    programs: Sequence[Program] = (),
    services: Sequence[Service] = (),
    project: Path | None = None,
    batch: bool = False,
) -> int:
    """Run every check, print the report to ``out``; 1 when anything failed, else 0 (for CLI and plugin).

    ``targets`` (the (role, model) pairs of collected suites) replace the role variables when given;
    ``programs`` / ``services``: the agent programs the suites run and the HTTP agents they call."""
    checks = run_checks(environ, models, timeout, targets, origins, programs, services, project, batch)
    secrets = [environ.get(n, "") for n in key_variables()] + [
        environ.get(n, "") for n in ANTHROPIC_VARIABLES[1:]
    ]
    out.write(format_checks(checks, secrets))
    return 1 if any(c.status == "fail" for c in checks) else 0


# --------------------------------------------------------------------------------------- print-config


def _claude_code(base_url: str) -> str:
    anthropic_base = base_url[: -len("/v1")] if base_url.endswith("/v1") else base_url
    block = {"env": {"ANTHROPIC_BASE_URL": anthropic_base, "ANTHROPIC_AUTH_TOKEN": KEY_PLACEHOLDER}}
    return (
        '# Claude Code: ~/.claude/settings.json (merge into the existing "env" block).\n'
        "# Claude Code appends /v1/messages itself and needs the gateway's Anthropic-compatible endpoint.\n"
        + json.dumps(block, indent=2)
        + "\n"
    )


def _codex(base_url: str) -> str:
    return (
        "# Codex: ~/.codex/config.toml (or $CODEX_HOME/config.toml); the key stays in the environment.\n"
        'model_provider = "taotoken"\n'
        "\n"
        "[model_providers.taotoken]\n"
        'name = "TaoToken"\n'
        f"base_url = {json.dumps(base_url)}\n"
        f'env_key = "{KEY_VARIABLE}"\n'
        'wire_api = "responses"  # current Codex refuses "chat"\n'
    )


def _cc_switch(base_url: str) -> str:
    return (
        "# CC Switch: add a provider with these fields (paste the key from the variable yourself).\n"
        "provider name: TaoToken\n"
        f"base URL: {base_url}\n"
        f"key variable: {KEY_VARIABLE}\n"
    )


def print_config(kind: str, environ: Mapping[str, str]) -> str:
    """Ready-to-paste configuration for ``kind`` (one of :data:`CONFIG_KINDS`), the key as a placeholder."""
    if kind not in CONFIG_KINDS:
        raise ValueError(f"unknown configuration kind {kind!r}; choose from {', '.join(CONFIG_KINDS)}")
    base_url = _show_url(check_base_url(configured_base_url(environ)).url)
    if urllib.parse.urlsplit(base_url).scheme in ("http", "https"):
        base_url = fixed_path_url(base_url)
    makers = {"claude-code": _claude_code, "codex": _codex, "cc-switch": _cc_switch}
    chosen = list(makers) if kind == "all" else [kind]
    text = "\n".join(makers[k](base_url) for k in chosen)
    secrets = [environ.get(n, "") for n in key_variables()] + [
        environ.get(n, "") for n in ANTHROPIC_VARIABLES[1:]
    ]
    return redact(text, secrets)
