"""The part a pytest process plays in a run, one class per xdist role (docs/architecture.md "One pytest
process, three roles").

* :class:`Standalone`: no xdist (``-n 0``, no xdist, ``--collect-only``): this process collects, runs
  the cases, keeps their records and finishes the run.
* :class:`Worker`: an xdist worker: it collects and runs cases, publishes each record in its item's
  record log in the run folder and stops at the controller's word; it never finishes the run.
* :class:`Controller`: xdist's controller: it runs no case, gets the records from the workers' reports,
  shows progress and, once every worker has finished, finishes the run.

The role is chosen once, in ``pytest_configure``, through xdist's public helpers
(:func:`xdist.is_xdist_worker`, :func:`xdist.is_xdist_controller`, :func:`xdist.get_xdist_worker_id`)
and kept on ``config.stash[role_key]``; ``plugin.py``'s hooks call the role's methods instead of
branching on the process's kind. The run id is xdist's ``testrun_uid`` on every process (see
:func:`choose_role`). What processes share during the run goes through the run folder's files (listed,
with why each is a file, in docs/architecture.md "The run folder"); a worker's end-of-run summary, which
only a normally finished run needs, goes through xdist's ``workeroutput``.
"""

from __future__ import annotations

import json
import re
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, cast

import pytest

from ..gateway.errors import BudgetExhausted
from ..gateway.model_stops import read_stops
from ..gateway.redact import register_secret
from ..options import GaugeOptions
from ..records import CaseRecord, WorkerSummary
from ..records.checks import CheckEntry, checks_from_json, checks_to_json, is_check_nodeid, without_group
from ..run.engine import STOP_GRACE
from ..run.looks import LookState
from .kept_reports import KeptReports
from .reports import ReportSharing
from .state import GaugeState, render_worker_summaries
from .stopping import (
    StopWatcher,
    announce_worker,
    mark_stopped,
    request_stop,
    wait_for_workers,
)
from .worker_reports import ReportDropping
from .workers import (
    PROXY_TOKEN_KEY,
    controller_paths,
    mark_controller,
    remote_worker_problem,
    worker_options,
)

if TYPE_CHECKING:
    from ..run.engine import Engine
    from ..run.looks import LookPlan, LookState
    from .adaptive import LookWatcher
    from .stopping import StopWatcher

__all__ = [
    "RUN_ID_PATTERN",
    "WORKER_SUMMARY",
    "Controller",
    "Role",
    "RunEnding",
    "Standalone",
    "Worker",
    "choose_role",
    "role_key",
    "started_run_id",
    "stop_finished_workers",
]

FAILURE_PROPERTY = "gauge_failure"  # a case without a record: the gateway error's class name
WORKER_SUMMARY = "gauge_worker_summary"
"""The key of a worker's :class:`WorkerSummary` (JSON form) in xdist's ``workeroutput``."""
RUN_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
"""A run id the user gives (``--testrunuid``): it names the run folder, so one safe path component."""


def damaged_warning(count: int, *, replay: bool) -> str:
    """The one line on cache entries (or cassettes) refused: what was done with them fits the backend (a
    replay sends nothing: the calls they would have answered are unrecorded)."""
    done = (
        "not replayed: the calls they answered fail as unrecorded (export the cassettes again)"
        if replay
        else "treated as misses and sent again"
    )
    return (
        f"pytest-gauge warning: {count} cache entries refused (damaged, edited, without their"
        f" response_digest, or not matching the key they are filed under): {done}"
    )


class RunEnding(Protocol):
    """The end of the run as the layers above give it (finish/ and fixtures/, wired by ``plugin.py``), so
    the process layer calls it without importing them."""

    def prepare(self) -> None:
        """Get ready to end the run: import its modules before the cases run, never later (a Ctrl-C
        cutting an import short leaves a half-made module behind, and the interrupted run's report needs
        them); an xdist controller does it while its workers start."""

    def write(self, session: pytest.Session, state: GaugeState, *, interrupted: bool) -> list[CheckEntry]:
        """Write every suite's outputs and reports, evaluate its gates (and report snapshots): their
        test outcomes."""

    def emit(self, session: pytest.Session, entry: CheckEntry) -> None:
        """Report a check no test item reported as a test entry of this process."""

    def tests_summary(self, reporter: Any, config: pytest.Config) -> None:
        """Your own tests' part of the terminal summary (the cost by test)."""

    def summary(self, reporter: Any, state: GaugeState) -> None:
        """The suites' part of the terminal summary (their tables, the gate notes)."""


