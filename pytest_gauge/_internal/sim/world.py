"""The simulator's world for a run (``--gauge-backend=sim``): a suite's tasks and its models' profiles,
and the client a suite's gateway is given, simulated or over the network."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from ..gateway.backends import network_client, sim_client
from ..suite.declare import CommandAgent, ModelAgent, Suite
from ..suite.sim_profiles import SimAgent, SimJudge
from ..suite.tasks import Task
from .backend import SimBackend, SimWorld

if TYPE_CHECKING:
    from ..gateway.transport import ModelClient
    from .backend import SimWorld

__all__ = ["build_client", "sim_world", "tests_world"]


def sim_world(suite: Suite, tasks: tuple[Task, ...], seed: int) -> SimWorld:
    """The simulator's world for one suite: its tasks and each of its models' profiles."""
    served = [a for a in suite.agents if isinstance(a, (ModelAgent, CommandAgent)) and a.model]
    agents = {str(a.model): (a.name, a.sim) for a in served}
    judges: dict[str, SimJudge] = {suite.judge.model: suite.judge.sim, **dict(suite.judge.extra_sims)}
    return SimWorld(
        seed=seed, tasks=tasks, agents=agents, users={suite.user.model: suite.user.sim}, judges=judges
    )


def tests_world(suites: Iterable[tuple[Suite, tuple[Task, ...]]], seed: int) -> SimWorld:
    """The simulator's world for users' own tests: every suite of the run (its tasks and its models'
    profiles), and any other model answering as a default simulated agent."""
    worlds = [sim_world(suite, tasks, seed) for suite, tasks in suites]
    return SimWorld(
        seed=seed,
        tasks=tuple(t for w in worlds for t in w.tasks),
        agents={m: a for w in worlds for m, a in w.agents.items()},
        users={m: u for w in worlds for m, u in w.users.items()},
        judges={m: j for w in worlds for m, j in w.judges.items()},
        any_agent=SimAgent(),
    )


def build_client(
    backend: str, suite: Suite, tasks: tuple[Task, ...], seed: int, timeout: float, max_connections: int
) -> tuple[Callable[[], ModelClient], str]:
    """A factory for the suite's client, and the backend's identity (part of every cache key).

    The identity is known now; the client waits until a call has to be sent.
    """
    if backend == "sim":
        world = sim_world(suite, tasks, seed)
        return sim_client(SimBackend(world).serve), f"sim:{world.fingerprint()}"
    return network_client(backend, timeout, max_connections)
