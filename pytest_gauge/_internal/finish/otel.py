"""The run as OpenTelemetry spans (docs/reference.md#opentelemetry), made on the controller at the end of
the run, where every record, ledger line and gate outcome is at hand; sent over OTLP/HTTP.

Per suite, one trace: the suite's span; under it one span per case, holding its transcripts' spans
(``invoke_agent``) and its judge calls, each model call a span with the GenAI attributes (model, tokens,
cost, latency, retries) and each verdict a ``gen_ai.evaluation.result`` event on the case's span; and
one span per gate with its value, interval and outcome. Times come from the ledger (an attempt's ``ts``
and latency), never from the export's clock. No key ever (every text passes the key redactor), and no
message text unless ``--gauge-otel-content``. The SDK is imported here only: the plugin runs without it.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..analysis.gates import GateResult
from ..gateway.redact import known_secrets, redact_known
from ..gateway.wire import APIS, wire_format
from ..records import CaseRecord, Judgment, LedgerRecord, SuiteMeta
from ..records.work_key import WorkKey, parse_work
from ..version import __version__
from .otel_setup import OtelSettings
from .verdict import gate_outcome

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.trace import Span, SpanContext, Tracer

__all__ = ["EVALUATION_EVENT", "SuiteTelemetry", "build_spans", "export_run"]

EVALUATION_EVENT = "gen_ai.evaluation.result"
EVALUATION_NAME = "pairwise_preference"
_BATCH = 512  # spans per OTLP request


@dataclass(frozen=True)
class SuiteTelemetry:
    """One suite's end of the run, as the export reads it: the records, the suite's ledger lines, the
    transcript rows and manifest just written, and its gate results (none when deferred to merge)."""

    meta: SuiteMeta
    records: Sequence[CaseRecord]
    ledger: Sequence[LedgerRecord]
    transcripts: Mapping[str, Iterable[Mapping[str, Any]]]
    manifest: Mapping[str, Any]
    gates: Sequence[GateResult] = ()
    strict_skips: bool = False


@dataclass(frozen=True)
class _Call:
    """One model call: its attempts (a retried call has several ledger lines sharing ``call_id``)."""

    attempts: tuple[LedgerRecord, ...]

    @property
    def start(self) -> int:
        return min(_ns(r.ts - r.latency_s) for r in self.attempts)

    @property
    def end(self) -> int:
        return max(_ns(r.ts) for r in self.attempts)


def _ns(seconds: float) -> int:
    return round(seconds * 1e9)


class _Attrs:
    """Attribute maps without None, every text through the key redactor (no key leaves the run)."""

    def __init__(self) -> None:
        self.secrets = known_secrets()

    def __call__(self, values: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in values.items():
            if value is None:
                continue
            if isinstance(value, str):
                value = redact_known(value, self.secrets)
            elif isinstance(value, list | tuple):
                value = [redact_known(v, self.secrets) if isinstance(v, str) else v for v in value]
            out[key] = value
        return out


def _calls(ledger: Sequence[LedgerRecord]) -> dict[str, list[_Call]]:
    """The suite's calls grouped by the work they belong to, in ledger order."""
    by_id: dict[str, list[LedgerRecord]] = {}
    for record in ledger:
        by_id.setdefault(record.call_id, []).append(record)
    out: dict[str, list[_Call]] = {}
    for attempts in by_id.values():
        attempts.sort(key=lambda r: r.attempt)
        out.setdefault(attempts[0].work, []).append(_Call(tuple(attempts)))
    return out


def _call_attributes(call: _Call) -> dict[str, Any]:
    """The GenAI client span's attributes of one call (its last attempt's answer; cost and latency over
    every attempt)."""
    attempts = call.attempts
    last = attempts[-1]
    usage = next((r.usage for r in reversed(attempts) if r.usage is not None), None)
    costs = [r.cost for r in attempts if r.cost is not None]
    ok = last.status == "ok"
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": wire_format(last.api).provider if last.api in APIS else None,
        "gen_ai.request.model": last.model,
        "gen_ai.response.model": (last.served_model or last.model) if ok else None,
        "gen_ai.usage.input_tokens": usage.input_tokens if usage else None,
        "gen_ai.usage.output_tokens": usage.output_tokens if usage else None,
        "gen_ai.usage.cache_read.input_tokens": usage.cached_input_tokens if usage else None,
        "gen_ai.response.finish_reasons": [last.finish_reason] if last.finish_reason else None,
        "http.response.status_code": last.http_status,
        "error.type": None if ok else last.status,
        "gauge.role": last.role,
        "gauge.call_id": last.call_id,
        "gauge.api": last.api,
        "gauge.cost_usd": round(sum(costs), 9) if costs else None,
        "gauge.latency_s": round(sum(r.latency_s for r in attempts), 6),
        "gauge.retries": len(attempts) - 1,
        "gauge.cache_hit": last.cache_hit,
        "gauge.status": last.status,
        "gauge.gateway_retries": last.gateway_retries,
    }


