"""The HTML report's data: one JSON document per suite, built purely from :class:`.model.SuiteOutputs`.

Each transcript is stored once and referenced by index from every case that judged it; the ledger lines
are stored once and referenced by the transcript or case they belong to. Contents are redacted as the
judge saw them (agent and model names replaced by the caller's ``redact``), so the case view is blind
until the reader asks to reveal who was who. Volatile ledger fields (latency, timestamps, run and worker
ids, cache hits) are left out: the same seed gives the same document, cold cache or warm.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...analysis.metric_table import SUITE_METRICS
from ...records import CaseRecord, LedgerRecord, Transcript
from ...records.html import GateRow, RuleRow, SuiteOutputs, TranscriptRow
from ...records.labels import case_transcripts, seen_text
from ...records.work_key import parse_work

__all__ = ["PAGE_TRANSCRIPT_CHARS", "PAYLOAD_VERSION", "build_payload", "driver_cases", "gate_rank"]

PAYLOAD_VERSION = 1
PAGE_TRANSCRIPT_CHARS = 100_000
"""The most characters of one transcript's text (turns, tool arguments) the page embeds; the rest is cut
with a marker and the case view links the transcript's line of ``agents/<agent>.jsonl``, which has it all."""
_STATUS_RANK = {"fail": 0, "inconclusive": 1, "pass": 2, "skipped": 3}

TranscriptKey = tuple[str, str, int]
Redact = Callable[[str], str]


def gate_rank(status: str) -> int:
    """Failing gates first, then inconclusive, passing and skipped ones."""
    return _STATUS_RANK.get(status, 4)


def _rules(rows: tuple[RuleRow, ...]) -> list[list[Any]]:
    return [[r.rule, r.passed, r.detail, r.weight] for r in rows]


class _Budget:
    """What is left of one transcript's characters on the page (:data:`PAGE_TRANSCRIPT_CHARS`); a text
    past it is cut with a marker, and ``cut`` counts what the page left out (the JSONL file has it all)."""

    def __init__(self, limit: int) -> None:
        self.left = limit
        self.cut = 0

    def __call__(self, text: str) -> str:
        if len(text) <= self.left:
            self.left -= len(text)
            return text
        kept, self.left = text[: self.left], 0
        self.cut += len(text) - len(kept)
        return f"{kept}\n[... {len(text) - len(kept):,} more characters not on this page]"


def _turns(t: Transcript, redact: Redact, fit: _Budget) -> list[dict[str, Any]]:
    codes = {c.id: c.return_code for c in t.tool_calls()}
    turns: list[dict[str, Any]] = []
    for turn in t.turns:
        item: dict[str, Any] = {"c": fit(redact(turn.content))}  # keys in sorted order: see build_payload
        if turn.tool_calls:
            item["calls"] = [
                {
                    "a": fit(redact(c.raw_arguments)),
                    "e": c.error,
                    "id": c.id,
                    "n": redact(c.name),
                    "rc": c.return_code,
                }
                for c in turn.tool_calls
            ]
        if turn.empty:  # a turn with nothing said: flagged in the case view
            item["empty"] = True
        if turn.role == "tool":
            item["id"] = turn.tool_call_id
        item["r"] = turn.role
        if turn.role == "tool":
            item["rc"] = codes.get(turn.tool_call_id or "")
        turns.append(item)
    if not t.turns or t.turns[-1].role != "assistant":
        turns.append({"c": fit(redact(t.final_reply)), "final": True, "r": "assistant"})
    return turns


def _transcript(row: TranscriptRow, task_index: dict[str, int], redact: Redact, line: int) -> dict[str, Any]:
    t = row.transcript
    fit = _Budget(PAGE_TRANSCRIPT_CHARS)
    doc = {  # keys in sorted order: see build_payload
        "agent": row.agent,
        "cons": _rules(row.constraints),
        "cost": row.cost,
        "crit": _rules(row.criteria),
        "end": t.ended_by if t is not None else "error",
        "err": redact(row.error or (t.error if t is not None else None) or "") or None,
        "lg": [],
        "ok": row.task_success,
        "reward": row.reward,
        "s": row.sample,
        "sat": t.user_satisfied if t is not None else None,
        "strategy": t.strategy if t is not None else "",
        "t": task_index.get(row.task_id, -1),
        "tok": [row.input_tokens, row.output_tokens],
        "turns": _turns(t, redact, fit) if t is not None else [],
    }
    if fit.cut:  # where the rest is: the transcript's line of its agents/<agent>.jsonl
        doc |= {"cut": fit.cut, "src": f"../agents/{row.agent}.jsonl", "line": line}
        doc = dict(sorted(doc.items()))
    return doc


