"""Where the gateway is and how to reach it: the key and base URL from the environment, checked
before any request is made.

Kept apart from :mod:`.client` so that code which only checks settings (the plugin at configure time,
the xdist controller, the CLI) does not import ``openai``: the controller never calls the gateway, and
``import openai`` costs about 30 MB and 0.4 s per process.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "DEFAULT_BASE_URL",
    "KEY_VARIABLE",
    "ROLE_KEY_VARIABLES",
    "URL_VARIABLE",
    "UrlCheck",
    "check_base_url",
    "check_key",
    "configured_base_url",
    "fixed_path_url",
    "key_variable",
    "key_variables",
    "live_settings_problems",
    "normalise_url",
    "read_key",
    "role_keys",
]

_TRACKING = re.compile(
    r"^(?:utm_\w*|fbclid|gclid|dclid|gbraid|wbraid|msclkid|yclid|twclid|igshid|mc_cid|mc_eid|_ga|_gl|ref_src)$",
    re.IGNORECASE,
)
"""Query parameters that come from pasted links (analytics and ad click ids), never from a gateway."""

KEY_VARIABLE = "TAOTOKEN_API_KEY"
URL_VARIABLE = "TAOTOKEN_BASE_URL"
DEFAULT_BASE_URL = "https://taotoken.net/api"


def check_key(environ: Mapping[str, str]) -> str | None:
    """Problem with the key in ``TAOTOKEN_API_KEY`` (never echoing it), or None when it looks usable."""
    raw = environ.get(KEY_VARIABLE)
    if raw is None:
        return (
            f"{KEY_VARIABLE} is not set: export your gateway key as {KEY_VARIABLE}"
            " (or run with --gauge-backend=sim)"
        )
    key = raw.strip()
    if not key:
        return f"{KEY_VARIABLE} is empty: set it to your gateway key"
    if any(ch.isspace() for ch in key):
        return f"{KEY_VARIABLE} contains whitespace or a newline inside the key: paste it again as one line"
    return None


def read_key(environ: Mapping[str, str]) -> str:
    return environ.get(KEY_VARIABLE, "").strip()


ROLE_KEY_VARIABLES = {
    "agent": "TAOTOKEN_AGENT_API_KEY",
    "user_sim": "TAOTOKEN_USER_API_KEY",
    "judge": "TAOTOKEN_JUDGE_API_KEY",
}
"""One key variable per role (the method's advice: the gateway's bill then reconciles per role); a role
whose variable is unset or empty uses ``TAOTOKEN_API_KEY``."""


def key_variable(role: str, environ: Mapping[str, str]) -> str:
    """The variable whose key ``role``'s calls use: its own when set, else ``TAOTOKEN_API_KEY``."""
    own = ROLE_KEY_VARIABLES.get(role)
    return own if own and environ.get(own, "").strip() else KEY_VARIABLE


def role_keys(environ: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """Role -> (variable, key) for every role with its own key variable set (never printed)."""
    return {
        role: (name, environ[name].strip())
        for role, name in ROLE_KEY_VARIABLES.items()
        if environ.get(name, "").strip()
    }


def key_variables() -> tuple[str, ...]:
    """Every variable a key may come from, for redaction: the run's key and the per-role ones."""
    return (KEY_VARIABLE, *ROLE_KEY_VARIABLES.values())


@dataclass(frozen=True)
class UrlCheck:
    """Base URL hygiene: ``url`` to use, ``errors`` that stop the run, ``warnings`` with a fix."""

    url: str
    errors: tuple[str, ...]
    warnings: tuple[str, ...]
    query: tuple[tuple[str, str], ...] = ()
    """Query parameters a gateway needs (``api-version=...``), sent on every request (``default_query``)."""

    @property
    def full_url(self) -> str:
        """The URL with its kept query, as the user should write it."""
        return self.url + ("?" + urllib.parse.urlencode(self.query) if self.query else "")


def fixed_path_url(url: str) -> str:
    """The URL without query or fragment, with doubled slashes, a repeated ``/v1`` and a pasted
    ``/chat/completions`` removed (what :func:`check_base_url` suggests, and what the doctor tries)."""
    parts = urllib.parse.urlsplit(url.strip())
    path = re.sub(r"/{2,}", "/", parts.path)
    path = re.sub(r"(/v1)+(?=/|$)", "/v1", path)
    path = re.sub(r"/chat/completions/?$", "", path)
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path.rstrip("/"), "", ""))


def check_base_url(url: str) -> UrlCheck:
    """Check a base URL before the first request. Never appends ``/v1`` silently."""
    errors: list[str] = []
    warnings: list[str] = []
    parts = urllib.parse.urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        errors.append(f"{URL_VARIABLE}={url!r} is not an http(s) URL")
        return UrlCheck(url, tuple(errors), ())
    clean = urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
    params = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    tracking = [k for k, _v in params if _TRACKING.match(k)]
    query = tuple((k, v) for k, v in params if not _TRACKING.match(k))
    if tracking or parts.fragment:
        use = clean + ("?" + urllib.parse.urlencode(query) if query else "")
        extra = f"tracking parameters {', '.join(tracking)}" if tracking else f"a fragment #{parts.fragment}"
        errors.append(
            f"{URL_VARIABLE} carries a query string or fragment with {extra}, likely pasted from a link;"
            f" use {use} (parameters a gateway needs, such as api-version, are kept)"
        )
    path = parts.path
    suggestion = fixed_path_url(url)
    if urllib.parse.urlsplit(suggestion).path != path.rstrip("/"):
        reasons = []
        if "//" in path:
            reasons.append("a doubled '/'")
        if re.search(r"/v1/v1", path):
            reasons.append("a doubled '/v1/v1'")
        if re.search(r"/chat/completions/?$", path):
            reasons.append("the endpoint path '/chat/completions' (the client appends it)")
        warnings.append(f"{URL_VARIABLE} has {' and '.join(reasons)}; did you mean {suggestion}?")
    return UrlCheck(clean.rstrip("/"), tuple(errors), tuple(warnings), query)


def normalise_url(url: str, query: tuple[tuple[str, str], ...] = ()) -> str:
    """The gateway's identity in cache keys: the lower-cased URL, plus its kept query (sorted) if any."""
    base = url.strip().rstrip("/").lower()
    return base + ("?" + urllib.parse.urlencode(sorted(query)) if query else "")


def configured_base_url(environ: Mapping[str, str]) -> str:
    """``TAOTOKEN_BASE_URL`` as set (or the default when unset or empty), before any cleaning."""
    return environ.get(URL_VARIABLE, DEFAULT_BASE_URL) or DEFAULT_BASE_URL


def live_settings_problems(environ: Mapping[str, str]) -> list[str]:
    """Why the live gateway cannot work with these settings (the key, then the base URL), each naming
    its variable and the fix; empty when both look usable. The one check before any live request."""
    problem = check_key(environ)
    return [*([problem] if problem else []), *check_base_url(configured_base_url(environ)).errors]
