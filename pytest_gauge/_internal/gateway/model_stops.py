"""Per-(role, model) stops: a model that cannot serve this run is stopped once, run-wide, and its remaining
work is not run (docs/architecture.md#model-stops).

One mechanism for every reason a model is stopped: an unknown model (a 400/404 naming it), a model
whose attempts time out ``--gauge-max-timeouts`` times in a row, a key rejected for one model. The
first process to stop a (role, model) writes ``stopped-models/<id>.json`` in the run folder (created
exclusively, so there is one first stop and one full message per model run-wide); every process checks
it before each attempt, so other workers stop too without sending. The call that stopped the model fails
with the full message (cause and fix); every later call for it raises :class:`ModelStopped`, a short
"not run" that the case items report as skipped, and the terminal lists each stop once.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from ..files.folders import RunFolder
from .errors import GatewayError, ModelStopped

__all__ = ["ModelStop", "ModelStops", "read_stops"]


@dataclass(frozen=True)
class ModelStop:
    """One stopped (role, model): why (``reason``, a few words) and the full message (cause and fix)."""

    role: str
    model: str
    reason: str
    message: str

    def to_json(self) -> dict[str, str]:
        return {"role": self.role, "model": self.model, "reason": self.reason, "message": self.message}

    def refusal(self) -> ModelStopped:
        """The short error every later call for this model raises (its case is reported as not run)."""
        return ModelStopped(
            f"not run: the {self.role} model {self.model!r} was stopped earlier in this run ({self.reason})",
            "see 'pytest-gauge: stopped models' in the terminal summary",
            role=self.role,
            model=self.model,
        )


@functools.lru_cache(maxsize=1024)
def _file_name(role: str, model: str) -> str:
    """The stop file's name of (role, model) (looked up before every attempt: computed once)."""
    return hashlib.sha256(f"{role}\0{model}".encode()).hexdigest()[:20] + ".json"


class ModelStops:
    """The run's stopped models: in memory for this process, in ``<run folder>/stopped-models/`` for all.

    API (what the gateway and other stages call):

    - :meth:`stop` ``(role, model, reason, error) -> GatewayError``: stop it; returns the error the
      calling call raises (the full ``error`` if this was the first stop run-wide, else the short
      :class:`ModelStopped`).
    - :meth:`check` ``(role, model)``: raise the short :class:`ModelStopped` if it was stopped by any
      process; called before every attempt.
    - :meth:`timed_out` / :meth:`answered` ``(role, model)``: count timeouts in a row; the
      ``max_timeouts``-th in a row returns the :class:`ModelStop` to make (None otherwise).
    """

    def __init__(self, run_dir: Path | None, max_timeouts: int = 3) -> None:
        self.folder = RunFolder(run_dir).stopped_models if run_dir is not None else None
        self.max_timeouts = max_timeouts
        self._stopped: dict[tuple[str, str], ModelStop] = {}
        self._timeouts: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()
        self._paths: dict[tuple[str, str], str] = {}

    def stop(self, role: str, model: str, reason: str, error: GatewayError) -> GatewayError:
        """Stop (role, model) for the rest of the run; the error the stopping call raises."""
        stop = ModelStop(role, model, reason, str(error))
        with self._lock:
            if (role, model) in self._stopped:
                return self._stopped[(role, model)].refusal()
            self._stopped[(role, model)] = stop
        if self.folder is None:
            return error
        self.folder.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(self.folder / _file_name(role, model), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return stop.refusal()  # another process stopped it first and gave the full message
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps(stop.to_json(), sort_keys=True) + "\n")
        return error

    def check(self, role: str, model: str) -> None:
        """Raise :class:`ModelStopped` if (role, model) was stopped in this run (by any process)."""
        stop = self._stopped.get((role, model))
        if stop is None and self.folder is not None:
            path = self._path(role, model)
            if os.path.exists(path):
                stop = _read(Path(path)) or ModelStop(role, model, "stopped by another worker", "")
                with self._lock:
                    self._stopped.setdefault((role, model), stop)
        if stop is not None:
            raise stop.refusal()

    def _path(self, role: str, model: str) -> str:
        """Where (role, model)'s stop file is (kept per model: :meth:`check` runs before every attempt)."""
        path = self._paths.get((role, model))
        if path is None:
            assert self.folder is not None
            path = self._paths[(role, model)] = os.fspath(self.folder / _file_name(role, model))
        return path

    def timed_out(self, role: str, model: str, timeout: float) -> ModelStop | None:
        """One more timed-out attempt of (role, model): the stop to make at ``max_timeouts`` in a row."""
        with self._lock:
            n = self._timeouts.get((role, model), 0) + 1
            self._timeouts[(role, model)] = n
        if self.max_timeouts <= 0 or n < self.max_timeouts:
            return None
        return ModelStop(role, model, f"{n} timeouts in a row of {timeout:g}s", "")

    def answered(self, role: str, model: str) -> None:
        """An attempt of (role, model) was answered in time: its timeouts in a row start again."""
        if self._timeouts.get((role, model)):
            with self._lock:
                self._timeouts[(role, model)] = 0


def _read(path: Path) -> ModelStop | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return ModelStop(str(data["role"]), str(data["model"]), str(data["reason"]), str(data["message"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def read_stops(run_dir: Path) -> list[ModelStop]:
    """Every model stopped in the run (one each, sorted by role and model): for the terminal summary."""
    folder = RunFolder(run_dir).stopped_models
    if not folder.is_dir():
        return []
    stops = [s for p in sorted(folder.glob("*.json")) if (s := _read(p)) is not None]
    return sorted(stops, key=lambda s: (s.role, s.model))