def _ledger_line(x: LedgerRecord, cache: bool = False) -> list[Any]:
    """One ledger line of the page; with ``cache`` (some call of the suite read or wrote the provider's
    prompt cache) its cache reads and writes last, so a page without any keeps its bytes."""
    usage = x.usage
    line = [
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
        x.usage_missing,
    ]
    if cache:
        line += [usage.cached_input_tokens, usage.cache_write_tokens] if usage else [None, None]
    return line


def _caching(ledger: Sequence[LedgerRecord]) -> bool:
    """Whether a call of the ledger read from or wrote to the provider's prompt cache."""
    return any(x.usage and (x.usage.cached_input_tokens or x.usage.cache_write_tokens) for x in ledger)


def _work_owner(work: str) -> tuple[str, str | TranscriptKey] | None:
    """``("case", case_id)`` for a judge call, ``("transcript", key)`` for a transcript's call."""
    key = parse_work(work)
    if key is None:
        return None
    if key.kind == "judge":
        return "case", key.owner
    return "transcript", (key.owner, key.who, key.index)


def driver_cases(case_ids: Sequence[str], records: Sequence[CaseRecord]) -> list[int]:
    """The sorted indices of the cases a gate's drivers name (``metrics.json``'s ``driver_cases``)."""
    return _case_indices(case_ids, {r.case_id: i for i, r in enumerate(records)})


def _case_indices(case_ids: Sequence[str], by_id: dict[str, int]) -> list[int]:
    return sorted({by_id[c] for c in case_ids if c in by_id})


def _gate(g: GateRow, by_id: dict[str, int]) -> dict[str, Any]:
    return {  # keys in sorted order: see build_payload
        "drivers": _case_indices(g.driver_cases, by_id),
        "expr": g.expr,
        "high": g.high,
        "low": g.low,
        "message": g.message,
        "n": g.n,
        "repeats": None if g.reproducibility is None else list(g.reproducibility),
        "status": g.status,
        "threshold": g.threshold,
        "value": g.value,
    }


@dataclass(frozen=True)
class _Index:
    """Where each transcript, task and pair sits in the document, and the flipped (task, pair, sample)."""

    where: dict[TranscriptKey, int]
    tasks: dict[str, int]
    pairs: dict[str, int]
    flips: set[tuple[str, str, int]]
    hashes: dict[str, str]  # each case's transcripts hash, which its exported labels carry


def _case_hashes(out: SuiteOutputs) -> dict[str, str]:
    """Each case's :func:`~pytest_gauge._internal.records.labels.transcripts_hash`, as the end of the run
    makes it."""
    seen = {
        (t.task_id, t.agent, t.sample): seen_text(t.transcript.to_json())
        for t in out.transcripts
        if t.transcript
    }
    cases = ((r.case_id, r.task_id, r.agent_left, r.agent_right, r.sample) for r in out.records)
    return case_transcripts(cases, seen)


def _sat_but_failed(r: CaseRecord) -> bool:
    left = bool(r.user_sat_left) and not r.task_success_left
    return left or (bool(r.user_sat_right) and not r.task_success_right)