def _retry_attributes(attempt: LedgerRecord) -> dict[str, Any]:
    """A ``gauge.retry`` event's attributes: an attempt the call did again."""
    return {
        "gauge.attempt": attempt.attempt,
        "gauge.status": attempt.status,
        "http.response.status_code": attempt.http_status,
        "gauge.retry_after_s": attempt.retry_after,
    }


def _case_attributes(record: CaseRecord) -> dict[str, Any]:
    """A case span's attributes: the pair, the orders, the verdict, the rule rewards, and the case's
    tokens and cost including its shared transcripts under ``gauge.*_incl_shared``, never under the
    GenAI usage names or ``gauge.cost_usd``: those sit on the call spans, whose sums are the bill."""
    return {
        "gauge.case_id": record.case_id,
        "gauge.task_id": record.task_id,
        "gauge.category": record.category,
        "gauge.agent.left": record.agent_left,
        "gauge.agent.right": record.agent_right,
        "gauge.order": record.order,
        "gauge.blind_order": record.blind_order,
        "gauge.sample": record.sample,
        "gauge.verdict": record.judge_choice,
        "gauge.preferred_agent": record.preferred_agent,
        "gauge.reward.left": record.reward_left,
        "gauge.reward.right": record.reward_right,
        "gauge.task_success.left": record.task_success_left,
        "gauge.task_success.right": record.task_success_right,
        "gauge.input_tokens_incl_shared": record.input_tokens_incl_shared,
        "gauge.output_tokens_incl_shared": record.output_tokens_incl_shared,
        "gauge.cost_usd_incl_shared": record.est_cost_incl_shared,
    }


def _messages(row: Mapping[str, Any]) -> dict[str, str]:
    """A transcript's text as the GenAI conventions' message attributes (``--gauge-otel-content`` only)."""
    turns = [
        {"role": t.get("role"), "parts": [{"type": "text", "content": t.get("content", "")}]}
        for t in row.get("turns") or []
    ]
    reply = [{"role": "assistant", "parts": [{"type": "text", "content": row.get("final_reply", "")}]}]
    return {"gen_ai.input.messages": json.dumps(turns), "gen_ai.output.messages": json.dumps(reply)}


def _verdicts(record: CaseRecord, meta: SuiteMeta) -> list[Judgment]:
    """Every verdict of the case: its judgments, or (one judge, one repeat) the record's own."""
    if record.judgments:
        return list(record.judgments)
    judge = meta.judge_models[0] if meta.judge_models else ""
    return [
        Judgment(
            judge, 0, record.judge_choice, record.judge_reward_a, record.judge_reward_b,
            record.judge_reason, record.judge_raw, record.judge_error, record.judge_response_format,
        )
    ]  # fmt: skip


def _left_score(record: CaseRecord, choice: str) -> tuple[float | None, str]:
    """The verdict as the left agent's score (1 preferred, 0.5 tie, 0 the right one preferred) and its
    label in agent terms (``left``, ``right``, ``tie``, ``error``), whatever the blind order."""
    if choice == "tie":
        return 0.5, "tie"
    if choice not in ("A", "B"):
        return None, "error"
    left = (choice == "A") == (record.blind_order == "A=left")
    return (1.0, "left") if left else (0.0, "right")