class Role:
    """What every process does the same way; the subclasses override what their role does differently.
    The defaults are a process that takes no part in that step."""

    started_by_user: ClassVar[bool] = True  # the process the user started (checks the setup up front)

    def __init__(self, config: pytest.Config, state: GaugeState, ending: RunEnding) -> None:
        self.config = config
        self.state = state
        self.ending = ending

    def engine_for(self, session: pytest.Session) -> Engine:
        """This process's engine, started on first use (see :meth:`GaugeState.engine_for`)."""
        return self.state.engine_for(session)

    def collection_problem(self) -> str | None:
        """Why this process cannot collect the run's suites, or None."""
        return None

    def gate_problems(self, problems: list[str]) -> str | None:
        """Gates that do not fit their suite, found at collection: kept for ``pytest_collection_finish``
        (a usage error before any call); a worker returns the message that fails its collection."""
        self.state.gate_problems += problems
        return None

    def keep_record(self, record: CaseRecord) -> None:
        """A case's record, where its item ran: the process that finishes the run keeps it, an xdist
        worker appends it to its record log."""

    def start_looks(self) -> LookPlan:
        """``--gauge-adaptive``, after collection (where cases run): plan the looks, and listen for the
        controller's word on them."""
        return self.state.plan_looks().plan

    def case_finished(self, report: pytest.TestReport) -> None:
        """A case item's last report (``--gauge-adaptive``: where the run ends, count it to its look)."""

    def session_started(self) -> None:
        """``pytest_sessionstart`` (after xdist's, which starts the workers)."""

    def record_report(self, report: pytest.TestReport) -> None:
        """A test's report (``pytest_runtest_logreport``, the call phase)."""

    def report_arrived(self, report: pytest.TestReport) -> None:
        """Every report of every phase, first (``pytest_runtest_logreport``, tried first)."""

    def gate_entry(self, session: pytest.Session, nodeid: str) -> CheckEntry | None:
        """A gate item's outcome, once the run's end has evaluated the gates; None when the run stopped
        before (an xdist worker waits for the controller's ``checks.json``)."""
        path = self.state.run_folder.checks
        while not path.is_file():
            if session.shouldstop:
                return None
            time.sleep(0.05)
        return checks_from_json(json.loads(path.read_text(encoding="utf-8"))).get(nodeid)

    def collected(self, ids: list[str]) -> None:
        """xdist's controller: a worker's collected test ids (the same on every worker)."""

    def item_done(self, report: pytest.TestReport) -> None:
        """A test's last report (its teardown): where the run ends, the gates are evaluated once every
        other test is done."""

    def waiting(self) -> None:
        """Called while a case item waits for its record (every 0.25 s): where the run ends, the
        progress line, so a slow first case still shows progress."""

    def configure_node(self, node: Any) -> None:
        """xdist's ``pytest_configure_node`` (only the controller gets it)."""

    def testnode_down(self, node: Any, error: object | None) -> None:
        """xdist's ``pytest_testnodedown``: a worker finished (``error`` None) or went down (only the
        controller gets it)."""

    def start_loop(self, session: pytest.Session) -> None:
        """Before the cases run (``pytest_runtestloop``)."""

    def finish(self, session: pytest.Session) -> None:
        """After the cases ran (``session.shouldstop`` may say they stopped early)."""

    def abort(self, session: pytest.Session) -> None:
        """The run loop raised (Ctrl-C, SIGTERM, an internal error): the process that ends the run still
        writes what it has, as an interrupted run."""

    def terminal_summary(self, reporter: Any) -> None:
        """``pytest_terminal_summary``: only the process that ends the run has one."""

    def close(self) -> None:
        """Stop this process's engine and close its ledger (idempotent)."""
        self.state.close()

    def session_finished(self) -> None:
        """``pytest_sessionfinish``: close; the process that ended the run removes the run folder."""
        self.close()


