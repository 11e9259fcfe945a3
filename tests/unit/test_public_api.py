"""The public surface is frozen: ``pytest_gauge.__all__``, the ``pytest11`` entry point, the
``--gauge-*`` flags and ini keys and the CLI's commands (the fixtures and markers:
tests/e2e/test_public_surface.py). Changing one is a deliberate change to these lists, the README, the
docs and the CHANGELOG, never a side effect of moving modules."""

from __future__ import annotations

import argparse
import tomllib
from pathlib import Path
from typing import Any

import pytest_gauge
from pytest_gauge import cli, plugin

ROOT = Path(__file__).resolve().parents[2]

PUBLIC = [
    "BestOf",
    "CallableAgent",
    "CaseRecord",
    "CommandAgent",
    "Comparison",
    "GaugeBudgetExceeded",
    "GaugeClient",
    "GaugeJudge",
    "GaugeLedger",
    "HttpAgent",
    "Judge",
    "JudgedOrder",
    "Judgment",
    "LedgerRecord",
    "ModelAgent",
    "ProxyRoute",
    "Reflection",
    "Reply",
    "RuleResult",
    "SimAgent",
    "SimJudge",
    "SimUser",
    "Spent",
    "Suite",
    "Tool",
    "ToolCall",
    "ToolResult",
    "Transcript",
    "Turn",
    "Usage",
    "UserSimulator",
    "best_of",
    "claude_code",
    "client_environment",
    "codex",
    "env_model",
    "reflection",
]


def test_the_public_names_are_exactly_the_frozen_sorted_list() -> None:
    assert sorted(pytest_gauge.__all__) == PUBLIC
    assert pytest_gauge.__all__ == PUBLIC  # kept sorted in the module too


def test_every_public_name_is_importable_from_the_package() -> None:
    missing = [name for name in PUBLIC if not hasattr(pytest_gauge, name)]
    assert missing == []


ENTRY_POINTS = {"gauge": "pytest_gauge.plugin"}

FLAGS = [
    "--gauge-adaptive",
    "--gauge-adaptive-look",
    "--gauge-allow-skipped-gates",
    "--gauge-anthropic-auth",
    "--gauge-backend",
    "--gauge-baseline",
    "--gauge-batch",
    "--gauge-batch-deadline",
    "--gauge-bootstrap-rounds",
    "--gauge-budget-task-usd",
    "--gauge-budget-tokens",
    "--gauge-budget-usd",
    "--gauge-cache",
    "--gauge-cache-dir",
    "--gauge-cache-mode",
    "--gauge-cassettes",
    "--gauge-close-threshold",
    "--gauge-doctor",
    "--gauge-familywise",
    "--gauge-gate",
    "--gauge-gates-on-partial",
    "--gauge-history",
    "--gauge-labels",
    "--gauge-limits",
    "--gauge-max-concurrency",
    "--gauge-max-retries",
    "--gauge-max-timeouts",
    "--gauge-no-progress",
    "--gauge-otel",
    "--gauge-otel-content",
    "--gauge-out",
    "--gauge-prices",
    "--gauge-retry-after-cap",
    "--gauge-rpm",
    "--gauge-run-id",
    "--gauge-seed",
    "--gauge-shard",
    "--gauge-snapshot-reports",
    "--gauge-timeout",
    "--gauge-tpm",
    "--gauge-unsandboxed",
]

INI_KEYS = [
    "gauge_adaptive",
    "gauge_adaptive_look",
    "gauge_anthropic_auth",
    "gauge_backend",
    "gauge_baseline",
    "gauge_batch",
    "gauge_batch_deadline",
    "gauge_bootstrap_rounds",
    "gauge_budget_task_usd",
    "gauge_budget_tokens",
    "gauge_budget_usd",
    "gauge_cache",
    "gauge_cache_dir",
    "gauge_cassettes",
    "gauge_close_threshold",
    "gauge_familywise",
    "gauge_gates",
    "gauge_history",
    "gauge_labels",
    "gauge_limits",
    "gauge_max_concurrency",
    "gauge_max_retries",
    "gauge_max_timeouts",
    "gauge_otel",
    "gauge_otel_content",
    "gauge_out",
    "gauge_prices",
    "gauge_prices_file",
    "gauge_retry_after_cap",
    "gauge_rpm",
    "gauge_seed",
    "gauge_timeout",
    "gauge_tpm",
    "gauge_unsandboxed",
]

COMMANDS: dict[str, Any] = {
    "baseline": {"save": {}},
    "cache": {"merge": {}, "prune": {}},
    "cassettes": {"export": {}},
    "doctor": {},
    "history": {"merge": {}},
    "labels": {"sample": {}},
    "merge": {},
    "report": {},
}
"""``python -m pytest_gauge COMMAND [ACTION]``."""


class _Recorder:
    """Stands in for pytest's parser: records the flags and ini keys the plugin's hook adds."""

    def __init__(self) -> None:
        self.flags: list[str] = []
        self.ini: list[str] = []

    def getgroup(self, name: str, description: str = "") -> _Recorder:
        return self

    def addoption(self, *names: str, **kwargs: object) -> None:
        self.flags.extend(names)

    def addini(self, name: str, *args: object, **kwargs: object) -> None:
        self.ini.append(name)


def _commands(parser: argparse.ArgumentParser) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found[name] = _commands(sub)
    return found


def test_the_entry_point_is_frozen() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["entry-points"]["pytest11"] == ENTRY_POINTS


def test_the_flags_and_ini_keys_are_frozen() -> None:
    recorder = _Recorder()
    plugin.pytest_addoption(recorder)  # type: ignore[arg-type]  # the two methods the hook calls
    assert sorted(recorder.flags) == FLAGS
    assert sorted(recorder.ini) == INI_KEYS


def test_the_cli_commands_are_frozen() -> None:
    assert _commands(cli.build_parser()) == COMMANDS
