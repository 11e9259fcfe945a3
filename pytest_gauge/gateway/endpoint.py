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
    "URL_VARIABLE",
    "UrlCheck",
    "check_base_url",
    "check_key",
    "fixed_path_url",
    "normalise_url",
    "read_key",
]

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


@dataclass(frozen=True)
class UrlCheck:
    """Base URL hygiene: ``url`` to use, ``errors`` that stop the run, ``warnings`` with a fix."""

    url: str
    errors: tuple[str, ...]
    warnings: tuple[str, ...]


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
    if parts.query or parts.fragment:
        extra = "?" + parts.query if parts.query else "#" + parts.fragment
        errors.append(
            f"{URL_VARIABLE} carries a query string or fragment ({extra}),"
            f" likely pasted from a link; use {clean}"
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
    return UrlCheck(clean.rstrip("/"), tuple(errors), tuple(warnings))


def normalise_url(url: str) -> str:
    return url.strip().rstrip("/").lower()