class _EndsTheRun(Role):
    """A process that finishes the run: it keeps every record, shows progress and writes the outputs."""

    def __init__(self, config: pytest.Config, state: GaugeState, ending: RunEnding) -> None:
        super().__init__(config, state, ending)
        self.entries: dict[str, CheckEntry] = {}
        self.reported: set[str] = set()  # checks a test item reported
        self.outputs_written = False

    def session_started(self) -> None:
        """The terminal reporter's kept reports are made lean once every hook has seen them
        (:mod:`.kept_reports`)."""
        self.config.pluginmanager.register(KeptReports(self.config), "gauge-kept-reports")

    def progress(self) -> None:
        """A progress line at most every 10 s on a terminal, every 30 s otherwise (CI logs: steady, not
        flooded), on each finished case and while a case waits for its record."""
        state = self.state
        if not state.options.progress:
            return
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        now = time.monotonic()
        if now - state.progress_at < (10.0 if reporter.isatty() else 30.0):
            return
        state.progress_at = now
        line = state.progress_line()
        if line:
            reporter.write_line(line)

    def record_report(self, report: pytest.TestReport) -> None:
        self.progress()

    def waiting(self) -> None:
        self.progress()

    def case_finished(self, report: pytest.TestReport) -> None:
        if not self.state.options.adaptive:
            return
        if self.state.adaptive is None:
            from .adaptive import AdaptiveRun  # deferred: keeps numpy off pytest's start-up

            self.state.adaptive = AdaptiveRun(self.state, self.publish_looks)
        failure = next((str(v) for k, v in report.user_properties if k == FAILURE_PROPERTY), None)
        self.state.adaptive.case_done(report.nodeid, budget=failure == BudgetExhausted.__name__)

    def publish_looks(self, looks: LookState) -> None:
        """The controller's word on the looks, to the processes running cases."""

    def finish(self, session: pytest.Session) -> None:
        if not self.outputs_written:
            self._write_outputs(session, interrupted=bool(session.shouldstop))
        self._emit_unreported(session)

    def abort(self, session: pytest.Session) -> None:
        if not self.outputs_written:
            self._write_outputs(session, interrupted=True)
        self._emit_unreported(session)

    def _emit_unreported(self, session: pytest.Session) -> None:
        """The checks no test item reported: report snapshots, and selected gates whose items did not
        run (the run stopped first)."""
        for nodeid, entry in self.entries.items():
            if nodeid in self.reported:
                continue
            if entry.group == "snapshots" or nodeid in self.state.selected_gates:
                self.reported.add(nodeid)
                self.ending.emit(session, entry)

    def _write_outputs(self, session: pytest.Session, *, interrupted: bool) -> None:
        from ..files.readwrite import write_atomic  # deferred: off pytest's start-up

        self.close()
        self.stops = read_stops(self.state.run_dir)  # before the run folder goes
        self.damaged = self.state.damaged_entries()
        self.no_batch = self.state.no_batch_endpoints()
        entries = self.ending.write(session, self.state, interrupted=interrupted)
        self.entries = {e.nodeid: e for e in entries}
        self.outputs_written = True
        if self.state.selected_gates:  # the gate items (an xdist worker's wait for this file)
            write_atomic(self.state.run_folder.checks, json.dumps(checks_to_json(self.entries)))

    def terminal_summary(self, reporter: Any) -> None:
        self.ending.tests_summary(reporter, self.config)
        self._stopped_models(reporter)
        if getattr(self, "damaged", 0):
            replay = self.state.options.backend == "replay"
            reporter.write_line(damaged_warning(self.damaged, replay=replay), yellow=True)
        for where, said in sorted(getattr(self, "no_batch", {}).items()):
            line = f"pytest-gauge warning: --gauge-batch: no batch endpoint at {where} ({said}): the calls"
            reporter.write_line(f"{line} went the ordinary way, at the ordinary price", yellow=True)
        if self.state.finished or self.state.gate_notes:
            self.ending.summary(reporter, self.state)
        if int(self.config.getoption("verbose", 0) or 0) > 0:
            self._work_per_process(reporter)

    def _stopped_models(self, reporter: Any) -> None:
        """One line per (role, model) stopped during the run (:mod:`..gateway.model_stops`): the full
        message once, where each of its cases only says "not run"."""
        stops = getattr(self, "stops", [])
        if not stops:
            return
        reporter.write_sep("-", "pytest-gauge: stopped models")
        for stop in stops:
            reporter.write_line(
                stop.message or f"the {stop.role} model {stop.model!r}: {stop.reason}", red=True
            )

    def worker_summaries(self) -> tuple[list[WorkerSummary], dict[str, str]]:
        """What each process that ran cases did (see :class:`WorkerSummary`), and the workers that went
        down without a summary (worker id -> why)."""
        summary = self.state.worker_summary()
        return ([summary] if summary is not None else []), {}

    def _work_per_process(self, reporter: Any) -> None:
        """``-v``: one line per process that did gauge work (how the work spread over the workers)."""
        summaries, lost = self.worker_summaries()
        if not (summaries or lost):
            return
        reporter.write_sep("-", "pytest-gauge: work per process")
        for line in render_worker_summaries(summaries, lost):
            reporter.write_line(line)

    def session_finished(self) -> None:
        """Close; remove the run folder only once its ledgers were merged and the outputs written, else
        keep it (what was paid is in its ledgers) and say where."""
        self.close()
        ledgers = self.state.run_folder.ledgers()
        if self.outputs_written or not any(p.stat().st_size for p in ledgers):
            self.state.cleanup()
            return
        sys.stderr.write(
            f"pytest-gauge: the run stopped before its outputs were written; its ledgers are kept in"
            f" {self.state.run_dir} (paid answers are in the cache: a re-run sends only what is missing)\n"
        )


