"""Shared fixtures for the plugin's own tests: a copy of a small suite inside a pytester folder."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

DATA = Path(__file__).parent / "data"

# tests/data holds suites that the tests copy into pytester folders; they are not tests of this project.
collect_ignore = ["data"]

# Fields that may legitimately differ between runs of the same seed (docs/protocol.md#ledger: only latencies,
# timestamps, run and worker ids).
VOLATILE = {"latency_s", "ts", "run_id", "worker", "finished_at"}


@pytest.fixture(autouse=True)
def _no_ci_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    """The plugin's own runs are local runs unless a test sets ``CI`` itself: under ``CI`` a skipped
    gate fails the run (issue 16), and this project's CI sets it."""
    monkeypatch.delenv("CI", raising=False)


@pytest.fixture
def mini_suite(pytester: pytest.Pytester) -> Path:
    """The ``tests/data/mini`` suite copied to ``suites/mini`` in a fresh pytester folder (sim backend)."""
    target = pytester.path / "suites" / "mini"
    shutil.copytree(DATA / "mini", target)
    pytester.makeini("[pytest]\ngauge_backend = sim\ngauge_seed = 7\n")
    return target


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def normalised(rows: list[dict[str, Any]]) -> list[str]:
    """Rows without volatile fields (recursively), as sorted canonical JSON strings."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in VOLATILE}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return sorted(json.dumps(strip(r), sort_keys=True) for r in rows)


@pytest.fixture
def read_outputs() -> Callable[[Path], dict[str, list[str]]]:
    def read(folder: Path) -> dict[str, list[str]]:
        return {
            name: normalised(read_jsonl(folder / name))
            for name in (
                "pairs/pair_results.jsonl",
                "agent_runs.jsonl",
                "agents/agent_x.jsonl",
                "agents/agent_y.jsonl",
            )
        }

    return read


class MarkdownSnapshot(SingleFileSnapshotExtension):
    """One reviewable .md file per snapshot, stored as text."""

    file_extension = "md"
    _write_mode = WriteMode.TEXT


class JSONTextSnapshot(SingleFileSnapshotExtension):
    """Rendered JSON text (metrics.json, elo.json), stored verbatim."""

    file_extension = "json"
    _write_mode = WriteMode.TEXT


class SVGSnapshot(SingleFileSnapshotExtension):
    """A rendered SVG, stored verbatim (opens in a browser for review)."""

    file_extension = "svg"
    _write_mode = WriteMode.TEXT


class HTMLSnapshot(SingleFileSnapshotExtension):
    """A rendered HTML page, stored verbatim (opens in a browser for review)."""

    file_extension = "html"
    _write_mode = WriteMode.TEXT
