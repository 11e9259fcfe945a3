"""Building the ``openai`` client for a backend: live (the real gateway), sim (a simulator behind an
in-process transport; the simulator's world is built by :mod:`pytest_gauge.sim.world`) and replay (no
network at all: a socket connect is refused).

Clients are built on first use (factories): a run answered entirely from the cache or from cassettes
never imports ``openai``."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from .endpoint import check_base_url, configured_base_url, normalise_url, read_key

if TYPE_CHECKING:
    import openai

    from ..sim.backend import SimBackend

__all__ = [
    "install_replay_guard",
    "network_client",
    "replay_guard",
    "sim_client",
]

SIM_BASE_URL = "http://gauge-sim.invalid/v1"


class _ReplayGuard:
    """An audit hook that refuses socket connections while a replay run is active (tested), except to
    ``allowed`` addresses: the process's own recording proxy on loopback (:mod:`.proxy`)."""

    active = False
    installed = False
    allowed: ClassVar[set[tuple[str, int]]] = set()

    @classmethod
    def hook(cls, event: str, args: tuple[Any, ...]) -> None:
        if cls.active and event == "socket.connect" and _address(args) not in cls.allowed:
            raise ConnectionRefusedError(
                "pytest-gauge replay backend: network access is disabled (a socket connect was attempted)"
            )


replay_guard = _ReplayGuard


def _address(args: tuple[Any, ...]) -> tuple[str, int] | None:
    """The (host, port) of a ``socket.connect`` audit event (None for other address families)."""
    address = args[1] if len(args) > 1 else None
    if isinstance(address, tuple) and len(address) >= 2:
        return str(address[0]), int(address[1])
    return None


def install_replay_guard() -> None:
    """Turn on the no-network guard for this process (audit hooks cannot be removed, so it toggles)."""
    if not _ReplayGuard.installed:
        sys.addaudithook(_ReplayGuard.hook)
        _ReplayGuard.installed = True
    _ReplayGuard.active = True


def sim_client(backend: SimBackend) -> Callable[[], openai.AsyncOpenAI]:
    """A factory for an ``openai.AsyncOpenAI`` answered in-process by the simulator ``backend``."""

    def make() -> openai.AsyncOpenAI:
        import httpx2
        import openai

        return openai.AsyncOpenAI(
            api_key="sim-backend-no-key",
            base_url=SIM_BASE_URL,
            http_client=httpx2.AsyncClient(transport=backend.transport()),
            max_retries=0,
        )

    return make


def network_client(
    backend: str, timeout: float, max_connections: int
) -> tuple[Callable[[], openai.AsyncOpenAI], str]:
    """A factory for the live (or replay) client and the gateway's identity (its normalised URL)."""
    check = check_base_url(configured_base_url(os.environ))
    url, query = check.url, dict(check.query)  # kept parameters (api-version) go on every request
    identity = normalise_url(url, check.query)
    if backend == "replay":

        def replay_client() -> openai.AsyncOpenAI:
            import openai

            return openai.AsyncOpenAI(api_key="replay-no-key", base_url=url, max_retries=0)

        return replay_client, identity

    def live_client() -> openai.AsyncOpenAI:
        import httpx2
        import openai

        # The pool sized to the concurrency cap: the slots never let more attempts out at once, and each
        # request's pool pass probes every idle connection's socket, so spare ones only cost CPU.
        limits = httpx2.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        return openai.AsyncOpenAI(
            api_key=read_key(os.environ),
            base_url=url,
            max_retries=0,
            timeout=timeout,
            default_query=query or None,
            http_client=httpx2.AsyncClient(limits=limits, timeout=timeout),
        )

    return live_client, identity