class Standalone(_EndsTheRun):
    """No xdist: this process collects, runs the cases, keeps their records and finishes the run."""

    def keep_record(self, record: CaseRecord) -> None:
        self.state.add_record(record)

    def gate_entry(self, session: pytest.Session, nodeid: str) -> CheckEntry | None:
        """The gate items run last: the first one ends the run (every case and test has run)."""
        if not self.outputs_written:
            self._write_outputs(session, interrupted=bool(session.shouldstop))
        self.reported.add(nodeid)
        return self.entries.get(nodeid)

    def start_loop(self, session: pytest.Session) -> None:
        session.testscollected += self.state.suite_entries_expected()  # report snapshots: counted now
        if self.state.suites:  # a run of plain tests only never imports the end of the run's modules
            self.ending.prepare()

    def publish_looks(self, looks: LookState) -> None:
        if self.state.looks is not None:
            self.state.looks.update(looks)


class Controller(_EndsTheRun):
    """xdist's controller: runs no case; records come in the workers' record logs, each worker's end-of-run
    summary in its ``workeroutput`` (:meth:`testnode_down`), and the run ends here."""

    def __init__(self, config: pytest.Config, state: GaugeState, ending: RunEnding) -> None:
        super().__init__(config, state, ending)
        self.summaries: dict[str, WorkerSummary] = {}
        self.lost: dict[str, str] = {}
        self.expected: set[str] | None = None  # the tests (not the checks) a worker collected
        self.done: set[str] = set()
        self.session: pytest.Session | None = None
        self.sharing = ReportSharing()

    def start_loop(self, session: pytest.Session) -> None:
        self.session = session

    def report_arrived(self, report: pytest.TestReport) -> None:
        """Share the report's strings: the terminal reporter keeps every report to the end of the run."""
        self.sharing.share(report)

    def collected(self, ids: list[str]) -> None:
        if self.expected is None:
            self.expected = {i for i in ids if not is_check_nodeid(i)}
            self.state.selected_gates = {without_group(i) for i in ids if is_check_nodeid(i)}

    def item_done(self, report: pytest.TestReport) -> None:
        """Once every test but the gates is done, end the run: the workers' gate items wait for the
        outcomes (``checks.json``), so a gate is reported by its own item."""
        if is_check_nodeid(report.nodeid):
            self.reported.add(without_group(report.nodeid))
            return
        self.done.add(report.nodeid)
        expected, session = self.expected, self.session
        if self.outputs_written or expected is None or session is None or not self.state.selected_gates:
            return
        if expected <= self.done:
            self._write_outputs(session, interrupted=bool(session.shouldstop))

    def session_started(self) -> None:
        super().session_started()
        self.ending.prepare()  # while xdist's workers start (whether they collect suites is not known yet)

    def testnode_down(self, node: Any, error: object | None) -> None:
        """Keep a finished worker's summary (``workeroutput[WORKER_SUMMARY]``: none if it did no gauge
        work), or why it went down without one."""
        worker = str(node.workerinput["workerid"])
        if error is not None:
            self.lost[worker] = str(error)
            return
        data = getattr(node, "workeroutput", {}).get(WORKER_SUMMARY)
        if isinstance(data, dict):
            self.summaries[worker] = WorkerSummary.from_json(data)

    def worker_summaries(self) -> tuple[list[WorkerSummary], dict[str, str]]:
        return list(self.summaries.values()), dict(self.lost)

    def configure_node(self, node: Any) -> None:
        """Every worker joins the controller's run folder (the run id reaches it as xdist's
        ``testrunuid``, see :func:`choose_role`)."""
        node.workerinput.update(controller_paths(self.state.options, self.state.proxy_token))
        mark_controller(self.state.run_dir)

    def publish_looks(self, looks: LookState) -> None:
        from .adaptive import publish_looks  # deferred: keeps numpy off pytest's start-up

        publish_looks(self.state.run_dir, looks)

    def finish(self, session: pytest.Session) -> None:
        stop_finished_workers(self.config)
        super().finish(session)

    def abort(self, session: pytest.Session) -> None:
        if not self.outputs_written:
            self._stop_workers()
        super().abort(session)

    def _stop_workers(self) -> None:
        """Interrupted: tell the workers to stop and wait (briefly) until they have, so the merged ledger
        has every attempt they sent (see :mod:`.stopping`)."""
        request_stop(self.state.run_dir)
        late = wait_for_workers(self.state.run_dir, STOP_GRACE + 5.0)
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if late and reporter is not None:
            reporter.write_line(
                f"pytest-gauge: workers {', '.join(sorted(late))} did not stop in time; their last attempts"
                " may be missing from the ledger",
                yellow=True,
            )


