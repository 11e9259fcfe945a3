"""``python -m pytest_gauge``: cassette export and cache prune on hand-made cache folders, the help text,
and one end-to-end subprocess run per command (doctor against the loopback server)."""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import openai
import pytest

from pytest_gauge.cli import main
from pytest_gauge.gateway.cache import prune_cache
from pytest_gauge.gateway.cassettes import export_cassettes, scrub_entry
from pytest_gauge.gateway.gateway import (
    CallContext,
    Gateway,
    GatewayResources,
    GatewaySettings,
    GatewayShared,
)
from pytest_gauge.gateway.ledger import Ledger
from pytest_gauge.gateway.limits import Budget, ConcurrencySlots, RateLimiter, SharedState
from pytest_gauge.gateway.store import Store, content_key
from pytest_gauge.records.prices import PriceTable
from pytest_gauge.testing import FaultPlan, LoopbackServer

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-cli-test-8d1e77"
NOW = 1_800_000_000.0
DAY = 86400.0


def entry(
    suite: str,
    task: str,
    *,
    persist: bool = True,
    created: float = NOW,
    role: str = "agent",
    model: str = "m1",
    work: str | None = None,
    content: str = "hello",
) -> dict[str, Any]:
    """A cache entry in the format Gateway.chat writes."""
    return {
        "format_version": 1,
        "meta": {
            "suite": suite,
            "task_id": task,
            "work": work or f"transcript/{task}/a/0",
            "role": role,
            "model": model,
        },
        "request": {"model": model, "messages": [{"role": "user", "content": content}]},
        "response": {
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
        },
        "persist": persist,
        "run_id": "run-abc",
        "created": created,
    }


def put(cache_dir: Path, value: dict[str, Any]) -> str:
    key = content_key(value["meta"] | {"persist": value["persist"], "created": value["created"]})
    Store(cache_dir / "responses").put(key, value)
    return key


def run_cli(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m pytest_gauge ARGS`` in a child process without any gateway variables of this machine."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TAOTOKEN_", "ANTHROPIC_", "GAUGE_"))}
    base["PYTHONPATH"] = str(ROOT) + (os.pathsep + base["PYTHONPATH"] if base.get("PYTHONPATH") else "")
    base.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "pytest_gauge", *args],
        capture_output=True,
        text=True,
        env=base,
        cwd=cwd or ROOT,
        timeout=60,
    )


# ---------------------------------------------------------------------------------------------- export


def test_export_filters_by_suite_and_persist_and_keeps_the_store_layout(tmp_path: Path) -> None:
    cache = tmp_path / ".gauge-cache"
    a1 = put(cache, entry("alpha", "t1", role="judge", model="judge-m", work="judgment/t1/x-y"))
    a2 = put(cache, entry("alpha", "t2"))
    put(cache, entry("alpha", "t3", persist=False))
    put(cache, entry("beta", "t1"))
    out_dir = tmp_path / "cassettes"
    result = export_cassettes(cache, "alpha", out_dir, environ={})
    assert sorted(result.exported) == sorted([a1, a2])
    assert result.suites_seen == ("alpha", "beta") and result.refused == ()
    files = sorted(p.relative_to(out_dir).as_posix() for p in out_dir.rglob("*.json"))
    assert files == sorted([*(f"{k[:2]}/{k}.json" for k in (a1, a2)), "recording.json"])
    replay = Store(out_dir)
    for key, task in ((a1, "t1"), (a2, "t2")):
        got = replay.get(key)
        assert got is not None
        expected = entry("alpha", task)
        if task == "t1":
            expected = entry("alpha", "t1", role="judge", model="judge-m", work="judgment/t1/x-y")
        del expected["run_id"], expected["created"]
        assert got == expected
        text = replay.path(key).read_text(encoding="utf-8")
        assert text == json.dumps(expected, sort_keys=True, indent=2, ensure_ascii=False) + "\n"
        assert '"run_id"' not in text and '"created"' not in text
    readme = (out_dir / "README.md").read_text(encoding="utf-8")
    rows = [line for line in readme.splitlines() if line.startswith("- ")]
    assert rows == [
        f"- role=agent model=m1 task=t2 work=transcript/t2/a/0 suite=alpha file={a2[:2]}/{a2}.json",
        f"- role=judge model=judge-m task=t1 work=judgment/t1/x-y suite=alpha file={a1[:2]}/{a1}.json",
    ]


