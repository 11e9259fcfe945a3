"""Serve a suite's simulator over the loopback server, so live-path tests and benchmarks run the real
HTTP path (``--gauge-backend=live``) against answers as realistic as the offline backend's."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from ..gateway.backends import sim_world
from ..sim.backend import SimBackend
from ..suite.declare import Suite
from .server import Responder, ResponderError

__all__ = ["load_suite", "sim_responder"]


def load_suite(module_path: Path) -> Suite:
    """Import a suite's test module from its path and return its module-level :class:`Suite`."""
    name = f"_gauge_suite_{abs(hash(str(module_path)))}"
    spec = importlib.util.spec_from_file_location(name, module_path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    suites = [v for v in vars(module).values() if isinstance(v, Suite)]
    if len(suites) != 1:
        raise ValueError(f"{module_path}: expected one module-level Suite, found {len(suites)}")
    return suites[0]


def sim_responder(module_path: Path, seed: int) -> Responder:
    """A loopback-server responder answering like the sim backend for this suite and seed."""
    suite = load_suite(module_path)
    tasks = suite.load(module_path.parent)
    backend = SimBackend(sim_world(suite, tasks, seed))

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        status, payload = backend.respond(body)
        if status != 200:
            err = payload.get("error", {})
            raise ResponderError(status, str(err.get("message", "error")), code=err.get("code"))
        return payload

    return respond
