"""This suite runs real agent CLIs: it is collected only when named (``pytest eval_suites/program_agents``),
never by ``pytest eval_suites/``; without the CLIs its module is skipped with their install command, and
under CI (``CI`` or ``GAUGE_REQUIRE_BROWSER`` set) that is a collection error instead."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
MODULE = HERE / "test_program_agents.py"
INSTALL = "npm install -g @anthropic-ai/claude-code@2.1.328 @openai/codex@0.169.0"


def _missing() -> list[str]:
    """The CLIs not found (``GAUGE_CLAUDE_COMMAND`` / ``GAUGE_CODEX_COMMAND`` name other binaries)."""
    return [
        c
        for c in ("claude", "codex")
        if shutil.which(os.environ.get(f"GAUGE_{c.upper()}_COMMAND", c)) is None
    ]


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Leave this folder out unless the command line names it (or a file in it)."""
    named = [Path(str(a).split("::", 1)[0]).resolve() for a in config.args]
    if any(p == HERE or HERE in p.parents for p in named):
        return None
    return collection_path.resolve() == MODULE or None


class _MissingPrograms(pytest.Module):
    """The suite's module when a CLI is missing: skipped with the install command (failed under CI)."""

    def collect(self) -> list[pytest.Item | pytest.Collector]:
        why = f"{' and '.join(_missing())} not installed: {INSTALL}"
        if os.environ.get("CI") or os.environ.get("GAUGE_REQUIRE_BROWSER"):
            pytest.fail(f"eval_suites/program_agents: {why} (required under CI)", pytrace=False)
        pytest.skip(why)


def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector) -> pytest.Module | None:
    if module_path.resolve() == MODULE and _missing():
        return _MissingPrograms.from_parent(parent, path=module_path)
    return None
