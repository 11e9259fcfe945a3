"""The one choke point for secrets in text that came from a gateway (docs/architecture.md#secrets).

A gateway, or a proxy in front of it, may quote the request's ``Authorization`` header back in an error
body. Every such text (error bodies and messages, a malformed 200's snippet, headers quoted in a
diagnosis) passes :func:`redact` before it reaches a :class:`~.errors.GatewayError`, and from there the
terminal, a record, a report, junit or the HTML page. It removes:

- every key the run knows: the configured key, every environment variable named ``*_API_KEY``,
  ``*_AUTH_TOKEN``, ``*_API_TOKEN`` or ``*_SECRET_KEY`` (per-role keys such as
  ``TAOTOKEN_JUDGE_API_KEY`` included), and any key registered with :func:`register_secret`;
  each whole and any run of :data:`MIN_RUN` or more of its characters (a quoted, cut key);
- ``Bearer <token>``, ``x-api-key: <token>`` / ``api-key=<token>`` and common token shapes
  (``sk-...``, ``sk-ant-...``, ``ghp_...``, ``xoxb-...``, AWS ``AKIA...``).
Pure string work, no I/O beyond reading ``os.environ``.
"""

from __future__ import annotations

import functools
import os
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "MASK",
    "MIN_RUN",
    "host_secrets",
    "known_secrets",
    "redact",
    "redact_known",
    "redact_output",
    "register_secret",
]

MASK = "***"
MIN_RUN = 8
"""A run of this many characters of a key is treated as the key (shorter ones are too common)."""

_KEY_NAME = re.compile(r"(?:_API_KEY|_AUTH_TOKEN|_API_TOKEN|_SECRET_KEY|_ACCESS_KEY)$")
_SHAPES = (
    re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=\-]{4,}"),
    re.compile(
        r"(?i)\b((?:x-)?api[-_]key|x-auth-token|authorization)(\"?\s*[:=]\s*\"?)(?!\*\*\*|(?:bearer|basic)\s)[^\s\"',;}<]{4,}"
    ),
    re.compile(r"\b(sk|pk|rk)-[A-Za-z0-9_\-]{8,}"),
    re.compile(r"\b(ghp|gho|ghs|github_pat|xox[abpr])[_\-][A-Za-z0-9_\-]{8,}"),
    re.compile(r"\bAKIA[A-Z0-9]{12,}"),
)
_registered: set[str] = set()
_lock = threading.Lock()
_VOLATILE = os.fsencode("PYTEST_CURRENT_TEST")
"""The one variable that changes all the time (pytest sets it at each phase of each test): not key-named,
so a change of it alone does not make :func:`known_secrets` scan the environment again."""
_seen: list[Any] = [None, None, ()]  # the process environment's raw data and registered keys last read, and
# what they gave: os.environ read afresh on every response, its scan skipped while it is unchanged


def register_secret(value: str) -> None:
    """Make ``value`` (a key the run uses that no environment variable holds) one :func:`redact` removes."""
    value = value.strip()
    if len(value) >= MIN_RUN:
        with _lock:
            _registered.add(value)


@functools.lru_cache(maxsize=4096)
def _key_named(name: str) -> bool:
    return _KEY_NAME.search(name.upper()) is not None


