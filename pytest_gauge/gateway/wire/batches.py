"""Which batch API each wire format's calls go through (docs/protocol.md#batched-judging): Messages calls
through Anthropic's Message Batches, the OpenAI formats through ``/files`` + ``/batches``. The one place
outside the two batch wire modules that knows which is which, so the batcher, the doctor and the loopback
server reach a format's batch API through these names."""

from __future__ import annotations

from .anthropic import MESSAGES
from .base import APIS, Api

__all__ = ["BATCH_APIS", "MESSAGE_BATCHES_API", "batch_family", "message_batches"]

BATCH_APIS = frozenset(APIS)
"""The formats whose calls can be batched: every one."""
MESSAGE_BATCHES_API: Api = MESSAGES.api
"""The format whose batches are Message Batches (the others are OpenAI batches)."""


def message_batches(api: str) -> bool:
    """Whether ``api``'s calls batch through Message Batches (else OpenAI's ``/files`` + ``/batches``)."""
    return api == MESSAGE_BATCHES_API


def batch_family(api: str) -> str:
    """The batch API's name for messages: ``Message Batches`` or ``OpenAI batches (/files + /batches)``."""
    return "Message Batches" if message_batches(api) else "OpenAI batches (/files + /batches)"