class Worker(Role):
    """An xdist worker: collects and runs cases, appends their records to its record log in the run folder
    (the controller reads it), and stops at the controller's word (its Ctrl-C or SIGTERM)."""

    started_by_user = False

    def keep_record(self, record: CaseRecord) -> None:
        self.state.publish_record(record)

    def __init__(self, config: pytest.Config, state: GaugeState, ending: RunEnding) -> None:
        super().__init__(config, state, ending)
        self.stop_watcher: StopWatcher | None = None
        self.look_watcher: LookWatcher | None = None

    def session_started(self) -> None:
        """The worker's reports are not kept once sent (:mod:`.worker_reports`)."""
        self.config.pluginmanager.register(ReportDropping(self.config), "gauge-report-dropping")

    def start_looks(self) -> LookPlan:
        from .adaptive import LookWatcher  # deferred: keeps numpy off pytest's start-up

        gate = self.state.plan_looks()
        self.look_watcher = LookWatcher(self.state.run_dir, gate)
        self.look_watcher.start()
        return gate.plan

    def engine_for(self, session: pytest.Session) -> Engine:
        if self.state.engine is not None:
            return self.state.engine
        engine = self.state.engine_for(session)
        self._watch_for_stop(engine, session)
        return engine

    def _watch_for_stop(self, engine: Engine, session: pytest.Session) -> None:
        """Stop at the controller's word, see :mod:`.stopping`; the worker's session ends after the case
        at hand, so the worker exits when xdist tears it down."""
        run_dir, worker_id = self.state.run_dir, self.state.worker_id
        announce_worker(run_dir, worker_id)

        def stop() -> None:
            engine.request_stop()
            looks = self.state.looks
            if looks is not None:  # an adaptive run: a case waiting for its look is not run
                opened = looks.state.opened
                looks.update(LookState(opened, opened, "not run: the run was stopped (Ctrl-C or SIGTERM)"))
            mark_stopped(run_dir, worker_id)
            session.shouldstop = "pytest-gauge: the run was stopped (Ctrl-C or SIGTERM)"

        self.stop_watcher = StopWatcher(run_dir, stop)
        self.stop_watcher.start()

    def collection_problem(self) -> str | None:
        workerinput = getattr(self.config, "workerinput", {})
        return remote_worker_problem(self.state.run_dir, self.state.worker_id, workerinput)

    def gate_problems(self, problems: list[str]) -> str | None:
        if problems:  # an xdist worker cannot stop the run with a usage error: its collection fails
            return "pytest-gauge: " + "\n".join(problems)
        return None

    def session_finished(self) -> None:
        """Close, then hand the controller this worker's summary through xdist's ``workeroutput``, which
        xdist sends once this hook is over (a normally finished worker only: nothing crash-critical)."""
        self.close()
        summary = self.state.worker_summary()
        workeroutput = getattr(self.config, "workeroutput", None)
        if summary is not None and isinstance(workeroutput, dict):
            workeroutput[WORKER_SUMMARY] = summary.to_json()

    def close(self) -> None:
        if self.stop_watcher is not None:
            self.stop_watcher.close()
        if self.look_watcher is not None:
            self.look_watcher.close()
        had_engine = self.state.engine is not None
        self.state.close()
        if had_engine:
            mark_stopped(self.state.run_dir, self.state.worker_id)


@dataclass(frozen=True)
class _Node:
    """What xdist's role helpers read from their ``request_or_session`` argument: its ``config``. There
    is no session yet in ``pytest_configure``, where the role is chosen."""

    config: pytest.Config