def known_secrets(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """Every key the run knows: key-named environment variables' values and the registered keys.

    Read on every response, so the environment is read afresh each time: the process environment's raw
    mapping is compared with the one last scanned (one C-level dict comparison), and scanned again, only
    the key-named variables' values, whenever anything in it or in the registered keys changed."""
    if environ is None:
        raw: Any = getattr(os.environ, "_data", None)  # CPython's os.environ keeps its raw data here
        with _lock:
            seen = _seen[0]
            if raw is not None and seen is not None and _VOLATILE in seen and _VOLATILE in raw:
                seen[_VOLATILE] = raw[_VOLATILE]  # pytest's current test: set 3 times a test, never a key
            if raw is not None and seen == raw and _seen[1] == _registered:
                return tuple(_seen[2])
            before = (dict(raw) if raw is not None else None, set(_registered))  # taken before the scan
        found = _scan(os.environ)
        if raw is not None:
            with _lock:
                _seen[:] = [*before, found]
        return found
    return _scan(environ)


def _scan(env: Mapping[str, str]) -> tuple[str, ...]:
    found = {v for k in env if _key_named(k) and len(v := env[k].strip()) >= 4}
    with _lock:
        found |= _registered
    return tuple(sorted(found, key=len, reverse=True))


def _spans(text: str, secret: str) -> list[tuple[int, int]]:
    """Where ``secret`` or any :data:`MIN_RUN`-character run of it occurs in ``text``."""
    if len(secret) < MIN_RUN:
        spans, start = [], text.find(secret)
        while start >= 0:
            spans.append((start, start + len(secret)))
            start = text.find(secret, start + 1)
        return spans
    spans = []
    for i in range(len(secret) - MIN_RUN + 1):
        gram = secret[i : i + MIN_RUN]
        start = text.find(gram)
        while start >= 0:
            spans.append((start, start + MIN_RUN))
            start = text.find(gram, start + 1)
    return spans


def redact_known(text: str, secrets: Iterable[str] | None = None) -> str:
    """``text`` with every known secret, and every 8+ character run of one, replaced by ``***``
    (no token shapes: for a model's own reply, where ``sk-`` may be ordinary text)."""
    spans = [s for secret in (known_secrets() if secrets is None else secrets) for s in _spans(text, secret)]
    if not spans:
        return text
    merged: list[list[int]] = []
    for start, stop in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], stop)
        else:
            merged.append([start, stop])
    out, pos = [], 0
    for start, stop in merged:
        out += [text[pos:start], MASK]
        pos = stop
    out.append(text[pos:])
    return "".join(out)


def _mask_shape(match: re.Match[str]) -> str:
    if match.re is _SHAPES[0]:
        return f"{match.group(1)} {MASK}"
    if match.re is _SHAPES[1]:
        return f"{match.group(1)}{match.group(2)}{MASK}"
    return f"{match.group(0)[:3]}{MASK}" if match.re is _SHAPES[2] else MASK


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` from a gateway made safe to show and store: the known secrets (plus ``secrets``) and
    every token-shaped string replaced by ``***``. Idempotent."""
    text = redact_known(text, (*known_secrets(), *(s.strip() for s in secrets if len(s.strip()) >= 4)))
    for shape in _SHAPES:
        text = shape.sub(_mask_shape, text)
    return text


_SECRET_WORDS = frozenset(
    {"KEY", "APIKEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL", "CREDENTIALS"}
)
"""Words of a variable's name (split at ``_``, ``-`` and ``.``) that say it holds a secret: whole words,
so ``GITHUB_TOKEN`` and ``DB_PASSWORD`` are secrets and ``TAOTOKEN_BASE_URL`` or ``KEYBOARD`` are not."""


def host_secrets(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The values of every host variable whose name says key, token, secret or password
    (``GITHUB_TOKEN``, ``NPM_TOKEN``, ``DB_PASSWORD``...), :data:`MIN_RUN` characters or longer."""
    env = os.environ if environ is None else environ
    found = {
        v.strip()
        for k, v in env.items()
        if _SECRET_WORDS.intersection(re.split(r"[_.\-]", k.upper())) and len(v.strip()) >= MIN_RUN
    }
    return tuple(sorted(found, key=len, reverse=True))


def redact_output(text: str) -> str:
    """What a program or a command printed, made safe to store: the run's keys and every secret-named
    value of the host environment (:func:`host_secrets`), each with its runs, and the token shapes
    (``sk-``, ``ghp_``, ``xox*-``, ``AKIA``); not the header shapes (``basic <word>`` is prose here)."""
    text = redact_known(text, (*known_secrets(), *host_secrets()))
    for shape in _SHAPES[2:]:
        text = shape.sub(_mask_shape, text)
    return text