def _case(r: CaseRecord, ix: _Index, redact: Redact) -> dict[str, Any]:
    where = ix.where
    return {  # keys in sorted order (capitals first): see build_payload
        "L": where.get((r.task_id, r.agent_left, r.sample), -1),
        "R": where.get((r.task_id, r.agent_right, r.sample), -1),
        "ao": r.blind_order,
        "cat": r.category,
        "ch": r.judge_choice,
        "cost": r.est_cost_incl_shared,
        "err": r.judge_choice == "error",
        "flip": (r.task_id, r.pair_id, r.sample) in ix.flips,
        "h": ix.hashes.get(r.case_id, ""),
        "id": r.case_id,
        "j": [r.judge_reward_a, r.judge_reward_b, redact(r.judge_reason), r.judge_raw, r.judge_error],
        "js": [
            [j.judge, j.repeat, j.choice, j.reward_a, j.reward_b, redact(j.reason), j.raw, j.error]
            for j in r.judgments
        ],
        "lg": [],
        "lrs": bool(r.lower_reward_selected),
        "o": r.order,
        "p": ix.pairs[r.pair_id],
        "rl": r.reward_left,
        "rr": r.reward_right,
        "s": r.sample,
        "sbf": _sat_but_failed(r),
        "t": ix.tasks.get(r.task_id, -1),
        "tok": r.input_tokens_incl_shared + r.output_tokens_incl_shared,
        "uf": [list(r.user_flags_left), list(r.user_flags_right)],
        "usr": bool(r.user_flags_left or r.user_flags_right),
    }


def _link_ledger(
    ledger: Sequence[LedgerRecord],
    where: dict[TranscriptKey, int],
    cases: Mapping[str, list[int]],
    transcripts: list[list[int]],
) -> None:
    """Each ledger line's index goes to the ``lg`` list of the case (judge calls, by case id) or the
    transcript (its dialogue, by place) it belongs to."""
    owners: dict[str, list[int] | None] = {}  # by work key: a unit's retries and turns share one
    for i, x in enumerate(ledger):
        if x.work not in owners:
            owners[x.work] = _owner_list(_work_owner(x.work), where, cases, transcripts)
        lines = owners[x.work]
        if lines is not None:
            lines.append(i)


def _owner_list(
    owner: tuple[str, str | TranscriptKey] | None,
    where: dict[TranscriptKey, int],
    cases: Mapping[str, list[int]],
    transcripts: list[list[int]],
) -> list[int] | None:
    """The ``lg`` list of the case or transcript a work key belongs to, None when it is neither."""
    if owner is None:
        return None
    kind, key = owner
    if kind == "case" and isinstance(key, str):
        return cases.get(key)
    if kind == "transcript" and isinstance(key, tuple) and key in where:
        return transcripts[where[key]]
    return None


def _keys(rows: Sequence[TranscriptRow]) -> list[TranscriptKey]:
    return [(t.task_id, t.agent, t.sample) for t in rows]


def _once_per_text(redact: Redact) -> Redact:
    """``redact`` run once per distinct text of the page: a task's prompt opens each of its transcripts,
    tool names and arguments recur, and a redaction is a pure function of its text."""
    done: dict[str, str] = {}

    def once(text: str) -> str:
        out = done.get(text)
        if out is None:
            out = done[text] = redact(text)
        return out

    return once


class LazyRows:
    """One of the document's bulk lists (cases, transcripts, ledger lines) whose rows are made when read
    by index: the page encodes them a row at a time, so a large suite's rows (some 75 MB of lists and
    dicts at 30,000 cases) are never all in memory at once. Made by ``build_payload(..., lazy=True)``."""

    __slots__ = ("_make", "_size")

    def __init__(self, size: int, make: Callable[[int], Any]) -> None:
        self._size = size
        self._make = make

    def __len__(self) -> int:
        return self._size

    def __getitem__(self, index: int) -> Any:
        return self._make(index)


