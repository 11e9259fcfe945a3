"""A new user's first live run: the judge in JSON mode with a once-per-model fallback, gates
checked before any call, and (below) token detail, self-contained replay and doctor, all against the
loopback server."""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_gauge.analysis.gate_precheck import SuiteShape, check_gate
from pytest_gauge.analysis.gates import parse_gate
from pytest_gauge.cli import main, suite_targets
from pytest_gauge.gateway.endpoint import check_base_url, normalise_url
from pytest_gauge.gateway.errors import GatewayError, ReplayMiss
from pytest_gauge.gateway.prices import parse_price_lines, with_genai_prices
from pytest_gauge.gateway.wire.chat import chat_usage
from pytest_gauge.records import Usage
from pytest_gauge.records.prices import Price, PriceRow, PriceTable
from pytest_gauge.run.dialogue import ChatResult
from pytest_gauge.run.judge import JUDGE_SYSTEM_PROMPT
from pytest_gauge.run.judge_format import (
    JSON_OBJECT,
    JSON_SCHEMA,
    JudgeFormats,
    ask_judge,
    format_chain,
    rejects_format,
)
from pytest_gauge.suite.declare import Judge
from pytest_gauge.testing import FaultPlan, LoopbackServer
from pytest_gauge.testing.simserver import sim_responder
from tests.e2e import test_live
from tests.helpers import normalised, read_jsonl, run_inprocess

CASES = test_live.CASES
KEY = test_live.KEY
ROOT = Path(__file__).resolve().parents[2]
server = test_live.server  # the fixture: a loopback server answering like the sim, key and URL set


