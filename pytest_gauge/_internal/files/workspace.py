"""A transcript's workspace: a fresh copy of the folder a suite names (``Suite(workspace=...)``) at a
path that depends only on the output folder, suite, task, agent and sample (``SuiteFolder.workspace``),
so an agent's prompt or configuration naming it is the same in every run (docs/protocol.md#workspaces).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from .folders import OutFolder

__all__ = ["workspace_for", "workspace_path"]


def workspace_path(
    out_dir: Path | str, suite: str, task_id: str, agent: str, sample: int, candidate: int = 0
) -> Path:
    """Where (task, agent, sample)'s workspace lives: ``<gauge-out>/<suite>/work/<task>/<agent>/<sample>``,
    absolute (a relative ``--gauge-out`` is resolved against the current directory); a best-of tier's
    ``candidate`` k > 0 at ``<sample>-c<k>``."""
    folder = OutFolder(Path(out_dir).absolute()).suite(suite)
    return folder.workspace(task_id, agent, sample, candidate)


def workspace_for(
    out_dir: Path | str,
    suite: str,
    task_id: str,
    agent: str,
    sample: int,
    source: Path | None,
    candidate: int = 0,
) -> Path:
    """A fresh workspace for one transcript: whatever an earlier run left there is removed, then
    ``source`` (a folder) is copied in, symlinks kept as links; with ``source`` None an empty folder.
    Called once per transcript by the engine before its dialogue (and by program agents' presets for
    their working directory), never by two processes at once: a transcript is produced once per run."""
    target = workspace_path(out_dir, suite, task_id, agent, sample, candidate)
    if target.is_symlink() or target.is_file():
        target.unlink()
    elif target.exists():
        shutil.rmtree(target)
    if source is None:
        target.mkdir(parents=True)
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(source, target, symlinks=True)
    return target