class _SuiteSpans:
    """One suite's trace, built with the tracer from the suite's values."""

    def __init__(self, tracer: Tracer, suite: SuiteTelemetry, attrs: _Attrs, content: bool) -> None:
        self.tracer, self.suite, self.attrs, self.content = tracer, suite, attrs, content
        self.calls = _calls(suite.ledger)
        self.rows = {
            str(WorkKey.transcript(r["task_id"], r["agent"], int(r["sample"]))): r
            for rows in suite.transcripts.values()
            for r in rows
        }
        self.shown: dict[str, SpanContext] = {}  # the transcripts already under a case
        self.done: set[str] = set()  # the works whose calls have their spans
        self.prompt_hash = (suite.manifest.get("hashes") or {}).get("judge_prompt")

    def window(self, works: Sequence[str], default: tuple[int, int]) -> tuple[int, int]:
        calls = [c for w in works for c in self.calls.get(w, [])]
        if not calls:
            return default
        return min(c.start for c in calls), max(c.end for c in calls)

    def start(self, name: str, parent: Span | None, when: int, values: Mapping[str, Any], **kw: Any) -> Span:
        from opentelemetry import trace  # deferred: the SDK is the otel extra's, imported by the export only

        context = trace.set_span_in_context(parent) if parent is not None else None
        return self.tracer.start_span(
            name, context=context, start_time=when, attributes=self.attrs(values), **kw
        )

    def call_spans(self, work: str, parent: Span) -> None:
        from opentelemetry.trace import SpanKind, Status, StatusCode  # deferred: the otel extra's SDK

        if work in self.done:
            return
        self.done.add(work)
        for call in self.calls.get(work, []):
            values = _call_attributes(call)
            span = self.start(
                f"chat {values['gen_ai.request.model']}", parent, call.start, values, kind=SpanKind.CLIENT
            )
            for retried in call.attempts[:-1]:
                span.add_event(
                    "gauge.retry", self.attrs(_retry_attributes(retried)), timestamp=_ns(retried.ts)
                )
            if values["error.type"] is not None:
                span.set_status(Status(StatusCode.ERROR))
            span.end(end_time=call.end)

    def transcript_span(
        self, work: str, side: str, parent: Span, default: tuple[int, int]
    ) -> SpanContext | None:
        """The transcript's span under the first case that judged it; later cases link to it instead."""
        if work in self.shown:
            return self.shown[work]
        key = parse_work(work)
        assert key is not None
        row = self.rows.get(work, {})
        begin, end = self.window([work], default)
        values: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": key.who,
            "gauge.task_id": key.owner,
            "gauge.sample": key.index,
            "gauge.side": side,
            "gauge.ended_by": row.get("ended_by"),
            "gauge.user_satisfied": row.get("user_satisfied"),
            "gauge.error": bool(row.get("error")) or None,
        }
        if self.content and row.get("turns") is not None:
            values.update(_messages(row))
        span = self.start(f"invoke_agent {key.who}", parent, begin, values)
        self.call_spans(work, span)
        span.end(end_time=end)
        self.shown[work] = span.get_span_context()
        return None

    def case_span(self, record: CaseRecord, parent: Span, default: tuple[int, int]) -> None:
        from opentelemetry.trace import Status, StatusCode  # deferred: the otel extra's SDK

        meta = self.suite.meta
        sides = {
            "left": str(WorkKey.transcript(record.task_id, record.agent_left, record.sample)),
            "right": str(WorkKey.transcript(record.task_id, record.agent_right, record.sample)),
        }
        judges = sorted(w for w in self.calls if w.startswith(f"judge/{record.case_id}/"))
        begin, end = self.window([*sides.values(), *judges], default)
        span = self.start(f"gauge case {record.case_id}", parent, begin, _case_attributes(record))
        for side, work in sides.items():
            earlier = self.transcript_span(work, side, span, (begin, begin))
            if earlier is not None:
                span.add_link(earlier, self.attrs({"gauge.side": side}))
        for work in judges:
            self.call_spans(work, span)
        for verdict in _verdicts(record, meta):
            span.add_event(
                EVALUATION_EVENT,
                self.attrs(self.verdict(record, verdict)),
                timestamp=self.verdict_time(record, verdict, end),
            )
        if record.judge_error:
            span.set_status(Status(StatusCode.ERROR))
        span.end(end_time=end)

    def verdict(self, record: CaseRecord, verdict: Judgment) -> dict[str, Any]:
        """A ``gen_ai.evaluation.result`` event's attributes: the judge's model, the A/B order, the judge
        prompt's hash, the rule rewards and the verdict (its reason with ``--gauge-otel-content`` only)."""
        score, label = _left_score(record, verdict.choice)
        return {
            "gen_ai.evaluation.name": EVALUATION_NAME,
            "gen_ai.evaluation.score.value": score,
            "gen_ai.evaluation.score.label": label,
            "gen_ai.evaluation.explanation": verdict.reason if self.content and verdict.reason else None,
            "gen_ai.request.model": verdict.judge,
            "error.type": "judge_error" if verdict.error else None,
            "gauge.judge.model": verdict.judge,
            "gauge.judge.repeat": verdict.repeat,
            "gauge.judge.prompt_hash": self.prompt_hash,
            "gauge.judge.response_format": verdict.response_format,
            "gauge.judge.reward_a": verdict.reward_a,
            "gauge.judge.reward_b": verdict.reward_b,
            "gauge.order": record.order,
            "gauge.blind_order": record.blind_order,
            "gauge.verdict": verdict.choice,
            "gauge.reward.left": record.reward_left,
            "gauge.reward.right": record.reward_right,
            "gauge.agent.left": record.agent_left,
            "gauge.agent.right": record.agent_right,
            "gauge.judge.error": verdict.error if self.content else None,
        }

    def verdict_time(self, record: CaseRecord, verdict: Judgment, default: int) -> int:
        """When the verdict came: the end of its judge call (judge index and repeat), else the case's end."""
        models = self.suite.meta.judge_models
        index = models.index(verdict.judge) if verdict.judge in models else 0
        work = str(WorkKey.judge(record.case_id, index, verdict.repeat))
        return self.window([work], (default, default))[1]

    def gate_span(self, result: GateResult, parent: Span, when: int) -> None:
        from opentelemetry.trace import Status, StatusCode  # deferred: the otel extra's SDK

        outcome, _ = gate_outcome(result, strict_skips=self.suite.strict_skips)
        gate = result.gate
        span = self.start(f"gauge gate {gate.canonical()}", parent, when, {
            "gauge.gate": gate.canonical(), "gauge.gate.status": result.status, "gauge.gate.outcome": outcome,
            "gauge.gate.value": result.value, "gauge.gate.low": result.low, "gauge.gate.high": result.high,
            "gauge.gate.op": gate.op, "gauge.gate.threshold": gate.threshold, "gauge.gate.n": result.n,
        })  # fmt: skip
        if outcome == "failed":
            span.set_status(Status(StatusCode.ERROR))
        span.end(end_time=when)

    def emit(self) -> None:
        suite, meta = self.suite, self.suite.meta
        every = [c for calls in self.calls.values() for c in calls]
        if every:
            begin, end = min(c.start for c in every), max(c.end for c in every)
        else:
            begin = end = _finished_ns(suite.manifest)
        root = self.start(f"gauge suite {meta.name}", None, begin, {
            "gauge.suite": meta.name, "gauge.run_id": suite.manifest.get("run_id"),
            "gauge.seed": suite.manifest.get("seed"), "gauge.backend": suite.manifest.get("backend"),
            "gauge.cases_selected": len(meta.selected), "gauge.cases_recorded": len(suite.records),
            "gauge.judge.prompt_hash": self.prompt_hash,
        })  # fmt: skip
        for record in suite.records:
            self.case_span(record, root, (begin, begin))
        for work in sorted(self.calls):  # calls of no recorded case (a case cut short, a selection)
            self.call_spans(work, root)
        for result in suite.gates:
            self.gate_span(result, root, end)
        root.end(end_time=end)


