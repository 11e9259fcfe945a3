"""Output folders and baselines written before the usage convention (ledger format version 1: Chat's
``usage`` with ``prompt_tokens`` including ``cached_tokens``, no ``api``) stay readable: the same
comparison side, the same compact baseline and the same records as the version 2 folder they came from."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_gauge.files.baseline import load_baseline, load_run_side, save_baseline
from pytest_gauge.records import LedgerRecord, Usage
from tests.e2e.test_plugin import mini_run
from tests.helpers import SharedRuns, read_jsonl


def _as_version_1(line: dict[str, object]) -> dict[str, object]:
    """A version 2 ledger line as version 1 wrote it."""
    old = {k: v for k, v in line.items() if k != "api"} | {"format_version": 1}
    if isinstance(line.get("usage"), dict):
        u = Usage.from_json(line["usage"])  # type: ignore[arg-type]
        old["usage"] = {
            "prompt_tokens": u.prompt_tokens,
            "completion_tokens": u.completion_tokens,
            "total_tokens": u.total_tokens,
            "cached_tokens": u.cached_input_tokens,
            "reasoning_tokens": u.reasoning_tokens,
        }
    return old


def test_a_version_1_output_folder_and_its_baseline_read_as_before(
    shared_runs: SharedRuns, pytester: pytest.Pytester, tmp_path: Path
) -> None:
    run = mini_run(shared_runs, "n0", pytester)
    assert run.ret == 0, run.stdout[-3000:]
    new = tmp_path / "v2" / "mini"
    shutil.copytree(run.path / "gauge-out" / "mini", new)
    old = tmp_path / "v1" / "mini"
    shutil.copytree(new, old)
    lines = read_jsonl(new / "agent_runs.jsonl")
    assert lines and all(x["format_version"] == 2 and x["api"] == "chat" for x in lines)
    (old / "agent_runs.jsonl").write_text("".join(json.dumps(_as_version_1(x)) + "\n" for x in lines))
    sides = [replace(load_run_side(folder), links={}) for folder in (old, new)]  # links name the folder
    assert sides[0] == sides[1] and sides[0].task_costs
    read = [LedgerRecord.from_json(x) for x in read_jsonl(old / "agent_runs.jsonl")]
    assert [r.to_json() for r in read] == [
        LedgerRecord.from_json(x).to_json() | {"usage": _no_raw(x)} for x in lines
    ]
    for version in ("v1", "v2"):
        save_baseline(tmp_path / version, tmp_path / f"base-{version}")
    compact = [json.loads(next((tmp_path / f"base-{v}").rglob("*.json")).read_text()) for v in ("v1", "v2")]
    assert compact[0]["ledger_summary"] == compact[1]["ledger_summary"]
    assert compact[0]["ledger_summary"]["agent"]["input_tokens"] > 0
    bases = [load_baseline(tmp_path / f"base-{v}", "mini") for v in ("v1", "v2")]
    assert bases[0] is not None and bases[1] is not None
    assert replace(bases[0], links={}) == replace(bases[1], links={})


def _no_raw(line: dict[str, object]) -> object:
    """A version 2 line's usage as read back from version 1 (which kept no raw usage object)."""
    usage = line.get("usage")
    return {k: v for k, v in usage.items() if k != "raw"} if isinstance(usage, dict) else usage
