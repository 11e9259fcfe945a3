"""The OpenTelemetry export against a real collector: Arize Phoenix (from PyPI) started on loopback once
for this module, a plugin run (two xdist workers, a judge asked twice per case) with
``OTEL_EXPORTER_OTLP_ENDPOINT`` pointing at it, and the spans read back through Phoenix's REST API: one
span per case and per gate, every model call with its GenAI attributes, one ``gen_ai.evaluation.result``
event per verdict with the judge's model, the A/B order, the judge prompt's hash, the rule rewards and the
verdict; no key and no message text unless ``--gauge-otel-content``.

Phoenix is a server with its own dependencies (it pins an older ``anthropic`` than the test extra's), so
.ci/run installs it in a virtual environment of its own and names its ``phoenix`` in ``GAUGE_PHOENIX``;
outside CI the test skips without it, under ``CI`` it fails.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import DATA, MINI_INI, read_jsonl, run_pytest_subprocess

pytestmark = pytest.mark.slow
INSTALL = (
    "python -m venv .phoenix && .phoenix/bin/pip install arize-phoenix; GAUGE_PHOENIX=.phoenix/bin/phoenix"
)
STARTUP_S = 300.0  # a loaded machine takes 20 to 60 s to import Phoenix and migrate its database; bounded
INGEST_S = 60.0  # Phoenix writes received spans in batches: wait for them, bounded
KEY = "sk-gauge-otel-fake-key-5e0b71c2"
PRICES = "gauge_prices =\n" + "".join(
    f"    {row}\n" for row in ("sim-agent-x 0.5 1.5", "sim-agent-y 0.5 1.5", "sim-agent-z 0.15 0.6",
                          "sim-user 0.15 0.6", "sim-judge 2.5 10")
)  # fmt: skip
GATES = ("flip_rate <= 1", "flip_rate >= 2")  # one passes, one fails whatever the run


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:  # loopback only
        return json.loads(response.read())


def _wait_ready(base: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + STARTUP_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"phoenix exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            time.sleep(0.5)
    raise RuntimeError(f"phoenix did not answer within {STARTUP_S:.0f}s: {log.read_text()[-2000:]}")


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Phoenix's base URL on loopback (its HTTP port takes OTLP at /v1/traces and serves the REST API)."""
    executable = os.environ.get("GAUGE_PHOENIX") or shutil.which("phoenix")
    if not executable:
        if os.environ.get("CI"):
            pytest.fail(f"Phoenix is not installed: .ci/run installs it ({INSTALL})")
        pytest.skip(f"Arize Phoenix is not installed ({INSTALL})")
    folder = tmp_path_factory.mktemp("phoenix")
    port = _free_port()
    env = {
        **os.environ,
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(_free_port()),
        "PHOENIX_WORKING_DIR": str(folder),
        "PHOENIX_TELEMETRY_ENABLED": "false",
        "PHOENIX_DISABLE_AGENT_ASSISTANT": "true",
    }
    log = folder / "phoenix.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([executable, "serve"], env=env, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(base, proc, log)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)


def _run(tmp: Path, phoenix: str, project: str, *flags: str) -> tuple[Path, str]:
    """The mini suite (its judge asked twice per case) run with two workers, exporting to Phoenix."""
    folder = tmp / project
    suite = folder / "suites" / "mini"
    shutil.copytree(DATA / "mini", suite)
    module = suite / "test_mini.py"
    text = module.read_text(encoding="utf-8")
    module.write_text(text.replace("sim=SimJudge(noise=0.15)", "sim=SimJudge(noise=0.15), repeats=2"))
    (folder / "pytest.ini").write_text(MINI_INI + PRICES, encoding="utf-8")
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": phoenix,
        "OTEL_RESOURCE_ATTRIBUTES": f"openinference.project.name={project}",  # Phoenix's project
        "TAOTOKEN_API_KEY": KEY,
    }
    gates = [arg for gate in GATES for arg in ("--gauge-gate", gate)]
    code, out = run_pytest_subprocess(folder, "-n", "2", "suites", *gates, *flags, env=env)
    assert code == 1, out  # the failing gate fails the run
    assert "OpenTelemetry: " in out and " sent to " in out, out
    return folder / "gauge-out" / "mini", out


def _spans(phoenix: str, project: str, expected: int) -> list[dict[str, Any]]:
    """Every span of the project, once Phoenix has written as many as the run sent."""
    deadline = time.monotonic() + INGEST_S
    while True:
        spans: list[dict[str, Any]] = []
        cursor = ""
        try:
            while True:
                page = _get(f"{phoenix}/v1/projects/{project}/spans?limit=1000{cursor}")
                spans += page["data"]
                if not page.get("next_cursor"):
                    break
                cursor = f"&cursor={page['next_cursor']}"
        except urllib.error.HTTPError as error:  # 404: the project is made with its first span written
            if error.code != 404 or time.monotonic() > deadline:
                raise
        if len(spans) >= expected or time.monotonic() > deadline:
            return spans
        time.sleep(0.5)


def _sent(out: str) -> int:
    line = next(line for line in out.splitlines() if "OpenTelemetry: " in line)
    return int(line.split("OpenTelemetry: ", 1)[1].split(" ", 1)[0])


def _named(spans: list[dict[str, Any]], prefix: str) -> list[dict[str, Any]]:
    return [s for s in spans if s["name"].startswith(prefix)]


