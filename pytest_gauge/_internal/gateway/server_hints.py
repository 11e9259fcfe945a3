"""What a server's answer tells the gateway beside its body: how long to wait before a retry
(:func:`retry_delay`; :func:`backoff` when it names nothing), which model answered (:func:`served_model`),
and a proxy's upstream retries and cost (:func:`gateway_said`)."""

from __future__ import annotations

import email.utils
import json
import random
import re
import time
from collections.abc import Mapping

from ..records.json_types import JSONObject

__all__ = ["backoff", "gateway_said", "retry_delay", "served_model"]


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_DURATIONS = re.compile(r"(?:\d+(?:\.\d+)?(?:ms|s|m|h))+")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def _seconds(text: str, now: float | None = None) -> float | None:
    """``"1.5"`` seconds, an HTTP date, or a duration such as ``"6m0s"`` / ``"20ms"`` (OpenAI's
    ``x-ratelimit-reset-*``), as seconds from now; None when unreadable."""
    text = text.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    if _DURATIONS.fullmatch(text):
        return sum(float(a) * _UNIT_SECONDS[b] for a, b in _DURATION.findall(text))
    try:
        parsed = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, parsed.timestamp() - (now if now is not None else time.time()))


def retry_delay(
    headers: Mapping[str, str], attempt: int, rng: random.Random, now: float | None = None
) -> float | None:
    """Seconds the server asks us to wait, else None: ``retry-after-ms``, ``Retry-After`` (seconds or an
    HTTP date), provider-prefixed forms (``llm_provider-retry-after``, ``x-...-retry-after-ms``), then
    the longer of ``x-ratelimit-reset-requests`` / ``-tokens``."""
    found = {str(k).lower(): str(v) for k, v in headers.items()}
    for name in ("retry-after-ms", *sorted(k for k in found if k.endswith("-retry-after-ms"))):
        if name in found:
            try:
                return max(0.0, float(found[name]) / 1000.0)
            except ValueError:
                pass
    for name in ("retry-after", *sorted(k for k in found if k.endswith("-retry-after"))):
        wait = _seconds(found[name], now) if name in found else None
        if wait is not None:
            return wait
    resets = ("x-ratelimit-reset-requests", "x-ratelimit-reset-tokens")
    known = [w for k in resets if k in found and (w := _seconds(found[k], now)) is not None]
    return max(known) if known else None


def backoff(attempt: int, rng: random.Random, base: float = 0.25, cap: float = 8.0) -> float:
    """Capped exponential backoff with ±25% jitter."""
    return float(min(cap, base * 2.0 ** (attempt - 1)) * rng.uniform(0.75, 1.25))


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


def gateway_said(headers: Mapping[str, str], body: object = None) -> JSONObject:
    """What a proxy reports beside the answer: retries it made upstream within this attempt (the
    ``x-litellm-attempted-retries`` header, or for an error the "LiteLLM Retried: N times" of its
    ``body``) and the cost it computed (``x-litellm-response-cost``)."""
    said: JSONObject = {}
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
