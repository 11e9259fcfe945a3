"""Command-line flags and ini keys, resolved once (CLI → ini → default) into one frozen settings object.

:class:`GaugeOptions` holds only plain values so it can travel to xdist workers unchanged. Secrets
(the API key) are never stored here: they are read from the environment at the moment of use.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from .gateway.prices import PriceRow

__all__ = ["BACKENDS", "CACHE_MODES", "GaugeOptions", "add_options", "resolve_options"]

BACKENDS = ("live", "sim", "replay")
CACHE_MODES = ("use", "refresh", "off")


@dataclass(frozen=True)
class GaugeOptions:
    """Every pytest-gauge setting of one run (docs/reference.md#options)."""

    backend: str = "live"
    seed: int = 0
    out_dir: str = "gauge-out"
    cache_mode: str = "use"
    cache_dir: str = ".gauge-cache"
    cassettes: str | None = None
    timeout: float = 60.0
    max_retries: int = 4
    max_concurrency: int = 8
    max_timeouts: int = 3  # timed-out attempts in a row that stop a (role, model) for the run; 0: never
    rpm: float | None = None
    tpm: float | None = None
    retry_after_cap: float = 60.0
    close_threshold: float = 0.1
    gates: tuple[str, ...] = ()
    budget_usd: float | None = None
    budget_tokens: int | None = None
    budget_task_usd: float | None = None
    prices: tuple[PriceRow, ...] = ()
    genai_prices: bool = False  # --gauge-prices genai-prices: unpriced models priced from genai-prices
    bootstrap_rounds: int = 2000
    progress: bool = True
    snapshot_reports: bool = False
    baseline: str | None = None
    gates_on_partial: bool = False
    allow_skipped_gates: bool = False
    shard: str | None = None
    limits: str | None = None
    run_id: str | None = None
    adaptive: bool = False  # --gauge-adaptive: looks of tasks, stop when every gate is decided (issue 18)
    adaptive_look: int = 5  # tasks per look

    def prices_for(self, models: Iterable[str]) -> tuple[PriceRow, ...]:
        """The prices a run with these ``models`` uses: the configured ones, plus genai-prices for the
        models they do not price with ``--gauge-prices genai-prices`` (the run and ``merge`` alike)."""
        if not self.genai_prices:
            return self.prices
        from .gateway.prices import with_genai_prices

        return with_genai_prices(self.prices, models)


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


def _gate_text(text: str) -> str:
    """Validate a ``--gauge-gate`` expression at parse time (pytest-benchmark style); keep its text."""
    from .analysis.gates import gate_arg

    return gate_arg(text).canonical()


def _non_negative_int(text: str) -> int:
    value = int(text) if text.lstrip("-").isdigit() else -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}")
    return value


# (flag suffix, ini key, argparse type, help, choices)
_SETTINGS: tuple[tuple[str, str, Any, str, tuple[str, ...] | None], ...] = (
    (
        "backend",
        "gauge_backend",
        str,
        "live (default), sim (embedded offline simulator) or replay (cache/cassettes only, no network)",
        BACKENDS,
    ),
    ("seed", "gauge_seed", int, "run seed: A/B order draws, simulator, bootstrap (default 0)", None),
    (
        "out",
        "gauge_out",
        str,
        "output folder, relative to the invocation directory (default gauge-out)",
        None,
    ),
    ("cache", "gauge_cache", str, "response cache mode: use (default), refresh or off", CACHE_MODES),
    (
        "cache-dir",
        "gauge_cache_dir",
        str,
        "response cache folder (default .gauge-cache under the rootdir)",
        None,
    ),
    ("cassettes", "gauge_cassettes", str, "replay reads only from this folder of exported cassettes", None),
    ("timeout", "gauge_timeout", _positive_float, "per-request timeout in seconds (default 60)", None),
    (
        "max-retries",
        "gauge_max_retries",
        _non_negative_int,
        "retries per call for 408/409/429/5xx/timeouts (default 4)",
        None,
    ),
    (
        "max-concurrency",
        "gauge_max_concurrency",
        _positive_int,
        "requests in flight across all workers (default 8)",
        None,
    ),
    (
        "max-timeouts",
        "gauge_max_timeouts",
        _non_negative_int,
        "timed-out attempts in a row that stop a (role, model) for the rest of the run (default 3; 0: never)",
        None,
    ),
    ("rpm", "gauge_rpm", _positive_float, "requests per minute across all workers", None),
    ("tpm", "gauge_tpm", _positive_float, "tokens per minute across all workers", None),
    (
        "retry-after-cap",
        "gauge_retry_after_cap",
        _positive_float,
        "longest Retry-After honoured, seconds (default 60)",
        None,
    ),
    (
        "close-threshold",
        "gauge_close_threshold",
        float,
        "pairs whose mean-reward gap is <= this are close (default 0.1)",
        None,
    ),
    (
        "budget-usd",
        "gauge_budget_usd",
        _positive_float,
        "stop spending when the run's cost would pass this",
        None,
    ),
    (
        "budget-tokens",
        "gauge_budget_tokens",
        _positive_int,
        "stop spending when the run's tokens would pass this",
        None,
    ),
    ("budget-task-usd", "gauge_budget_task_usd", _positive_float, "per-task cost limit", None),
    (
        "bootstrap-rounds",
        "gauge_bootstrap_rounds",
        _positive_int,
        "bootstrap resamples for intervals (default 2000)",
        None,
    ),
    (
        "baseline",
        "gauge_baseline",
        str,
        "compare with this earlier run: a --gauge-out folder or a 'baseline save' folder",
        None,
    ),
    (
        "limits",
        "gauge_limits",
        str,
        "redis://HOST:PORT/DB: concurrency, RPM/TPM and budgets shared by every host of the run (needs the"
        " redis extra)",
        None,
    ),
    (
        "prices",
        "gauge_prices_file",
        str,
        "prices file (TOML or JSON): {model: {input: $/M, output: $/M, cached_input: $/M}}, or "
        "'genai-prices' for the genai-prices package's prices",
        None,
    ),
)


