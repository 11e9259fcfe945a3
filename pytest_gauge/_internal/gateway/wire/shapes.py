"""The usage objects the wire formats write when they translate an answer (chat's ``usage``, Messages'
and Responses' own) and Messages usage in the ledger's terms, as TypedDicts, so the type checker checks
what the translators write (what a server sends stays ``dict[str, Any]``: its checks are at run time)."""

from __future__ import annotations

from typing import NotRequired, TypedDict

__all__ = [
    "CacheCreation",
    "CachedTokens",
    "ChatUsageBody",
    "MessagesUsageBody",
    "ReasoningTokens",
    "ResponsesInputDetails",
    "ResponsesUsageBody",
    "UsageCounts",
]


class CachedTokens(TypedDict):
    """Chat's ``prompt_tokens_details``: the cache reads inside ``prompt_tokens``."""

    cached_tokens: int


class ReasoningTokens(TypedDict):
    """Chat's ``completion_tokens_details`` and Responses' ``output_tokens_details``."""

    reasoning_tokens: int


class ChatUsageBody(TypedDict):
    """A chat completion's ``usage`` as the translators write it (the details only when known)."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: NotRequired[CachedTokens]
    completion_tokens_details: NotRequired[ReasoningTokens]


class CacheCreation(TypedDict):
    """Messages' ``cache_creation``: the cache writes split by their time to live."""

    ephemeral_5m_input_tokens: int
    ephemeral_1h_input_tokens: int


class MessagesUsageBody(TypedDict):
    """A Messages response's ``usage`` (``input_tokens`` without the cache's reads and writes)."""

    input_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int
    cache_creation: CacheCreation
    output_tokens: int


class ResponsesInputDetails(TypedDict):
    """Responses' ``input_tokens_details``: the cache's reads and writes inside ``input_tokens``."""

    cached_tokens: int
    cache_write_tokens: int


class ResponsesUsageBody(TypedDict):
    """A Responses response's ``usage``."""

    input_tokens: int
    input_tokens_details: ResponsesInputDetails
    output_tokens: int
    output_tokens_details: ReasoningTokens
    total_tokens: int


class UsageCounts(TypedDict):
    """Messages usage in the ledger's terms (``usage_counts``): uncached input, cache reads, the cache
    writes' 5-minute and 1-hour parts, output."""

    input_tokens: int
    cached_input_tokens: int
    cache_write_tokens: int
    cache_write_1h_tokens: int
    output_tokens: int
