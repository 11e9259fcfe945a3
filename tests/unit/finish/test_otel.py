"""The OpenTelemetry export's spans, built in memory with the SDK (the ``otel`` extra; the test extra has
it): one span per case with its calls as GenAI client spans, one ``gen_ai.evaluation.result`` event per
verdict, one span per gate, times from the ledger, and no key nor message text unless asked."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk.trace", reason="the otel extra (pip install -e '.[otel]')")

from pytest_gauge._internal.analysis.gates import GateResult, parse_gate
from pytest_gauge._internal.finish import otel_setup
from pytest_gauge._internal.finish.otel import EVALUATION_EVENT, SuiteTelemetry, build_spans
from pytest_gauge._internal.finish.otel_setup import OtelSettings, check_otel, otel_settings
from pytest_gauge._internal.records import CaseKey, CaseRecord, Judgment, LedgerRecord, SuiteMeta, Usage

KEY = "sk-fake-otel-key-4c9e2a71b0d3"
TEXT = "the customer's address is 12 Juniper Lane"  # message text: never exported by default
REASON = "Response B names the juniper address"
T0 = 1_800_000_000.0


def _meta() -> SuiteMeta:
    cases = (CaseKey("t1-x-vs-y-AB", "t1", "x", "y", "AB"), CaseKey("t1-x-vs-y-BA", "t1", "x", "y", "BA"))
    return SuiteMeta(
        name="demo", folder="/s", module_path="/s/test_demo.py", nodeid_prefix="s/test_demo.py",
        tasks_file="/s/tasks.jsonl", tasks=({"task_id": "t1", "category": "c", "task_prompt": TEXT},),
        categories={"t1": "c"}, agents=("x", "y"), pairs=(("x", "y"),),
        models={"agent:x": "mx", "agent:y": "my", "judge:0": "judge-a", "judge:1": "judge-b"},
        judge_models=("judge-a", "judge-b"), judge_repeats=1, judge_format="json_schema", user_max_turns=2,
        orders="both", samples=1, gates=(), tools=(), cases=cases, families={}, prompts={},
        selected=tuple(f"demo::{c.case_id}" for c in cases),
    )  # fmt: skip


def _call(work: str, role: str, model: str, ts: float, attempt: int = 1, status: str = "ok") -> LedgerRecord:
    ok = status == "ok"
    return LedgerRecord(
        run_id="r1", call_id=f"{work}#1", attempt=attempt, status=status, suite="demo", task_id="t1",
        role=role, model=model, strategy="single", work=work,  # type: ignore[arg-type]
        usage=Usage(100 + attempt, 20) if ok else None, usage_missing=False, latency_s=0.5,
        finish_reason="stop" if ok else None, cache_hit=False, cost=0.002 if ok else None,
        http_status=200 if ok else 429, error=None if ok else "rate limited", ts=ts,
        key_variable="TAOTOKEN_API_KEY",
    )  # fmt: skip


def _ledger() -> list[LedgerRecord]:
    return [
        _call("transcript/t1/x/0", "user_sim", "mu", T0 + 1),
        replace(_call("transcript/t1/x/0", "agent", "mx", T0 + 2), call_id="transcript/t1/x/0#2"),
        _call("transcript/t1/y/0", "agent", "my", T0 + 3),
        _call("judge/t1-x-vs-y-AB/0/0", "judge", "judge-a", T0 + 4, attempt=1, status="rate_limited"),
        _call("judge/t1-x-vs-y-AB/0/0", "judge", "judge-a", T0 + 5, attempt=2),
        _call("judge/t1-x-vs-y-AB/1/0", "judge", "judge-b", T0 + 6),
        _call("judge/t1-x-vs-y-BA/0/0", "judge", "judge-a", T0 + 7),
        _call("judge/t1-x-vs-y-BA/1/0", "judge", "judge-b", T0 + 8),
    ]


def _record(order: str, choices: tuple[str, str]) -> CaseRecord:
    blind = "A=left" if order == "AB" else "A=right"
    judgments = [
        Judgment(m, 0, c, 0.2, 0.9, REASON, raw=TEXT)  # type: ignore[arg-type]
        for m, c in zip(("judge-a", "judge-b"), choices, strict=True)
    ]
    return CaseRecord(
        suite="demo", case_id=f"t1-x-vs-y-{order}", pair_id="x-vs-y", task_id="t1", category="c",
        agent_left="x", agent_right="y", order=order, blind_order=blind, sample=0,  # type: ignore[arg-type]
        judge_choice=choices[0], reward_left=1.0, reward_right=0.25, selected_reward=0.25,  # type: ignore[arg-type]
        lower_reward_selected=True, task_success_left=True, task_success_right=False, user_sat_left=True,
        user_sat_right=None, input_tokens_incl_shared=500, output_tokens_incl_shared=90,
        est_cost_incl_shared=0.01, judge_reward_a=0.2,
        judge_reward_b=0.9, judge_reason=REASON, judge_raw=TEXT, judge_error=None, chars_left=40,
        chars_right=44, judgments=judgments,
    )  # fmt: skip


def _row(agent: str) -> dict[str, Any]:
    turns = [{"role": "user", "content": TEXT}, {"role": "assistant", "content": f"{TEXT} ({KEY})"}]
    return {
        "task_id": "t1",
        "agent": agent,
        "sample": 0,
        "turns": turns,
        "final_reply": TEXT,
        "ended_by": "done",
    }


def _suite() -> SuiteTelemetry:
    records = [_record("AB", ("B", "B")), _record("BA", ("A", "tie"))]
    gates = [
        GateResult(parse_gate("flip_rate <= 0.15"), "pass", 0.05, 0.0, 0.12, 2, "ok"),
        GateResult(parse_gate("win_rate(x, y) >= 0.9"), "fail", 0.5, 0.1, 0.8, 2, "too low"),
    ]
    manifest = {"run_id": "r1", "seed": 7, "backend": "sim", "hashes": {"judge_prompt": "abc123"}}
    return SuiteTelemetry(_meta(), records, _ledger(), {"x": [_row("x")], "y": [_row("y")]}, manifest, gates)


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, ...]]:
    monkeypatch.setenv("TAOTOKEN_API_KEY", KEY)
    yield build_spans([_suite()])


def _by_name(spans: tuple[Any, ...], prefix: str) -> list[Any]:
    return [s for s in spans if s.name.startswith(prefix)]


def _texts(spans: tuple[Any, ...]) -> list[str]:
    """Every attribute value of every span, event and link, and the resource's, as text."""
    out = []
    for span in spans:
        groups = [span.attributes, span.resource.attributes]
        groups += [e.attributes for e in span.events] + [link.attributes for link in span.links]
        out += [f"{k}={v}" for attrs in groups for k, v in (attrs or {}).items()]
        out.append(span.name)
    return out