def test_scrub_drops_run_metadata_and_any_header_or_key_field() -> None:
    raw = entry("s", "t") | {"headers": {"Authorization": "Bearer x"}, "api_key": "x"}
    raw["request"] = raw["request"] | {"extra_headers": {"X-Api-Key": "x"}, "Authorization": "x"}
    raw["response"] = raw["response"] | {"x-api-key": "x"}
    clean = scrub_entry(raw)
    assert set(clean) == {"format_version", "meta", "request", "response", "persist"}
    assert set(clean["request"]) == {"model", "messages"}
    assert set(clean["response"]) == {"choices", "usage"}
    # content is never rewritten: only field names decide
    nested = entry("s", "t", content="my headers and api_key talk")
    assert scrub_entry(nested)["request"]["messages"] == nested["request"]["messages"]


def test_export_refuses_an_entry_that_contains_the_key_value(tmp_path: Path) -> None:
    cache = tmp_path / "c"
    leaky = put(cache, entry("s", "t1", content=f"my key is {KEY}"))
    fine = put(cache, entry("s", "t2"))
    result = export_cassettes(cache, "s", tmp_path / "out", environ={"TAOTOKEN_API_KEY": KEY})
    assert result.exported == (fine,) and result.refused == (leaky,)
    assert not Store(tmp_path / "out").path(leaky).exists()
    err = io.StringIO()
    argv = ["cassettes", "export", "--suite", "s", "--to", str(tmp_path / "o2"), "--cache-dir", str(cache)]
    status = main(argv, environ={"TAOTOKEN_API_KEY": KEY}, out=io.StringIO(), err=err)
    assert status == 1 and f"refused {leaky}" in err.getvalue() and KEY not in err.getvalue()


def test_exported_cassettes_replay_through_the_gateway_without_network(tmp_path: Path) -> None:
    def shared(cache: Store, replay: bool, run_id: str) -> GatewayShared:
        run = tmp_path / run_id
        return GatewayShared(
            GatewaySettings(
                run_id=run_id,
                cache_mode="use",
                replay=replay,
                max_retries=0,
                timeout=5.0,
                retry_after_cap=5.0,
            ),
            GatewayResources(
                ledger=Ledger(run, "main"),
                slots=ConcurrencySlots(run / "slots", 4),
                rate=RateLimiter(SharedState(run / "rate.json"), None, None),
                budget=Budget(SharedState(run / "budget.json"), None, None, None),
                prices=PriceTable({}),
                cache=cache,
            ),
        )

    body: dict[str, Any] = {"messages": [{"role": "user", "content": "recorded question"}], "max_tokens": 8}
    ctx = CallContext("suite-r", "t1", "transcript/t1/a/0")
    with LoopbackServer() as srv:
        client = openai.AsyncOpenAI(api_key=KEY, base_url=srv.base_url, max_retries=0)
        recorder = Gateway(
            suite="suite-r",
            client_factory=lambda: client,
            backend_id="b",
            shared=shared(Store(tmp_path / "cache" / "responses"), False, "rec"),
        )
        recorded = asyncio.run(recorder.chat(ctx, 1, "agent", "m", dict(body)))
        assert srv.requests_total == 1
        argv = [
            "cassettes",
            "export",
            "--suite",
            "suite-r",
            "--to",
            str(tmp_path / "cas"),
            "--cache-dir",
            str(tmp_path / "cache"),
        ]
        status = main(argv, environ={}, out=io.StringIO(), err=io.StringIO())
        assert status == 0
        player = Gateway(
            suite="suite-r",
            client_factory=lambda: client,
            backend_id="b",
            shared=shared(Store(tmp_path / "cas"), True, "play"),
        )
        replayed = asyncio.run(player.chat(ctx, 1, "agent", "m", dict(body)))
        assert srv.requests_total == 1  # served from the cassette
    assert replayed.content == recorded.content == "ok: recorded question"


