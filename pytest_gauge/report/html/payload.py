"""The HTML report's data: one JSON document per suite, built purely from :class:`.model.SuiteOutputs`.

Each transcript is stored once and referenced by index from every case that judged it; the ledger lines
are stored once and referenced by the transcript or case they belong to. Contents are redacted as the
judge saw them (agent and model names replaced by the caller's ``redact``), so the case view is blind
until the reader asks to reveal who was who. Volatile ledger fields (latency, timestamps, run and worker
ids, cache hits) are left out: the same seed gives the same document, cold cache or warm.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ...records import CaseRecord, LedgerRecord, Transcript
from .model import GateRow, RuleRow, SuiteOutputs, TranscriptRow

__all__ = ["PAYLOAD_VERSION", "build_payload", "driver_cases", "gate_rank"]

PAYLOAD_VERSION = 1
_STATUS_RANK = {"fail": 0, "inconclusive": 1, "pass": 2, "skipped": 3}
_GROUP = re.compile(r"^(?P<task>[^/]+)/(?P<who>[^#]+)#(?P<sample>\d+)(?::.*)?$")

TranscriptKey = tuple[str, str, int]
Redact = Callable[[str], str]


def gate_rank(status: str) -> int:
    """Failing gates first, then inconclusive, passing and skipped ones."""
    return _STATUS_RANK.get(status, 4)


def _rules(rows: tuple[RuleRow, ...]) -> list[list[Any]]:
    return [[r.rule, r.passed, r.detail, r.weight] for r in rows]


def _turns(t: Transcript, redact: Redact) -> list[dict[str, Any]]:
    codes = {c.id: c.return_code for c in t.tool_calls()}
    turns: list[dict[str, Any]] = []
    for turn in t.turns:
        item: dict[str, Any] = {"r": turn.role, "c": redact(turn.content)}
        if turn.tool_calls:
            item["calls"] = [
                {
                    "id": c.id,
                    "n": redact(c.name),
                    "a": redact(c.raw_arguments),
                    "rc": c.return_code,
                    "e": c.error,
                }
                for c in turn.tool_calls
            ]
        if turn.role == "tool":
            item["id"] = turn.tool_call_id
            item["rc"] = codes.get(turn.tool_call_id or "")
        turns.append(item)
    if not t.turns or t.turns[-1].role != "assistant":
        turns.append({"r": "assistant", "c": redact(t.final_reply), "final": True})
    return turns


def _transcript(row: TranscriptRow, task_index: dict[str, int], redact: Redact) -> dict[str, Any]:
    t = row.transcript
    return {
        "agent": row.agent,
        "t": task_index.get(row.task_id, -1),
        "s": row.sample,
        "turns": _turns(t, redact) if t is not None else [],
        "end": t.ended_by if t is not None else "error",
        "err": redact(row.error or (t.error if t is not None else None) or "") or None,
        "sat": t.user_satisfied if t is not None else None,
        "strategy": t.strategy if t is not None else "",
        "reward": row.reward,
        "ok": row.task_success,
        "crit": _rules(row.criteria),
        "cons": _rules(row.constraints),
        "tok": [row.input_tokens, row.output_tokens],
        "cost": row.cost,
        "lg": [],
    }


def _ledger_line(x: LedgerRecord) -> list[Any]:
    usage = x.usage
    return [
        x.call_id,
        x.attempt,
        x.status,
        x.role,
        x.model,
        usage.prompt_tokens if usage else None,
        usage.completion_tokens if usage else None,
        x.cost,
        x.finish_reason,
        x.error,
    ]


def _work_owner(work: str) -> tuple[str, str | TranscriptKey] | None:
    """``("case", case_id)`` for a judge call, ``("transcript", key)`` for a transcript's call."""
    kind, _, rest = work.partition("/")
    parts = rest.rsplit("/", 2)
    if kind == "judge" and len(parts) == 3:
        return "case", parts[0]
    if kind == "transcript" and len(parts) == 3 and parts[2].isdigit():
        return "transcript", (parts[0], parts[1], int(parts[2]))
    return None


def driver_cases(drivers: Sequence[str], records: Sequence[CaseRecord]) -> list[int]:
    """The sorted indices of the cases gate drivers name: a case id, a flip group ``task/pair#sample: ...``
    or a transcript ``task/agent#sample`` (every case that judged it)."""
    by_id = {r.case_id: i for i, r in enumerate(records)}
    by_group: dict[tuple[str, int], list[int]] = {}
    for i, r in enumerate(records):
        by_group.setdefault((r.task_id, r.sample), []).append(i)
    hits: set[int] = set()
    for driver in drivers:
        if driver in by_id:
            hits.add(by_id[driver])
            continue
        m = _GROUP.match(driver)
        if m is None:
            continue
        who = m["who"]
        for i in by_group.get((m["task"], int(m["sample"])), []):
            r = records[i]
            if who in (r.pair_id, r.agent_left, r.agent_right):
                hits.add(i)
    return sorted(hits)


