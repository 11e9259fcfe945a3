"""What a process gives its engine for program agents (:class:`~pytest_gauge.run.programs.ProgramHost`):
each transcript's route of the process's recording proxy, as the plain values a program's setup takes
(docs/protocol.md#the-recording-proxy)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..gateway.gateway import CallContext
from ..gateway.proxy import RecordingProxy, WorkCalls, client_environment
from ..gateway.route_policy import RoutePolicy
from ..suite.programs import ProgramEndpoint

__all__ = ["ProxyProgramHost"]


class ProxyProgramHost:
    """Program agents' model calls through this process's recording proxy (one route per transcript,
    kept until the process ends: a program a turn left running may still send one)."""

    def __init__(self, proxy: RecordingProxy) -> None:
        self.proxy = proxy

    def endpoint(
        self, ctx: CallContext, calls: WorkCalls, seed: int | None = None, policy: RoutePolicy | None = None
    ) -> ProgramEndpoint:
        """The transcript's route: base URLs per wire format, the run's proxy token, and the client
        environment (no gateway key); its requests are role ``agent`` calls of the transcript, with
        ``seed`` added where they carry none, held to ``policy``."""
        route = self.proxy.register(ctx, "agent", calls=calls, seed=seed, policy=policy)
        urls = {"chat": route.openai_base_url, "responses": route.openai_base_url}
        env = client_environment(route, environ={})  # the route's variables only: the program's
        # environment is built from nothing (run/programs.py), never from the test process's
        return ProgramEndpoint({**urls, "anthropic": route.anthropic_base_url}, route.token, env)

    def mcp_servers(self, ctx: CallContext, tools: Any) -> Mapping[str, Mapping[str, Any]]:
        """No MCP servers from here (the suite's tools over MCP are their own module's)."""
        return {}