@pytest.mark.slow  # python -m pytest_gauge in child processes; export itself runs in process above
def test_export_subprocess_end_to_end(tmp_path: Path) -> None:
    cache = tmp_path / ".gauge-cache"
    put(cache, entry("alpha", "t1"))
    put(cache, entry("alpha", "t2"))
    put(cache, entry("beta", "t1", persist=False))
    done = run_cli("cassettes", "export", "--suite", "alpha", "--to", "cas", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "exported 2 cassettes for suite alpha to cas"
    assert len(list((tmp_path / "cas").rglob("*/*.json"))) == 2  # and recording.json beside them
    err = io.StringIO()
    argv = [
        "cassettes",
        "export",
        "--suite",
        "beta",
        "--to",
        str(tmp_path / "cas2"),
        "--cache-dir",
        str(cache),
    ]
    assert main(argv, environ={}, out=io.StringIO(), err=err) == 1
    assert "no persisted cache entries for suite 'beta'" in err.getvalue()
    assert "suites in the cache: alpha, beta" in err.getvalue()
    assert not (tmp_path / "cas2").exists()


# ----------------------------------------------------------------------------------------------- prune


def test_prune_removes_old_unpersisted_unreadable_and_orphans_and_keeps_the_rest(tmp_path: Path) -> None:
    cache = tmp_path / "c"
    store = Store(cache / "responses")
    fresh = put(cache, entry("s", "fresh", created=NOW - 2 * DAY))
    old = put(cache, entry("s", "old", created=NOW - 10 * DAY))
    unpersisted = put(cache, entry("s", "trunc", persist=False, created=NOW))
    undated = put(cache, entry("s", "undated") | {"created": None})
    corrupt = content_key("corrupt")
    store.path(corrupt).parent.mkdir(parents=True, exist_ok=True)
    store.path(corrupt).write_text("{not json", encoding="utf-8")
    held = put(cache, entry("s", "held", created=NOW - 30 * DAY))
    orphan_lock = store.root / "ab" / f"ab{'0' * 62}.lock"
    orphan_lock.parent.mkdir(parents=True, exist_ok=True)
    orphan_lock.touch()
    kept_lock = store.root / fresh[:2] / f"{fresh}.lock"
    kept_lock.touch()
    stale_tmp = store.root / fresh[:2] / f".{fresh}.json.123.tmp"
    stale_tmp.write_text("partial", encoding="utf-8")
    os.utime(stale_tmp, (NOW - 3600, NOW - 3600))
    live_tmp = store.root / fresh[:2] / f".{fresh}.json.456.tmp"
    live_tmp.write_text("partial", encoding="utf-8")
    os.utime(live_tmp, (NOW - 5, NOW - 5))
    fd = store.try_lock(held)
    assert fd is not None
    try:
        result = prune_cache(cache, 7, now=NOW)
    finally:
        Store.unlock(fd)
    assert (result.removed_old, result.removed_unpersisted, result.removed_unreadable) == (1, 1, 1)
    assert result.kept == 3 and result.busy == 1  # fresh, undated, and the locked old one
    assert result.removed_files == 2  # the orphan lock and the stale tmp file
    assert set(store.keys()) == {fresh, undated, held}
    assert store.get(old) is None and store.get(unpersisted) is None and not store.path(corrupt).exists()
    assert kept_lock.exists() and live_tmp.exists() and not stale_tmp.exists()
    assert not orphan_lock.exists() and not orphan_lock.parent.exists()  # the emptied shard went too


@pytest.mark.slow  # python -m pytest_gauge in child processes; prune itself runs in process above
def test_prune_subprocess_end_to_end(tmp_path: Path) -> None:
    cache = tmp_path / ".gauge-cache"
    now = time.time()
    keep = put(cache, entry("s", "new", created=now - 1 * DAY))
    put(cache, entry("s", "old", created=now - 40 * DAY))
    put(cache, entry("s", "trunc", persist=False, created=now))
    done = run_cli("cache", "prune", "--older-than", "30", "--cache-dir", str(cache))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(
        "removed 2 entries (1 older than 30 days, 1 not persisted, 0 unreadable), kept 1;"
    )
    assert list(Store(cache / "responses").keys()) == [keep]


def test_prune_of_a_missing_cache_is_a_no_op(tmp_path: Path) -> None:
    result = prune_cache(tmp_path / "nothing", 1, now=NOW)
    assert (result.removed, result.kept, result.removed_files) == (0, 0, 0)


# ---------------------------------------------------------------------------------------- help & doctor


def test_help_lists_the_commands() -> None:
    done = run_cli("--help")
    assert done.returncode == 0
    for command in ("doctor", "cassettes", "cache"):
        assert f"\n    {command}" in done.stdout
    out = io.StringIO()
    assert main([], environ={}, out=out) == 2 and "doctor" in out.getvalue()


@pytest.mark.slow  # two child processes; the doctor's checks run in process in test_doctor.py
def test_doctor_subprocess_end_to_end(tmp_path: Path) -> None:
    with LoopbackServer(faults=FaultPlan(expected_key=KEY)) as srv:
        env = {"TAOTOKEN_API_KEY": KEY, "TAOTOKEN_BASE_URL": srv.base_url, "CODEX_HOME": str(tmp_path)}
        good = run_cli("doctor", "--models", "loopback-model", env=env)
        assert good.returncode == 0, good.stdout + good.stderr
        assert "model loopback-model (--models): answered" in good.stdout and KEY not in good.stdout
        bad = run_cli("doctor", env=env | {"TAOTOKEN_BASE_URL": srv.root_url})
        assert bad.returncode == 1
        assert f"use TAOTOKEN_BASE_URL={srv.base_url} " in bad.stdout and KEY not in bad.stdout + bad.stderr
    out = io.StringIO()
    assert main(["doctor", "--print-config", "codex"], environ=env, out=out) == 0
    assert 'env_key = "TAOTOKEN_API_KEY"' in out.getvalue() and KEY not in out.getvalue()
