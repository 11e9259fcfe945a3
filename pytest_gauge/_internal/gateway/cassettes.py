"""``python -m pytest_gauge cassettes export``: a suite's persisted response-cache entries copied for
review and replay, scrubbed of anything secret, with a README and the suite's recording.json entry."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..files.folders import OutFolder
from ..files.readwrite import FileFormatError, read_json_object, read_jsonl, write_atomic
from ..files.replay import Recording, save_recording
from ..records.work_key import parse_work
from .endpoint import KEY_VARIABLE
from .store import Store

__all__ = [
    "DROPPED_FIELDS",
    "CassetteError",
    "ExportResult",
    "RunKeys",
    "export_cassettes",
    "run_keys",
    "scrub_entry",
]

DROPPED_FIELDS = frozenset({"run_id", "created"})
_SECRET_NAME = re.compile(r"authorization|api_?key|headers?$|^cookie$|^set_cookie$")


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


class CassetteError(Exception):
    """An export that cannot be made as asked (a run whose ledger is not found): the message says why."""


@dataclass(frozen=True)
class RunKeys:
    """The cache keys one run of a suite used (its ledger's ``request`` of every answered call, live or
    from the cache), the run ids of those calls, and the output folder whose manifest describes it."""

    run_ids: tuple[str, ...]
    keys: frozenset[str]
    out_dir: Path


def _ledger_rows(path: Path) -> list[dict[str, Any]]:
    try:
        return read_jsonl(path)
    except FileFormatError as exc:
        raise CassetteError(str(exc)) from None


def run_keys(run: str, suite: str, out_dir: str | os.PathLike[str]) -> RunKeys:
    """The keys of the run ``run`` names: a run's ``--gauge-out`` folder, its suite folder or its
    ``agent_runs.jsonl``; else a run id, looked up in ``<out_dir>/<suite>/agent_runs.jsonl``. A ledger
    links a run to the entries it used: each answered call's ``request`` is its cache key."""
    given = Path(run)
    if given.is_file():
        ledger, out = given, given.parent.parent
    elif (given / "agent_runs.jsonl").is_file():
        ledger, out = given / "agent_runs.jsonl", given.parent
    elif given.is_dir():
        ledger, out = OutFolder(given).suite(suite).ledger, given
    else:
        ledger, out = OutFolder(Path(out_dir)).suite(suite).ledger, Path(out_dir)
    if not ledger.is_file():
        raise CassetteError(
            f"no ledger {ledger} for run {run!r}: give the run's --gauge-out folder, or its id with --out"
            " naming the folder it wrote"
        )
    rows = [r for r in _ledger_rows(ledger) if r.get("suite") == suite]
    ids = sorted({str(r.get("run_id")) for r in rows})
    if not given.exists():  # a run id: only its lines (the folder may hold a later run's)
        if run not in ids:
            seen = ", ".join(ids) or "none"
            raise CassetteError(
                f"{ledger} holds no call of suite {suite} by run {run!r} (runs there: {seen})"
            )
        rows = [r for r in rows if r.get("run_id") == run]
    keys = frozenset(str(r["request"]) for r in rows if r.get("request") and r.get("status") == "ok")
    if not keys:
        raise CassetteError(f"{ledger}: no call of suite {suite} used the cache; was it on (--gauge-cache)?")
    return RunKeys(tuple(sorted({str(r.get("run_id")) for r in rows})), keys, out)


