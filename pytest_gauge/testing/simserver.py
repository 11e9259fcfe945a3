"""Serve a suite's simulator over the loopback server, so live-path tests and benchmarks run the real
HTTP path (``--gauge-backend=live``) against answers as realistic as the offline backend's."""

from __future__ import annotations

from pathlib import Path

from .._internal.records.json_types import JSONObject
from .._internal.sim.backend import SimBackend
from .._internal.sim.world import sim_world
from .._internal.suite.discover import load_suite
from .responders import Responder, ResponderError

__all__ = ["load_suite", "sim_responder"]


def sim_responder(module_path: Path, seed: int) -> Responder:
    """A loopback-server responder answering like the sim backend for this suite and seed."""
    suite = load_suite(module_path)
    tasks = suite.load(module_path.parent)
    backend = SimBackend(sim_world(suite, tasks, seed))

    def respond(body: JSONObject) -> JSONObject:
        status, payload = backend.respond(body)
        if status != 200:
            err = payload.get("error", {})
            raise ResponderError(status, str(err.get("message", "error")), code=err.get("code"))
        return payload

    return respond
