"""``python -m pytest_gauge``: ``doctor``, ``cassettes export``, ``cache prune``/``merge``, ``report`` and
``merge`` (shards).

argparse and printing only; the doctor's logic lives in :mod:`pytest_gauge.gateway.doctor`, the cassette and
cache logic in the small pure functions below (each returns what it did, the CLI prints it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO, TypeAlias

from .files.readwrite import FileFormatError, read_json_object, write_atomic
from .files.replay import Recording, save_recording
from .gateway.doctor import CONFIG_KINDS, DEFAULT_TIMEOUT, Target, print_config, run_doctor
from .gateway.endpoint import KEY_VARIABLE
from .gateway.store import Store

__all__ = [
    "CacheMergeResult",
    "ExportResult",
    "PruneResult",
    "build_parser",
    "export_cassettes",
    "main",
    "merge_caches",
    "prune_cache",
    "scrub_entry",
]

DEFAULT_CACHE_DIR = ".gauge-cache"
DROPPED_FIELDS = frozenset({"run_id", "created"})
_SECRET_NAME = re.compile(r"authorization|api_?key|headers?$|^cookie$|^set_cookie$")
TMP_GRACE_SECONDS = 60.0


# ------------------------------------------------------------------------------------------ cassettes


def _secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name.lower().replace("-", "_")))


def scrub_entry(entry: Mapping[str, Any]) -> dict[str, Any]:
    """The entry for review: no ``run_id``/``created``, and no authorization/api-key/headers field at the top
    level of the entry, its ``meta``, ``request`` or ``response`` (the only places the SDK could put one)."""
    out: dict[str, Any] = {}
    for name, value in entry.items():
        if name in DROPPED_FIELDS or _secret_name(name):
            continue
        if name in ("meta", "request", "response") and isinstance(value, dict):
            value = {k: v for k, v in value.items() if not _secret_name(k)}
        out[name] = value
    return out


def _has_secret_field(entry: Mapping[str, Any]) -> bool:
    parts: list[Mapping[str, Any]] = [entry]
    parts += [entry[k] for k in ("meta", "request", "response") if isinstance(entry.get(k), dict)]
    return any(_secret_name(name) for part in parts for name in part) or bool(DROPPED_FIELDS & set(entry))


@dataclass(frozen=True)
class ExportResult:
    """What an export wrote: the keys exported, the suites present in the cache, and keys refused."""

    exported: tuple[str, ...]
    suites_seen: tuple[str, ...]
    refused: tuple[str, ...]


def _review_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def _readme(dest: Store) -> str:
    rows = []
    for key in dest.keys():
        entry = dest.get(key)
        meta = entry.get("meta") if entry is not None else None
        if not isinstance(meta, dict):
            continue
        rows.append(
            (
                str(meta.get("suite")),
                str(meta.get("role")),
                str(meta.get("model")),
                str(meta.get("task_id")),
                str(meta.get("work")),
                f"{key[:2]}/{key}.json",
            )
        )
    lines = [
        "# Cassettes",
        "",
        "Recorded gateway responses, replayed with",
        "`pytest --gauge-backend=replay --gauge-cassettes <this folder>`.",
        "Written by `python -m pytest_gauge cassettes export`; one entry per line (no keys, no headers).",
        "",
    ]
    for suite, role, model, task, work, file in sorted(rows):
        lines.append(f"- role={role} model={model} task={task} work={work} suite={suite} file={file}")
    return "\n".join(lines) + "\n"


def export_cassettes(
    cache_dir: str | os.PathLike[str],
    suite: str,
    to: str | os.PathLike[str],
    environ: Mapping[str, str] | None = None,
    out_dir: str | os.PathLike[str] = "gauge-out",
) -> ExportResult:
    """Copy the suite's persisted cache entries into ``to`` (same content-addressed layout, readable by
    :class:`Store`), scrubbed and pretty-printed, then rewrite ``to/README.md`` and the suite's entry of
    ``to/recording.json`` (what replay needs without the recording's environment). Entries in which the
    value of ``TAOTOKEN_API_KEY`` appears are refused, not exported."""
    env = os.environ if environ is None else environ
    key_value = env.get(KEY_VARIABLE, "").strip()
    source = Store(Path(cache_dir) / "responses")
    dest = Store(to)
    exported: list[str] = []
    refused: list[str] = []
    suites: set[str] = set()
    for key in source.keys():
        entry = source.get(key)
        if entry is None:
            continue
        meta = entry.get("meta")
        entry_suite = meta.get("suite") if isinstance(meta, dict) else None
        if isinstance(entry_suite, str):
            suites.add(entry_suite)
        if entry_suite != suite or entry.get("persist") is not True:
            continue
        clean = scrub_entry(entry)
        assert not _has_secret_field(clean), "scrubbed cassette still carries a secret field"
        text = _review_json(clean)
        if len(key_value) >= 4 and key_value in text:
            refused.append(key)
            continue
        write_atomic(dest.path(key), text)
        exported.append(key)
    if exported:
        write_atomic(Path(to) / "README.md", _readme(dest))
        save_recording(to, _recording(suite, [dest.get(k) for k in exported], out_dir))
    return ExportResult(tuple(exported), tuple(sorted(suites)), tuple(refused))


def _recording(
    suite: str, entries: list[dict[str, Any] | None], out_dir: str | os.PathLike[str]
) -> Recording:
    """What replay needs beside the responses: the gateway the entries were keyed by and, from the
    recorded run's manifest (``<out_dir>/<suite>/manifest.json``), the model per role, seed and hashes;
    without a manifest, the models are read from the entries themselves."""
    metas = [e["meta"] for e in entries if e is not None and isinstance(e.get("meta"), dict)]
    gateways = sorted({str(m["gateway"]) for m in metas if m.get("gateway")})
    try:
        manifest = read_json_object(Path(out_dir) / suite / "manifest.json")
    except FileFormatError:
        manifest = {}
    models: dict[str, str | None] = dict(manifest.get("models") or {})
    if not models:
        for m in metas:
            kind, _, rest = str(m.get("work", "")).partition("/")
            parts = rest.split("/")
            if m.get("role") == "agent" and kind == "transcript" and len(parts) == 3:
                models[f"agent:{parts[1]}"] = m.get("model")
            elif m.get("role") == "user_sim":
                models["user_sim"] = m.get("model")
            elif m.get("role") == "judge" and kind == "judge" and len(parts) == 3:
                models[f"judge:{parts[1]}"] = m.get("model")
    return Recording(
        suite,
        gateways[0] if len(gateways) == 1 else None,
        models,
        manifest.get("seed"),
        dict(manifest.get("hashes") or {}),
    )


# ---------------------------------------------------------------------------------------------- prune


@dataclass(frozen=True)
class PruneResult:
    """Counts from a prune: entries removed by reason, entries kept, and orphan lock/tmp files removed."""

    removed_old: int
    removed_unpersisted: int
    removed_unreadable: int
    kept: int
    removed_files: int
    busy: int

    @property
    def removed(self) -> int:
        """Every response entry removed."""
        return self.removed_old + self.removed_unpersisted + self.removed_unreadable


def _read_entry(path: Path) -> dict[str, Any] | None:
    try:
        return read_json_object(path)
    except FileFormatError:
        return None


def prune_cache(
    cache_dir: str | os.PathLike[str],
    older_than_days: float,
    now: float | None = None,
    tmp_grace: float = TMP_GRACE_SECONDS,
) -> PruneResult:
    """Delete response entries created more than ``older_than_days`` ago, non-persisted and unreadable
    entries, orphan ``.lock`` files and stale ``.tmp`` files. An entry whose lock is held is left alone.
    Do not run it while a pytest-gauge run is using the same cache."""
    now = time.time() if now is None else now
    cutoff = now - older_than_days * 86400.0
    store = Store(Path(cache_dir) / "responses")
    old = unpersisted = unreadable = kept = files = busy = 0
    for key in list(store.keys()):
        entry = _read_entry(store.path(key))
        created = entry.get("created") if entry is not None else None
        if entry is None:
            reason = "unreadable"
        elif not entry.get("persist"):
            reason = "unpersisted"
        elif isinstance(created, (int, float)) and created < cutoff:
            reason = "old"
        else:
            kept += 1
            continue
        fd = store.try_lock(key)
        if fd is None:  # a run is writing this key right now
            busy += 1
            kept += 1
            continue
        try:
            store.delete(key)
            (store.root / key[:2] / f"{key}.lock").unlink(missing_ok=True)  # part of the entry, not counted
        finally:
            Store.unlock(fd)
        old += reason == "old"
        unpersisted += reason == "unpersisted"
        unreadable += reason == "unreadable"
    if store.root.is_dir():
        for shard in sorted(p for p in store.root.iterdir() if p.is_dir()):
            for path in sorted(shard.iterdir()):
                if path.suffix == ".lock" and not path.with_suffix(".json").exists():
                    fd = store.try_lock(path.stem)
                    if fd is None:
                        continue
                    try:
                        path.unlink(missing_ok=True)
                        files += 1
                    finally:
                        Store.unlock(fd)
                elif path.suffix == ".tmp":
                    with contextlib.suppress(FileNotFoundError):
                        if now - path.stat().st_mtime > tmp_grace:
                            path.unlink()
                            files += 1
            with contextlib.suppress(OSError):
                shard.rmdir()  # only succeeds when empty
    return PruneResult(old, unpersisted, unreadable, kept, files, busy)


# ------------------------------------------------------------------------------------------------ CLI


_Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"  # subscriptable only for mypy
_CACHE_DIR_HELP = "cache folder (default .gauge-cache)"


def _group(commands: _Commands, name: str, help: str) -> _Commands:
    """A command made of actions (``cache prune``, ``cache merge``): the parsers of its actions."""
    group = commands.add_parser(name, help=help)
    return group.add_subparsers(dest="action", metavar="ACTION", required=True)


def _cache_dir_option(parser: argparse.ArgumentParser, help: str = _CACHE_DIR_HELP) -> None:
    """``--cache-dir``: the response cache a command reads or writes."""
    parser.add_argument("--cache-dir", default=DEFAULT_CACHE_DIR, help=help)


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


def _add_cache(commands: _Commands) -> None:
    """``cache prune``: maintain the response cache."""
    cache_commands = _group(commands, "cache", "maintain the response cache")
    prune = cache_commands.add_parser(
        "prune",
        help="delete old and non-persisted responses and orphan lock/tmp files",
        description="Delete cached responses older than DAYS days and those not persisted (truncated or "
        "filtered answers), plus orphan .lock/.tmp files. Do not run during a pytest-gauge run.",
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
    """``merge``: one verdict from the shards of a suite (issue 16)."""
    merge = commands.add_parser(
        "merge",
        help="merge the outputs of --gauge-shard runs, evaluate the gates",
        description="Check the shards agree and every task ran exactly once, write the merged outputs and "
        "reports to --out, evaluate the gates; exit 1 on a failing gate, 2 when the shards cannot be merged.",
    )
    merge.add_argument("shards", nargs="+", metavar="SHARD_DIR", help="each shard's --gauge-out folder")
    merge.add_argument("--out", required=True, help="folder for the merged outputs")
    merge.add_argument("--junitxml", default=None, metavar="FILE", help="write the gates as JUnit XML")


@dataclass(frozen=True)
class CacheMergeResult:
    """What a cache merge did: entries copied, entries the destination had already."""

    copied: int
    kept: int


def merge_caches(
    sources: Sequence[str | os.PathLike[str]], cache_dir: str | os.PathLike[str]
) -> CacheMergeResult:
    """Copy each source cache's responses that ``cache_dir`` lacks (content-addressed: same key, same
    request; the entry already there wins)."""
    dest = Store(Path(cache_dir) / "responses")
    copied = kept = 0
    for source in sources:
        store = Store(Path(source) / "responses")
        for key in store.keys():
            entry = store.get(key)
            if entry is None:
                continue
            if dest.get(key) is not None:
                kept += 1
                continue
            dest.put(key, entry)
            copied += 1
    return CacheMergeResult(copied, kept)


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
        "OUT_DIR/index.html linking them, from the outputs a run wrote there (no model is called).",
    )
    report.add_argument(
        "out_dir", metavar="OUT_DIR", help="a --gauge-out folder (default of runs: gauge-out)"
    )


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
    _add_merge(commands)
    return parser


def _doctor(args: argparse.Namespace, environ: Mapping[str, str], out: TextIO) -> int:
    if args.print_config:
        out.write(print_config(args.print_config, environ))
        return 0
    models = [m for m in args.models.split(",") if m.strip()] if args.models else None
    paths = args.paths or _configured_testpaths(Path.cwd())
    targets = suite_targets(paths) if paths and not models else None
    return run_doctor(environ, out, models=models, timeout=args.timeout, targets=targets)


def _configured_testpaths(root: Path) -> list[str]:
    """``testpaths`` of the pytest configuration in ``root`` (pytest.ini, pyproject.toml), else []."""
    import configparser
    import tomllib

    ini = root / "pytest.ini"
    if ini.is_file():
        parser = configparser.ConfigParser()
        parser.read(ini, encoding="utf-8")
        return parser.get("pytest", "testpaths", fallback="").split()
    try:
        data = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return []
    paths = data.get("tool", {}).get("pytest", {}).get("ini_options", {}).get("testpaths", [])
    return [paths] if isinstance(paths, str) else [str(p) for p in paths]


def suite_targets(paths: Sequence[str]) -> list[Target]:
    """One doctor target per distinct (role, model) of the suites under ``paths``, labelled with the
    suites (and agents) that use it; judge models are tried in their JSON-mode chain."""
    from .run.judge_format import format_chain
    from .suite.declare import ModelAgent
    from .suite.discover import find_suites

    users: dict[tuple[str, str], list[str]] = {}
    chains: dict[str, tuple[dict[str, Any] | None, ...]] = {}
    for name, suite in find_suites(paths):
        for agent in suite.agents:
            if isinstance(agent, ModelAgent):
                users.setdefault(("agent", agent.model), []).append(f"{name}/{agent.name}")
        users.setdefault(("user_sim", suite.user.model), []).append(name)
        for model in suite.judge.models():
            users.setdefault(("judge", model), []).append(name)
            chains.setdefault(model, format_chain(suite.judge.response_format))
    return [
        Target(
            model, f"{role} ({', '.join(dict.fromkeys(who))})", chains[model] if role == "judge" else (None,)
        )
        for (role, model), who in users.items()
    ]


def _export(args: argparse.Namespace, environ: Mapping[str, str], out: TextIO, err: TextIO) -> int:
    result = export_cassettes(args.cache_dir, args.suite, args.to, environ, args.out)
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
    from .files.baseline import BaselineError, save_baseline

    try:
        written = save_baseline(Path(args.source), Path(args.to))
    except BaselineError as exc:
        err.write(f"error: {exc}\n")
        return 1
    size = sum(p.stat().st_size for p in written)
    suites = sorted({p.parent.name for p in written if p.name == "baseline.json"})
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
    from .files.html import ReportInputError, write_html_reports

    try:
        written = write_html_reports(Path(args.out_dir))
    except ReportInputError as exc:
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
        from .finish.merge import run_merge

        return run_merge(args.shards, args.out, args.junitxml, env, out)
    if args.command == "baseline":
        return _save_baseline(args, out, err)
    if args.command == "report":
        return _report(args, out, err)
    parser.print_help(out)
    return 2