@dataclass(frozen=True)
class ExportResult:
    """What an export wrote: the keys exported, the suites present in the cache, and keys refused."""

    exported: tuple[str, ...]
    suites_seen: tuple[str, ...]
    refused: tuple[str, ...]
    gateway: str | None = None  # the gateway whose entries were exported
    other_gateways: tuple[tuple[str, int], ...] = ()  # the suite's entries of other gateways, not exported
    missing: tuple[str, ...] = ()  # keys the named run used that the cache no longer holds as persisted


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
    gateway: str | None = None,
    only: frozenset[str] | None = None,
) -> ExportResult:
    """Copy the suite's persisted cache entries into ``to`` (same content-addressed layout, readable by
    :class:`Store`), scrubbed and pretty-printed, then rewrite ``to/README.md`` and the suite's entry of
    ``to/recording.json`` (what replay needs without the recording's environment). Entries in which the
    value of ``TAOTOKEN_API_KEY`` appears are refused, not exported. One gateway's entries per export
    (replay keys requests by gateway): ``gateway``, else the one of the suite's latest entry. ``only``:
    the keys of one run (:func:`run_keys`), the others are left out."""
    env = os.environ if environ is None else environ
    key_value = env.get(KEY_VARIABLE, "").strip()
    source = Store(Path(cache_dir) / "responses")
    dest = Store(to)
    exported: list[str] = []
    refused: list[str] = []
    suites: set[str] = set()
    mine: dict[str, dict[str, Any]] = {}
    for key in source.keys():
        entry = source.get(key)
        if entry is None:
            continue
        meta = entry.get("meta")
        entry_suite = meta.get("suite") if isinstance(meta, dict) else None
        if isinstance(entry_suite, str):
            suites.add(entry_suite)
        if entry_suite == suite and entry.get("persist") is True and (only is None or key in only):
            mine[key] = entry
    chosen, others = _one_gateway(mine, gateway)
    for key, entry in mine.items():
        if _gateway_of(entry) != chosen:
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
    missing = tuple(sorted(only - set(mine))) if only is not None else ()
    return ExportResult(tuple(exported), tuple(sorted(suites)), tuple(refused), chosen, others, missing)


def _gateway_of(entry: Mapping[str, Any]) -> str | None:
    meta = entry.get("meta")
    value = meta.get("gateway") if isinstance(meta, dict) else None
    return str(value) if value else None


def _one_gateway(
    entries: Mapping[str, Mapping[str, Any]], wanted: str | None
) -> tuple[str | None, tuple[tuple[str, int], ...]]:
    """The gateway to export (``wanted``, else the one of the most recently created entry) and the
    others with their entry counts: a cache that has seen two gateways exports one, so the recording
    names it and replay finds its keys."""
    counts: dict[str | None, int] = {}
    latest: tuple[float, str] | None = None
    for entry in entries.values():
        gw = _gateway_of(entry)
        counts[gw] = counts.get(gw, 0) + 1
        created = entry.get("created")
        if gw is not None and isinstance(created, int | float) and (latest is None or (created, gw) > latest):
            latest = (float(created), gw)
    chosen = (
        wanted if wanted is not None else (latest[1] if latest else next(iter(sorted(counts, key=str)), None))
    )
    others = tuple(sorted((gw, n) for gw, n in counts.items() if gw is not None and gw != chosen))
    return chosen, others


def _recording(
    suite: str, entries: list[dict[str, Any] | None], out_dir: str | os.PathLike[str]
) -> Recording:
    """What replay needs beside the responses: the gateway the entries were keyed by and, from the
    recorded run's manifest (``<out_dir>/<suite>/manifest.json``), the model per role, seed and hashes;
    without a manifest, the models are read from the entries themselves."""
    metas = [e["meta"] for e in entries if e is not None and isinstance(e.get("meta"), dict)]
    gateways = sorted({str(m["gateway"]) for m in metas if m.get("gateway")})
    try:
        manifest = read_json_object(OutFolder(Path(out_dir)).suite(suite).manifest)
    except FileFormatError:
        manifest = {}
    models: dict[str, str | None] = dict(manifest.get("models") or {})
    if not models:
        for m in metas:
            key = parse_work(str(m.get("work", "")))
            if m.get("role") == "agent" and key is not None and key.kind == "transcript":
                models[f"agent:{key.who}"] = m.get("model")
            elif m.get("role") == "user_sim":
                models["user_sim"] = m.get("model")
            elif m.get("role") == "judge" and key is not None and key.kind == "judge":
                models[f"judge:{key.who}"] = m.get("model")
    return Recording(
        suite,
        gateways[0] if len(gateways) == 1 else None,
        models,
        manifest.get("seed"),
        dict(manifest.get("hashes") or {}),
    )
