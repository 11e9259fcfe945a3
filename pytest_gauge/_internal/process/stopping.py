"""Stopping a run promptly, with nothing paid lost: Ctrl-C, SIGTERM (a CI job's timeout) and killed workers.

How a stop travels (docs/guide.md#what-is-recorded-when-nothing-paid-is-lost):

* **SIGTERM** becomes a ``KeyboardInterrupt`` in every pytest process (controller and xdist workers),
  so a CI timeout takes the same path as Ctrl-C instead of killing the process without a report.
* The **controller**, on an interrupt, writes the run folder's ``stop`` file and waits (a few seconds
  at most) until every live worker has written ``stopped-<worker>``; then it merges the ledgers and
  writes the outputs and reports of the cases that finished.
* A **worker** watches the ``stop`` file (:class:`StopWatcher`, every 50 ms); on a stop (the file, or
  its own Ctrl-C/SIGTERM) its engine starts no new attempt, gives the attempts in flight a short grace,
  cancels the rest (their ledger line says ``interrupted``), then writes ``stopped-<worker>``.
* A worker that was **killed** (``kill -9``) writes nothing more: its ``worker-<id>.pid`` names a dead
  process, so the controller does not wait for it, and its write-ahead ledger lines without an outcome
  are merged as ``interrupted`` (:func:`pytest_gauge._internal.gateway.ledger.resolve_sent`).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from ..files.folders import RunFolder

__all__ = [
    "FORCED",
    "PLEASE_WAIT",
    "RunFolderWatcher",
    "StopWatcher",
    "announce_worker",
    "install_sigterm",
    "mark_stopped",
    "request_stop",
    "restore_sigterm",
    "stop_requested",
    "wait_for_workers",
]


FORCED = threading.Event()
"""Set by a third Ctrl-C/SIGTERM: the stop waits for nothing more (workers, attempts in flight) but
still merges what the run folder holds and writes the outputs."""
_signals_seen = 0
_speaks = True  # False in an xdist worker: the controller speaks for the run
PLEASE_WAIT = (
    "pytest-gauge: stopping, please wait: finishing the ledgers and reports (press Ctrl-C again to"
    " stop waiting for the workers; what the run folder holds is still merged)\n"
)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    """The first Ctrl-C or SIGTERM interrupts the run (a KeyboardInterrupt, as pytest expects); the
    second is absorbed so the stop can finish; the third forces it to stop waiting (:data:`FORCED`)."""
    global _signals_seen
    _signals_seen += 1
    if _signals_seen == 1 or _signals_seen > 3:  # the fourth: the user insists, as without the plugin
        raise KeyboardInterrupt(signal.Signals(signum).name)
    if _signals_seen == 2:
        if _speaks:
            os.write(2, PLEASE_WAIT.encode())
        return
    FORCED.set()
    if _speaks:
        os.write(2, b"pytest-gauge: forced: not waiting any longer; merging what the run folder holds\n")


def install_sigterm(speaks: bool = True) -> Any:
    """Make Ctrl-C and SIGTERM stop this process through :func:`_on_signal` (SIGTERM included, so a CI
    job's timeout stops like Ctrl-C, with a report), each unless someone else already handles it.
    Returns the previous handlers (for :func:`restore_sigterm`), or None when nothing was changed.
    ``speaks``: this process prints "stopping, please wait" (not an xdist worker)."""
    global _speaks, _signals_seen
    if threading.current_thread() is not threading.main_thread():
        return None
    _speaks, _signals_seen = speaks, 0
    FORCED.clear()
    previous: dict[signal.Signals, Any] = {}
    for signum, default in ((signal.SIGTERM, signal.SIG_DFL), (signal.SIGINT, signal.default_int_handler)):
        if signal.getsignal(signum) is default:
            previous[signum] = default
            signal.signal(signum, _on_signal)
    return previous or None


def restore_sigterm(previous: Any) -> None:
    """Put back the handlers :func:`install_sigterm` replaced."""
    if previous is None or threading.current_thread() is not threading.main_thread():
        return
    for signum, handler in previous.items():
        if signal.getsignal(signum) is _on_signal:
            signal.signal(signum, handler)


def request_stop(run_dir: Path) -> None:
    """The controller's word to every worker: start nothing new, wind down, say so."""
    run_dir.mkdir(parents=True, exist_ok=True)
    RunFolder(run_dir).stop.write_text("stop\n", encoding="utf-8")


def stop_requested(run_dir: Path) -> bool:
    return RunFolder(run_dir).stop.exists()


def announce_worker(run_dir: Path, worker: str) -> None:
    """``worker-<id>.pid``: the controller waits for this worker's ``stopped`` mark only while it lives."""
    run_dir.mkdir(parents=True, exist_ok=True)
    RunFolder(run_dir).pid(worker).write_text(str(os.getpid()), encoding="utf-8")


def mark_stopped(run_dir: Path, worker: str) -> None:
    """``stopped-<id>``: this worker sends nothing more, and its ledger file is complete."""
    try:
        RunFolder(run_dir).stopped(worker).write_text("stopped\n", encoding="utf-8")
    except OSError:  # the run folder is already gone: nobody is waiting
        pass


def _alive(pid: int) -> bool:
    """Whether a process runs (a zombie, killed and not yet reaped, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except OSError:
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True
    return stat.rsplit(")", 1)[-1].split()[0] not in ("Z", "X")


def _waiting_for(run_dir: Path) -> list[str]:
    pending = []
    folder = RunFolder(run_dir)
    for worker in folder.pid_workers():
        if folder.stopped(worker).exists():
            continue
        try:
            pid = int(folder.pid(worker).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if _alive(pid):
            pending.append(worker)
    return pending


def wait_for_workers(run_dir: Path, deadline: float) -> list[str]:
    """Wait until every live worker has marked itself stopped, for at most ``deadline`` seconds.
    Returns the workers still running at the deadline (their later lines miss the merged ledger)."""
    end = time.monotonic() + deadline
    pending = _waiting_for(run_dir)
    while pending and time.monotonic() < end and not FORCED.is_set():
        time.sleep(0.05)
        pending = _waiting_for(run_dir)
    return pending


class RunFolderWatcher:
    """A worker's daemon thread that looks at the run folder every ``every`` seconds (:meth:`check`)
    until it is closed or ``check`` returns True: how a worker hears the controller's files."""

    name = "gauge-watcher"

    def __init__(self, run_dir: Path, every: float = 0.05) -> None:
        self.run_dir = run_dir
        self.every = every
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name=self.name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._done.set()

    def check(self) -> bool:
        """One look at the run folder; True ends the watch."""
        raise NotImplementedError

    def _watch(self) -> None:
        while not self._done.wait(self.every):
            if self.check():
                self._done.set()


class StopWatcher(RunFolderWatcher):
    """When the controller's ``stop`` file appears, call ``on_stop`` once."""

    name = "gauge-stop-watcher"

    def __init__(self, run_dir: Path, on_stop: Callable[[], None], every: float = 0.05) -> None:
        super().__init__(run_dir, every)
        self.on_stop = on_stop

    def check(self) -> bool:
        if not stop_requested(self.run_dir):
            return False
        self.on_stop()
        return True
