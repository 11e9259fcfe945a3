"""``python -m pytest_gauge``: ``doctor``, ``cassettes export``, ``cache prune``/``merge``, ``report``,
``labels sample``, ``merge`` (shards) and ``history merge``.

argparse and printing only: the doctor's logic lives in :mod:`pytest_gauge.gateway.doctor`, the
cassettes export in :mod:`pytest_gauge.gateway.cassettes`, the cache's prune and merge in
:mod:`pytest_gauge.gateway.cache`
(each returns what it did, the CLI prints it), the report and the shards' merge in their own modules.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO, TypeAlias

from .files.baseline import BaselineError, save_baseline
from .files.folders import CACHE_DIR, SuiteFolder
from .files.history import HistoryError, merge_histories
from .files.html import ReportInputError
from .finish.merge import run_merge
from .gateway.cache import merge_caches, prune_cache
from .gateway.cassettes import CassetteError, export_cassettes, run_keys
from .gateway.doctor import (
    CONFIG_KINDS,
    DEFAULT_TIMEOUT,
    Program,
    Service,
    Target,
    print_config,
    run_doctor,
)
from .gateway.endpoint import KEY_VARIABLE
from .records.json_types import JSONObject
from .run.programs import INSTALL
from .suite.declare import (
    MODEL_VARIABLES,  # filled by the suites' env_model as they are imported
    ModelAgent,
)
from .suite.discover import configured_testpaths, find_suites
from .suite.http_agent import HttpAgent, env_references
from .suite.programs import CommandAgent
from .suite.response_format import format_chain

__all__ = ["build_parser", "main", "suite_targets"]


_Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"  # subscriptable only for mypy
_CACHE_DIR_HELP = f"cache folder (default {CACHE_DIR})"


def _group(commands: _Commands, name: str, help: str) -> _Commands:
    """A command made of actions (``cache prune``, ``cache merge``): the parsers of its actions."""
    group = commands.add_parser(name, help=help)
    return group.add_subparsers(dest="action", metavar="ACTION", required=True)


def _cache_dir_option(parser: argparse.ArgumentParser, help: str = _CACHE_DIR_HELP) -> None:
    """``--cache-dir``: the response cache a command reads or writes."""
    parser.add_argument("--cache-dir", default=CACHE_DIR, help=help)


def _positive_float(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be >= 0")
    return value


def _add_doctor(commands: _Commands) -> None:
    """``doctor``: check the key, base URL and models."""
    doctor = commands.add_parser(
        "doctor",
        help="check the gateway key, base URL and models (one tiny request each)",
        description="Check TAOTOKEN_API_KEY, TAOTOKEN_BASE_URL, Claude Code / Codex settings, then send one "
        "1-token request per configured role model. Exits 1 if anything failed. The key is never printed.",
    )
    doctor.add_argument(
        "paths",
        nargs="*",
        help="suite folders or test modules: one request per distinct (role, model) of their suites "
        "(default: the configured testpaths; without suites, the role variables)",
    )
    doctor.add_argument(
        "--models",
        default=None,
        help="comma-separated models to try (default: "
        "TAOTOKEN_JUDGE_MODEL, GAUGE_AGENT_MODEL, GAUGE_USER_MODEL, whichever are set)",
    )
    doctor.add_argument(
        "--print-config",
        choices=CONFIG_KINDS,
        default=None,
        help="print ready-to-paste client configuration (key as a placeholder) and exit",
    )
    doctor.add_argument(
        "--timeout", type=_positive_float, default=DEFAULT_TIMEOUT, help="seconds per request"
    )
    doctor.add_argument(
        "--batch",
        action="store_true",
        help="also probe the batch endpoint --gauge-batch judge would use (one listing GET, nothing billed)",
    )


def _add_cassettes(commands: _Commands) -> None:
    """``cassettes export``: copy recorded responses for offline replay."""
    cassette_commands = _group(commands, "cassettes", "export recorded responses for offline replay in CI")
    export = cassette_commands.add_parser(
        "export",
        help="copy a suite's persisted cache entries into a cassettes folder",
        description="Copy every persisted response of one suite from the cache into DIR (same layout, "
        "pretty-printed, no run ids, timestamps, keys or headers) and write DIR/README.md.",
    )
    export.add_argument("--suite", required=True, help="suite name")
    export.add_argument("--to", required=True, metavar="DIR", help="cassettes folder (for --gauge-cassettes)")
    _cache_dir_option(export)
    export.add_argument(
        "--out",
        default="gauge-out",
        help="the recorded run's --gauge-out folder (its manifest: models, hashes)",
    )
    export.add_argument(
        "--gateway",
        default=None,
        metavar="URL",
        help="the gateway whose responses to export, as the cache names it (default: the latest one's)",
    )
    export.add_argument(
        "--run",
        default=None,
        metavar="RUN",
        help="export only the entries one run used: its --gauge-out folder (or suite folder), or its run id"
        " as --out's ledger names it (default: every persisted entry of the suite)",
    )


def _add_cache(commands: _Commands) -> None:
    """``cache prune``: maintain the response cache."""
    cache_commands = _group(commands, "cache", "maintain the response cache")
    prune = cache_commands.add_parser(
        "prune",
        help="delete old and non-persisted responses and orphan lock/tmp files",
        description="Delete cached responses older than DAYS days and those not persisted (truncated or "
        "filtered answers of earlier versions), plus orphan .lock/.tmp files. Do not run during a run.",
    )
    prune.add_argument(
        "--older-than",
        required=True,
        type=_positive_float,
        metavar="DAYS",
        help="remove entries created more than DAYS days ago (fractions allowed)",
    )
    _cache_dir_option(prune)
    merge = cache_commands.add_parser(
        "merge",
        help="copy the responses of other caches (e.g. shards' artifacts) into one",
        description="Copy every cached response of SOURCE caches that --cache-dir lacks (an entry already "
        "there is kept). Do not run during a pytest-gauge run.",
    )
    merge.add_argument("sources", nargs="+", metavar="SOURCE", help="cache folders (each like .gauge-cache)")
    _cache_dir_option(merge, "the cache to merge into")


def _add_merge(commands: _Commands) -> None:
    """``merge``: one verdict from the shards of a suite."""
    merge = commands.add_parser(
        "merge",
        help="merge the outputs of --gauge-shard runs, evaluate the gates",
        description="Check the shards agree and every task ran exactly once, write the merged outputs and "
        "reports to --out, evaluate the gates; exit 1 on a failing gate, 2 when the shards cannot be merged.",
    )
    merge.add_argument("shards", nargs="+", metavar="SHARD_DIR", help="each shard's --gauge-out folder")
    merge.add_argument("--out", required=True, help="folder for the merged outputs")
    merge.add_argument("--junitxml", default=None, metavar="FILE", help="write the gates as JUnit XML")
    merge.add_argument(
        "--history",
        default=None,
        metavar="PATH",
        help="verdict history (SQLite) to append the merged run to, once per suite (not once per shard)",
    )


def _add_history(commands: _Commands) -> None:
    """``history merge``: join verdict histories (shards, branches)."""
    history_commands = _group(commands, "history", "maintain the verdict history (--gauge-history)")
    merge = history_commands.add_parser(
        "merge",
        help="join verdict histories (e.g. shards' or branches' artifacts) into one",
        description="Write every suite run of the HISTORY files to --out (which may be one of them); a run "
        "present in several is written once (a run id is unique).",
    )
    merge.add_argument("histories", nargs="+", metavar="HISTORY", help="--gauge-history files")
    merge.add_argument("--out", required=True, metavar="FILE", help="the merged history file")


def _history_merge(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    try:
        merged = merge_histories([Path(p) for p in args.histories], Path(args.out))
    except HistoryError as exc:
        err.write(f"pytest-gauge: {exc}\n")
        return 1
    out.write(
        f"wrote {merged.written} suite runs to {args.out}; {merged.duplicates} already present were skipped\n"
    )
    return 0


def _add_baseline(commands: _Commands) -> None:
    """``baseline save``: keep a run as the baseline."""
    baseline_commands = _group(commands, "baseline", "keep a run as the baseline later runs compare with")
    save = baseline_commands.add_parser(
        "save",
        help="write a compact, versioned baseline of a --gauge-out folder (for --gauge-baseline)",
        description="Write DIR/<suite>/baseline.json (case records, tasks, per-task cost, ledger summary, "
        "metrics, manifest) and DIR/<suite>/agents/*.jsonl for every suite in the output folder; small "
        "enough to commit or keep as a CI artifact.",
    )
    save.add_argument("--from", dest="source", default="gauge-out", metavar="OUT", help="--gauge-out folder")
    save.add_argument("--to", required=True, metavar="DIR", help="baseline folder (for --gauge-baseline)")


def _add_report(commands: _Commands) -> None:
    """``report``: (re)write the HTML reports of an output folder."""
    report = commands.add_parser(
        "report",
        help="(re)write the HTML reports of an output folder",
        description="Write <suite>/reports/index.html for every suite folder in OUT_DIR and "
        "OUT_DIR/index.html linking them, from the outputs a run wrote there (no model is called); the "
        "missing reports of a run stopped while it wrote its outputs first.",
    )
    report.add_argument(
        "out_dir",
        metavar="OUT_DIR",
        nargs="?",
        default="gauge-out",
        help="a --gauge-out folder (default: gauge-out, the runs' default)",
    )


def _add_labels(commands: _Commands) -> None:
    """``labels sample``: which cases people should label."""
    labels_commands = _group(commands, "labels", "blind human labels of judged cases")
    sample = labels_commands.add_parser(
        "sample",
        help="choose the cases to label: a stratified sample the HTML report offers first",
        description="Write <suite>/labels/sample.jsonl for every suite of the output folder: N cases drawn "
        "from the judge-rules disagreements, the flips, the close pairs and the rest, each with its weight "
        "(stratum size / cases drawn) so the agreement estimates stay unbiased for the whole suite; then "
        "rewrite the HTML reports, whose labelling mode offers the sample first.",
    )
    sample.add_argument(
        "--from", dest="source", default="gauge-out", metavar="OUT", help="--gauge-out folder"
    )
    sample.add_argument("--n", type=int, default=40, help="cases to sample per suite (default 40)")
    sample.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0)")


def _labels(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .finish.labels import sample_labels  # deferred: keeps numpy off the import of cli

    if args.n < 1:
        err.write(f"error: --n must be a whole number >= 1, got {args.n}\n")
        return 2
    try:
        samples, pages = sample_labels(Path(args.source), args.n, args.seed)
    except ReportInputError as exc:
        err.write(f"error: {exc}\n")
        return 1
    for s in samples:
        strata = ", ".join(f"{k} {v}" for k, v in s.drawn.items()) or "no case"
        out.write(f"wrote {s.path}: {sum(s.drawn.values())} of {s.cases} cases ({strata})\n")
    for path in pages:
        out.write(f"wrote {path}\n")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The ``python -m pytest_gauge`` argument parser with its commands."""
    parser = argparse.ArgumentParser(
        prog="python -m pytest_gauge",
        description="pytest-gauge helper commands (the evaluations themselves run under pytest).",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_doctor(commands)
    _add_cassettes(commands)
    _add_cache(commands)
    _add_baseline(commands)
    _add_report(commands)
    _add_labels(commands)
    _add_merge(commands)
    _add_history(commands)
    return parser


def _doctor(args: argparse.Namespace, environ: Mapping[str, str], out: TextIO) -> int:
    if args.print_config:
        out.write(print_config(args.print_config, environ))
        return 0
    models = [m for m in args.models.split(",") if m.strip()] if args.models else None
    paths = args.paths or configured_testpaths(Path.cwd())
    found = find_suites(paths) if paths else []
    targets = targets_of(found) if paths and not models else None

    return run_doctor(
        environ,
        out,
        models=models,
        timeout=args.timeout,
        targets=targets,
        origins=MODEL_VARIABLES,
        programs=programs_of(found),
        services=services_of(found),
        batch=args.batch,
    )


def services_of(found: Sequence[tuple[str, Any]]) -> list[Service]:
    """Every HTTP agent of the suites, with the environment variables its headers read."""
    return [
        Service(f"{name}/{agent.name}", agent.url, tuple(env_references(agent.headers)))
        for name, suite in found
        for agent in suite.agents
        if isinstance(agent, HttpAgent)
    ]


def programs_of(found: Sequence[tuple[str, Any]]) -> list[Program]:
    """Every program the suites' program agents run (``argv[0]``), with the agents using it and, for
    the presets' CLIs, the install command."""
    users: dict[str, list[str]] = {}
    for name, suite in found:
        for agent in suite.agents:
            if isinstance(agent, CommandAgent):
                users.setdefault(agent.argv[0], []).append(f"{name}/{agent.name}")
    return [Program(c, tuple(who), INSTALL.get(Path(c).name)) for c, who in users.items()]


def suite_targets(paths: Sequence[str]) -> list[Target]:
    """One doctor target per distinct (role, model) of the suites under ``paths`` (:func:`targets_of`)."""
    return targets_of(find_suites(paths))


def targets_of(found: Sequence[tuple[str, Any]]) -> list[Target]:
    """One doctor target per distinct (role, model) of the suites found, labelled with the suites (and
    agents) that use it; judge models are tried in their JSON-mode chain."""
    users: dict[tuple[str, str, str], list[str]] = {}  # (role, model, api) -> who uses it
    chains: dict[str, tuple[JSONObject | None, ...]] = {}
    for name, suite in found:
        for agent in suite.agents:
            if isinstance(agent, ModelAgent):
                users.setdefault(("agent", agent.model, agent.api), []).append(f"{name}/{agent.name}")
        users.setdefault(("user_sim", suite.user.model, suite.user.api), []).append(name)
        for model in suite.judge.models():
            users.setdefault(("judge", model, suite.judge.api), []).append(name)
            chains.setdefault(model, format_chain(suite.judge.response_format))
    return [
        Target(
            model,
            f"{role} ({', '.join(dict.fromkeys(who))})",
            chains[model] if role == "judge" else (None,),
            origin=MODEL_VARIABLES.get(model),
            api=api,
        )
        for (role, model, api), who in users.items()
    ]


def _export(args: argparse.Namespace, environ: Mapping[str, str], out: TextIO, err: TextIO) -> int:
    only, out_dir = None, args.out
    if args.run is not None:
        try:
            used = run_keys(args.run, args.suite, args.out)
        except CassetteError as exc:
            err.write(f"error: {exc}\n")
            return 1
        only, out_dir = used.keys, used.out_dir
    result = export_cassettes(args.cache_dir, args.suite, args.to, environ, out_dir, args.gateway, only)
    if result.missing:
        err.write(
            f"note: {len(result.missing)} of the {len(only or ())} entries run {args.run} used are not in the"
            " cache as persisted entries (pruned, or written with the cache off): not exported\n"
        )
    for other, count in result.other_gateways:
        err.write(
            f"note: {count} entries of suite {args.suite} were recorded through another gateway ({other}):"
            f" not exported (replay uses one gateway; --gateway {other} exports those)\n"
        )
    for key in result.refused:
        err.write(f"refused {key}: it contains the value of {KEY_VARIABLE}\n")
    if not result.exported:
        present = ", ".join(result.suites_seen) or "none"
        where = Path(args.cache_dir) / "responses"
        err.write(
            f"error: no persisted cache entries for suite {args.suite!r} under {where}"
            f" (suites in the cache: {present}); run the suite once with the cache on (--gauge-cache=use)\n"
        )
        return 1
    out.write(f"exported {len(result.exported)} cassettes for suite {args.suite} to {args.to}\n")
    return 1 if result.refused else 0


def _save_baseline(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:

    try:
        written = save_baseline(Path(args.source), Path(args.to))
    except BaselineError as exc:
        err.write(f"error: {exc}\n")
        return 1
    size = sum(p.stat().st_size for p in written)
    suites = sorted({p.parent.name for p in written if p == SuiteFolder(p.parent).compact_baseline})
    out.write(f"saved baseline of {', '.join(suites)} to {args.to} ({len(written)} files, {size:,} bytes)\n")
    return 0


def _prune(args: argparse.Namespace, out: TextIO) -> int:
    result = prune_cache(args.cache_dir, args.older_than)
    out.write(
        f"removed {result.removed} entries ({result.removed_old} older than {args.older_than:g} days, "
        f"{result.removed_unpersisted} not persisted, {result.removed_unreadable} unreadable), "
        f"kept {result.kept}"
        f"{f' ({result.busy} locked by a running process)' if result.busy else ''}; "
        f"removed {result.removed_files} orphan .lock/.tmp files\n"
    )
    return 0


def _report(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .files.html import ReportInputError  # deferred: keeps numpy off the import of cli
    from .files.readwrite import FileFormatError  # deferred: keeps numpy off the import of cli
    from .finish.html import write_html_reports  # deferred: keeps numpy off the import of cli
    from .finish.resume import write_pending_reports  # deferred: keeps numpy off the import of cli

    try:
        for folder in write_pending_reports(Path(args.out_dir)):  # a run stopped while writing them
            out.write(f"wrote the missing reports of {folder}\n")
        written = write_html_reports(Path(args.out_dir))
    except (ReportInputError, FileFormatError) as exc:
        err.write(f"error: {exc}\n")
        return 1
    for path in written:
        out.write(f"wrote {path}\n")
    return 0


def main(
    argv: Sequence[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Parse ``argv`` and run the command; the exit status (0 ok, 1 failed, 2 usage)."""
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    env = os.environ if environ is None else environ
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "doctor":
        return _doctor(args, env, out)
    if args.command == "cassettes":
        return _export(args, env, out, err)
    if args.command == "cache" and args.action == "merge":
        merged = merge_caches(args.sources, args.cache_dir)
        out.write(
            f"copied {merged.copied} responses into {args.cache_dir}; {merged.kept} were there already\n"
        )
        return 0
    if args.command == "cache":
        return _prune(args, out)
    if args.command == "merge":
        return run_merge(args.shards, args.out, args.junitxml, env, out, args.history)
    if args.command == "baseline":
        return _save_baseline(args, out, err)
    if args.command == "report":
        return _report(args, out, err)
    if args.command == "labels":
        return _labels(args, out, err)
    if args.command == "history":
        return _history_merge(args, out, err)
    parser.print_help(out)
    return 2
