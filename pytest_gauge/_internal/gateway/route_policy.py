"""What a route of the recording proxy lets a program ask for (docs/protocol.md#route-policy): the
models the suite declared for it (its own and the helper models its preset declares) and the suite's
caps on a request's output tokens and choices. A pure function decides; the proxy refuses what it names
with a 403 in the format's error shape, a ledger line (status ``refused``) and a note in the transcript.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from .wire import WireFormat

__all__ = ["REFUSED", "Refusals", "RoutePolicy", "refusal", "route_policy"]

REFUSED = "refused"
"""The ledger status of a request the route's policy refused (never sent to the gateway)."""


@dataclass(frozen=True)
class RoutePolicy:
    """What a route accepts: ``models`` (empty: any), at most ``max_tokens`` output tokens a request
    (None: no cap) and at most ``max_n`` choices (Chat's ``n``)."""

    models: frozenset[str] = frozenset()
    max_tokens: int | None = None
    max_n: int = 1


def route_policy(models: Iterable[str | None], max_tokens: int | None = None, max_n: int = 1) -> RoutePolicy:
    """A policy for the declared ``models`` (None entries skipped: an agent that names no model)."""
    return RoutePolicy(frozenset(m for m in models if m), max_tokens, max_n)


def refusal(policy: RoutePolicy, fmt: WireFormat, body: Mapping[str, Any]) -> str | None:
    """Why ``policy`` refuses the request ``body`` of format ``fmt`` (one line naming the value and the
    limit), or None when it may be sent. A body the format cannot read is refused (it cannot be checked)."""
    model = body.get("model")
    if policy.models and model not in policy.models:
        allowed = ", ".join(sorted(policy.models))
        return f"pytest-gauge proxy: model {model!r} is not one this agent was given (allowed: {allowed})"
    try:
        chat = fmt.chat_request(dict(body))
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        return f"pytest-gauge proxy: the request cannot be checked against the suite's limits ({exc})"
    tokens = chat.get("max_completion_tokens", chat.get("max_tokens"))
    if policy.max_tokens is not None and isinstance(tokens, int) and tokens > policy.max_tokens:
        return f"pytest-gauge proxy: max_tokens {tokens} is over this agent's cap of {policy.max_tokens}"
    n = chat.get("n")
    if isinstance(n, int) and n > policy.max_n:
        return f"pytest-gauge proxy: n={n} is over this agent's cap of {policy.max_n} choice(s) a request"
    return None


@runtime_checkable
class Refusals(Protocol):
    """A route's calls that record refused requests (the ledger line, the transcript's note)."""

    def refused(self, seq: int, role: str, model: str, fmt: WireFormat, reason: str) -> None: ...