def test_phoenix_receives_the_runs_spans_and_one_evaluation_per_verdict(phoenix: str, tmp_path: Path) -> None:
    out_dir, out = _run(tmp_path, phoenix, "gauge-default")
    spans = _spans(phoenix, "gauge-default", _sent(out))
    assert len(spans) == _sent(out)
    records = read_jsonl(out_dir / "pairs" / "pair_results.jsonl")
    ledger = read_jsonl(out_dir / "agent_runs.jsonl")
    manifest = json.loads((out_dir / "manifest.json").read_text(encoding="utf-8"))

    cases = {s["attributes"]["gauge.case_id"]: s for s in _named(spans, "gauge case ")}
    assert sorted(cases) == sorted(r["case_id"] for r in records) and len(cases) == 30
    calls = _named(spans, "chat ")
    assert sorted(s["attributes"]["gauge.call_id"] for s in calls) == sorted({r["call_id"] for r in ledger})
    for call in calls:
        attrs = call["attributes"]
        assert attrs["gen_ai.request.model"].startswith("sim-")
        assert attrs["gen_ai.usage.input_tokens"] > 0 and attrs["gen_ai.usage.output_tokens"] > 0
        assert attrs["gauge.cost_usd"] > 0 and attrs["gauge.latency_s"] >= 0 and attrs["gauge.retries"] == 0
    judge_calls = [c for c in calls if c["attributes"]["gauge.role"] == "judge"]
    assert {c["parent_id"] for c in judge_calls} <= {s["context"]["span_id"] for s in cases.values()}

    verdicts = 0
    for record in records:
        events = [e for e in cases[record["case_id"]]["events"] if e["name"] == "gen_ai.evaluation.result"]
        judgments = record["judgments"]
        assert len(events) == len(judgments) == 2  # one event per verdict: the judge asked twice
        for event, judgment in zip(events, judgments, strict=True):
            attrs = event["attributes"]
            assert attrs["gen_ai.evaluation.name"] == "pairwise_preference"
            assert attrs["gauge.judge.model"] == attrs["gen_ai.request.model"] == judgment["judge"]
            assert attrs["gauge.judge.repeat"] == judgment["repeat"]
            assert (
                attrs["gauge.blind_order"] == record["blind_order"]
                and attrs["gauge.order"] == record["order"]
            )
            assert attrs["gauge.judge.prompt_hash"] == manifest["hashes"]["judge_prompt"]
            assert attrs["gauge.reward.left"] == record["reward_left"]
            assert attrs["gauge.reward.right"] == record["reward_right"]
            assert attrs["gauge.verdict"] == judgment["choice"]
            assert "gen_ai.evaluation.explanation" not in attrs
        verdicts += len(events)
    assert verdicts == 60

    gates = {s["attributes"]["gauge.gate"]: s["attributes"] for s in _named(spans, "gauge gate ")}
    assert sorted(gates) == sorted(GATES)
    assert (gates["flip_rate <= 1"]["gauge.gate.outcome"], gates["flip_rate >= 2"]["gauge.gate.outcome"]) == (
        "passed",
        "failed",
    )
    for gate in gates.values():
        assert gate["gauge.gate.low"] <= gate["gauge.gate.value"] <= gate["gauge.gate.high"]

    blob = json.dumps(spans)
    assert KEY not in blob and KEY[:16] not in blob
    texts = [r["final_reply"] for f in (out_dir / "agents").glob("*.jsonl") for r in read_jsonl(f)]
    texts += [
        t["content"] for f in (out_dir / "agents").glob("*.jsonl") for r in read_jsonl(f) for t in r["turns"]
    ]
    texts += [r["judge_reason"] for r in records]
    leaked = [t for t in texts if len(t) >= 12 and t in blob]
    assert len(texts) > 50 and leaked == []
    assert "gen_ai.input.messages" not in blob

    content_dir, content_out = _run(tmp_path, phoenix, "gauge-content", "--gauge-otel-content")
    shown = json.dumps(_spans(phoenix, "gauge-content", _sent(content_out)))
    reasons = [r["judge_reason"] for r in read_jsonl(content_dir / "pairs" / "pair_results.jsonl")]
    assert all(json.dumps(reason)[1:-1] in shown for reason in reasons) and "gen_ai.input.messages" in shown
    assert KEY not in shown and KEY[:16] not in shown


def test_an_unreachable_collector_is_said_and_leaves_the_run_and_its_files_alone(tmp_path: Path) -> None:
    suite = tmp_path / "suites" / "mini"
    shutil.copytree(DATA / "mini", suite)
    (tmp_path / "pytest.ini").write_text(MINI_INI, encoding="utf-8")
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{_free_port()}",
        "OTEL_EXPORTER_OTLP_TIMEOUT": "1",
    }
    code, out = run_pytest_subprocess(tmp_path, "suites", "--gauge-out=with", env=env)
    assert code == 0, out
    assert "OpenTelemetry export to http://127.0.0.1:" in out and "failed for 116 of 116 spans" in out, out
    code, plain = run_pytest_subprocess(tmp_path, "suites", "--gauge-out=without")
    assert code == 0 and "OpenTelemetry" not in plain, plain
    for name in ("pairs/pair_results.jsonl", "reports/conclusion.md", "reports/pairwise_table.md"):
        with_otel = (tmp_path / "with" / "mini" / name).read_text(encoding="utf-8")
        assert with_otel == (tmp_path / "without" / "mini" / name).read_text(encoding="utf-8")
