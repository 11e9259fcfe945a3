"""What a gateway's 200 answer must be before it is used, cached or replayed: a well-formed chat completion.

A server can send anything with a 200: an HTML login page from a proxy, an empty body, JSON that is not
an object, ``choices`` that is not a list or is empty, ``content: null`` without tool calls, ``usage``
with strings in it, or a body of hundreds of megabytes. :func:`parse_completion` turns any of these into
:class:`BadResponse` (a ``bad_response`` ledger line, retried like a server fault, never cached), so no
malformed body reaches the dialogue or the user as a traceback. Pure functions, no I/O.
"""

from __future__ import annotations

import json
from typing import Any

from ..records.json_types import JSONObject
from .redact import known_secrets, redact, redact_known

__all__ = ["MAX_BODY_BYTES", "BadResponse", "body_snippet", "parse_completion", "usage_problem"]

MAX_BODY_BYTES = 8 << 20
"""Largest response body read (8 MiB); a longer one is refused without being read whole."""

SNIPPET_CHARS = 200
USAGE_FIELDS = ("prompt_tokens", "completion_tokens", "total_tokens")


class BadResponse(Exception):
    """A 200 answer that is not a usable chat completion: ``problem`` says what was wrong, ``snippet``
    shows the body's first characters (on one line, secrets removed by :func:`body_snippet`)."""

    def __init__(self, problem: str, snippet: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.snippet = snippet


def body_snippet(body: bytes, secrets: tuple[str, ...] = ()) -> str:
    """The body's first 200 characters on one line, every secret (the API key, any key the run knows,
    token shapes) replaced by ``***`` (:func:`.redact.redact`).

    Secrets are removed from the whole decoded prefix before it is cut, so a key straddling the cut
    cannot leave a fragment behind."""
    text = redact(body[: SNIPPET_CHARS * 4 + 256].decode("utf-8", errors="replace"), secrets)
    text = " ".join(text.split())
    return text[:SNIPPET_CHARS] + ("..." if len(text) > SNIPPET_CHARS else "")


def usage_problem(usage: Any, counts: tuple[str, ...] = USAGE_FIELDS) -> str | None:
    """What is wrong with a response's ``usage`` object, or None: not an object, or one of ``counts``
    present but not a number (every wire format's check; each names its own counts)."""
    if usage is None:
        return None
    if not isinstance(usage, dict):
        return f"'usage' is {type(usage).__name__}, not an object"
    for name in counts:
        value = usage.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            return f"'usage.{name}' is {type(value).__name__}, not a number"
    return None


def _choice_problem(choices: Any) -> str | None:
    if choices is None:
        return "no 'choices'"
    if not isinstance(choices, list):
        return f"'choices' is {type(choices).__name__}, not a list"
    if not choices:
        return "'choices' is empty"
    choice = choices[0]
    if not isinstance(choice, dict) or not isinstance(choice.get("message"), dict):
        return "'choices[0].message' is not an object"
    message = choice["message"]
    content, tool_calls = message.get("content"), message.get("tool_calls")
    if tool_calls is not None and not (
        isinstance(tool_calls, list) and all(isinstance(c, dict) for c in tool_calls)
    ):
        return "'tool_calls' is not a list of objects"
    if content is None and not tool_calls:
        return "'content' is null and there are no tool calls"
    if content is not None and not isinstance(content, str):
        return f"'content' is {type(content).__name__}, not a string"
    return None


def parse_completion(body: bytes, secrets: tuple[str, ...] = ()) -> JSONObject:
    """The chat completion in ``body``, or :class:`BadResponse` saying what is wrong with it. A key the
    run knows quoted in the body is removed before it is used (:func:`.redact.redact_known`)."""
    try:
        known = dict.fromkeys((*secrets, *known_secrets()))  # each secret once (the run's key is in both)
        data = json.loads(redact_known(body.decode("utf-8"), known))
    except (ValueError, UnicodeDecodeError):
        problem = "the body is empty" if not body.strip() else "the body is not JSON"
        raise BadResponse(problem, body_snippet(body, secrets)) from None
    if not isinstance(data, dict):
        kind = type(data).__name__
        raise BadResponse(f"the body is a JSON {kind}, not an object", body_snippet(body, secrets))
    wrong = _choice_problem(data.get("choices")) or usage_problem(data.get("usage"))
    if wrong is not None:
        raise BadResponse(wrong, body_snippet(body, secrets))
    return data
