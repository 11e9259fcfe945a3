"""Diagnosis of a failed gateway call: the transport's typed failure (:mod:`.transport`) or the attempt's
failure mapped to a typed
:class:`GatewayError` with its cause and fix (docs/protocol.md#gateway-failures), never the key.

Apart from the call path (:mod:`.gateway`), which decides when a call has failed; this module only says
what the failure means and what to do about it.
"""

from __future__ import annotations

import json
import os
import re
from http import HTTPStatus

from .endpoint import URL_VARIABLE, check_base_url, key_variable
from .errors import (
    FORMAT_REFUSAL_STATUSES,
    ConfigurationError,
    GatewayError,
    KeyRejected,
    ModelNotFound,
    names_format,
)
from .response import BadResponse, body_snippet
from .transport import APIConnectionError, APIStatusError, APITimeoutError

__all__ = ["diagnose", "diagnose_http_agent", "error_type", "final_error", "is_timeout", "server_message"]


def server_message(exc: APIStatusError, limit: int = 300) -> str:
    """The gateway's own words on one line (whitespace folded, cut at ``limit`` characters, so a diagnosis
    quoting it stays within two lines): the JSON error's message (OpenAI's ``{"error": {"message"}}``,
    Anthropic's ``{"type": "error", "error": {"type", "message"}}``), else the start of a text or HTML
    body (secrets go when the error quoting it is made, :mod:`.redact`)."""
    body = exc.body
    text = str(exc.message)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            text = str(err["message"])
    elif isinstance(body, str) and body.strip():
        text = f"{exc.message} - {body_snippet(body.encode('utf-8', errors='replace'))}"
    folded = " ".join(text.split())
    return folded if len(folded) <= limit else folded[: limit - 1] + "…"


_KEY_PHRASES = (
    "no connected db",  # LiteLLM's proxy without a database, asked with a key it does not know
    "invalid api key",
    "incorrect api key",
    "invalid_api_key",
    "authentication",
    "unauthorized",
    "api key not valid",
    "invalid proxy server token",
    "virtual key",
)


def _names_rejected_key(message: str) -> bool:
    """Whether an error body (in a 400 or 500, as some proxies answer) says the key was rejected."""
    lowered = message.lower()
    return any(phrase in lowered for phrase in _KEY_PHRASES)


_CONTEXT_FIXES = {
    "agent": "lower the task's max_turns or the agent's max_tokens (each turn adds the replies before it)",
    "user_sim": "lower UserSimulator(max_tokens=...) or the task's max_turns",
    "user_audit": "lower UserSimulator(max_tokens=...) or the task's max_turns (it reads the dialogue)",
    "judge": "give Judge(context_tokens=...) the judge's window, or lower UserSimulator(max_tokens=...)"
    " and max_turns (the judge reads both transcripts)",
}


def _prompt_tokens(message: str) -> str:
    """``" (the prompt has N tokens)"`` from a context-length message that says so, else ``""``."""
    found = re.search(
        r"(?:resulted in|requested|prompt (?:has|is|of)|you (?:sent|provided))\D{0,20}([\d,]+) tokens",
        message,
    )
    return f" (the prompt has {found.group(1)} tokens)" if found else ""


def error_type(exc: APIStatusError) -> str | None:
    """The error body's ``type`` (Anthropic's ``rate_limit_error``, ``overloaded_error``, ...; OpenAI's
    ``invalid_request_error``, ...), or None."""
    body = exc.body
    err = body.get("error", body) if isinstance(body, dict) else None
    found = err.get("type") if isinstance(err, dict) else None
    return found if isinstance(found, str) else None


_FORMAT_PATH = re.compile(r"/(?:chat/completions|messages|responses)/?$")


def _url_fix(url: str) -> str:
    found = _FORMAT_PATH.search(url.split("?", 1)[0])
    path = found.group(0).rstrip("/") if found else "/chat/completions"
    check = check_base_url(_FORMAT_PATH.sub("", url.split("?", 1)[0]))
    if check.errors or check.warnings:
        return " ".join(check.errors + check.warnings)
    return (
        f"check {URL_VARIABLE}: the client appends {path} to it; most gateways want the base "
        "ending in /v1 (or without it): run `python -m pytest_gauge doctor` to try both"
    )


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "error"


def _names_missing_model(exc: APIStatusError, message: str, model: str) -> bool:
    """Whether a 400/404 says the model does not exist (``model_not_found``, "model ... does not
    exist", "unknown model", "no such model", "model not found")."""
    body = exc.body
    err = body.get("error", body) if isinstance(body, dict) else None
    code = str(err.get("code") or "") if isinstance(err, dict) else ""
    if code in ("model_not_found", "invalid_model", "unknown_model"):
        return True
    lowered = message.lower()
    if "model" not in lowered or names_format(lowered):
        return False  # about the model's parameters (e.g. a response format it refuses), not the model
    return any(
        phrase in lowered
        for phrase in ("does not exist", "not found", "unknown model", "no such model", "invalid model name")
    ) or (bool(model) and model.lower() in lowered and exc.status_code == 404)