def test_one_span_per_case_with_its_calls_as_genai_client_spans(spans: tuple[Any, ...]) -> None:
    (root,) = _by_name(spans, "gauge suite demo")
    cases = _by_name(spans, "gauge case ")
    assert sorted(c.attributes["gauge.case_id"] for c in cases) == ["t1-x-vs-y-AB", "t1-x-vs-y-BA"]
    assert {c.parent.span_id for c in cases} == {root.context.span_id}
    calls = _by_name(spans, "chat ")
    assert len(calls) == 7  # eight attempts, one retried call
    retried = next(c for c in calls if c.attributes["gauge.call_id"] == "judge/t1-x-vs-y-AB/0/0#1")
    assert retried.attributes["gauge.retries"] == 1
    assert retried.attributes["gen_ai.request.model"] == "judge-a"
    assert retried.attributes["gen_ai.operation.name"] == "chat"
    assert retried.attributes["gen_ai.usage.input_tokens"] == 102  # the answered attempt's usage
    assert retried.attributes["gen_ai.usage.output_tokens"] == 20
    assert retried.attributes["gauge.cost_usd"] == pytest.approx(0.002)
    assert retried.attributes["gauge.latency_s"] == pytest.approx(1.0)
    assert [e.name for e in retried.events] == ["gauge.retry"]
    assert retried.start_time == round((T0 + 3.5) * 1e9) and retried.end_time == round((T0 + 5) * 1e9)
    ab = next(c for c in cases if c.attributes["gauge.order"] == "AB")
    under_ab = [c for c in calls if c.parent.span_id == ab.context.span_id]
    assert sorted(c.attributes["gauge.call_id"] for c in under_ab) == [
        "judge/t1-x-vs-y-AB/0/0#1",
        "judge/t1-x-vs-y-AB/1/0#1",
    ]


def test_a_transcript_shared_by_two_cases_is_one_span_and_a_link(spans: tuple[Any, ...]) -> None:
    transcripts = _by_name(spans, "invoke_agent ")
    assert sorted(t.attributes["gen_ai.agent.name"] for t in transcripts) == ["x", "y"]
    cases = {c.attributes["gauge.order"]: c for c in _by_name(spans, "gauge case ")}
    assert {t.parent.span_id for t in transcripts} == {cases["AB"].context.span_id}
    assert {link.context.span_id for link in cases["BA"].links} == {t.context.span_id for t in transcripts}
    agent_calls = [c for c in _by_name(spans, "chat ") if c.attributes["gauge.role"] != "judge"]
    assert len(agent_calls) == 3 and {c.parent.span_id for c in agent_calls} <= {
        t.context.span_id for t in transcripts
    }