def add_options(parser: pytest.Parser) -> None:
    """Register the ``--gauge-*`` flags and their ini twins."""
    group = parser.getgroup("gauge", "pytest-gauge: LLM-agent evaluations")
    for suffix, ini, kind, help_text, choices in _SETTINGS:
        group.addoption(
            f"--gauge-{suffix}", dest=ini, type=kind, default=None, choices=choices, help=help_text
        )
        parser.addini(ini, help_text, default=None)
    group.addoption(
        "--gauge-gate",
        dest="gauge_gate",
        action="append",
        default=[],
        type=_gate_text,
        metavar="EXPR",
        help='a suite gate, e.g. "flip_rate <= 0.15" or "upper(lrs_close) <= 0.5; min_n=20" (repeatable)',
    )
    parser.addini("gauge_gates", "gates applied to every suite, one per line", type="linelist", default=[])
    parser.addini(
        "gauge_prices",
        "model prices, one per line: MODEL INPUT_PER_M OUTPUT_PER_M",
        type="linelist",
        default=[],
    )
    group.addoption("--gauge-no-progress", action="store_true", default=False, help="no live progress line")
    group.addoption(
        "--gauge-snapshot-reports",
        action="store_true",
        default=False,
        help="check each suite's reports against stored syrupy snapshots (with --snapshot-update to accept)",
    )
    group.addoption(
        "--gauge-gates-on-partial",
        action="store_true",
        default=False,
        help="evaluate the gates on an interrupted run too (over the cases that finished)",
    )
    group.addoption(
        "--gauge-run-id",
        default=None,
        help="the run id that shards share for --gauge-limits (also GAUGE_RUN_ID; default: this run's own)",
    )
    group.addoption(
        "--gauge-shard",
        default=None,
        metavar="I/N",
        help="run shard I of N of every suite's tasks (also GAUGE_SHARD, or JOB_COMPLETION_INDEX with"
        " GAUGE_SHARD_COUNT); gates are deferred to 'python -m pytest_gauge merge'",
    )
    group.addoption(
        "--gauge-allow-skipped-gates",
        action="store_true",
        default=False,
        help="with CI set, a gate skipped by a partial run does not fail the run (it does by default)",
    )
    group.addoption(
        "--gauge-adaptive",
        action="store_true",
        default=None,
        help="take the tasks in seeded looks and stop when every gate is decided (anytime-valid intervals;"
        " the cases not needed are skipped)",
    )
    parser.addini("gauge_adaptive", "like --gauge-adaptive", type="bool", default=False)
    group.addoption(
        "--gauge-adaptive-look",
        dest="gauge_adaptive_look",
        type=_positive_int,
        default=None,
        metavar="TASKS",
        help="tasks per look of an adaptive run (default 5; ini gauge_adaptive_look)",
    )
    parser.addini("gauge_adaptive_look", "tasks per look of an adaptive run (default 5)", default=None)
    group.addoption(
        "--gauge-doctor", action="store_true", default=False, help="check the gateway setup and exit"
    )


def _setting(config: pytest.Config, ini: str, kind: Any) -> Any:
    value = config.getoption(ini)
    if value is not None:
        return value
    raw = config.getini(ini)
    if raw in (None, ""):
        return None
    try:
        return kind(str(raw).strip())
    except (ValueError, argparse.ArgumentTypeError) as exc:
        raise pytest.UsageError(f"ini key {ini} = {raw!r}: {exc}") from None


