"""The embedded offline simulator (``--gauge-backend=sim``): deterministic agents, user and judge
served through the real ``openai`` client. Profiles live in :mod:`.profiles` (cheap to import)."""

from __future__ import annotations

from .backend import SimBackend, SimWorld
from .profiles import SimAgent, SimJudge, SimUser

__all__ = ["SimAgent", "SimBackend", "SimJudge", "SimUser", "SimWorld"]
