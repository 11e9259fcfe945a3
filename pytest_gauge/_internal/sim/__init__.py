"""The embedded offline simulator (``--gauge-backend=sim``): deterministic agents, user and judge
served through the real ``openai`` client. Profiles are declared with the suite
(:mod:`pytest_gauge._internal.suite.sim_profiles`, cheap to import); the
backend (which needs the HTTP stack) is imported on first use, so suites that only declare profiles
do not pay for it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..suite.sim_profiles import SimAgent, SimJudge, SimUser

if TYPE_CHECKING:
    from .backend import SimBackend, SimWorld

__all__ = ["SimAgent", "SimBackend", "SimJudge", "SimUser", "SimWorld"]


def __getattr__(name: str) -> Any:
    if name in ("SimBackend", "SimWorld"):
        from . import backend  # deferred: sim.backend imports this package (a cycle)

        return getattr(backend, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