def _model_origin(variable: str | None) -> str:
    """Where the model name came from, for the fix: its environment variable, else the suite."""
    if variable is not None:
        return f"the model comes from the environment variable {variable}: set it"
    return "the model is set in the suite's declaration (or its env_model variable is unset): change it"


def _request_error(
    exc: APIStatusError, message: str, role: str, model: str, url: str | None, origin: str | None
) -> GatewayError:
    """A 400/404/422: an unknown model (stops that role and model), a wrong URL (404, fatal), a context
    too long, or another bad request; each named by its own status phrase (404 is never "Bad Request")."""
    status = exc.status_code
    if status in (400, 404) and _names_missing_model(exc, message, model):
        return ModelNotFound(
            f"{status} {_phrase(status)}: the gateway does not know the {role} model {model!r}: {message}",
            f"{_model_origin(origin)} to a model this gateway serves (`python -m pytest_gauge doctor --models"
            " NAME` tries one); every later call for this role and model stops here",
            status=status,
            role=role,
            model=model,
        )
    if status == 404:
        return ConfigurationError(f"404 Not Found: {message}", _url_fix(url or ""), status=status, url=url)
    lowered = message.lower()
    if "context" in lowered and ("length" in lowered or "long" in lowered or "maximum" in lowered):
        return GatewayError(
            f"{status} context too long for the {role} model {model!r}{_prompt_tokens(message)}: {message}",
            _CONTEXT_FIXES.get(role, _CONTEXT_FIXES["agent"]),
            status=status,
            role=role,
            model=model,
        )
    return GatewayError(
        f"{status} {_phrase(status)}: {message}",
        "check the model name for this role and the message format/response_format",
        status=status,
        role=role,
        model=model,
    )


def diagnose(exc: Exception, role: str, model: str, attempts: int, origin: str | None = None) -> GatewayError:
    """Map an attempt's failure (:mod:`.transport`'s typed errors) to a GatewayError with cause and fix
    (docs/protocol.md#gateway-failures). ``origin``: the environment variable the model name was read
    from (``env_model``), if any."""
    if isinstance(exc, APIStatusError):
        status = exc.status_code
        url = exc.url or None
        message = server_message(exc)
        if status in (401, 403) or (status in (400, 500) and _names_rejected_key(message)):
            said = f" ({message})" if status not in (401, 403) else ""
            return KeyRejected(
                f"{status} {_phrase(status)}: the gateway rejected the API key{said}",
                f"check {key_variable(role, os.environ)} (set, current, no spaces or newline); Claude"
                " Code's ANTHROPIC_* variables are not read by this client",
                status=status,
                role=role,
                model=model,
            )
        if status in FORMAT_REFUSAL_STATUSES and names_format(message):
            return GatewayError(
                f"{status} {_phrase(status)}: the server refused the request's response_format: {message}",
                "a judge falls back to json_object, then to the prompt alone, once per model and run;"
                " Judge(response_format=...) sets where it starts",
                status=status,
                role=role,
                model=model,
            )
        if status in (400, 404, 422):
            return _request_error(exc, message, role, model, url, origin)
        if status == 429:
            return GatewayError(
                f"429 rate limited, still after {attempts} attempts",
                "set the gateway's limits: --gauge-rpm/--gauge-tpm MODEL=N for this model (repeatable),"
                " N for the whole run, or lower --gauge-max-concurrency",
                status=status,
                role=role,
                model=model,
            )
        if status == 529 or error_type(exc) == "overloaded_error":  # Anthropic's overloaded
            return GatewayError(
                f"{status} the provider is overloaded, still after {attempts} attempts: {message}",
                "retry later, raise --gauge-max-retries, or lower --gauge-max-concurrency",
                status=status,
                role=role,
                model=model,
            )
        return GatewayError(
            f"{status} server error after {attempts} attempts: {message}",
            "the gateway is failing; retry later or raise --gauge-max-retries",
            status=status,
            role=role,
            model=model,
        )
    if isinstance(exc, APITimeoutError):
        return GatewayError(
            f"timed out after {attempts} attempts (the request may still have been billed)",
            "raise --gauge-timeout, or lower max_tokens",
            role=role,
            model=model,
        )
    if isinstance(exc, APIConnectionError):
        return _connection_error(exc, role, model, attempts)
    return GatewayError(
        f"unexpected error: {type(exc).__name__}: {exc}", "report this as a bug", role=role, model=model
    )


def _connection_error(exc: APIConnectionError, role: str, model: str, attempts: int) -> GatewayError:
    """No usable answer, told by its cause: nothing listening or unreachable (the URL or the network), a
    TLS failure (the certificate), or an answer that is not HTTP (the URL names another kind of port)."""
    cause = exc.cause or type(exc.__cause__ or exc).__name__
    if cause.startswith("the TLS handshake failed"):
        fix = f"check {URL_VARIABLE}'s scheme and host, or trust the gateway's certificate (SSL_CERT_FILE)"
    elif cause.startswith(("the answer", "the server closed")):
        fix = (
            f"check {URL_VARIABLE}: it must name the gateway's HTTP(S) endpoint, not another service or port"
        )
    else:
        fix = f"check {URL_VARIABLE} and the network"
    return GatewayError(f"no usable answer after {attempts} attempts: {cause}", fix, role=role, model=model)


