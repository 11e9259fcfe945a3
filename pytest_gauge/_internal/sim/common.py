"""Small pure helpers shared by the simulated roles: seeded randomness, token and word counts, languages.

Every random draw of the simulator goes through :func:`seeded`, keyed by sha256 of stable ids, so a
response is a pure function of the world and the request body (no global RNG, no time).
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from typing import Any

from ..records import dumps
from ..records.json_types import JSONObject

__all__ = [
    "SIM_VERSION",
    "content_text",
    "count_tokens",
    "has_cjk",
    "looks_like_error",
    "message_text",
    "seeded",
    "stable_hash",
    "truncate_to_tokens",
]

SIM_VERSION = "1"
"""Bumped whenever simulated answers change, so cached sim answers are invalidated (in the fingerprint)."""

_CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]")
_CJK_CHAR = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_ERROR_WORDS = re.compile(
    r"\b(error|exception|traceback|failed|failure|invalid|not found|denied|timed? ?out|unknown tool)\b"
    r"|错误|失败",
    re.IGNORECASE,
)


def stable_hash(*parts: Any) -> str:
    """sha256 hex of the canonical JSON of ``parts``: the same ids always give the same hash."""
    return hashlib.sha256(dumps(list(parts)).encode("utf-8")).hexdigest()


def seeded(*parts: Any) -> random.Random:
    """A ``random.Random`` seeded by sha256 of (parts): independent streams per purpose and id."""
    return random.Random(int(stable_hash(*parts)[:32], 16))


def has_cjk(text: str) -> bool:
    """True when the text contains Chinese (CJK) characters: the simulator then answers in Chinese."""
    return bool(_CJK_CHAR.search(text))


def count_tokens(text: str) -> int:
    """Simulated token count: one per CJK character plus ceil(other characters / 4)."""
    cjk = len(_CJK.findall(text))
    return cjk + math.ceil((len(text) - cjk) / 4)


def truncate_to_tokens(text: str, max_tokens: int) -> str:
    """The longest prefix of ``text`` whose :func:`count_tokens` is at most ``max_tokens``."""
    if count_tokens(text) <= max_tokens:
        return text
    lo, hi = 0, len(text)
    while lo < hi:  # largest prefix length with count <= max_tokens (count is monotone in the prefix)
        mid = (lo + hi + 1) // 2
        if count_tokens(text[:mid]) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]


def content_text(content: Any) -> str:
    """The text of a message's ``content``: a string, or the text parts of a multi-part content joined
    (string parts as they are); anything else (None, tool calls only) is ""."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p if isinstance(p, str) else str(p.get("text", "")) for p in content if isinstance(p, dict | str)
        )
    return ""


def message_text(message: JSONObject) -> str:
    """The text of a chat message (:func:`content_text` of its content)."""
    return content_text(message.get("content"))


def looks_like_error(text: str) -> bool:
    """Surface test of a tool result: does it read like a failure (error, traceback, not found...)."""
    return bool(_ERROR_WORDS.search(text))
