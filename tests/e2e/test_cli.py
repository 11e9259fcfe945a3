"""``python -m pytest_gauge``: cassette export and cache prune on hand-made cache folders, the help text,
and one end-to-end subprocess run per command (doctor against the loopback server)."""

from __future__ import annotations

import asyncio
import io
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_gauge._internal.cli import main
from pytest_gauge._internal.gateway.gateway import (
    CallContext,
    Gateway,
    GatewayResources,
    GatewaySettings,
    GatewayShared,
)
from pytest_gauge._internal.gateway.ledger import Ledger
from pytest_gauge._internal.gateway.limits import Budget, ConcurrencySlots, RateLimiter, SharedState
from pytest_gauge._internal.gateway.store import Store
from pytest_gauge._internal.gateway.transport import ModelClient
from pytest_gauge._internal.records.prices import PriceTable
from pytest_gauge.testing import FaultPlan, LoopbackServer
from tests.e2e.test_gateway import run_closing
from tests.unit.gateway.test_cache import DAY
from tests.unit.gateway.test_cassettes import KEY, entry, put
from tests.unit.test_cli import run_cli

# ---------------------------------------------------------------------------------------------- export


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
        client = ModelClient(srv.base_url, KEY)
        recorder = Gateway(
            suite="suite-r",
            client_factory=lambda: client,
            backend_id="b",
            shared=shared(Store(tmp_path / "cache" / "responses"), False, "rec"),
        )
        recorded = run_closing(recorder, recorder.chat(ctx, 1, "agent", "m", dict(body)))
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


# ---------------------------------------------------------------------------------------- help & doctor


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
