"""The shipped examples over many seeds: how many seeds pass each gate.

Run: ``python benchmarks/bench_seeds.py`` (``--seeds 200`` by default, ``--jobs`` processes, ``--suites``
to pick some of ``example in_house prompts tiers``). Each (suite, seed) is an ordinary
``pytest eval_suites/<suite> -n 0 --gauge-backend sim --gauge-cache off --gauge-seed S`` run, made
in-process (``pytest.main``) by a pool of worker processes so imports are paid once per process, on the
run's own sim path (its model client calls the simulator in-process); the bench checks this on its last
seed of every suite, whose outputs it compares with an ordinary subprocess run.

It prints, per suite, every gate (and every plain test of ``prompts``) with the number of seeds on
which it passed, and the seeds that did not; exits 1 when one passes on fewer than ``--target`` (99%)
of the seeds. A gate's "pass" is its status in ``metrics.json`` (an inconclusive gate does not pass).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SUITES = ("example", "in_house", "prompts", "tiers")
PLAIN = ("prompts",)  # plain pytest tests (fixtures), no Suite: run by pytest itself
PYTEST_ARGS = ["-q", "-n", "0", "-p", "no:randomly", "-p", "no:cacheprovider", "-p", "no:unraisableexception"]
PYTEST_ARGS += ["--gauge-backend", "sim", "--gauge-cache", "off", "--gauge-no-progress"]
Outcomes = dict[str, str]  # entry (gate expression or test name) -> pass / fail / inconclusive / skipped


class _Collector:
    """A pytest plugin keeping the outcome of every plain test (the gate entries are read from
    metrics.json, which says pass / fail / inconclusive / skipped)."""

    def __init__(self) -> None:
        self.outcomes: Outcomes = {}

    def pytest_runtest_logreport(self, report: Any) -> None:
        plain = report.nodeid.count("::") == 1 and "gauge_gates" not in report.keywords  # not a case
        if plain and (report.when == "call" or report.outcome != "passed"):
            name = report.nodeid.rsplit("::", 1)[-1]
            self.outcomes[f"test {name}"] = "pass" if report.outcome == "passed" else "fail"


def _gates(out: Path) -> Outcomes:
    """Every gate of every suite written under ``out``, by expression."""
    found: Outcomes = {}
    for metrics in sorted(out.glob("*/reports/metrics.json")):
        for gate in json.loads(metrics.read_text(encoding="utf-8")).get("gates", []):
            found[f"gate {gate['expr']}"] = str(gate["status"])
    return found


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """pytest's terminal output of the in-process runs goes to /dev/null (fd 1 and 2)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 1)
        os.dup2(null.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def run_one(job: tuple[str, int, str]) -> tuple[str, int, Outcomes]:
    """One suite at one seed: its gates' (and plain tests') outcomes."""
    suite, seed, work = job
    if suite in PLAIN:
        return suite, seed, pytest_run(suite, seed, work)
    return suite, seed, direct_run(suite, seed, work)


def pytest_run(suite: str, seed: int, work: str) -> Outcomes:
    """An in-process pytest run (the plain tests of ``prompts``, with the gauge fixtures)."""
    import pytest

    out = Path(work) / f"{suite}-{seed}"
    collector = _Collector()
    args = [str(ROOT / "eval_suites" / suite), *PYTEST_ARGS, "--gauge-seed", str(seed)]
    with _quiet():
        pytest.main([*args, "--gauge-out", str(out), "--rootdir", str(ROOT)], plugins=[collector])
    subprocess.run(["rm", "-rf", str(out)], check=False)
    return {**_gates(out), **collector.outcomes}


class _Capture:
    """A pytest plugin keeping the run's state after a ``--collect-only`` run: the resolved options and
    the collected suite (declaration, tasks), which do not depend on the seed."""

    state: Any = None

    def pytest_collection_finish(self, session: Any) -> None:
        from pytest_gauge._internal.process.state import state_key

        self.state = session.config.stash[state_key]


@functools.cache
def _collected(suite: str) -> tuple[Any, Any]:
    """The suite's options and entry, from one in-process ``--collect-only`` run."""
    import pytest

    capture = _Capture()
    args = [str(ROOT / "eval_suites" / suite), *PYTEST_ARGS, "--co", "--rootdir", str(ROOT)]
    with _quiet():
        pytest.main(args, plugins=[capture])
    state = capture.state
    (entry,) = state.suites.values()
    return state.options, entry


async def _records(runtime: Any, cases: list[Any]) -> list[Any]:
    """Every case's record, as the engine makes them (each transcript once, then the case's verdicts)."""
    import asyncio

    from pytest_gauge._internal.records import TranscriptResult
    from pytest_gauge._internal.run.work import build_record

    made: dict[tuple[str, str, int], asyncio.Task[Any]] = {}

    def transcript(task: str, agent: str, sample: int) -> asyncio.Task[Any]:
        key = (task, agent, sample)
        if key not in made:
            made[key] = asyncio.ensure_future(runtime.transcript(task, agent, sample))
        return made[key]

    judge = runtime.suite.judge

    async def record(case: Any) -> Any:
        left, right = await asyncio.gather(
            transcript(case.task_id, case.left, case.sample),
            transcript(case.task_id, case.right, case.sample),
        )
        assert isinstance(left, TranscriptResult) and isinstance(right, TranscriptResult), (left, right)
        verdicts = [
            await runtime.judgment(case, j, r, left.transcript, right.transcript)
            for j in range(len(judge.models()))
            for r in range(judge.repeats)
        ]
        return build_record(runtime, case, left, right, verdicts)

    return list(await asyncio.gather(*(record(c) for c in cases)))


def direct_results(suite: str, seed: int, work: str, extra: tuple[str, ...] = ()) -> list[Any]:
    """The suite at a seed without pytest: its cases made by the run's own gateway, runtime and record
    code (no pytest items, no engine thread, no reports), its gate results by the end of the run's
    analysis (``GateResult``s, as ``metrics.json`` shows them), with ``extra`` gates as ``--gauge-gate``."""
    import asyncio
    from dataclasses import replace

    from pytest_gauge._internal.analysis.numbers import gate_source
    from pytest_gauge._internal.analysis.suite import gate_results
    from pytest_gauge._internal.gateway.gateway import (
        Gateway,
        GatewayResources,
        GatewaySettings,
        GatewayShared,
    )
    from pytest_gauge._internal.gateway.ledger import Ledger, merge_ledgers
    from pytest_gauge._internal.process.limits import build_limits
    from pytest_gauge._internal.records.prices import PriceTable
    from pytest_gauge._internal.run.judge_format import JudgeFormats
    from pytest_gauge._internal.run.work import SuiteRuntime
    from pytest_gauge._internal.sim.world import build_client
    from pytest_gauge._internal.suite.cases import build_cases

    options, entry = _collected(suite)
    opts = replace(options, seed=seed, gates=(*options.gates, *extra))  # extra: --gauge-gate ones
    s = entry.suite
    cases = build_cases(entry.name, entry.tasks, s.pairs, orders=s.orders, samples=s.samples, seed=seed)
    entry = replace(entry, cases=cases)
    meta = entry.meta([f"{entry.name}::{c.case_id}" for c in cases])
    run = Path(work) / f"run-{suite}-{seed}"
    run.mkdir(parents=True)

    async def produce() -> list[Any]:
        slots, rate, budget = build_limits(opts, run, run.name)
        shared = GatewayShared(
            GatewaySettings(
                run_id=run.name,
                cache_mode="off",
                replay=False,
                max_retries=opts.max_retries,
                timeout=opts.timeout,
                retry_after_cap=opts.retry_after_cap,
            ),
            GatewayResources(
                ledger=Ledger(run, "bench"),
                slots=slots,
                rate=rate,
                budget=budget,
                prices=PriceTable.from_rows(opts.prices),
                cache=None,
            ),
        )
        make, backend_id = build_client("sim", s, entry.tasks, seed, opts.timeout, opts.max_concurrency)
        gateway = Gateway(suite=entry.name, client_factory=make, backend_id=backend_id, shared=shared)
        runtime = SuiteRuntime(
            entry.name, s, {t.task_id: t for t in entry.tasks}, gateway, JudgeFormats(), seed
        )
        try:
            return await _records(runtime, cases)
        finally:
            shared.resources.ledger.close()

    records = asyncio.run(produce())
    ledger = [r for r in merge_ledgers(sorted(run.glob("ledger-*.jsonl"))) if r.suite == entry.name]
    subprocess.run(["rm", "-rf", str(run)], check=False)
    numbers = gate_source(meta, records, ledger, opts, comparison=(None, "no baseline"), labels=None)
    return gate_results(
        meta, opts, numbers.source, False, 0, deferred=False, interrupted=None, spread=numbers.spread
    )


def direct_run(suite: str, seed: int, work: str) -> Outcomes:
    """The suite at a seed without pytest (:func:`direct_results`): its gates' statuses."""
    results = direct_results(suite, seed, work)
    dump = os.environ.get("BENCH_SEEDS_DUMP")
    if dump:  # every gate's value and interval, for choosing thresholds
        rows = [
            {"expr": r.gate.canonical(), "status": r.status, "value": r.value, "low": r.low, "high": r.high}
            for r in results
        ]
        with open(dump, "a", encoding="utf-8") as f:
            f.write(json.dumps({"suite": suite, "seed": seed, "gates": rows}) + "\n")
    return {f"gate {r.gate.canonical()}": r.status for r in results}


def ordinary_run(suite: str, seed: int, work: str) -> Outcomes:
    """The same run as an ordinary pytest process (openai client, mock transport): the check."""
    out = Path(work) / f"check-{suite}-{seed}"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = [sys.executable, "-m", "pytest", str(ROOT / "eval_suites" / suite), *PYTEST_ARGS]
    args += ["--gauge-seed", str(seed), "--gauge-out", str(out), "--rootdir", str(ROOT)]
    args += ["--junitxml", str(out / "junit.xml")]
    subprocess.run(args, cwd=ROOT, env=env, capture_output=True, check=False)
    outcomes = _gates(out)
    if suite == "prompts":
        import xml.etree.ElementTree as ET

        for case in ET.parse(out / "junit.xml").iter("testcase"):
            failed = any(child.tag in ("failure", "error") for child in case)
            outcomes[f"test {case.get('name')}"] = "fail" if failed else "pass"
    return outcomes


def _init() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ["PYTHONPATH"] = str(ROOT)


def _table(seeds: list[int], results: dict[str, dict[int, Outcomes]], target: float) -> bool:
    """Print the per-suite, per-entry pass counts; True when every entry meets the target."""
    ok = True
    for suite in results:
        per_entry: dict[str, list[int]] = defaultdict(list)
        for seed in seeds:
            for entry, status in results[suite].get(seed, {}).items():
                per_entry.setdefault(entry, [])
                if status != "pass":
                    per_entry[entry].append(seed)
        print(f"\n{suite}: {len(results[suite])} seeds")
        width = max((len(e) for e in per_entry), default=10)
        for entry, bad in per_entry.items():
            passed = len(seeds) - len(bad)
            share = passed / len(seeds)
            mark = "ok " if share >= target else "LOW"
            shown = ", ".join(str(s) for s in bad[:8]) + (" ..." if len(bad) > 8 else "")
            print(f"  {mark} {entry:<{width}}  {passed:>4}/{len(seeds)}  {share:6.1%}  {shown}")
            ok = ok and share >= target
    return ok


def _table_from(log: Path, target: float) -> int:
    """The table of the seeds a ``--log`` holds (every suite's seeds that finished)."""
    results: dict[str, dict[int, Outcomes]] = defaultdict(dict)
    for line in log.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        results[row["suite"]][int(row["seed"])] = row["outcomes"]
    complete = sorted(set.intersection(*(set(r) for r in results.values()))) if results else []
    print(f"{len(complete)} seeds with every suite finished (of {log})")
    done = {s: {k: v for k, v in r.items() if k in complete} for s, r in results.items()}
    return 0 if _table(complete, done, target) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=200, help="seeds 1..N (default 200)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="worker processes")
    parser.add_argument("--suites", nargs="*", default=list(SUITES), choices=SUITES)
    parser.add_argument("--target", type=float, default=0.99, help="share of seeds every entry must pass")
    parser.add_argument(
        "--no-check", action="store_true", help="skip the ordinary-run check of the last seed"
    )
    parser.add_argument("--log", help="append each run's outcomes to this JSON-lines file as they come")
    parser.add_argument("--table-from", metavar="LOG", help="print the table of a --log file and exit")
    args = parser.parse_args(argv)
    if args.table_from:
        return _table_from(Path(args.table_from), args.target)
    seeds = list(range(1, args.seeds + 1))
    started = time.perf_counter()
    results: dict[str, dict[int, Outcomes]] = {s: {} for s in args.suites}
    with tempfile.TemporaryDirectory(prefix="bench-seeds-") as work:
        jobs = [(suite, seed, work) for seed in seeds for suite in args.suites]
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(args.jobs, initializer=_init) as pool:
            for done, (suite, seed, outcomes) in enumerate(pool.imap_unordered(run_one, jobs), 1):
                results[suite][seed] = outcomes
                if args.log:
                    with open(args.log, "a", encoding="utf-8") as log:
                        log.write(json.dumps({"suite": suite, "seed": seed, "outcomes": outcomes}) + "\n")
                if done % 100 == 0:
                    print(f"  {done}/{len(jobs)} runs, {time.perf_counter() - started:.0f} s", flush=True)
        checked = True
        for suite in [] if args.no_check else args.suites:
            same = ordinary_run(suite, seeds[-1], work) == results[suite][seeds[-1]]
            checked = checked and same
            said = "the same as" if same else "DIFFERENT from"
            print(f"check: {suite} at seed {seeds[-1]} {said} an ordinary pytest run")
    elapsed = time.perf_counter() - started
    print(f"{len(jobs)} runs of {len(args.suites)} suites over {len(seeds)} seeds in {elapsed:.0f} s")
    ok = _table(seeds, results, args.target)
    print(f"\n{'PASS' if ok and checked else 'FAIL'}: every entry passes on >= {args.target:.0%} of seeds")
    return 0 if ok and checked else 1


if __name__ == "__main__":
    sys.exit(main())
