"""Every folder layout, spelt once: the output folder (``--gauge-out``: one :class:`SuiteFolder` per
suite, the index page, the run folders under it) and a run's shared :class:`RunFolder`
(``<gauge-out>/.gauge-run/<run id>``, docs/architecture.md#the-run-folder). One property per file;
whoever writes or reads a file asks these for its path."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["CACHE_DIR", "INDEX_FILE", "OutFolder", "RunFolder", "SuiteFolder"]

INDEX_FILE = "index.html"
"""The HTML page's file name: the output folder's index and each suite's reports/ page."""
CACHE_DIR = ".gauge-cache"
"""The response cache's default folder (``--gauge-cache-dir``, the CLI's ``--cache-dir``), under the
rootdir: its layout is :mod:`pytest_gauge.gateway.store`'s."""


@dataclass(frozen=True)
class SuiteFolder:
    """One suite's outputs, ``<gauge-out>/<suite>`` (or a compact baseline's ``DIR/<suite>``)."""

    path: Path

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def tasks(self) -> Path:
        return self.path / "tasks.jsonl"

    @property
    def agents(self) -> Path:
        """The transcripts' folder, one ``<agent>.jsonl`` per agent."""
        return self.path / "agents"

    def transcripts(self, agent: str) -> Path:
        return self.agents / f"{agent}.jsonl"

    def transcript_files(self) -> list[Path]:
        """Every agent's transcripts file, sorted by name (as one run writes and links them)."""
        return sorted(self.agents.glob("*.jsonl"))

    @property
    def pairs(self) -> Path:
        """The case records."""
        return self.path / "pairs" / "pair_results.jsonl"

    @property
    def ledger(self) -> Path:
        return self.path / "agent_runs.jsonl"

    @property
    def manifest(self) -> Path:
        return self.path / "manifest.json"

    @property
    def shard(self) -> Path:
        """``--gauge-shard``'s ``shard.json`` (what merge reads)."""
        return self.path / "shard.json"

    @property
    def compact_baseline(self) -> Path:
        """A compact baseline's ``baseline.json`` (``baseline save``)."""
        return self.path / "baseline.json"

    @property
    def reports(self) -> Path:
        return self.path / "reports"

    def report(self, name: str) -> Path:
        """A report file by its name in ``report.REPORTS`` (``metrics.json``, ``elo.svg``, ...)."""
        return self.reports / name

    @property
    def page(self) -> Path:
        """The suite's HTML page."""
        return self.reports / INDEX_FILE

    @property
    def workspaces(self) -> Path:
        """Every transcript's workspace, ``work/<task>/<agent>/<sample>`` (tasks that act on files)."""
        return self.path / "work"

    def workspace(self, task_id: str, agent: str, sample: int, candidate: int = 0) -> Path:
        """One transcript's workspace: the same path in every run, so program agents' prompts and
        configurations that name it stay the same bytes (and their cached calls keep answering). A
        best-of tier's later samples (``candidate`` 1, 2, ...) each have their own: ``<sample>-c<k>``."""
        return self.workspaces / task_id / agent / _slot(sample, candidate)

    def mcp(self, task_id: str, agent: str, sample: int, candidate: int = 0) -> Path:
        """One transcript's MCP folder (``claude-mcp.json``, the tool server's ``tools.sock`` while it
        runs): the suite's tools offered to a program agent; beside the workspace, never in it."""
        return self.path / "mcp" / task_id / agent / _slot(sample, candidate)

    @property
    def label_sample(self) -> Path:
        """``labels sample``'s stratified sample of cases to label (the HTML page offers them first)."""
        return self.path / "labels" / "sample.jsonl"


@dataclass(frozen=True)
class RunFolder:
    """What the processes of one run share, ``<gauge-out>/.gauge-run/<run id>``."""

    path: Path

    @property
    def suites(self) -> Path:
        """Each collected suite's metadata, ``suites/<suite>.json``."""
        return self.path / "suites"

    def suite_meta(self, name: str) -> Path:
        return self.suites / f"{name}.json"

    def suite_metas(self) -> list[Path]:
        """Every collected suite's metadata file, sorted by name."""
        return sorted(self.suites.glob("*.json"))

    @property
    def work(self) -> Path:
        """The work store (transcripts, verdicts, case records)."""
        return self.path / "work"

    @property
    def formats(self) -> Path:
        """JSON mode's once-per-run decisions per judge model."""
        return self.path / "formats"

    def ledger(self, worker: str) -> Path:
        return self.path / f"ledger-{worker}.jsonl"

    def ledgers(self) -> list[Path]:
        """Every process's ledger file, sorted (the merge's order)."""
        return sorted(self.path.glob("ledger-*.jsonl"))

    def records(self, worker: str) -> Path:
        """A worker's record log (:mod:`.record_log`): its cases' records, one JSON line each."""
        return self.path / f"records-{worker}.jsonl"

    def record_logs(self) -> list[Path]:
        """Every worker's record log, sorted."""
        return sorted(self.path.glob("records-*.jsonl"))

    @property
    def slots(self) -> Path:
        return self.path / "slots"

    @property
    def rate(self) -> Path:
        return self.path / "rate.json"

    def model_rate(self, key: str) -> Path:
        """One model's RPM/TPM window (``--gauge-rpm MODEL=N``), by the model's key."""
        return self.path / f"rate-{key}.json"

    @property
    def budget(self) -> Path:
        return self.path / "budget.json"

    @property
    def controller(self) -> Path:
        """The controller's mark, written before the workers start."""
        return self.path / "controller"

    def progress(self, worker: str) -> Path:
        return self.path / f"progress-{worker}.json"

    def progress_files(self) -> list[Path]:
        return sorted(self.path.glob("progress-*.json"))

    @property
    def looks(self) -> Path:
        """``--gauge-adaptive``: the controller's word on the looks."""
        return self.path / "looks.json"

    @property
    def checks(self) -> Path:
        """The suite-level checks' outcomes (gates, snapshots), once the run's end has evaluated them: the
        xdist workers' gate items wait for it."""
        return self.path / "checks.json"

    @property
    def stop(self) -> Path:
        """The controller's stop file (Ctrl-C or SIGTERM reached it)."""
        return self.path / "stop"

    def pid(self, worker: str) -> Path:
        return self.path / f"worker-{worker}.pid"

    def pid_workers(self) -> list[str]:
        """The workers that wrote their pid file, by id."""
        return sorted(p.name[len("worker-") : -len(".pid")] for p in self.path.glob("worker-*.pid"))

    def stopped(self, worker: str) -> Path:
        """A worker's mark that it has stopped after a stop."""
        return self.path / f"stopped-{worker}"

    @property
    def stopped_models(self) -> Path:
        """Every stopped (role, model), one file each."""
        return self.path / "stopped-models"


@dataclass(frozen=True)
class OutFolder:
    """The output folder (``--gauge-out``): a :class:`SuiteFolder` per suite, the index page and the
    run folders."""

    path: Path

    def suite(self, name: str) -> SuiteFolder:
        return SuiteFolder(self.path / name)

    @property
    def page(self) -> Path:
        """The index page over every suite's page."""
        return self.path / INDEX_FILE

    @property
    def pr_comment(self) -> Path:
        """The sticky pull-request comment's Markdown (``report/github.py``)."""
        return self.path / "pr-comment.md"

    def run(self, run_id: str) -> RunFolder:
        return RunFolder(self.path / ".gauge-run" / run_id)


def _slot(sample: int, candidate: int) -> str:
    """A transcript's folder name: its sample, and a best-of tier's later candidates apart."""
    return str(sample) if candidate == 0 else f"{sample}-c{candidate}"