def _finished_ns(manifest: Mapping[str, Any]) -> int:
    """The manifest's ``finished_at`` (a suite with no call at all), else now."""
    try:
        when = datetime.strptime(str(manifest["finished_at"]), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        return round(when.timestamp()) * 10**9
    except (KeyError, ValueError):
        return time.time_ns()


def _resource(environ: Mapping[str, str]) -> Any:
    """The SDK's resource (``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``), named ``pytest-gauge``
    unless the environment names it."""
    from opentelemetry.sdk.resources import Resource  # deferred: the otel extra's SDK

    resource = Resource.create({"service.version": __version__})
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": "pytest-gauge"}))
    return resource


def build_spans(
    suites: Sequence[SuiteTelemetry], *, content: bool = False, environ: Mapping[str, str] = os.environ
) -> tuple[ReadableSpan, ...]:
    """Every suite's spans, finished, in memory (what :func:`export_run` sends)."""
    from opentelemetry.sdk.trace import TracerProvider  # deferred: the otel extra's SDK
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # deferred: the otel extra's SDK
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # deferred: the otel extra's SDK
        InMemorySpanExporter,
    )

    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=_resource(environ))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("pytest_gauge", __version__)
    attrs = _Attrs()
    for suite in suites:
        _SuiteSpans(tracer, suite, attrs, content).emit()
    provider.shutdown()
    return tuple(memory.get_finished_spans())


def _endpoint(environ: Mapping[str, str]) -> str:
    """Where the exporter sends traces, as the OTLP/HTTP exporter resolves it (for the summary line)."""
    if environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        return environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]
    base = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or "http://localhost:4318"
    return base.rstrip("/") + "/v1/traces"


def export_run(
    suites: Sequence[SuiteTelemetry], settings: OtelSettings, environ: Mapping[str, str] = os.environ
) -> str:
    """Send the run's spans over OTLP/HTTP; the summary line says how many went where, or that the
    export failed (the run's outcome does not depend on it)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # deferred: the otel extra's SDK
        OTLPSpanExporter,
    )
    from opentelemetry.sdk.trace.export import SpanExportResult  # deferred: the otel extra's SDK

    spans = build_spans(suites, content=settings.content, environ=environ)
    exporter = OTLPSpanExporter()
    failed = 0
    try:
        for start in range(0, len(spans), _BATCH):
            batch = spans[start : start + _BATCH]
            if exporter.export(batch) is not SpanExportResult.SUCCESS:
                failed += len(batch)
    finally:
        exporter.shutdown()
    where = _endpoint(environ)
    events = sum(1 for s in spans for e in s.events if e.name == EVALUATION_EVENT)
    if failed:
        return f"OpenTelemetry export to {where} failed for {failed} of {len(spans)} spans"
    return f"OpenTelemetry: {len(spans)} spans ({events} evaluations) sent to {where}"
