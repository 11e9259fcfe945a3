"""Test helpers shipped with pytest-gauge: a loopback model server (Chat Completions, Messages, Responses)
that injects gateway faults.

``server`` (the server, on aiohttp), ``faults`` (the fault catalogue), ``exchange`` (the request and
answer records the faults work on), ``responders`` (what it answers with), ``process`` (the server in a
child process), ``simserver`` (a suite's simulator as a responder), ``hostile`` (a raw-socket server
writing broken HTTP, for testing clients), ``browser`` (headless Chromium);
``python -m pytest_gauge.testing`` runs the loopback server.
Names are loaded lazily, so a test importing one helper does not import them all.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .faults import MALFORMED_BODIES, MALFORMED_BY_API, FaultPlan, scheduled_fault
    from .hostile import HOSTILE, Hostile, HostileServer
    from .process import ServerProcess
    from .responders import (
        Responder,
        ResponderError,
        completion,
        default_responder,
        message_text,
        tool_call,
    )
    from .server import LoopbackServer, RequestRecord

__all__ = [
    "HOSTILE",
    "MALFORMED_BODIES",
    "MALFORMED_BY_API",
    "FaultPlan",
    "Hostile",
    "HostileServer",
    "LoopbackServer",
    "RequestRecord",
    "Responder",
    "ResponderError",
    "ServerProcess",
    "completion",
    "default_responder",
    "message_text",
    "scheduled_fault",
    "tool_call",
]

_HOMES = {
    "MALFORMED_BODIES": ".faults",
    "MALFORMED_BY_API": ".faults",
    "FaultPlan": ".faults",
    "scheduled_fault": ".faults",
    "HOSTILE": ".hostile",
    "Hostile": ".hostile",
    "HostileServer": ".hostile",
    "ServerProcess": ".process",
    "Responder": ".responders",
    "ResponderError": ".responders",
    "completion": ".responders",
    "default_responder": ".responders",
    "message_text": ".responders",
    "tool_call": ".responders",
    "LoopbackServer": ".server",
    "RequestRecord": ".server",
}


def __getattr__(name: str) -> Any:
    """Import the module of one of the public names on its first use."""
    home = _HOMES.get(name)
    if home is not None:
        return getattr(importlib.import_module(home, __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
