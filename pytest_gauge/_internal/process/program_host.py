"""What a process gives its engine for program agents
(:class:`~pytest_gauge._internal.run.programs.ProgramHost`): each transcript's route of the process's
recording proxy, as the plain values a program's setup takes (docs/protocol.md#the-recording-proxy), for a
program in the sandbox unless the run opted out (``--gauge-unsandboxed``;
docs/protocol.md#programs-and-sandboxing)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..gateway.gateway import CallContext
from ..gateway.proxy import RecordingProxy, WorkCalls, client_environment
from ..gateway.route_policy import RoutePolicy
from ..gateway.wire import APIS, wire_format
from ..run import sandbox
from ..run.programs import ProgramMissing
from ..run.relay import HostRelay
from ..suite.programs import ProgramEndpoint

__all__ = ["ProxyProgramHost", "inside_urls"]

HOST = "127.0.0.1"  # where the recording proxy listens on the host, and the relay inside


def inside_urls(values: Mapping[str, str], port: int) -> dict[str, str]:
    """``values`` with the proxy's host address (``http://127.0.0.1:<port>``) replaced by the one the
    sandbox's relay listens on (the same port in every run)."""
    here = re.compile(re.escape(f"http://{HOST}:{port}") + r"(?![0-9])")
    inside = f"http://{HOST}:{sandbox.PROXY_PORT}"
    return {k: here.sub(inside, v) for k, v in values.items()}


class ProxyProgramHost:
    """Program agents' model calls through this process's recording proxy (one route per transcript,
    kept until the process ends: a program a turn left running may still send one); sandboxed programs
    reach it through one relay per process (:class:`~pytest_gauge._internal.run.relay.HostRelay`)."""

    def __init__(self, proxy: RecordingProxy, *, unsandboxed: bool = False) -> None:
        self.proxy = proxy
        self.unsandboxed = unsandboxed
        self.relay: HostRelay | None = None

    def endpoint(
        self, ctx: CallContext, calls: WorkCalls, seed: int | None = None, policy: RoutePolicy | None = None
    ) -> ProgramEndpoint:
        """The transcript's route: base URLs per wire format, the run's proxy token, and the client
        environment (no gateway key); its requests are role ``agent`` calls of the transcript, with
        ``seed`` added where they carry none, held to ``policy``. In the sandbox the URLs are the relay's
        inside address; with no sandbox and no opt-out, the one line naming the fix
        (:class:`~pytest_gauge._internal.run.programs.ProgramMissing`: the run stops)."""
        if not self.unsandboxed and (problem := sandbox.sandbox_problem()) is not None:
            raise ProgramMissing(
                f"no sandbox for program agents: {problem}",
                f"{sandbox.INSTALL_LINE}, or run with --gauge-unsandboxed",
            )
        route = self.proxy.register(ctx, "agent", calls=calls, seed=seed, policy=policy)
        urls: dict[str, str] = {api: wire_format(api).sdk_base_url(route.base_url) for api in APIS}
        env = client_environment(route, environ={})  # the route's variables only: the program's
        # environment is built from nothing (run/programs.py), never from the test process's
        if self.unsandboxed:
            return ProgramEndpoint(urls, route.token, env)
        if self.relay is None:
            self.relay = HostRelay(route.port)
        inside = inside_urls(urls, route.port)
        return ProgramEndpoint(inside, route.token, inside_urls(env, route.port), True, self.relay.path)

    def mcp_servers(self, ctx: CallContext, tools: Any) -> Mapping[str, Mapping[str, Any]]:
        """No MCP servers from here (the suite's tools over MCP are their own module's)."""
        return {}

    def close(self) -> None:
        """Stop the relay (the run's end)."""
        if self.relay is not None:
            self.relay.close()
