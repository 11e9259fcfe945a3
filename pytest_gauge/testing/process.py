"""The loopback server in a child process (``python -m pytest_gauge.testing``), driven through its admin
routes: for tests and benchmarks that need the server outside the client's process.
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._internal.records.json_types import JSONObject
from .faults import FaultPlan
from .server import ADMIN_PREFIX, Served

__all__ = ["ServerProcess", "admin_call"]


def admin_call(
    root_url: str, route: str, payload: Any = None, timeout: float = 10.0, cafile: str | None = None
) -> JSONObject:
    """One call to a running server's admin routes (GET without a payload, POST with one); an HTTPS
    server's certificate is trusted from ``cafile``, else ``SSL_CERT_FILE``."""
    data = None if payload is None else json.dumps(payload).encode("utf-8")
    req = urllib.request.Request(
        root_url + ADMIN_PREFIX + route,
        data=data,
        method="GET" if data is None else "POST",
        headers={"content-type": "application/json"},
    )
    https = root_url.startswith("https:")
    trusted = cafile or os.environ.get("SSL_CERT_FILE")
    context = ssl.create_default_context(cafile=trusted) if https else None
    with urllib.request.urlopen(req, timeout=timeout, context=context) as resp:  # loopback only
        result: JSONObject = json.loads(resp.read())
        return result


class ServerProcess(Served):
    """The loopback server in a child process (``python -m pytest_gauge.testing``), for multi-process.

    ``args`` are extra CLI arguments (e.g. ``["--latency", "0.05", "--rate-429", "0.1"]``).
    """

    def __init__(self, args: Sequence[str] = (), *, startup_timeout: float = 20.0) -> None:
        self.args = list(args)
        self.startup_timeout = startup_timeout
        self.proc: subprocess.Popen[str] | None = None
        self.port = 0
        self.path_prefix = "/v1"
        tls = "--tls-cert" in self.args
        self.scheme = "https" if tls else "http"
        self.cafile = self.args[self.args.index("--tls-cert") + 1] if tls else None
        if "--prefix" in self.args:
            raw = self.args[self.args.index("--prefix") + 1].strip("/")
            self.path_prefix = "/" + raw if raw else ""

    def start(self) -> ServerProcess:
        """Launch the child, wait for its ``PORT <n>`` line; returns self."""
        root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ)
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        cmd = [sys.executable, "-m", "pytest_gauge.testing", "--port", "0", *self.args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
        stdout = self.proc.stdout
        assert stdout is not None
        result: list[str] = []
        reader = threading.Thread(target=lambda: result.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(self.startup_timeout)
        line = result[0] if result else ""
        if not line.startswith("PORT "):
            self.stop()
            raise RuntimeError(f"loopback server process did not start (got {line!r})")
        self.port = int(line.split()[1])
        return self

    def stop(self) -> None:
        """Terminate the child (SIGTERM, then SIGKILL after 5 s) and reap it."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()

    def __enter__(self) -> ServerProcess:
        return self if self.proc is not None else self.start()

    def stats(self, full: bool = False) -> JSONObject:
        """The child's counters via ``GET /__gauge__/stats``."""
        return admin_call(self.root_url, "/stats" + ("?full=1" if full else ""), cafile=self.cafile)

    def set_faults(self, plan: FaultPlan) -> None:
        """Replace the child's fault plan."""
        admin_call(self.root_url, "/faults", plan.to_dict(), cafile=self.cafile)

    def set_latency(self, latency: float) -> None:
        """Replace the child's latency."""
        admin_call(self.root_url, "/latency", {"latency": latency}, cafile=self.cafile)

    def reset_counters(self) -> None:
        """Zero the child's counters and restart its fault schedule."""
        admin_call(self.root_url, "/reset", {}, cafile=self.cafile)
