"""``python -m pytest_gauge.testing``: the loopback server in its own process. It prints ``PORT <n>``, serves
until SIGTERM/SIGINT and exposes its counters at ``GET /__gauge__/stats``; ``--suite PATH --suite-seed N``
makes it answer like the simulator for that suite (benchmarks). ``python -m pytest_gauge.testing.server``
runs the same CLI.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from .faults import FaultPlan
from .responders import Responder
from .server import DEFAULT_MODELS, LoopbackServer
from .simserver import sim_responder

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m pytest_gauge.testing",
        description="OpenAI-compatible loopback server with fault injection.",
    )
    p.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0 = any free port)")
    p.add_argument("--latency", type=float, default=0.0, help="seconds before every answer")
    p.add_argument("--jitter", type=float, default=0.0, help="each answer's latency ± up to this (seeded)")
    p.add_argument("--tls-cert", default=None, help="serve HTTPS with this certificate (PEM; with --tls-key)")
    p.add_argument("--tls-key", default=None, help="the certificate's private key (PEM)")
    p.add_argument("--prefix", default="/v1", help="path prefix of the model routes")
    p.add_argument("--models", default=",".join(DEFAULT_MODELS), help="comma-separated ids for GET /models")
    p.add_argument("--status-401", action="store_true")
    p.add_argument("--expected-key", default=None)
    p.add_argument("--rate-429", type=float, default=0.0)
    p.add_argument("--retry-after", default="1", help="Retry-After value on 429; 'none' to omit")
    p.add_argument("--retry-after-ms", type=int, default=None)
    p.add_argument("--rate-503", type=float, default=0.0)
    p.add_argument("--rate-500", type=float, default=0.0)
    p.add_argument("--burst-5xx", type=int, default=0)
    p.add_argument("--slow-every", type=int, default=0)
    p.add_argument("--slow-seconds", type=float, default=0.0)
    p.add_argument("--reset-every", type=int, default=0)
    p.add_argument("--no-usage", action="store_true")
    p.add_argument("--truncate", action="store_true")
    p.add_argument("--should-retry-false", action="store_true")
    p.add_argument("--status-400-model", action="append", default=[], help="repeatable")
    p.add_argument("--unknown-model", action="append", default=[], help="404 model_not_found; repeatable")
    p.add_argument("--rate-malformed", type=float, default=0.0, help="share of 200s with a malformed body")
    p.add_argument("--malformed", default="mixed", help="kind of malformed body (mixed: each in turn)")
    p.add_argument("--rate-reset", type=float, default=0.0, help="share of connections reset")
    p.add_argument("--rate-529", type=float, default=0.0, help="share of 529 overloaded answers")
    p.add_argument("--drip-seconds", type=float, default=0.0, help="send 200 bodies one byte per N s")
    p.add_argument("--hold-after", type=int, default=0, help="hold chat requests after the first N")
    p.add_argument(
        "--judge-prefers", choices=("A", "B"), default=None, help="answer every judge request for this slot"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the probabilistic faults")
    p.add_argument(
        "--suite",
        default=None,
        metavar="PATH",
        help="answer like the simulator for the Suite in this test module (sim_responder)",
    )
    p.add_argument(
        "--suite-seed", type=int, default=0, help="the simulator's seed for --suite (the run's --gauge-seed)"
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry: serve until SIGTERM/SIGINT, after printing ``PORT <n>`` on stdout."""
    a = _parser().parse_args(argv)
    plan = FaultPlan(
        status_401=a.status_401,
        expected_key=a.expected_key,
        rate_429=a.rate_429,
        retry_after=None if a.retry_after.lower() == "none" else a.retry_after,
        retry_after_ms=a.retry_after_ms,
        rate_503=a.rate_503,
        rate_500=a.rate_500,
        burst_5xx=a.burst_5xx,
        slow_every=a.slow_every,
        slow_seconds=a.slow_seconds,
        reset_every=a.reset_every,
        no_usage=a.no_usage,
        truncate=a.truncate,
        should_retry_false=a.should_retry_false,
        status_400_models=frozenset(a.status_400_model),
        unknown_models=frozenset(a.unknown_model),
        rate_malformed=a.rate_malformed,
        malformed=a.malformed,
        rate_reset=a.rate_reset,
        rate_529=a.rate_529,
        drip_seconds=a.drip_seconds,
        hold_after=a.hold_after,
        judge_prefers=a.judge_prefers,
        seed=a.seed,
    )
    models = [m for m in a.models.split(",") if m]
    responder: Responder | None = None
    if a.suite is not None:
        responder = sim_responder(Path(a.suite).resolve(), a.suite_seed)
    tls = (a.tls_cert, a.tls_key) if a.tls_cert else None
    server = LoopbackServer(
        responder,
        latency=a.latency,
        faults=plan,
        path_prefix=a.prefix,
        port=a.port,
        models=models,
        latency_jitter=a.jitter,
        tls=tls,
    )
    done = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    server.start()
    print(f"PORT {server.port}", flush=True)
    try:
        while not done.wait(0.5):
            pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