def build_payload(out: SuiteOutputs, redact: Redact, *, lazy: bool = False) -> dict[str, Any]:
    """The report's JSON document (see the module docstring); pure and deterministic. ``redact`` hides
    the names of :func:`.model.redaction_names` as the judge's view does (the caller's Redactor);
    ``lazy``: the cases, transcripts and ledger lines as :class:`LazyRows`, made when encoded.

    Every dict is built with its keys in sorted order, so the page encodes it without ``sort_keys`` and
    gets the bytes of :func:`.render.embed_json` faster (tests/test_html_report.py checks the order)."""
    redact = _once_per_text(redact)
    task_index = {t.task_id: i for i, t in enumerate(out.tasks)}
    pair_ids = sorted({r.pair_id for r in out.records})
    firsts = {r.pair_id: r for r in reversed(out.records)}
    ix = _Index(
        where={k: i for i, k in enumerate(_keys(out.transcripts))},
        tasks=task_index,
        pairs={pid: i for i, pid in enumerate(pair_ids)},
        flips=set(out.flipped),
        hashes=_case_hashes(out),
    )
    rows = _bulk(out, ix, redact)
    bulk: dict[str, Any] = rows if lazy else {k: [v[i] for i in range(len(v))] for k, v in rows.items()}
    gates = sorted(out.gates, key=lambda g: gate_rank(g.status))
    by_id = {r.case_id: i for i, r in enumerate(out.records)}
    return {
        "backend": out.backend,
        "baseline": out.baseline,
        "cases": bulk["cases"],
        "costs": [
            [c.role, c.calls, c.attempts, c.input_tokens, c.output_tokens, c.cost, c.usage_missing]
            for c in out.costs
        ],
        "elo_svg": out.elo_svg,
        "gates": [_gate(g, by_id) for g in gates],
        "glossary": [[m.name, m.description] for m in SUITE_METRICS],
        **({"history": out.history} if out.history is not None else {}),  # only with --gauge-history
        "human": out.human,
        "ledger": bulk["ledger"],
        "metrics": [[m.name, m.value, m.low, m.high, m.n, m.method] for m in out.metrics],
        "pairs": [
            [pid, firsts[pid].agent_left, firsts[pid].agent_right, out.pair_class.get(pid, "")]
            for pid in pair_ids
        ],
        "sample": [[by_id[c.case_id], c.weight, c.stratum] for c in out.sample if c.case_id in by_id],
        "seed": out.seed,
        "self_preference": out.self_preference,
        "suite": out.name,
        "tasks": [[t.task_id, t.category, redact(t.prompt)] for t in out.tasks],
        "total_cost": out.total_cost,
        "transcripts": bulk["transcripts"],
        "um": out.usage_missing,
        "v": PAYLOAD_VERSION,
        "watch": [
            [w.role, w.model, w.tokens_per_task, w.retry_rate, w.rate_limited, w.asked_wait_s]
            for w in out.watch
        ],
    }


class _InOrder:
    """``items[i]`` read through one iterator while ``i`` counts up (as the page encodes its rows): the
    ledger's columns make records a block at a time when iterated, one by one when indexed."""

    def __init__(self, items: Sequence[LedgerRecord]) -> None:
        self._items = items
        self._next = 0
        self._it = iter(items)

    def __getitem__(self, i: int) -> LedgerRecord:
        if i != self._next:
            self._it = iter(self._items if i == 0 else self._items[i:])
        self._next = i + 1
        return next(self._it)


def _bulk(out: SuiteOutputs, ix: _Index, redact: Redact) -> dict[str, LazyRows]:
    """The cases, transcripts and ledger lines as :class:`LazyRows`, each with its ledger lines' indices
    (``lg``) found first, in one pass over the ledger."""
    numbers = []  # each transcript's line in its agent's file (written in this order)
    lines: dict[str, int] = {}
    for t in out.transcripts:
        lines[t.agent] = lines.get(t.agent, 0) + 1
        numbers.append(lines[t.agent])
    case_lines: list[list[int]] = [[] for _ in out.records]
    transcript_lines: list[list[int]] = [[] for _ in out.transcripts]
    by_case = {r.case_id: case_lines[i] for i, r in enumerate(out.records)}  # a repeated id: its last case
    _link_ledger(out.ledger, ix.where, by_case, transcript_lines)
    caching = _caching(out.ledger)
    ledger = _InOrder(out.ledger)

    def transcript(i: int) -> dict[str, Any]:
        return _transcript(out.transcripts[i], ix.tasks, redact, numbers[i]) | {"lg": transcript_lines[i]}

    def case(i: int) -> dict[str, Any]:
        return _case(out.records[i], ix, redact) | {"lg": case_lines[i]}

    return {
        "cases": LazyRows(len(out.records), case),
        "ledger": LazyRows(len(out.ledger), lambda i: _ledger_line(ledger[i], caching)),
        "transcripts": LazyRows(len(out.transcripts), transcript),
    }


def build_volatile(out: SuiteOutputs) -> dict[str, Any]:
    """The page's volatile block (``gauge-volatile``, between the ``gauge:volatile`` markers): p50/p95
    latency per (role, model), which differs from run to run; keys sorted like the payload's."""
    return {"latency": [[x.role, x.model, x.attempts, x.p50, x.p95] for x in out.latency]}
