"""The run's state in each process: its options, suites, selection, engine and, where the run ends,
the records (what each process does with it is its role, :mod:`.roles`).

Workers (and a run without xdist) collect suites, run the engine and publish per-case records (an xdist
worker through its record log in the run folder); the controller reads those logs, merges every worker's
ledger file, and, once every case has finished, writes the outputs, evaluates the gates and renders the
reports (docs/protocol.md#outputs).
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..files.folders import OutFolder, RunFolder
from ..files.readwrite import FileFormatError, read_json_object, write_atomic
from ..files.record_log import RecordLog, read_new_lines
from ..files.work_store import WorkStore
from ..gateway.batch import Batcher, BatchSettings
from ..gateway.gateway import (
    Gateway,
    GatewayResources,
    GatewaySettings,
    GatewayShared,
    live_keys,
)
from ..gateway.ledger import Ledger
from ..gateway.limits import ModelPacer
from ..gateway.model_stops import ModelStops
from ..gateway.proxy import RecordingProxy, new_proxy_token
from ..gateway.redact import register_secret
from ..gateway.shared import REPLAY_THEN_LIVE, REUSING_MODES
from ..gateway.store import Store
from ..options import GaugeOptions
from ..records import CaseKey, CaseRecord, SuiteMeta, WorkerSummary, dumps
from ..records.json_types import JSONObject
from ..records.prices import PriceTable
from ..run.engine import Engine, SuiteRuntime
from ..run.judge_format import JudgeFormats, format_chain, format_label, format_scope
from ..run.looks import LookGate
from ..suite.cases import Case
from ..suite.declare import MODEL_VARIABLES, Suite
from ..suite.tasks import Task
from .limits import (
    build_limits,
    build_model_rates,
)
from .program_host import ProxyProgramHost

if TYPE_CHECKING:  # the engine's modules: the xdist controller, which runs no case, never needs them
    from ..gateway.gateway import GatewayShared
    from ..gateway.proxy import RecordingProxy
    from ..records.prices import PriceRow
    from ..run.engine import Engine
    from ..run.looks import LookGate
    from .adaptive import AdaptiveRun

__all__ = ["GaugeState", "SuiteEntry", "render_progress", "render_worker_summaries", "state_key"]


@dataclass
class SuiteEntry:
    """A collected suite in this process: declaration, tasks, folder and all of its cases."""

    name: str
    suite: Suite
    tasks: tuple[Task, ...]
    folder: Path
    module_path: Path
    nodeid_prefix: str
    cases: list[Case]
    recorded_gateway: str | None = None  # replay: the gateway identity the cassettes were recorded with

    def meta(self, selected: Sequence[str] = (), shard_tasks: Sequence[str] | None = None) -> SuiteMeta:
        """What the controller needs about the suite (it does not collect under xdist)."""
        s = self.suite
        return SuiteMeta(
            name=self.name,
            folder=str(self.folder),
            module_path=str(self.module_path),
            nodeid_prefix=self.nodeid_prefix,
            tasks_file=str(self.folder / s.tasks_file),
            tasks=tuple(t.raw for t in self.tasks),
            categories={t.task_id: t.category for t in self.tasks},
            agents=tuple(a.name for a in s.agents),
            pairs=tuple(s.pairs),
            models=s.models(),
            judge_models=tuple(s.judge.models()),
            judge_repeats=s.judge.repeats,
            judge_format=format_label(format_chain(s.judge.response_format)[0]),
            user_max_turns=s.user.max_turns,
            orders=s.orders,
            samples=s.samples,
            gates=tuple(s.gates),
            tools=tuple(t.name for t in s.tools),
            cases=tuple(
                CaseKey(c.case_id, c.task_id, c.left, c.right, c.order, c.sample) for c in self.cases
            ),
            families={f: tuple(tiers) for f, tiers in s.families().items()},
            prompts={
                **{f"agent:{a.name}": getattr(a, "system_prompt", None) for a in s.agents},
                "user_sim_extra": s.user.extra_prompt,
            },
            selected=tuple(selected),
            shard_tasks=None if shard_tasks is None else tuple(shard_tasks),
            settings={
                "judge_temperature": s.judge.temperature,
                "judge_max_tokens": s.judge.max_tokens,
                "judge_repeats": s.judge.repeats,
                "judge_response_format": format_label(format_chain(s.judge.response_format)[0]),
                "user_sim_temperature": s.user.temperature,
                "user_sim_max_tokens": s.user.max_tokens,
                "user_sim_max_turns": s.user.max_turns,
            },
        )


@dataclass
class GaugeState:
    """Everything pytest-gauge keeps for one pytest process (on ``config.stash``)."""

    options: GaugeOptions
    run_id: str
    worker_id: str = "main"
    worker_count: int = 1
    suites: dict[str, SuiteEntry] = field(default_factory=dict)
    selected: dict[str, list[str]] = field(default_factory=dict)
    records: dict[str, dict[str, CaseRecord]] = field(default_factory=dict)
    engine: Engine | None = None
    shared: GatewayShared | None = None
    gate_problems: list[str] = field(default_factory=list)
    deselected_any: bool = False
    errored_cases: int = 0
    progress_at: float = field(default_factory=time.monotonic)
    finished: dict[str, Any] = field(default_factory=dict)
    shard_tasks: dict[str, list[str]] = field(default_factory=dict)  # suite -> this shard's tasks
    gate_notes: list[tuple[bool, str]] = field(default_factory=list)  # (loud, line): gates not checked
    selected_gates: set[str] = field(default_factory=set)  # the gate items' node ids, as selected
    looks: LookGate | None = None  # --gauge-adaptive, where cases run: the look each may start
    adaptive: AdaptiveRun | None = None  # --gauge-adaptive, where the run ends: the looks' evaluation
    proxy_token: str = field(default_factory=new_proxy_token, repr=False)  # the run's (the controller's)
    proxy: RecordingProxy | None = None  # made with the engine; its server starts with its first route
    program_host: Any = None  # its ProxyProgramHost: the sandboxes' relay, closed with the proxy
    record_log: RecordLog | None = None  # an xdist worker's: its cases' records, for the controller
    record_offsets: dict[str, int] = field(default_factory=dict)  # where the run ends: each log read so far

    def __post_init__(self) -> None:
        register_secret(self.proxy_token)  # redacted from every output like a key

    @property
    def run_dir(self) -> Path:
        return self.run_folder.path

    @property
    def run_folder(self) -> RunFolder:
        """The run's shared folder, typed (every file's path in it)."""
        return OutFolder(Path(self.options.out_dir)).run(self.run_id)

    @staticmethod
    def new_run_id() -> str:
        return uuid.uuid4().hex[:12]

    # ----- all processes ---------------------------------------------------------------------
    def plan_looks(self) -> LookGate:
        """``--gauge-adaptive``: the run's looks over the selected cases (the same in every process)."""
        from .adaptive import plan_from_metas  # deferred: keeps numpy off pytest's start-up

        metas = [e.meta(self.selected.get(name, [])) for name, e in self.suites.items()]
        self.looks = LookGate(plan_from_metas(metas, self.options))
        return self.looks

    def publish_suites(self) -> None:
        """Write each collected suite's metadata for the controller (identical from every worker)."""
        for entry in self.suites.values():
            meta = entry.meta(self.selected.get(entry.name, []), self.shard_tasks.get(entry.name))
            write_atomic(self.run_folder.suite_meta(entry.name), dumps(meta.to_json()))

    def engine_for(self, session: pytest.Session) -> Engine:
        """Start this process's engine on first use, over every selected case of every suite."""
        if self.engine is not None:
            return self.engine
        from ..sim.world import build_client  # deferred: 14 ms (statistics), the sim only

        opts = self.options
        run = self.run_dir
        self.shared = self.gateway_shared()
        formats = JudgeFormats(  # one JSON-mode fallback per judge model for the whole run, all workers
            run=Store(RunFolder(run).formats) if self.worker_id != "main" else None,
            kept=Store(Path(opts.cache_dir) / "formats") if opts.cache_mode != "off" else None,
            scope=format_scope(opts.backend, os.environ),
            reuse=opts.cache_mode in REUSING_MODES,
        )
        runtimes: dict[str, SuiteRuntime] = {}
        for name, entry in self.suites.items():
            make_client, backend_id = build_client(
                opts.backend, entry.suite, entry.tasks, opts.seed, opts.timeout, opts.max_concurrency
            )
            backend_id = entry.recorded_gateway or backend_id
            gateway = Gateway(
                suite=name, client_factory=make_client, backend_id=backend_id, shared=self.shared
            )
            tasks = {t.task_id: t for t in entry.tasks}
            runtimes[name] = SuiteRuntime(
                name,
                entry.suite,
                tasks,
                gateway,
                formats,
                opts.seed,
                out_dir=Path(opts.out_dir),
                workspace_source=entry.suite.workspace_source(entry.folder),
                module_path=entry.module_path,
            )
        selected = {cid for ids in self.selected.values() for cid in ids}
        cases = [c for e in self.suites.values() for c in e.cases if f"{e.name}::{c.case_id}" in selected]
        self.engine = Engine(
            runtimes,
            cases,
            WorkStore(RunFolder(run).work, self.worker_id),
            lookahead=2 * opts.max_concurrency,
            worker_count=self.worker_count,
            progress=self.write_progress,
            looks=self.looks,
        )
        self.proxy = self._recording_proxy(self.engine)
        self.engine.start()
        return self.engine

    def _recording_proxy(self, engine: Engine) -> RecordingProxy:
        """This process's recording proxy on the engine's loop, serving every suite's gateway (the tests'
        own gateway adds itself); a route gets it through its unit's caller (``WorkCaller.proxy_route``)."""
        proxy = RecordingProxy(self.proxy_token, engine.loop)
        from ..run.commands import SandboxedCommands  # deferred: off pytest's start-up

        host = ProxyProgramHost(proxy, unsandboxed=self.options.unsandboxed)
        self.program_host = host
        commands = SandboxedCommands(self.options.unsandboxed)
        for runtime in engine.runtimes.values():
            proxy.add_gateway(runtime.gateway)
            runtime.proxy = proxy
            runtime.programs = host
            runtime.commands = commands
        return proxy

    def gateway_shared(self) -> GatewayShared:
        """What every suite's gateway of this process shares: the run's settings (from the options and
        the environment's keys), its resources (ledger, limits on the run folder or ``--gauge-limits``,
        prices, cache, model stops) and a fresh state."""
        opts = self.options
        run = self.run_dir
        cache = None
        if opts.backend == "replay" and opts.cassettes:
            cache = Store(opts.cassettes)
        elif opts.cache_mode != "off" or opts.backend == "replay":
            cache = Store(Path(opts.cache_dir) / "responses")
        slots, rate, budget = build_limits(opts, run, self.run_id, self.worker_count)  # run folder or Redis
        settings = GatewaySettings(
            run_id=self.run_id,
            cache_mode=opts.cache_mode,
            replay=opts.backend == "replay",
            max_retries=opts.max_retries,
            timeout=opts.timeout,
            retry_after_cap=opts.retry_after_cap,
            anthropic_auth=opts.anthropic_auth,
            model_variables=MODEL_VARIABLES,
            **live_keys(opts.backend, os.environ),
        )
        resources = GatewayResources(
            ledger=Ledger(run, self.worker_id),
            slots=slots,
            rate=rate,
            budget=budget,
            prices=PriceTable.from_rows(self.price_rows()),
            cache=cache,
            stops=ModelStops(run, opts.max_timeouts),
            model_rates=build_model_rates(opts, run, self.run_id),  # run folder or --gauge-limits
            pacer=ModelPacer(opts.max_concurrency),
            recorded=_recorded(opts),
            batcher=_batcher(opts),
        )
        return GatewayShared(settings, resources)

    def write_progress(self) -> None:
        """This process's counters for the controller's progress line (overwritten about once a second)."""
        if self.engine is None or self.shared is None:
            return
        ledger = self.shared.resources.ledger
        snapshot: JSONObject = {
            "done_units": self.engine.done_units,
            "total_units": self.engine.total_units,
            "live_calls": ledger.live_calls,
            "cached_calls": ledger.cached_calls,
            "retries": ledger.retries,
            "tokens": ledger.tokens,
            "cost": ledger.cost,
            "rate_limit_waits": self.shared.state.rate_limit_waits,
            "damaged_entries": self.shared.state.damaged_entries,
        }
        batcher = self.shared.resources.batcher
        if batcher is not None and batcher.no_endpoint:
            snapshot["no_batch_endpoint"] = dict(batcher.no_endpoint)
        target = self.run_folder.progress(self.worker_id)
        try:
            write_atomic(target, json.dumps(snapshot), mkdir=False)
        except OSError:
            pass

    def worker_summary(self) -> WorkerSummary | None:
        """This process's end-of-run counters, or None when it did no gauge work (no engine started)."""
        if self.engine is None or self.shared is None:
            return None
        ledger = self.shared.resources.ledger
        return WorkerSummary(
            worker=self.worker_id,
            units=self.engine.done_units,
            attempts=ledger.live_calls,
            retries=ledger.retries,
            cached=ledger.cached_calls,
            tokens=ledger.tokens,
            cost=None if ledger.unpriced else ledger.cost,
            rate_limit_waits=self.shared.state.rate_limit_waits,
            peak_in_flight=self.shared.state.peak_in_flight,
        )

    def progress_snapshots(self) -> list[dict[str, Any]]:
        """Every process's last progress counters (see :meth:`write_progress`)."""
        snapshots = []
        for path in self.run_folder.progress_files():
            try:
                snapshots.append(read_json_object(path))
            except FileFormatError:
                continue
        return snapshots

    def progress_line(self) -> str | None:
        """One line summing every process's progress, or None before any work started."""
        return render_progress(self.progress_snapshots())

    def damaged_entries(self) -> int:
        """Cache entries refused as misses in the run, by every process (one warning line)."""
        own = self.shared.state.damaged_entries if self.shared is not None else 0
        others = sum(int(s.get("damaged_entries", 0)) for s in self.progress_snapshots())
        return max(own, others)

    def no_batch_endpoints(self) -> dict[str, str]:
        """The gateways ``--gauge-batch`` found without a batch endpoint, by every process (where ->
        what it answered): their calls went the ordinary way."""
        found: dict[str, str] = {}
        for snapshot in self.progress_snapshots():
            found.update(snapshot.get("no_batch_endpoint") or {})
        batcher = self.shared.resources.batcher if self.shared is not None else None
        found.update(batcher.no_endpoint if batcher is not None else {})
        return found

    def close(self) -> None:
        """Stop this process's engine, then its proxy (the units the engine lets finish may be program
        agents still calling it), and close its ledger (idempotent); its last counters written."""
        if self.engine is not None:
            self.engine.stop()
            self.write_progress()
        if self.proxy is not None:
            self.proxy.close()
        if self.program_host is not None:
            self.program_host.close()
        if self.shared is not None:
            self.shared.resources.ledger.close()
        if self.record_log is not None:
            self.record_log.close()

    def price_rows(self) -> tuple[PriceRow, ...]:
        """The run's prices: the configured ones, plus genai-prices for the other models of the collected
        suites with ``--gauge-prices genai-prices``."""
        return self.options.prices_for(
            str(m) for e in self.suites.values() for m in e.suite.models().values() if m
        )

    def suite_entries_expected(self) -> int:
        """The suite-level test entries this run will report after its tests, that are no test items:
        with ``--gauge-snapshot-reports`` on a whole run, one per snapshot report (the gates are items);
        so pytest's progress counter can count them from the start."""
        total = 0
        for entry in self.suites.values():
            selected = self.selected.get(entry.name, [])
            if self.options.snapshot_reports and selected and len(selected) == len(entry.cases):
                from ..report import SNAPSHOT_REPORTS  # deferred: imports every report (and numpy)

                total += len(SNAPSHOT_REPORTS)
        return total

    def publish_record(self, record: CaseRecord) -> None:
        """An xdist worker: append a case's record to this worker's record log in the run folder, where
        the controller reads it (before the case's report is sent, see :mod:`..files.record_log`)."""
        if self.record_log is None:
            self.record_log = RecordLog(self.run_folder.records(self.worker_id))
        self.record_log.append(dumps(record.to_json()))

    # ----- controller ------------------------------------------------------------------------
    def add_record(self, record: CaseRecord) -> None:
        """Keep a case's record for the end of the run."""
        self.records.setdefault(record.suite, {})[record.case_id] = record

    def ingest_records(self) -> None:
        """Keep the records the workers' logs gained since the last call, read line by line."""
        for path in self.run_folder.record_logs():
            lines, end = read_new_lines(path, self.record_offsets.get(path.name, 0))
            for data in lines:
                self.add_record(CaseRecord.from_json(data))
            self.record_offsets[path.name] = end[0]

    def ordered_records(self, meta: SuiteMeta) -> list[CaseRecord]:
        """The suite's records so far in collection order, never arrival order (same seed, same bytes
        whatever ``-n``)."""
        self.ingest_records()
        order = {cid: i for i, cid in enumerate(meta.case_ids)}
        kept = self.records.get(meta.name, {}).values()
        return sorted(kept, key=lambda r: order.get(r.case_id, 1 << 30))

    def suite_metas(self) -> list[SuiteMeta]:
        folder = self.run_folder.suites
        if not folder.is_dir():
            return []
        return [SuiteMeta.from_json(read_json_object(p)) for p in self.run_folder.suite_metas()]

    def release(self) -> None:
        """Drop the run's records and rendered reports once they are written and shown, so pytest's
        end-of-run garbage collection passes do not walk them."""
        self.records.clear()
        self.finished.clear()
        self.engine = None
        self.shared = None

    def cleanup(self) -> None:
        shutil.rmtree(self.run_dir, ignore_errors=True)
        parent = self.run_dir.parent
        try:
            parent.rmdir()
        except OSError:
            pass


