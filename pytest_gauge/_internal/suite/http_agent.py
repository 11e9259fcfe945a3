"""``HttpAgent``: an agent behind HTTP (docs/protocol.md#http-agents). Each turn POSTs a JSON body made
from a template (the conversation, the user's last message, the session id) to the service's URL and
reads the reply (and the session id for the next turn) from the response at a path. Declaration and
the pure template/path helpers only; the request, its retries and diagnoses are
:mod:`pytest_gauge._internal.run.http_agent`."""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..records.json_types import JSONObject
from .sim_profiles import SimAgent
from .strategy import Strategy

__all__ = [
    "HTTP_PLACEHOLDERS",
    "MISSING",
    "HttpAgent",
    "env_references",
    "extract",
    "fill_headers",
    "render_body",
]

HTTP_PLACEHOLDERS = ("messages", "last_user_message", "session")
"""What a body template may name: ``"{messages}"`` (the conversation so far, ``[{"role", "content"}]``),
``"{last_user_message}"`` and ``"{session}"`` (the id the previous turn's response gave, else null)."""
_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
MISSING: Any = object()


def _default_body() -> JSONObject:
    return {"messages": "{messages}", "session_id": "{session}"}


@dataclass(frozen=True)
class HttpAgent:
    """An agent that is a service: ``url`` is POSTed ``body`` (a JSON template, see
    :data:`HTTP_PLACEHOLDERS`) once per turn; ``reply_path`` (dotted, list indexes as numbers:
    ``"choices.0.message.content"``) is where the reply is in the response, ``session_path`` or
    ``session_header`` where the session id for the next turn is. ``headers`` values may name
    environment variables as ``${NAME}`` (``{"Authorization": "Bearer ${AGENT_TOKEN}"}``): read at each
    request, never logged or recorded. ``timeout`` seconds per attempt, ``retries`` more attempts after a
    429, a 5xx, a timeout or a refused connection (``retry_wait`` seconds doubling, or the service's
    ``Retry-After``); ``usage_path``: where the response reports token usage (recorded beside the
    ledger's). Its own model calls are the service's business: they are not in the ledger."""

    name: str
    url: str
    body: Mapping[str, Any] = field(default_factory=_default_body)
    reply_path: str = "reply"
    session_path: str | None = None
    session_header: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float = 60.0
    retries: int = 2
    retry_wait: float = 0.5
    usage_path: str | None = "usage"
    model: str | None = None  # what the service says it runs, for the manifest only
    sim: SimAgent = field(default_factory=SimAgent)  # unused: the service answers on every backend
    strategy: Strategy | None = None  # test-time compute (best_of / reflection): each sample its own session

    def __post_init__(self) -> None:
        where = f"HttpAgent {self.name!r}"
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"{where}: url must be an http(s) URL, got {self.url!r}")
        try:
            text = json.dumps(dict(self.body))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: body must be a JSON object template: {exc}") from None
        if "{messages}" not in text and "{last_user_message}" not in text:
            raise ValueError(f"{where}: body names neither {{messages}} nor {{last_user_message}}")
        if not self.reply_path.strip():
            raise ValueError(f"{where}: reply_path must name where the reply is in the response")
        if not self.timeout > 0 or self.retries < 0 or self.retry_wait < 0:
            raise ValueError(f"{where}: timeout must be > 0 seconds, retries and retry_wait >= 0")
        for name, value in self.headers.items():
            if not isinstance(name, str) or not isinstance(value, str):
                raise ValueError(f"{where}: headers are strings, got {name!r}: {value!r}")


def render_body(template: Any, values: Mapping[str, Any]) -> Any:
    """The template with its placeholders filled: a string that is exactly ``"{name}"`` becomes the
    value itself (a list, a string, null), inside a longer string the value's text ("" for null)."""
    if isinstance(template, str):
        for name in HTTP_PLACEHOLDERS:
            if template == "{" + name + "}":
                return values.get(name)
        out = template
        for name in HTTP_PLACEHOLDERS:
            value = values.get(name)
            if "{" + name + "}" in out:
                text = value if isinstance(value, str) else ("" if value is None else json.dumps(value))
                out = out.replace("{" + name + "}", text)
        return out
    if isinstance(template, Mapping):
        return {k: render_body(v, values) for k, v in template.items()}
    if isinstance(template, list | tuple):
        return [render_body(v, values) for v in template]
    return template


def extract(value: Any, path: str) -> Any:
    """The value at a dotted ``path`` (numbers index lists), or :data:`MISSING`."""
    for part in path.split("."):
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.lstrip("-").isdigit() and -len(value) <= int(part) < len(value):
            value = value[int(part)]
        else:
            return MISSING
    return value


def env_references(headers: Mapping[str, str]) -> list[str]:
    """The environment variables the headers read, in order of first use."""
    found: list[str] = []
    for value in headers.values():
        found += [n for n in _ENV.findall(value) if n not in found]
    return found


def fill_headers(headers: Mapping[str, str], environ: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """The headers with ``${NAME}`` replaced from ``environ``, and the variables that are not set."""
    missing = [n for n in env_references(headers) if not environ.get(n, "").strip()]
    filled = {k: _ENV.sub(lambda m: environ.get(m.group(1), "").strip(), v) for k, v in headers.items()}
    return filled, missing