def parse_price_lines(lines: list[str]) -> list[PriceRow]:
    """``MODEL INPUT_PER_M OUTPUT_PER_M [CACHED_INPUT_PER_M]`` lines (ini ``gauge_prices``) as price rows."""
    prices: list[PriceRow] = []
    for line in lines:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split()
        if len(parts) not in (3, 4):
            raise pytest.UsageError(
                f"gauge_prices: expected 'MODEL INPUT_PER_M OUTPUT_PER_M [CACHED_INPUT_PER_M]', got {line!r}"
            )
        try:
            numbers = [float(p) for p in parts[1:]]
        except ValueError:
            raise pytest.UsageError(f"gauge_prices: prices must be numbers in {line!r}") from None
        cached = numbers[2] if len(numbers) == 3 else None
        prices.append((parts[0], numbers[0], numbers[1], cached, "ini gauge_prices"))
    return prices


def _shard(config: pytest.Config) -> str | None:
    """The shard label (``I/N``) from ``--gauge-shard`` or the environment, checked."""
    from .files.shards import ShardError, shard_from

    try:
        shard = shard_from(config.getoption("gauge_shard"), os.environ)
    except ShardError as exc:
        raise pytest.UsageError(f"pytest-gauge: {exc}") from None
    return shard.label if shard else None


def resolve_options(config: pytest.Config) -> GaugeOptions:
    """Resolve every setting once, CLI first, then ini, then the default."""
    from .gateway.prices import GENAI_PRICES, check_genai_prices, load_prices

    values: dict[str, Any] = {}
    for _suffix, ini, kind, _help, choices in _SETTINGS:
        value = _setting(config, ini, kind)
        if value is not None and choices and value not in choices:
            raise pytest.UsageError(f"{ini} must be one of {', '.join(choices)}, got {value!r}")
        values[ini] = value
    invocation = Path(config.invocation_params.dir)
    root = Path(config.rootpath)
    out = values["gauge_out"] or "gauge-out"
    cache_dir = values["gauge_cache_dir"] or str(root / ".gauge-cache")
    from .analysis.gates import GateSyntaxError, parse_gates

    ini_gates = [str(g) for g in config.getini("gauge_gates")]
    try:
        parse_gates(ini_gates)
    except GateSyntaxError as exc:
        raise pytest.UsageError(f"ini key gauge_gates: {exc}") from None
    gates = tuple(ini_gates) + tuple(config.getoption("gauge_gate") or ())
    genai = values["gauge_prices_file"] == GENAI_PRICES
    if genai:
        check_genai_prices()
    prices = load_prices(
        ini_lines=parse_price_lines(list(config.getini("gauge_prices"))),
        file=None if genai else values["gauge_prices_file"],
        environ=os.environ,
        base=root,
    )

    def pick(key: str, default: Any) -> Any:
        return default if values[key] is None else values[key]

    return GaugeOptions(
        backend=pick("gauge_backend", "live"),
        seed=pick("gauge_seed", 0),
        out_dir=str((invocation / out).resolve()),
        cache_mode=pick("gauge_cache", "use"),
        cache_dir=str((invocation / cache_dir).resolve()),
        cassettes=str((invocation / values["gauge_cassettes"]).resolve())
        if values["gauge_cassettes"]
        else None,
        timeout=pick("gauge_timeout", 60.0),
        max_retries=pick("gauge_max_retries", 4),
        max_concurrency=pick("gauge_max_concurrency", 8),
        max_timeouts=pick("gauge_max_timeouts", 3),
        rpm=values["gauge_rpm"],
        tpm=values["gauge_tpm"],
        retry_after_cap=pick("gauge_retry_after_cap", 60.0),
        close_threshold=pick("gauge_close_threshold", 0.1),
        gates=gates,
        budget_usd=values["gauge_budget_usd"],
        budget_tokens=values["gauge_budget_tokens"],
        budget_task_usd=values["gauge_budget_task_usd"],
        prices=tuple(sorted(prices.rows(), key=lambda row: row[0])),
        genai_prices=genai,
        bootstrap_rounds=pick("gauge_bootstrap_rounds", 2000),
        progress=not config.getoption("gauge_no_progress"),
        snapshot_reports=bool(config.getoption("gauge_snapshot_reports")),
        baseline=str((invocation / values["gauge_baseline"]).resolve()) if values["gauge_baseline"] else None,
        gates_on_partial=bool(config.getoption("gauge_gates_on_partial")),
        allow_skipped_gates=bool(config.getoption("gauge_allow_skipped_gates")),
        shard=_shard(config),
        limits=values["gauge_limits"],
        run_id=config.getoption("gauge_run_id") or os.environ.get("GAUGE_RUN_ID") or None,
        adaptive=bool(config.getoption("gauge_adaptive") or config.getini("gauge_adaptive")),
        adaptive_look=_setting(config, "gauge_adaptive_look", _positive_int) or 5,
    )
