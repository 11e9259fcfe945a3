"""How long one Ctrl-C takes to end a live ``-n 2`` run.

A live run of ``tests/data/mini`` against the loopback server, which holds every request after the
40th, gets one SIGINT to its process group (as a terminal's Ctrl-C) once every slot is held at the
server. Printed: seconds from the signal to the run's ``manifest.json`` (every output written) and to
the exit of pytest, beside the in-flight grace (2 s) the guide states. Run it on a quiet machine and
say the load (``uptime``) with the figure.

    python benchmarks/bench_ctrl_c.py            # 3 runs
    python benchmarks/bench_ctrl_c.py --runs 1
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pytest_gauge.testing import FaultPlan, LoopbackServer
from pytest_gauge.testing.simserver import sim_responder

ROOT = Path(__file__).resolve().parents[1]
MINI = ROOT / "tests" / "data" / "mini"
CONCURRENCY = 3
HOLD_AFTER = 40
GRACE_S = 2.0


def one_run(server: LoopbackServer, folder: Path) -> tuple[float, float, int]:
    """(signal → manifest written, signal → exit, exit code) of one stopped run."""
    shutil.copytree(MINI, folder / "suites" / "mini")
    (folder / "pytest.ini").write_text("[pytest]\ngauge_seed = 7\n", encoding="utf-8")
    env = {**os.environ, "TAOTOKEN_API_KEY": "sk-bench", "TAOTOKEN_BASE_URL": server.base_url}
    env["PYTHONPATH"] = str(ROOT)
    command = [sys.executable, "-m", "pytest", "suites", "-p", "no:cacheprovider", "-n", "2", "-q"]
    command += ["--gauge-backend", "live", "--gauge-max-concurrency", str(CONCURRENCY), "--gauge-no-progress"]
    server.faults = FaultPlan(hold_after=HOLD_AFTER)
    server.reset_counters()
    proc = subprocess.Popen(
        command,
        cwd=folder,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        end = time.monotonic() + 120
        while server.held < CONCURRENCY and proc.poll() is None and time.monotonic() < end:
            time.sleep(0.02)
        sent = time.time()
        os.killpg(proc.pid, signal.SIGINT)
        code = proc.wait(timeout=120)
        exited = time.time()
    finally:
        server.release()
        if proc.poll() is None:
            proc.kill()
    manifest = folder / "gauge-out" / "mini" / "manifest.json"
    written = manifest.stat().st_mtime - sent if manifest.is_file() else float("nan")
    return written, exited - sent, code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(f"load: {os.getloadavg()[0]:.1f} (1 min), {os.cpu_count()} cores; grace {GRACE_S:g} s")
    with LoopbackServer(sim_responder(MINI / "test_mini.py", seed=7)) as server:
        for i in range(args.runs):
            with tempfile.TemporaryDirectory(prefix="bench-ctrl-c-") as tmp:
                written, exited, code = one_run(server, Path(tmp))
            print(
                f"run {i + 1}: outputs written {written:.1f} s, exit {exited:.1f} s after the signal ({code})"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