def live(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return run_inprocess(pytester, "suites", "--gauge-backend", "live", *args)


def judge_bodies(server: LoopbackServer) -> list[dict[str, object]]:
    return [b for b in server.bodies if b["messages"][0]["content"] == JUDGE_SYSTEM_PROMPT]


# ----- JSON mode ---------------------------------------------------------------------------------


def test_format_chain_and_the_fallback_happen_once_per_model() -> None:
    assert format_chain("auto") == (JSON_SCHEMA, JSON_OBJECT, None)
    assert format_chain("json_object") == (JSON_OBJECT, None)
    assert format_chain(None) == (None,)
    assert format_chain({"type": "json_object"}) == (JSON_OBJECT, None)
    with pytest.raises(ValueError, match="use 'auto'"):
        format_chain("yaml")
    refused = GatewayError(
        "400 Bad Request: 'response_format' of type 'json_schema' is not supported", "x", status=400
    )
    other = GatewayError("400 Bad Request: The model `m` does not exist", "x", status=400)
    assert rejects_format(refused) and not rejects_format(other)
    assert not rejects_format(GatewayError("503 response_format", "x", status=503))
    formats = JudgeFormats()
    chain = format_chain("auto")
    assert formats.reject("m", 0, chain, refused) == 1
    assert formats.reject("m", 0, chain, refused) == 1  # a concurrent call that also saw the 400
    assert formats.level("m") == 1 and formats.level("other") == 0
    assert formats.reject("m", 1, chain, refused) == 2
    assert formats.reject("m", 2, chain, refused) is None  # the prompt alone: nothing left to drop


def test_judge_asks_for_json_and_falls_back_once_when_the_gateway_refuses_the_schema(
    pytester: pytest.Pytester, server: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.faults = FaultPlan(reject_response_formats=frozenset({"json_schema"}))
    monkeypatch.setenv("TAOTOKEN_BASE_URL", server.base_url + "?api-version=2024-06-01")  # Azure-style
    result = live(pytester, "--gauge-cache", "off")
    assert {r.query for r in server.log} == {"api-version=2024-06-01"}  # kept on every request
    result.assert_outcomes(passed=CASES)
    judged = judge_bodies(server)
    kinds = [b["response_format"]["type"] for b in judged]  # type: ignore[index]
    assert kinds[0] == "json_schema" and kinds.count("json_schema") == 1  # refused once, never again
    assert kinds[1:] == ["json_object"] * CASES
    assert server.requests_by_status.get(400) == 1
    out = pytester.path / "gauge-out" / "mini"
    records = read_jsonl(out / "pairs" / "pair_results.jsonl")
    assert all(r["judge_choice"] != "error" for r in records)
    assert {r["judge_response_format"] for r in records} == {"json_object"}
    note = "judge model sim-judge: the gateway refused response_format json_schema"
    assert note in (out / "reports" / "conclusion.md").read_text(encoding="utf-8")
    assert note in result.stdout.str()


def test_a_replayed_judge_finds_a_recording_that_fell_back_without_lowering_the_run() -> None:
    """On replay a miss with json_schema may be a recording made after a fallback: the next formats are
    looked up, and nothing is remembered (a real miss must not change how other verdicts are asked)."""
    sent: list[str | None] = []

    async def caller(role: str, model: str, messages: list[dict[str, Any]], **kw: Any) -> ChatResult:
        fmt = kw.get("response_format")
        sent.append(fmt["type"] if fmt else None)
        if fmt is not None and fmt["type"] == "json_schema":
            raise ReplayMiss("no recorded response", "record it", role=role, model=model)
        return ChatResult('{"winner": "A"}', (), "stop")

    formats = JudgeFormats()
    result, label = asyncio.run(ask_judge(formats, Judge("m"), caller, "m", []))
    assert (label, sent, result.content) == ("json_object", ["json_schema", "json_object"], '{"winner": "A"}')
    assert formats.level("m") == 0  # the next verdict is asked with json_schema first again
    with pytest.raises(ReplayMiss):
        asyncio.run(ask_judge(formats, Judge("m", response_format="json_schema"), _always_miss, "m", []))


async def _always_miss(role: str, model: str, messages: list[dict[str, Any]], **kw: Any) -> ChatResult:
    raise ReplayMiss("no recorded response", "record it", role=role, model=model)


# ----- gates at collection -----------------------------------------------------------------------


SHAPE = SuiteShape(
    "mini",
    agents=("agent_x", "agent_y", "solver", "solver@bo4"),
    pairs=(("agent_x", "agent_y"), ("solver", "solver@bo4")),
    tiers=("solver", "solver@bo4"),
    judges=("sim-judge",),
)


@pytest.mark.parametrize(
    ("gate", "problem"),
    [
        ("flip_rte <= 0.2", "unknown metric 'flip_rte'; did you mean 'flip_rate'?"),
        ("elo(agnet_x) >= 1000", "unknown agent 'agnet_x'; did you mean 'agent_x'?"),
        ("delta_elo(agent_x) >= 0", "unknown agent in a compute family"),
        ("flip_rate(agent_x, solver) <= 0.2", "not a declared pair"),
        ("lrs(clos) <= 0.2", "unknown class 'clos'; did you mean 'close'?"),
        ("success_rate(agent_x, agent_y) >= 0.5", "wrong number of arguments"),
        ("upper(lrs_close - lrs(agent_y, agent_x)) <= 0.5", None),
        ("lower(elo(solver@bo4) - elo(solver)) >= -20", None),
        ("judge_accuracy(sim-judge, close) >= 0.8", None),
        ("elo_per_1k_tokens(solver@bo4) >= 1", None),
        ("lower(delta(success_rate(agent_x))) >= -0.05", None),
        ("delta(success_rate(agent_q)) >= 0", "unknown agent 'agent_q'"),
    ],
)
def test_gates_are_checked_against_the_suite(gate: str, problem: str | None) -> None:
    found = check_gate(parse_gate(gate), SHAPE)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found


def test_bad_gates_are_a_usage_error_before_any_request(
    pytester: pytest.Pytester, server: LoopbackServer
) -> None:
    """A misspelt metric, an unknown agent in elo(...) and a missing number: all named, nothing sent."""
    suite_file = pytester.path / "suites" / "mini" / "test_mini.py"
    text = suite_file.read_text(encoding="utf-8")
    gates = ["flip_rte <= 0.2", "elo(agent_q) >= 1000", "flip_rate <="]
    suite_file.write_text(
        text.replace("suite = Suite(\n", f"suite = Suite(\n    gates={gates!r},\n"), "utf-8"
    )
    result = live(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    for shown in ("did you mean 'flip_rate'", "elo(agent_q): unknown agent 'agent_q'", "expected a number"):
        assert "suite mini: " in err and shown in err
    assert server.requests_total == 0


# ----- token detail and prices -------------------------------------------------------------------


def test_usage_keeps_cached_and_reasoning_tokens_and_the_cached_price_applies() -> None:
    api = {
        "prompt_tokens": 1000,
        "completion_tokens": 200,
        "total_tokens": 1200,
        "prompt_tokens_details": {"cached_tokens": 600},
        "completion_tokens_details": {"reasoning_tokens": 50},
    }
    usage = chat_usage(api)
    assert (usage.cached_tokens, usage.reasoning_tokens) == (600, 50)
    assert (usage.input_tokens, usage.prompt_tokens, usage.total_tokens) == (400, 1000, 1200)
    assert chat_usage({"prompt_tokens": 3}) == Usage(3, 0, None, None, None, None)
    assert (usage + Usage(1, 1)).cached_tokens == 600
    table = PriceTable.from_rows((("m", 2.0, 8.0, 0.5, "ini gauge_prices"), ("plain", 2.0, 8.0)))
    # 400 fresh input at $2/M + 600 cached at $0.5/M + 200 output at $8/M
    assert table.usage_cost("m", usage) == pytest.approx(400 * 2e-6 + 600 * 0.5e-6 + 200 * 8e-6)
    assert table.usage_cost("plain", usage) == pytest.approx(1000 * 2e-6 + 200 * 8e-6)  # no cached price
    assert table.usage_cost("unpriced", usage) is None  # unknown, never 0
    rows = parse_price_lines(["m 2 8 0.5", "n 1 2"])
    assert rows == [("m", 2.0, 8.0, 0.5, "ini gauge_prices"), ("n", 1.0, 2.0, None, "ini gauge_prices")]
    with pytest.raises(pytest.UsageError, match="CACHED_INPUT_PER_M"):
        parse_price_lines(["m 1 2 3 4"])


# ----- self-contained replay ---------------------------------------------------------------------

MODEL_VARIABLES = {
    '"sim-agent-x"': ("GAUGE_AGENT_X_MODEL", "live-x"),
    '"sim-agent-y"': ("GAUGE_AGENT_Y_MODEL", "live-y"),
    '"sim-agent-z"': ("GAUGE_AGENT_Z_MODEL", "live-z"),
    'Judge("sim-judge"': ("TAOTOKEN_JUDGE_MODEL", "live-judge"),
    'UserSimulator("sim-user"': ("GAUGE_USER_MODEL", "live-user"),
}
PRICES = "gauge_prices =\n" + "".join(f"    {model} 1 4 0.25\n" for _var, model in MODEL_VARIABLES.values())
SAME_REPORTS = ("pairwise_table.md", "conclusion.md", "elo.md", "elo.json", "elo.svg")
STABLE_LEDGER = ("call_id", "attempt", "status", "role", "model", "work", "usage", "cost", "request")


@pytest.fixture
def env_suite(mini_suite: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopbackServer]:
    """The mini suite reading its models from the environment (as a user's suite does), served live."""
    module = mini_suite / "test_mini.py"
    text = module.read_text(encoding="utf-8").replace("import Judge,", "import Judge, env_model,")
    for literal, (variable, model) in MODEL_VARIABLES.items():
        default = literal.split('"')[1]
        text = text.replace(f'"{default}"', f'env_model("{variable}", "{default}")')
        monkeypatch.setenv(variable, model)
    module.write_text(text, encoding="utf-8")
    (mini_suite.parent.parent / "pytest.ini").write_text(
        f"[pytest]\ngauge_backend = sim\ngauge_seed = 7\n{PRICES}", encoding="utf-8"
    )
    srv = LoopbackServer(sim_responder(module, seed=7), faults=FaultPlan(cached_tokens=10)).start()
    monkeypatch.setenv("TAOTOKEN_API_KEY", KEY)
    monkeypatch.setenv("TAOTOKEN_BASE_URL", srv.base_url)
    yield srv
    srv.stop()


def clean_env_pytest(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """pytest in an environment with no TAOTOKEN_* and no model variable (``env -i PATH HOME``), this
    checkout first on the path."""
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", str(folder)), "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "pytest", "suites", "-p", "no:cacheprovider", *args]
    return subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=300)


def without(path: Path, key: str) -> object:
    data = json.loads(path.read_text(encoding="utf-8"))
    data.pop(key, None)
    data.pop("volatile", None)  # latencies (docs/protocol.md#volatile-fields)
    return data


@pytest.mark.slow
def test_cassettes_replay_without_the_recording_environment(
    pytester: pytest.Pytester, env_suite: LoopbackServer
) -> None:
    live(pytester, "--gauge-out", "rec").assert_outcomes(passed=CASES)
    sent = env_suite.requests_total
    rec = pytester.path / "rec" / "mini"
    # token detail: the server reported 10 cached prompt tokens; they cost the cached-input price
    ledger = read_jsonl(rec / "agent_runs.jsonl")
    line = next(r for r in ledger if r["role"] == "judge")
    usage = line["usage"]
    assert usage["cached_input_tokens"] == 10 and usage["reasoning_tokens"] is None
    assert usage["raw"]["prompt_tokens"] == usage["input_tokens"] + 10  # Chat counts cached inside prompt
    fresh = usage["input_tokens"]  # the ledger's input is the uncached part
    assert line["cost"] == pytest.approx(fresh * 1e-6 + 10 * 0.25e-6 + usage["output_tokens"] * 4e-6)
    assert "(ini gauge_prices)" in (rec / "reports" / "token_cost.md").read_text(encoding="utf-8")

    export = io.StringIO()
    args = ["cassettes", "export", "--suite", "mini", "--to", "cass", "--out", "rec"]
    assert main(args, environ={}, out=export, err=io.StringIO()) == 0
    assert "exported" in export.getvalue()
    recording = json.loads((pytester.path / "cass" / "recording.json").read_text(encoding="utf-8"))
    entry = recording["suites"]["mini"]
    assert entry["models"]["agent:agent_x"] == "live-x" and entry["gateway"].startswith("http://127.0.0.1:")

    replay = clean_env_pytest(pytester.path, "--gauge-backend=replay", "--gauge-cassettes", "cass",
                              "--gauge-out", "rep")  # fmt: skip
    assert replay.returncode == 0, replay.stdout[-3000:] + replay.stderr[-2000:]
    assert env_suite.requests_total == sent  # nothing reached the gateway
    rep = pytester.path / "rep" / "mini"
    for name in ("pairs/pair_results.jsonl", "tasks.jsonl"):
        assert (rep / name).read_bytes() == (rec / name).read_bytes(), name
    for name in (f"agents/agent_{a}.jsonl" for a in "xyz"):  # tool latencies are measured again
        assert normalised(read_jsonl(rep / name)) == normalised(read_jsonl(rec / name)), name
    for name in SAME_REPORTS:
        assert (rep / "reports" / name).read_bytes() == (rec / "reports" / name).read_bytes(), name
    # what this run spent differs by design (live calls there, cassettes here); every other number not
    split = "## Spent this run"
    token_cost = [
        (d / "reports" / "token_cost.md").read_text(encoding="utf-8").split(split)[0] for d in (rec, rep)
    ]
    assert token_cost[0] == token_cost[1]
    assert without(rep / "reports" / "metrics.json", "spent_this_run") == without(
        rec / "reports" / "metrics.json", "spent_this_run"
    )
    stable = [
        [{k: r[k] for k in STABLE_LEDGER} for r in read_jsonl(d / "agent_runs.jsonl")] for d in (rec, rep)
    ]
    assert stable[0] == stable[1]

    tasks = pytester.path / "suites" / "mini" / "tasks.jsonl"
    tasks.write_text(tasks.read_text(encoding="utf-8").replace("Book me a table", "Book us a table"), "utf-8")
    changed = clean_env_pytest(pytester.path, "--gauge-backend=replay", "--gauge-cassettes", "cass",
                               "--gauge-out", "rep2")  # fmt: skip
    assert changed.returncode == 1
    assert "replay: 6 case(s) of suite mini had requests with no recorded response (m02-" in changed.stdout
    assert "changed task" in changed.stdout
    assert env_suite.requests_total == sent


# ----- doctor checks what will run -----------------------------------------------------------------


def test_doctor_sends_one_request_per_role_and_model_of_the_collected_suites() -> None:
    # the model suites only: program_agents needs the claude and codex CLIs (its own doctor test)
    folders = [p for p in sorted((ROOT / "eval_suites").iterdir()) if list(p.glob("test_*.py"))]
    paths = [str(p) for p in folders if p.name != "program_agents"]
    assert len(paths) >= 3
    targets = suite_targets(paths)
    pairs = {(t.roles.split(" ")[0], t.model) for t in targets}
    assert len(pairs) == len(targets) >= 4 and {role for role, _ in pairs} == {"agent", "user_sim", "judge"}
    judges = [t for t in targets if t.roles.startswith("judge")]
    with LoopbackServer(faults=FaultPlan(reject_response_formats=frozenset({"json_schema"}))) as srv:
        env = {"TAOTOKEN_API_KEY": KEY, "TAOTOKEN_BASE_URL": srv.base_url}
        out = io.StringIO()
        status = main(["doctor", *paths], environ=env, out=out, err=io.StringIO())
        bodies = [b for b in srv.bodies if "messages" in b]
    report = out.getvalue()
    assert status == 0, report
    # one request per distinct (role, model), plus the refused json_schema try of each judge model
    assert len(bodies) == len(targets) + len(judges)
    sent = [(b["model"], (b.get("response_format") or {}).get("type")) for b in bodies]
    for judge in judges:
        assert sent.count((judge.model, "json_schema")) == 1 and sent.count((judge.model, "json_object")) == 1
    assert "response_format json_schema refused" in report and KEY not in report


@pytest.mark.parametrize(
    ("url", "kept", "refused"),
    [
        ("https://x.test/openai?api-version=2024-06-01", (("api-version", "2024-06-01"),), ()),
        ("https://x.test/v1?utm_source=mail&api-version=1", (("api-version", "1"),), ("utm_source",)),
        ("https://x.test/v1?gclid=abc", (), ("gclid",)),
    ],
)
def test_gateway_query_parameters_are_kept_and_tracking_ones_refused(
    url: str, kept: tuple[tuple[str, str], ...], refused: tuple[str, ...]
) -> None:
    check = check_base_url(url)
    assert check.query == kept and "?" not in check.url
    assert bool(check.errors) == bool(refused)
    for name in refused:
        assert name in check.errors[0] and check.full_url in check.errors[0]  # the fix keeps api-version
    assert ("?api-version" in normalise_url(check.url, check.query)) == bool(kept)


# ----- every failing gate names its cases; Elo files always; the progress counter ---------------------


def with_suite_args(mini_suite: Path, text: str) -> None:
    module = mini_suite / "test_mini.py"
    module.write_text(
        module.read_text(encoding="utf-8").replace("suite = Suite(\n", f"suite = Suite(\n{text}")
    )


def test_failing_gates_name_their_cases_and_progress_stays_within_100(
    pytester: pytest.Pytester, mini_suite: Path
) -> None:
    gates = ["position_bias <= 0.01", "success_rate(agent_z) >= 0.99", "elo(agent_z) >= 2000"]
    with_suite_args(mini_suite, f"    gates={gates!r},\n")
    result = run_inprocess(pytester, "suites")
    result.assert_outcomes(passed=CASES, failed=3)
    out = result.stdout.str()
    percents = [int(p) for p in re.findall(r"\[\s*(\d+)%\]", out)]
    assert percents and max(percents) == 100  # gate entries were counted from the start
    metrics = json.loads((pytester.path / "gauge-out" / "mini" / "reports" / "metrics.json").read_text())
    messages = {g["expr"]: g["message"] for g in metrics["gates"]}
    assert re.search(r"driven by: m0\d-agent_", messages["position_bias <= 0.01"])  # slot-A verdicts
    assert "/agent_z#0 failed" in messages["success_rate(agent_z) >= 0.99"]
    assert re.search(r"driven by: m0\d \(Elo \d+\)", messages["elo(agent_z) >= 2000"])  # worst tasks


def test_elo_files_are_written_when_every_verdict_is_an_error(
    pytester: pytest.Pytester, mini_suite: Path
) -> None:
    module = mini_suite / "test_mini.py"
    text = module.read_text(encoding="utf-8").replace(
        "SimJudge(noise=0.15)", "SimJudge(noise=0.15, error_rate=1.0)"
    )
    module.write_text(text, encoding="utf-8")
    result = run_inprocess(pytester, "suites")
    result.assert_outcomes(failed=CASES)
    reports = pytester.path / "gauge-out" / "mini" / "reports"
    assert "No Elo scale could be fitted: every verdict is an error (30 of 30 cases)" in (
        reports / "elo.md"
    ).read_text(encoding="utf-8")
    assert json.loads((reports / "elo.json").read_text(encoding="utf-8"))["fitted"] is False
    assert "No Elo scale could be fitted" in (reports / "elo.svg").read_text(encoding="utf-8")


def test_genai_prices_fill_in_unconfigured_models_and_name_their_source() -> None:
    pytest.importorskip("genai_prices")
    configured: tuple[PriceRow, ...] = (("gpt-4o", 1.0, 2.0, None, "ini gauge_prices"),)
    rows = with_genai_prices(configured, ["gpt-4o", "gpt-4o-mini", "nope-x"])
    table = PriceTable.from_rows(rows)
    assert table.price("gpt-4o") == Price(1.0, 2.0, None, "ini gauge_prices")  # configured prices win
    mini = table.price("gpt-4o-mini")
    assert mini is not None and mini.source.startswith("genai-prices ") and "gpt-4o-mini" in mini.source
    assert mini.cached_input is not None and 0 < mini.cached_input < mini.input < mini.output
    assert table.price("nope-x") is None  # unknown to the package: still unknown, never 0
    window = table.context_tokens("gpt-4o-mini")  # the package's context_window: the judge's, when unset
    assert window is not None and window >= 16_000 and table.context_tokens("gpt-4o") is None
