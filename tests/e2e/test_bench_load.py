"""The load benchmark's quick size runs clean, and its checks catch a lost or doubled record, so the
script cannot rot unnoticed (the figures of its full size are benchmarks/README.md's)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.slow
SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_load.py"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_load", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_load", module)
    spec.loader.exec_module(module)
    return module


def test_the_quick_load_run_passes_and_its_checks_catch_lost_and_doubled_records(tmp_path: Path) -> None:
    bench = _bench()
    checked, _, code = bench.run_load(tmp_path, bench.QUICK_TASKS)
    assert (checked.failures, code) == ([], 0)
    figures = checked.figures
    assert figures["cases"] == bench.QUICK_TASKS * bench.CASES_PER_TASK
    assert figures["attempts"] > figures["calls"]  # the faults were met and retried
    assert figures["server_requests"] == figures["attempts"]

    out = tmp_path / "gauge-out" / "load"
    requests = figures["server_requests"]
    cases = out / "pairs" / "pair_results.jsonl"
    first, *rest = cases.read_text(encoding="utf-8").splitlines()
    cases.write_text("\n".join([first, first, *rest[1:]]) + "\n", encoding="utf-8")  # one doubled, one lost
    ledger = out / "agent_runs.jsonl"
    lines = ledger.read_text(encoding="utf-8").splitlines()
    ok = next(i for i, line in enumerate(lines) if json.loads(line)["status"] == "ok")
    ledger.write_text("\n".join(lines[:ok] + lines[ok + 1 :]) + "\n", encoding="utf-8")  # one answer lost
    failures = bench.check_outputs(out, bench.QUICK_TASKS, requests).failures
    assert any(f.startswith("case records:") and "1 doubled" in f for f in failures), failures
    assert any("answered of" in f for f in failures), failures
    assert any(f.startswith("the server saw") for f in failures), failures
