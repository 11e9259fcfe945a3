"""Building the model client (:class:`~.transport.ModelClient`) for a backend: live (the real gateway),
sim (a simulator behind an in-process server; the simulator's world is built by
:mod:`pytest_gauge._internal.sim.world`) and replay (no network at all: a socket connect is refused).

Clients are built on first use (factories): a run answered entirely from the cache or from cassettes
never builds one; aiohttp is imported only when a request goes over a socket (never on the simulator), no
backend imports ``openai``."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any, ClassVar

from .endpoint import check_base_url, configured_base_url, normalise_url, read_key
from .transport import ModelClient, Serve

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


def sim_client(serve: Serve) -> Callable[[], ModelClient]:
    """A factory for a :class:`ModelClient` answered in-process by ``serve`` (the simulator backend's
    ``serve``: the wiring hands it over, so the gateway never names the simulator)."""

    def make() -> ModelClient:
        return ModelClient(SIM_BASE_URL, "sim-backend-no-key", serve=serve)

    return make


def network_client(
    backend: str, timeout: float, max_connections: int
) -> tuple[Callable[[], ModelClient], str]:
    """A factory for the live (or replay) client and the gateway's identity (its normalised URL)."""
    check = check_base_url(configured_base_url(os.environ))
    url, query = check.url, dict(check.query)  # kept parameters (api-version) go on every request
    identity = normalise_url(url, check.query)
    if backend == "replay":

        def replay_client() -> ModelClient:
            return ModelClient(url, "replay-no-key", timeout=timeout, max_connections=max_connections)

        return replay_client, identity

    def live_client() -> ModelClient:
        return ModelClient(
            url, read_key(os.environ), query=query, timeout=timeout, max_connections=max_connections
        )

    return live_client, identity