def test_one_evaluation_event_per_verdict_with_the_judge_order_hash_rewards(spans: tuple[Any, ...]) -> None:
    cases = {c.attributes["gauge.order"]: c for c in _by_name(spans, "gauge case ")}
    events = {o: [e for e in c.events if e.name == EVALUATION_EVENT] for o, c in cases.items()}
    assert [len(v) for v in events.values()] == [2, 2]
    first = events["AB"][0].attributes
    assert first["gen_ai.evaluation.name"] == "pairwise_preference"
    assert first["gen_ai.request.model"] == first["gauge.judge.model"] == "judge-a"
    assert first["gauge.blind_order"] == "A=left" and first["gauge.order"] == "AB"
    assert first["gauge.judge.prompt_hash"] == "abc123"
    assert (first["gauge.reward.left"], first["gauge.reward.right"]) == (1.0, 0.25)
    assert (first["gauge.verdict"], first["gen_ai.evaluation.score.label"]) == ("B", "right")
    assert first["gen_ai.evaluation.score.value"] == 0.0
    ba = [e.attributes for e in events["BA"]]  # A sat right: "A" prefers the right agent
    assert [(a["gauge.verdict"], a["gen_ai.evaluation.score.label"]) for a in ba] == [
        ("A", "right"),
        ("tie", "tie"),
    ]
    assert [a["gauge.judge.model"] for a in ba] == ["judge-a", "judge-b"]
    assert events["AB"][0].timestamp == round((T0 + 5) * 1e9)  # its judge call's end, not the export's clock


def test_one_span_per_gate_with_value_interval_and_outcome(spans: tuple[Any, ...]) -> None:
    gates = {g.attributes["gauge.gate"]: g for g in _by_name(spans, "gauge gate ")}
    assert len(gates) == 2
    passed = gates["flip_rate <= 0.15"].attributes
    assert (passed["gauge.gate.value"], passed["gauge.gate.low"], passed["gauge.gate.high"]) == (
        0.05,
        0.0,
        0.12,
    )
    assert passed["gauge.gate.outcome"] == "passed"
    failed = next(g for name, g in gates.items() if name.startswith("win_rate"))
    assert failed.attributes["gauge.gate.outcome"] == "failed"
    assert failed.status.status_code.name == "ERROR"


def test_no_key_and_no_message_text_by_default(spans: tuple[Any, ...]) -> None:
    texts = _texts(spans)
    assert len(texts) > 100
    assert not [t for t in texts if KEY in t or KEY[:12] in t]
    assert not [t for t in texts if "Juniper" in t or "juniper" in t]
    assert not [t for t in texts if "gen_ai.input.messages" in t or "gen_ai.evaluation.explanation" in t]


def test_content_adds_message_text_but_never_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TAOTOKEN_API_KEY", KEY)
    texts = _texts(build_spans([_suite()], content=True))
    assert [t for t in texts if t.startswith("gen_ai.evaluation.explanation=")] == [
        f"gen_ai.evaluation.explanation={REASON}"
    ] * 4
    assert sum("Juniper" in t for t in texts if t.startswith("gen_ai.input.messages=")) == 2
    assert not [t for t in texts if KEY in t or KEY[8:20] in t]


class _Config:
    """Stands in for pytest's config: the two flags as given, the ini keys off."""

    def __init__(self, **flags: bool) -> None:
        self.flags = flags

    def getoption(self, name: str, default: object = None) -> object:
        return self.flags.get(name, default)

    def getini(self, name: str) -> bool:
        return False


def test_the_export_is_on_with_the_flag_or_an_otlp_endpoint_and_the_extra() -> None:
    endpoint = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}
    assert otel_settings(_Config(), {}) is None  # type: ignore[arg-type]
    assert otel_settings(_Config(), endpoint) == OtelSettings()  # type: ignore[arg-type]
    assert otel_settings(_Config(), {**endpoint, "OTEL_SDK_DISABLED": "true"}) is None  # type: ignore[arg-type]
    flagged = _Config(gauge_otel=True, gauge_otel_content=True)
    assert otel_settings(flagged, {}) == OtelSettings(content=True)  # type: ignore[arg-type]


def test_the_flag_without_the_extra_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(otel_setup, "_MODULES", ("opentelemetry.sdk.not_a_module_here",))
    assert otel_settings(_Config(), {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}) is None  # type: ignore[arg-type]
    with pytest.raises(pytest.UsageError, match=r"pytest-gauge\[otel\]"):
        check_otel(_Config(gauge_otel=True))  # type: ignore[arg-type]
    check_otel(_Config())  # type: ignore[arg-type]  # not asked for: nothing to check


def test_the_trace_sums_to_the_ledger_and_cases_keep_their_footprint_apart(spans: tuple[Any, ...]) -> None:
    """Summing the GenAI usage and ``gauge.cost_usd`` over every span (what a tracing backend's totals do)
    gives the ledger's bill: each call counted once. A case's footprint, which counts its shared
    transcripts again, is on its span under ``gauge.*_incl_shared`` only."""
    ledger = _ledger()
    answered = {x.call_id: x for x in sorted(ledger, key=lambda x: x.attempt) if x.usage is not None}
    tokens = sum(s.attributes.get("gen_ai.usage.input_tokens") or 0 for s in spans)
    assert tokens == sum(x.usage.input_tokens for x in answered.values() if x.usage is not None)
    cost = sum(s.attributes.get("gauge.cost_usd") or 0.0 for s in spans)
    assert cost == pytest.approx(sum(x.cost or 0.0 for x in ledger))
    for case in _by_name(spans, "gauge case "):
        attrs = case.attributes
        assert (attrs["gauge.input_tokens_incl_shared"], attrs["gauge.output_tokens_incl_shared"]) == (
            500,
            90,
        )
        assert attrs["gauge.cost_usd_incl_shared"] == pytest.approx(0.01)
