"""What a gateway says beside the answer (docs/protocol.md#ledger): the model that really answered (a
proxy's fallback), the retries a proxy made upstream within one attempt, and the cost it computed."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["gateway_said", "served_model"]


def served_model(requested: str, answered: object) -> str | None:
    """The model that answered when it is not the one requested (a proxy's fallback), else None. A dated
    or provider-qualified name of the same model (``gpt-4o-2024-08-06`` for ``gpt-4o``,
    ``gpt-4o`` for ``openai/gpt-4o``) is the same model."""
    if not isinstance(answered, str) or not answered or answered == requested:
        return None
    bare = requested.rsplit("/", 1)[-1]
    if answered.startswith((requested, bare)) or answered.rsplit("/", 1)[-1] == bare:
        return None
    return answered


_PROXY_RETRIED = re.compile(r"LiteLLM Retried: (\d{1,4}) times")
"""How LiteLLM's proxy says, in an error's message, the upstream retries behind an attempt it failed (it
sends ``x-litellm-attempted-retries`` only with a success)."""


def _retried_in(body: object) -> int | None:
    """The retries a proxy's error body says it made upstream (its first 64 KiB read), or None."""
    if body is None:
        return None
    text = body if isinstance(body, str) else json.dumps(body, default=str)
    found = _PROXY_RETRIED.search(text[:65536])
    return int(found.group(1)) if found else None


def gateway_said(headers: Mapping[str, str], body: object = None) -> dict[str, Any]:
    """What a proxy reports beside the answer: retries it made upstream within this attempt (the
    ``x-litellm-attempted-retries`` header, or for an error the "LiteLLM Retried: N times" of its
    ``body``) and the cost it computed (``x-litellm-response-cost``)."""
    said: dict[str, Any] = {}
    retries = (headers.get("x-litellm-attempted-retries") or "").strip()
    plain = retries.isascii() and retries.isdigit() and len(retries) <= 4  # "²" and 5,000 digits: not a count
    count = int(retries) if plain else _retried_in(body)
    if count:
        said["gateway_retries"] = count
    cost = headers.get("x-litellm-response-cost")
    if cost is not None:
        try:
            said["gateway_cost"] = float(cost)
        except ValueError:
            pass
    return said