def choose_role(config: pytest.Config, options: GaugeOptions, ending: RunEnding) -> Role:
    """This process's role, from xdist's public helpers (no xdist installed: :class:`Standalone`);
    ``ending``: what the process that ends the run does at the end.

    The run id is xdist's ``testrun_uid`` on every process of an xdist run: a worker reads it from
    ``workerinput["testrunuid"]`` (what xdist's ``testrun_uid`` fixture reads); the controller takes
    ``--testrunuid`` when given, else makes one and sets it as ``--testrunuid`` before xdist's node manager
    reads it (``pytest_sessionstart``), so xdist hands it to every worker. Without xdist the run's own id
    (or ``--testrunuid``) names the run folder."""
    try:
        from xdist import (  # type: ignore[import-untyped]  # deferred: keeps xdist off pytest's start-up
            get_xdist_worker_id,
            is_xdist_controller,
            is_xdist_worker,
        )
    except ImportError:
        return Standalone(config, GaugeState(options, run_id=GaugeState.new_run_id()), ending)
    node = cast(pytest.Session, _Node(config))  # the helpers only read ``.config``
    if is_xdist_worker(node):
        workerinput: dict[str, Any] = getattr(config, "workerinput", {})
        worker_id = get_xdist_worker_id(node)
        state = GaugeState(
            worker_options(options, workerinput),
            run_id=str(workerinput.get("testrunuid") or GaugeState.new_run_id()),
            worker_id=worker_id,
            worker_count=int(workerinput.get("workercount", 1)),
        )
        if isinstance(workerinput.get(PROXY_TOKEN_KEY), str):  # the controller's: one token per run
            state.proxy_token = workerinput[PROXY_TOKEN_KEY]
            register_secret(state.proxy_token)
        return Worker(config, state, ending)
    state = GaugeState(options, run_id=started_run_id(config, options))
    # xdist distributes only with workers to start (--tx, set by -n; absent with -p no:xdist) and not
    # under --collect-only (as xdist's own pytest_configure decides); otherwise this process runs the
    # cases itself.
    if config.getoption("tx", None) and not config.getoption("collectonly") and is_xdist_controller(node):
        config.option.testrunuid = state.run_id  # xdist's NodeManager hands it to every worker
        return Controller(config, state, ending)
    return Standalone(config, state, ending)


def started_run_id(config: pytest.Config, options: GaugeOptions) -> str:
    """The id of a run this process starts: xdist's ``--testrunuid`` when the user gave one (it names the
    run folder, so it must be a safe folder name and no other run's), else a new one."""
    option = config.getoption("testrunuid", None)
    if option is None:
        return GaugeState.new_run_id()
    given = str(option)
    if not RUN_ID_PATTERN.fullmatch(given):
        raise pytest.UsageError(
            f"pytest-gauge: --testrunuid {given!r} names the run folder <gauge-out>/.gauge-run/<id>: use 1 to"
            " 128 letters, digits, '.', '_' or '-', starting with a letter or a digit"
        )
    run_dir = GaugeState(options, run_id=given).run_dir
    if run_dir.exists():
        raise pytest.UsageError(
            f"pytest-gauge: --testrunuid {given}: the run folder {run_dir} exists: a run with this id is"
            " running or was killed. Give each run its own --testrunuid, or remove the folder if no run"
            " uses it"
        )
    return given


def stop_finished_workers(config: pytest.Config) -> None:
    """Shut the workers down once every one has finished its cases, before the controller renders the
    outputs: the run's peak memory is then the workers' or the controller's, not their sum.

    This is pytest-gauge's one use of xdist internals (``dsession.session_finished`` and
    ``dsession.nodemanager.teardown_nodes``): xdist has no public way to end its workers early. xdist
    does the same in its own ``pytest_sessionfinish``, where a second teardown finds no worker left.
    Nothing happens if the distributed session has not finished (a crash or an interrupt, which xdist
    handles itself) or if xdist's internals change (the workers then end at xdist's usual time).
    """
    dsession = config.pluginmanager.get_plugin("dsession")
    if dsession is None or not getattr(dsession, "session_finished", False):
        return
    nodemanager = getattr(dsession, "nodemanager", None)
    if nodemanager is None:
        return
    try:
        nodemanager.teardown_nodes()
    except Exception:  # a failed early shutdown only costs memory: xdist tears down again at its end
        return


role_key = pytest.StashKey[Role]()