def render_progress(snapshots: list[dict[str, Any]]) -> str | None:
    """The progress line from every process's counters (see :meth:`GaugeState.write_progress`).

    Work units are known up front; calls are not (dialogues vary in length), so the expected number of
    live calls is estimated from the live calls per finished unit so far ("~").
    """
    if not snapshots:
        return None
    total_units = max(int(s.get("total_units", 0)) for s in snapshots)
    totals: dict[str, float] = {}
    for snap in snapshots:
        for k, v in snap.items():
            if k != "total_units":
                totals[k] = totals.get(k, 0) + v
    count = {k: int(totals.get(k, 0)) for k in ("done_units", "live_calls", "retries", "cached_calls")}
    count.update(waits=int(totals.get("rate_limit_waits", 0)), tokens=int(totals.get("tokens", 0)))
    done, live = count["done_units"], count["live_calls"]
    expected = f" of ~{round(live / done * total_units)}" if done and live else ""
    return (
        f"gauge: {done}/{total_units} work units, {live}{expected} live calls ({count['retries']} retries,"
        f" {count['waits']} rate-limit waits), {count['cached_calls']} cached, {count['tokens']} tokens,"
        f" ${totals.get('cost', 0.0):.4f} so far"
    )


def render_worker_summaries(summaries: Sequence[WorkerSummary], lost: Mapping[str, str]) -> list[str]:
    """One line per process (``-v`` terminal summary): what it did, then the workers that went down
    without a summary (crashed or killed: their work is in the ledgers and the reports, not here)."""
    lines = [
        f"{s.worker}: {s.units} work units, {s.attempts} requests sent ({s.retries} retries,"
        f" {s.rate_limit_waits} rate-limit waits, at most {s.peak_in_flight} in flight), {s.cached} cached,"
        f" {s.tokens} tokens, {'unknown cost' if s.cost is None else f'${s.cost:.4f}'}"
        for s in sorted(summaries, key=lambda s: _worker_order(s.worker))
    ]
    lines += [
        f"{worker}: no summary, the worker went down ({reason})"
        for worker, reason in sorted(lost.items(), key=lambda kv: _worker_order(kv[0]))
    ]
    return lines


def _worker_order(worker: str) -> tuple[int, str]:
    """gw2 before gw10."""
    digits = worker.lstrip("gw")
    return (int(digits) if digits.isdigit() else -1, worker)


state_key = pytest.StashKey[GaugeState]()


def _batcher(opts: GaugeOptions) -> Batcher | None:
    """``--gauge-batch judge`` on a live run: the judge's cache misses go through batches (the simulator
    and a replay have no batch endpoint)."""
    if opts.batch == "off" or opts.backend != "live":
        return None
    return Batcher(BatchSettings(frozenset({opts.batch}), deadline=opts.batch_deadline * 60.0))


def _recorded(opts: GaugeOptions) -> Store | None:
    """``--gauge-cache replay-then-live`` with ``--gauge-cassettes``: the cassettes, read after the cache."""
    if opts.cache_mode == REPLAY_THEN_LIVE and opts.cassettes and opts.backend != "replay":
        return Store(opts.cassettes)
    return None
