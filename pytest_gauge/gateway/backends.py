"""Building the ``openai`` client for a backend: live (the real gateway), sim (the embedded simulator
behind an in-process transport) and replay (no network at all: a socket connect is refused).

Clients are built on first use (see :func:`build_client`): a run answered entirely from the cache or
from cassettes never imports ``openai``."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ..suite.declare import ModelAgent, Suite
from ..suite.sim_profiles import SimAgent, SimJudge
from ..suite.tasks import Task
from .endpoint import check_base_url, configured_base_url, normalise_url, read_key

if TYPE_CHECKING:
    import openai

    from ..sim.backend import SimBackend, SimWorld

__all__ = [
    "build_client",
    "install_replay_guard",
    "network_client",
    "replay_guard",
    "sim_client",
    "sim_world",
    "tests_world",
]

SIM_BASE_URL = "http://gauge-sim.invalid/v1"


class _ReplayGuard:
    """An audit hook that refuses socket connections while a replay run is active (tested)."""

    active = False
    installed = False

    @classmethod
    def hook(cls, event: str, args: tuple[Any, ...]) -> None:
        if cls.active and event == "socket.connect":
            raise ConnectionRefusedError(
                "pytest-gauge replay backend: network access is disabled (a socket connect was attempted)"
            )


replay_guard = _ReplayGuard


def install_replay_guard() -> None:
    """Turn on the no-network guard for this process (audit hooks cannot be removed, so it toggles)."""
    if not _ReplayGuard.installed:
        sys.addaudithook(_ReplayGuard.hook)
        _ReplayGuard.installed = True
    _ReplayGuard.active = True


def sim_world(suite: Suite, tasks: tuple[Task, ...], seed: int) -> SimWorld:
    """The simulator's world for one suite: its tasks and each of its models' profiles."""
    from ..sim.backend import SimWorld

    agents = {a.model: (a.name, a.sim) for a in suite.agents if isinstance(a, ModelAgent)}
    judges: dict[str, SimJudge] = {suite.judge.model: suite.judge.sim, **dict(suite.judge.extra_sims)}
    return SimWorld(
        seed=seed, tasks=tasks, agents=agents, users={suite.user.model: suite.user.sim}, judges=judges
    )


def tests_world(suites: Iterable[tuple[Suite, tuple[Task, ...]]], seed: int) -> SimWorld:
    """The simulator's world for users' own tests: every suite of the run (its tasks and its models'
    profiles), and any other model answering as a default simulated agent."""
    from ..sim.backend import SimWorld

    worlds = [sim_world(suite, tasks, seed) for suite, tasks in suites]
    return SimWorld(
        seed=seed,
        tasks=tuple(t for w in worlds for t in w.tasks),
        agents={m: a for w in worlds for m, a in w.agents.items()},
        users={m: u for w in worlds for m, u in w.users.items()},
        judges={m: j for w in worlds for m, j in w.judges.items()},
        any_agent=SimAgent(),
    )


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


def build_client(
    backend: str, suite: Suite, tasks: tuple[Task, ...], seed: int, timeout: float, max_connections: int
) -> tuple[Callable[[], openai.AsyncOpenAI], str]:
    """A factory for the suite's client, and the backend's identity (part of every cache key).

    The identity is known now; the client (and the ``openai`` import, about 0.4 s and 30 MB) waits
    until a call has to be sent.
    """
    if backend == "sim":
        from ..sim.backend import SimBackend

        world = sim_world(suite, tasks, seed)
        return sim_client(SimBackend(world)), f"sim:{world.fingerprint()}"
    return network_client(backend, timeout, max_connections)
