"""Test helpers shipped with pytest-gauge: a loopback OpenAI-compatible server that injects gateway faults.

Names are loaded lazily so ``python -m pytest_gauge.testing.server`` does not import the module twice.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .server import (
        FaultPlan,
        LoopbackServer,
        RequestRecord,
        Responder,
        ResponderError,
        ServerProcess,
        completion,
        default_responder,
        scheduled_fault,
        tool_call,
    )

__all__ = [
    "FaultPlan",
    "LoopbackServer",
    "RequestRecord",
    "Responder",
    "ResponderError",
    "ServerProcess",
    "completion",
    "default_responder",
    "scheduled_fault",
    "tool_call",
]


def __getattr__(name: str) -> Any:
    """Import the server module on first use of one of its public names."""
    if name in __all__:
        return getattr(importlib.import_module(".server", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