def final_error(
    failure: Exception,
    role: str,
    model: str,
    attempts: int,
    *,
    gateway: str,
    timeout: float,
    answered: bool,
    origin: str | None = None,
) -> GatewayError:
    """The error that ends a call after its last attempt: a bad body from ``gateway``, a timeout (fatal
    when no call of this process was ``answered`` yet), else :func:`diagnose`."""
    if isinstance(failure, BadResponse):
        starts = f"; the body starts {failure.snippet!r}" if failure.snippet else ""
        return GatewayError(
            f"bad response from the gateway {gateway} after {attempts} attempts: {failure.problem}{starts}",
            "the server at this URL does not answer like an OpenAI-compatible chat completions API"
            f" (a proxy or login page?): check {URL_VARIABLE}, or retry later",
            role=role,
            model=model,
        )
    if is_timeout(failure):
        cause = (
            f"timed out after {attempts} attempts of {timeout:g}s each (connect to last"
            " byte; the request may still have been billed)"
        )
        if not answered:  # no call of this process was ever answered in time
            return ConfigurationError(
                f"{cause}, before any call of this run was answered: the gateway does not answer in"
                " time, so the run stops here",
                f"raise --gauge-timeout, or check {URL_VARIABLE} (a server that never ends an answer)",
                role=role,
                model=model,
            )
        return GatewayError(cause, "raise --gauge-timeout, or lower max_tokens", role=role, model=model)
    return diagnose(failure, role, model, attempts, origin)


def is_timeout(failure: Exception) -> bool:
    """Whether an attempt's failure is a timeout (the client's, or asyncio's whole-request one)."""
    return isinstance(failure, APITimeoutError | TimeoutError)


def _service_message(body: bytes) -> str:
    """What an agent service said in an error body: its JSON ``error.message`` / ``message`` /
    ``detail``, else the body's start (secrets removed)."""
    try:
        data = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return body_snippet(body)
    err = data.get("error", data) if isinstance(data, dict) else data
    for key in ("message", "detail"):
        if isinstance(err, dict) and isinstance(err.get(key), str):
            return " ".join(str(err[key]).split())[:300]
    return body_snippet(body)


def diagnose_http_agent(
    agent: str,
    url: str,
    attempts: int,
    *,
    status: int | None = None,
    body: bytes = b"",
    failure: Exception | None = None,
    cause: str = "",
    location: str = "",
    timeout: float = 0.0,
    variables: tuple[str, ...] = (),
) -> GatewayError:
    """An ``HttpAgent`` turn that failed after its last attempt, as the gateway's failures are told:
    cause and fix, the service's own words quoted on one line, never a header's value (the error
    redacts every known key; the plugin registers the headers' values as secrets)."""
    role, said = f"agent {agent}", _service_message(body) if body else ""
    quoted = f": {said}" if said else ""
    if status is None:
        if failure is not None and is_timeout(failure):
            cause = f"the agent service did not answer within {timeout:g}s, {attempts} attempts"
            return GatewayError(
                cause, "raise HttpAgent(timeout=...), or check the service", role=role, url=url
            )
        kind = cause or (type(failure).__name__ if failure is not None else "no response")
        return GatewayError(
            f"could not reach the agent service after {attempts} attempts: {kind}",
            "start the service, or check HttpAgent(url=...)",
            role=role,
            url=url,
        )
    head = f"{status} {_phrase(status)} from the agent service"
    if 300 <= status < 400:
        where = f" to {body_snippet(location.encode())}" if location else " without a Location"
        fix = "point HttpAgent(url=...) at the URL that answers (redirects are not followed)"
        return GatewayError(f"{head}: a redirect{where}", fix, status=status, role=role, url=url)
    if status in (401, 403):
        names = ", ".join(variables) or "(none: HttpAgent(headers=...) sends no credential)"
        fix = f"check the variables its headers read: {names} (set, current, no spaces)"
        return GatewayError(
            f"{head}: it rejected the request's credentials{quoted}", fix, status=status, role=role, url=url
        )
    if status == 404:
        return GatewayError(f"{head}{quoted}", "check HttpAgent(url=...)", status=status, role=role, url=url)
    if status in (400, 415, 422):
        fix = "check HttpAgent(body=...) against the service's API"
        return GatewayError(f"{head}: it refused the body{quoted}", fix, status=status, role=role, url=url)
    if status == 429:
        fix = "raise HttpAgent(retries=...) or lower --gauge-max-concurrency"
        return GatewayError(
            f"{head}, still after {attempts} attempts{quoted}", fix, status=status, role=role, url=url
        )
    fix = "the agent service is failing: see its logs, or retry later"
    return GatewayError(f"{head} after {attempts} attempts{quoted}", fix, status=status, role=role, url=url)
