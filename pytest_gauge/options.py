"""Command-line flags and ini keys, resolved once (CLI → ini → default) into one frozen settings object.

:class:`GaugeOptions` holds only plain values so it can travel to xdist workers unchanged. Secrets
(the API key) are never stored here: they are read from the environment at the moment of use.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import itertools
import json
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .analysis.gates import GateSyntaxError, gate_arg, parse_gates
from .files.folders import CACHE_DIR
from .files.labels import LabelsError, read_labels
from .files.shards import ShardError, shard_from
from .gateway.prices import (
    GENAI_PRICES,
    check_genai_prices,
    load_prices,
    parse_price_lines,
    with_genai_prices,
)
from .records.json_types import JSONObject

if TYPE_CHECKING:
    from .records.prices import PriceRow

__all__ = [
    "BACKENDS",
    "CACHE_MODES",
    "GaugeOptions",
    "add_options",
    "check_bootstrap_rounds",
    "joined_value_args",
    "misread_ini_problem",
    "resolve_options",
]

BACKENDS = ("live", "sim", "replay")
CACHE_MODES = ("use", "refresh", "off", "replay-then-live")
BATCH_ROLES = ("off", "judge")  # --gauge-batch: nothing batched, or the judge's calls


@dataclass(frozen=True)
class GaugeOptions:
    """Every pytest-gauge setting of one run (docs/reference.md#options)."""

    backend: str = "live"
    seed: int = 0
    out_dir: str = "gauge-out"
    cache_mode: str = "use"
    cache_dir: str = CACHE_DIR
    cassettes: str | None = None
    timeout: float = 60.0
    max_retries: int = 4
    max_concurrency: int = 8
    max_timeouts: int = 3  # timed-out attempts in a row that stop a (role, model) for the run; 0: never
    rpm: float | None = None
    tpm: float | None = None
    rpm_models: tuple[tuple[str, float], ...] = ()  # --gauge-rpm MODEL=N: one model's own limit
    tpm_models: tuple[tuple[str, float], ...] = ()
    retry_after_cap: float = 60.0
    anthropic_auth: str = "bearer"  # --gauge-anthropic-auth: where Messages calls send the key
    batch: str = "off"  # --gauge-batch: off, or judge (its cache misses sent in batches)
    batch_deadline: float = 60.0  # --gauge-batch-deadline: minutes before a batch's rest falls back
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
    adaptive: bool = False  # --gauge-adaptive: looks of tasks, stop when every gate is decided
    adaptive_look: int = 5  # tasks per look
    familywise: str = "per-gate"  # --gauge-familywise: per-gate (each gate at 95%) or holm
    labels: tuple[str, ...] = ()  # --gauge-labels FILE (repeatable): human labels.jsonl files
    unsandboxed: bool = False  # --gauge-unsandboxed: programs run without the sandbox (said in every report)
    history: str | None = None  # --gauge-history PATH: the verdict history (SQLite) this run appends to

    def prices_for(self, models: Iterable[str]) -> tuple[PriceRow, ...]:
        """The prices a run with these ``models`` uses: the configured ones, plus genai-prices for the
        models they do not price with ``--gauge-prices genai-prices`` (the run and ``merge`` alike)."""
        if not self.genai_prices:
            return self.prices

        return with_genai_prices(self.prices, models)

    def to_json(self) -> JSONObject:
        """Every setting as plain JSON: what the controller hands each xdist worker (``workerinput``)."""
        data = dataclasses.asdict(self)
        data.pop("extra", None)
        plain: JSONObject = json.loads(json.dumps(data))
        return plain

    @classmethod
    def from_json(cls, data: JSONObject) -> GaugeOptions:
        """The options :meth:`to_json` wrote (lists back to tuples, unknown keys ignored)."""
        known = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        values = {k: v for k, v in data.items() if k in known}
        values["gates"] = tuple(values.get("gates") or ())
        values["labels"] = tuple(values.get("labels") or ())
        values["prices"] = tuple(tuple(row) for row in values.get("prices") or ())
        for name in ("rpm_models", "tpm_models"):
            if name in values:
                values[name] = tuple(tuple(row) for row in values[name] or ())
        return cls(**values)


def _finite_float(text: str) -> float:
    """A finite number (``nan`` and ``inf`` are refused: a limit of nan would silently not apply)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def _whole(text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None


def _shown(value: float) -> str:
    return f"{value:,.0f}" if value == int(value) else f"{value:g}"


def _bounded(kind: Any, low: float, high: float, *, open_low: bool = False) -> Any:
    """An argparse type: ``kind`` (:func:`_finite_float` or :func:`_whole`) from ``low`` (excluded with
    ``open_low``) to ``high``, the range a run can finish with; the message names the value and the range."""

    def convert(text: str) -> Any:
        value = kind(text)
        if value < low or value > high or (open_low and value == low):
            above = f"above {_shown(low)}" if open_low else f"from {_shown(low)}"
            raise argparse.ArgumentTypeError(f"expected a number {above} to {_shown(high)}, got {text!r}")
        return value

    convert.__name__ = kind.__name__  # argparse names the type in its message
    return convert


DAY = 86_400.0

_positive_float = _bounded(_finite_float, 0.0, 1e12, open_low=True)  # budgets, in dollars
_positive_int = _bounded(_whole, 1, 10**15)
_non_negative_int = _bounded(_whole, 0, 10**15)
_seconds = _bounded(_finite_float, 0.0, DAY, open_low=True)  # a timeout, a wait: at most a day
_seed = _bounded(_whole, 0, 2**63 - 1)  # numpy's and the API's seeds are 64-bit
_retries = _bounded(_whole, 0, 100)
_concurrency = _bounded(_whole, 1, 10_000)
_rounds = _bounded(_whole, 1, 10**15)  # and the memory it needs: analysis/memory.py
_minutes = _bounded(_finite_float, 0.0, 7 * 24 * 60.0, open_low=True)  # a batch's deadline: at most a week
_share = _bounded(_finite_float, 0.0, 1.0)  # a gap between mean rewards, which lie in [0, 1]
_rate = _bounded(_finite_float, 0.001, 1e12)  # per minute: one call per 1,000 minutes to any service's


def _gate_text(text: str) -> str:
    """Validate a ``--gauge-gate`` expression at parse time (pytest-benchmark style); keep its text."""
    return gate_arg(text).canonical()


def _rate_arg(text: str) -> tuple[str | None, float]:
    """``N`` (the run-wide limit) or ``MODEL=N`` (one model's), N a positive number."""
    model, sep, number = text.rpartition("=")
    if sep and not model.strip():
        raise argparse.ArgumentTypeError(f"expected N or MODEL=N, got {text!r}")
    return (model.strip() or None, _rate(number.strip()))


def _rates(config: pytest.Config, name: str) -> tuple[float | None, tuple[tuple[str, float], ...]]:
    """The run-wide limit and the per-model ones of ``--gauge-rpm``/``--gauge-tpm`` (or their ini lines;
    the command line wins for each model and for the run-wide value)."""
    ini = f"gauge_{name}"
    found: dict[str | None, float] = {}
    for line in config.getini(ini):
        text = str(line).strip()
        if text and not text.startswith("#"):
            try:
                model, value = _rate_arg(text)
            except argparse.ArgumentTypeError as exc:
                raise pytest.UsageError(f"ini key {ini} = {text!r}: {exc}") from None
            found[model] = value
    for model, value in config.getoption(ini) or ():
        found[model] = value
    overall = found.pop(None, None)
    return overall, tuple(sorted((str(m), v) for m, v in found.items()))


# (flag suffix, ini key, argparse type, help, choices)
_SETTINGS: tuple[tuple[str, str, Any, str, tuple[str, ...] | None], ...] = (
    (
        "backend",
        "gauge_backend",
        str,
        "live (default), sim (embedded offline simulator) or replay (cache/cassettes only, no network)",
        BACKENDS,
    ),
    (
        "seed",
        "gauge_seed",
        _seed,
        "run seed: A/B order draws, simulator, bootstrap (default 0)",
        None,
    ),
    (
        "out",
        "gauge_out",
        str,
        "output folder, relative to the invocation directory (default gauge-out)",
        None,
    ),
    (
        "cache",
        "gauge_cache",
        str,
        "response cache mode: use (default), refresh, off or replay-then-live (answer every recorded request"
        " from the cache or --gauge-cassettes, send only the misses and report them apart)",
        CACHE_MODES,
    ),
    (
        "familywise",
        "gauge_familywise",
        str,
        "per-gate (default: each gate at its own 95%) or holm (Holm's step-down over the gates that fail"
        " only when confident, at 2.5% for the run)",
        ("per-gate", "holm"),
    ),
    (
        "cache-dir",
        "gauge_cache_dir",
        str,
        f"response cache folder (default {CACHE_DIR} under the rootdir)",
        None,
    ),
    ("cassettes", "gauge_cassettes", str, "replay reads only from this folder of exported cassettes", None),
    (
        "history",
        "gauge_history",
        str,
        "verdict history (SQLite file) this run appends to and reads flake rates and gate records from",
        None,
    ),
    ("timeout", "gauge_timeout", _seconds, "per-request timeout in seconds (default 60)", None),
    (
        "max-retries",
        "gauge_max_retries",
        _retries,
        "retries per call for 408/409/429/5xx/timeouts (default 4)",
        None,
    ),
    (
        "max-concurrency",
        "gauge_max_concurrency",
        _concurrency,
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
    (
        "retry-after-cap",
        "gauge_retry_after_cap",
        _seconds,
        "longest Retry-After honoured, seconds (default 60)",
        None,
    ),
    (
        "anthropic-auth",
        "gauge_anthropic_auth",
        str,
        "where api='anthropic' calls send the key: bearer (default, Authorization: Bearer, as Claude Code's"
        " ANTHROPIC_AUTH_TOKEN) or x-api-key",
        ("bearer", "x-api-key"),
    ),
    (
        "batch",
        "gauge_batch",
        str,
        "off (default) or judge: the judge's calls that miss the cache go through the gateway's batch"
        " endpoint (OpenAI /files + /batches, Anthropic Message Batches), at the batch price",
        BATCH_ROLES,
    ),
    (
        "batch-deadline",
        "gauge_batch_deadline",
        _minutes,
        "minutes a batch may take before its unanswered calls are sent the ordinary way (default 60)",
        None,
    ),
    (
        "close-threshold",
        "gauge_close_threshold",
        _share,
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
        _rounds,
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


def _add_rate_options(parser: pytest.Parser, group: Any) -> None:
    """``--gauge-rpm`` / ``--gauge-tpm``: ``N`` for the run, ``MODEL=N`` for one model (repeatable)."""
    for name, what in (("rpm", "requests"), ("tpm", "tokens")):
        group.addoption(
            f"--gauge-{name}",
            dest=f"gauge_{name}",
            action="append",
            default=[],
            type=_rate_arg,
            metavar="[MODEL=]N",
            help=f"{what} per minute across all workers; MODEL=N limits one model (repeatable)",
        )
        parser.addini(
            f"gauge_{name}", f"like --gauge-{name}: N or MODEL=N lines", type="linelist", default=[]
        )


def _add_labels_option(parser: pytest.Parser, group: Any) -> None:
    """``--gauge-labels FILE`` (repeatable) and the ini's ``gauge_labels`` lines."""
    group.addoption(
        "--gauge-labels",
        dest="gauge_labels",
        action="append",
        default=[],
        metavar="FILE",
        help="blind human labels (labels.jsonl from the HTML report) to check the judge against (repeatable)",
    )
    parser.addini(
        "gauge_labels", "labels.jsonl files, one per line (like --gauge-labels)", type="linelist", default=[]
    )


def _add_sandbox_option(parser: pytest.Parser, group: Any) -> None:
    """``--gauge-unsandboxed`` and ``gauge_unsandboxed``: the explicit opt-out of the programs' sandbox."""
    group.addoption(
        "--gauge-unsandboxed",
        action="store_true",
        default=None,
        help="run program agents and workspace commands without the bubblewrap sandbox (where none can be"
        " made; every report says so)",
    )
    parser.addini("gauge_unsandboxed", "like --gauge-unsandboxed", type="bool", default=False)


def _add_cache_mode_option(group: Any) -> None:
    """``--gauge-cache-mode``: another name of ``--gauge-cache`` (the same ini key, ``gauge_cache``)."""
    group.addoption(
        "--gauge-cache-mode",
        dest="gauge_cache",
        default=None,
        choices=CACHE_MODES,
        help="the same as --gauge-cache (e.g. --gauge-cache-mode replay-then-live)",
    )


def add_options(parser: pytest.Parser) -> None:
    """Register the ``--gauge-*`` flags and their ini twins."""
    group = parser.getgroup("gauge", "pytest-gauge: LLM-agent evaluations")
    for suffix, ini, kind, help_text, choices in _SETTINGS:
        help_flag = help_text.replace("%", "%%")  # argparse formats a flag's help (%(default)s); not an ini's
        group.addoption(
            f"--gauge-{suffix}", dest=ini, type=kind, default=None, choices=choices, help=help_flag
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
    _add_labels_option(parser, group)
    _add_cache_mode_option(group)
    _add_sandbox_option(parser, group)
    parser.addini(
        "gauge_prices",
        "model prices, one per line: MODEL INPUT_PER_M OUTPUT_PER_M",
        type="linelist",
        default=[],
    )
    _add_rate_options(parser, group)
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


def _shard(config: pytest.Config) -> str | None:
    """The shard label (``I/N``) from ``--gauge-shard`` or the environment, checked."""
    try:
        shard = shard_from(config.getoption("gauge_shard"), os.environ)
    except ShardError as exc:
        raise pytest.UsageError(f"pytest-gauge: {exc}") from None
    return shard.label if shard else None


def check_out_dir(path: Path, flag: str = "--gauge-out") -> None:
    """Refuse (one line naming the flag) an output folder that is not a folder or cannot be created:
    ``/dev/null``, a file, a folder under a file, under one not writable or on a filesystem that takes no
    folders (``/proc``). Shown by creating it: only a folder made proves the run can write its outputs;
    the folders this made are removed again (a run that ends at collection leaves nothing behind)."""
    if path.exists() and not path.is_dir():
        raise pytest.UsageError(f"{flag} {path}: not a folder (give a folder to write the outputs to)")
    made = [p for p in (path, *path.parents) if not p.exists()]
    try:
        path.mkdir(parents=True, exist_ok=True)
        writable = os.access(path, os.W_OK | os.X_OK)
    except OSError as exc:
        raise pytest.UsageError(f"{flag} {path}: cannot be created ({exc.strerror or exc})") from None
    finally:
        for folder in made:  # deepest first
            with contextlib.suppress(OSError):
                folder.rmdir()
    if not writable:
        raise pytest.UsageError(f"{flag} {path}: the folder is not writable")


def _check_start(config: pytest.Config, invocation: Path, out: str, values: JSONObject) -> None:
    """What the options alone show a run cannot finish with: its output folder and its cache folder
    (made and removed here, by the process the user started: a worker writes to the controller's), a
    cassettes folder that is not one, and bootstrap rounds past the memory."""
    if not hasattr(config, "workerinput"):
        check_out_dir((invocation / out).resolve())
        if values["gauge_cache_dir"] and values["gauge_cache"] != "off":
            check_out_dir((invocation / values["gauge_cache_dir"]).resolve(), "--gauge-cache-dir")
    cassettes = values["gauge_cassettes"]
    if cassettes and not (invocation / cassettes).is_dir():
        raise pytest.UsageError(f"--gauge-cassettes {(invocation / cassettes).resolve()}: no such folder")
    check_bootstrap_rounds(values["gauge_bootstrap_rounds"], tasks=1)


def resolve_options(config: pytest.Config) -> GaugeOptions:
    """Resolve every setting once, CLI first, then ini, then the default."""
    values: JSONObject = {}
    for _suffix, ini, kind, _help, choices in _SETTINGS:
        value = _setting(config, ini, kind)
        if value is not None and choices and value not in choices:
            raise pytest.UsageError(f"{ini} must be one of {', '.join(choices)}, got {value!r}")
        values[ini] = value
    invocation = Path(config.invocation_params.dir)
    root = Path(config.rootpath)
    out = values["gauge_out"] or "gauge-out"
    cache_dir = values["gauge_cache_dir"] or str(root / CACHE_DIR)
    _check_start(config, invocation, out, values)
    gates = _gates(config)
    genai = values["gauge_prices_file"] == GENAI_PRICES
    if genai:
        check_genai_prices()
    prices = load_prices(
        ini_lines=parse_price_lines(list(config.getini("gauge_prices"))),
        file=None if genai else values["gauge_prices_file"],
        environ=os.environ,
        base=root,
    )

    rpm, rpm_models = _rates(config, "rpm")
    tpm, tpm_models = _rates(config, "tpm")

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
        rpm=rpm,
        tpm=tpm,
        rpm_models=rpm_models,
        tpm_models=tpm_models,
        retry_after_cap=pick("gauge_retry_after_cap", 60.0),
        anthropic_auth=pick("gauge_anthropic_auth", "bearer"),
        batch=pick("gauge_batch", "off"),
        batch_deadline=pick("gauge_batch_deadline", 60.0),
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
        familywise=pick("gauge_familywise", "per-gate"),
        labels=_labels(config, invocation, root),
        unsandboxed=bool(config.getoption("gauge_unsandboxed") or config.getini("gauge_unsandboxed")),
        history=_history(config, invocation, values["gauge_history"]),
    )


def _history(config: pytest.Config, invocation: Path, value: str | None) -> str | None:
    """``--gauge-history``: the file's absolute path, checked on the controller (a bad file fails now,
    not at the end of the run)."""
    if not value:
        return None
    from .files.history import HistoryError, check_history  # deferred: keeps sqlite3 off pytest's start-up

    path = (invocation / value).resolve()
    if not hasattr(config, "workerinput"):
        try:
            check_history(path)
        except HistoryError as exc:
            raise pytest.UsageError(str(exc)) from None
    return str(path)


def _gates(config: pytest.Config) -> tuple[str, ...]:
    """The run's gates: the ini key's (checked here, one usage line) and then ``--gauge-gate``'s."""

    ini_gates = [str(g) for g in config.getini("gauge_gates")]
    try:
        parse_gates(ini_gates)
    except GateSyntaxError as exc:
        raise pytest.UsageError(f"ini key gauge_gates: {exc}") from None
    return tuple(ini_gates) + tuple(config.getoption("gauge_gate") or ())


def check_bootstrap_rounds(rounds: int | None, tasks: int) -> None:
    """Refuse bootstrap rounds whose resampling of ``tasks`` tasks would not fit in memory (checked with
    one task here, with the suites' tasks once they are collected)."""
    from .analysis.memory import bootstrap_memory_problem  # deferred: keeps numpy off pytest's start-up

    problem = bootstrap_memory_problem(rounds, tasks) if rounds else None
    if problem:
        raise pytest.UsageError(f"pytest-gauge: {problem}")


def _labels(config: pytest.Config, invocation: Path, root: Path) -> tuple[str, ...]:
    """``--gauge-labels`` files (relative to the invocation folder) after the ini's (relative to the
    rootdir), resolved and read once here so a bad file is a usage error naming its line."""
    paths = [(root / str(p)).resolve() for p in config.getini("gauge_labels")]
    paths += [(invocation / str(p)).resolve() for p in config.getoption("gauge_labels") or ()]
    for path in paths:
        if not path.is_file():
            raise pytest.UsageError(f"--gauge-labels {path}: no such file")
    try:
        read_labels(paths)
    except LabelsError as exc:
        raise pytest.UsageError(f"--gauge-labels: {exc}") from None
    return tuple(str(p) for p in paths)


# Flags whose value may name a path: written with a space, pytest takes the value for a test path while it
# looks for its ini file (before the plugin's options are parsed), and can miss the project's ini.
_CONFIG_FILES = (
    ("pytest.ini", None),
    (".pytest.ini", None),
    ("pyproject.toml", ("[tool.pytest.ini_options]", "[tool.pytest]")),
    ("tox.ini", ("[pytest]",)),
    ("setup.cfg", ("[tool:pytest]",)),
)


def nearest_config_file(start: Path) -> Path | None:
    """The file pytest would read its settings from, searching ``start`` and its parents (pytest's order
    within a folder), or None."""
    for folder in (start, *start.parents):
        for name, sections in _CONFIG_FILES:
            path = folder / name
            if not path.is_file():
                continue
            if sections is None:
                return path
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            if any(line.strip() in sections for line in text.splitlines()):
                return path
    return None


def _space_form_paths(args: list[str], invocation: Path) -> list[tuple[str, str]]:
    """``--gauge-X VALUE`` pairs (space form) whose value names an existing file or folder."""
    found: list[tuple[str, str]] = []
    for flag, value in itertools.pairwise(args):
        if flag.startswith("--gauge-") and "=" not in flag and not value.startswith("-"):
            if (invocation / value).exists():
                found.append((flag, value))
    return found


def value_flags() -> frozenset[str]:
    """Every ``--gauge-*`` flag that takes a value."""
    names = [suffix for suffix, *_ in _SETTINGS]
    names += ["gate", "labels", "rpm", "tpm", "run-id", "shard", "adaptive-look"]
    return frozenset(f"--gauge-{name}" for name in names)


def joined_value_args(args: Iterable[str]) -> list[str]:
    """``args`` with every ``--gauge-X VALUE`` written ``--gauge-X=VALUE``: what the controller hands its
    xdist workers, which parse the command line again after the controller made the output folder. A
    worker would take a space-form path that exists by then for a test path (and look for its ini file
    there, and find no tests); the ``=`` form is one argument, read the same by every process."""
    flags = value_flags()
    out: list[str] = []
    items = list(args)
    i = 0
    while i < len(items):
        arg = items[i]
        if arg in flags and i + 1 < len(items):
            out.append(f"{arg}={items[i + 1]}")
            i += 2
            continue
        out.append(arg)
        i += 1
    return out


def misread_ini_problem(config: pytest.Config) -> str | None:
    """Why this run would silently lose its ini settings, or None: pytest found another ini file (or none)
    than the nearest one at or above the invocation folder because a ``--gauge-*`` value written with a
    space named an existing path (pytest reads such values as test paths while it looks for the ini)."""
    if config.getoption("inifilename", None):  # -c FILE: pytest reads that file (--rootdir does not help)
        return None
    invocation = Path(config.invocation_params.dir)
    expected = nearest_config_file(invocation)
    found = Path(config.inipath) if config.inipath else None
    if expected is None or (found is not None and found.resolve() == expected.resolve()):
        return None
    pairs = _space_form_paths([str(a) for a in config.invocation_params.args], invocation)
    if not pairs:
        return None
    flag, value = pairs[0]
    read = f"read {found}" if found else "found no ini file"
    return (
        f"pytest-gauge: {flag} {value}: pytest took {value} for a test path while looking for its ini file"
        f" and {read} instead of {expected}, whose settings the run would lose; write {flag}={value}, or"
        f" give -c {expected}"
    )