def _gate(g: GateRow, records: Sequence[CaseRecord]) -> dict[str, Any]:
    return {
        "expr": g.expr,
        "status": g.status,
        "value": g.value,
        "low": g.low,
        "high": g.high,
        "n": g.n,
        "threshold": g.threshold,
        "message": g.message,
        "drivers": driver_cases(g.drivers, records),
    }


def _flip_groups(flipped: Sequence[str]) -> set[tuple[str, str, int]]:
    groups = set()
    for label in flipped:
        m = _GROUP.match(label)
        if m is not None:
            groups.add((m["task"], m["who"], int(m["sample"])))
    return groups


@dataclass(frozen=True)
class _Index:
    """Where each transcript, task and pair sits in the document, and the flipped (task, pair, sample)."""

    where: dict[TranscriptKey, int]
    tasks: dict[str, int]
    pairs: dict[str, int]
    flips: set[tuple[str, str, int]]


def _sat_but_failed(r: CaseRecord) -> bool:
    left = bool(r.user_sat_left) and not r.task_success_left
    return left or (bool(r.user_sat_right) and not r.task_success_right)


def _case(r: CaseRecord, ix: _Index, redact: Redact) -> dict[str, Any]:
    where = ix.where
    return {
        "id": r.case_id,
        "t": ix.tasks.get(r.task_id, -1),
        "cat": r.category,
        "p": ix.pairs[r.pair_id],
        "o": r.order,
        "ao": r.blind_order,
        "s": r.sample,
        "ch": r.judge_choice,
        "rl": r.reward_left,
        "rr": r.reward_right,
        "lrs": bool(r.lower_reward_selected),
        "flip": (r.task_id, r.pair_id, r.sample) in ix.flips,
        "err": r.judge_choice == "error",
        "sbf": _sat_but_failed(r),
        "tok": r.input_tokens + r.output_tokens,
        "cost": r.est_cost,
        "L": where.get((r.task_id, r.agent_left, r.sample), -1),
        "R": where.get((r.task_id, r.agent_right, r.sample), -1),
        "j": [r.judge_reward_a, r.judge_reward_b, redact(r.judge_reason), r.judge_raw, r.judge_error],
        "js": [
            [j.judge, j.repeat, j.choice, j.reward_a, j.reward_b, redact(j.reason), j.raw, j.error]
            for j in r.judgments
        ],
        "lg": [],
    }


def _link_ledger(
    ledger: Sequence[LedgerRecord],
    where: dict[TranscriptKey, int],
    cases: list[dict[str, Any]],
    transcripts: list[dict[str, Any]],
) -> None:
    """Each ledger line's index goes to the case (judge calls) or transcript (its dialogue) it belongs to."""
    by_case = {c["id"]: c for c in cases}
    for i, x in enumerate(ledger):
        owner = _work_owner(x.work)
        if owner is None:
            continue
        kind, key = owner
        if kind == "case" and isinstance(key, str) and key in by_case:
            by_case[key]["lg"].append(i)
        elif kind == "transcript" and isinstance(key, tuple) and key in where:
            transcripts[where[key]]["lg"].append(i)


def _keys(rows: Sequence[TranscriptRow]) -> list[TranscriptKey]:
    return [(t.task_id, t.agent, t.sample) for t in rows]


def build_payload(out: SuiteOutputs, redact: Redact) -> dict[str, Any]:
    """The report's JSON document (see the module docstring); pure and deterministic. ``redact`` hides
    the names of :func:`.model.redaction_names` as the judge's view does (the caller's Redactor)."""
    task_index = {t.task_id: i for i, t in enumerate(out.tasks)}
    pair_ids = sorted({r.pair_id for r in out.records})
    firsts = {r.pair_id: r for r in reversed(out.records)}
    transcripts = [_transcript(t, task_index, redact) for t in out.transcripts]
    ix = _Index(
        where={k: i for i, k in enumerate(_keys(out.transcripts))},
        tasks=task_index,
        pairs={pid: i for i, pid in enumerate(pair_ids)},
        flips=_flip_groups(out.flipped),
    )
    cases = [_case(r, ix, redact) for r in out.records]
    _link_ledger(out.ledger, ix.where, cases, transcripts)
    gates = sorted(out.gates, key=lambda g: gate_rank(g.status))
    return {
        "v": PAYLOAD_VERSION,
        "suite": out.name,
        "seed": out.seed,
        "backend": out.backend,
        "tasks": [[t.task_id, t.category, redact(t.prompt)] for t in out.tasks],
        "pairs": [
            [pid, firsts[pid].agent_left, firsts[pid].agent_right, out.pair_class.get(pid, "")]
            for pid in pair_ids
        ],
        "gates": [_gate(g, out.records) for g in gates],
        "metrics": [[m.name, m.value, m.low, m.high, m.n, m.method] for m in out.metrics],
        "costs": [[c.role, c.calls, c.attempts, c.input_tokens, c.output_tokens, c.cost] for c in out.costs],
        "total_cost": out.total_cost,
        "elo_svg": out.elo_svg,
        "transcripts": transcripts,
        "cases": cases,
        "ledger": [_ledger_line(x) for x in out.ledger],
    }
