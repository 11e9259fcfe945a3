"""The typed records at every seam of the pipeline: transcripts, the engine's unit results, case
records, ledger records, the suite's metadata for the controller and a worker's end-of-run summary.

Whatever crosses a stage or a process is one of these dataclasses; workers and the controller exchange
only their plain JSON forms (xdist-serializable, diffable), so this module is the one place that says
what a field means. Definitions: docs/protocol.md#case-record
and docs/protocol.md#ledger.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Final, Literal, get_args

from .json_types import JSONObject, UnitSpendJSON

if TYPE_CHECKING:  # only for annotations: the records themselves never import numpy
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
    """The float arrays of the statistics (per-task sums, resamples): one alias for every module."""

__all__ = [
    "APIS",
    "CASE_FORMAT_VERSION",
    "LEDGER_FORMAT_VERSION",
    "NEUTRAL_API",
    "ROLES",
    "Api",
    "CaseKey",
    "CaseRecord",
    "ChatResult",
    "Judgment",
    "JudgmentResult",
    "LedgerRecord",
    "SuiteMeta",
    "ToolCall",
    "Transcript",
    "TranscriptResult",
    "UnitSpend",
    "Usage",
    "WorkFailure",
    "WorkResult",
    "WorkerSummary",
    "case_json",
    "content_hash",
    "dumps",
    "roles_in",
    "work_result_from_json",
]

CASE_FORMAT_VERSION = 1
LEDGER_FORMAT_VERSION = 2

Api = Literal["chat", "anthropic", "responses"]
APIS: tuple[Api, ...] = get_args(Api)
"""The wire formats a model is called in (``api=`` on every model role; gateway/wire has one module each)."""
NEUTRAL_API: Final[Api] = "chat"
"""The package's own shape (roles build chat bodies, the dialogue reads chat completions) and every
call's default format: its requests and completions cross the wire untranslated."""

Role = Literal["agent", "user_sim", "judge", "user_audit"]
ROLES: tuple[Role, ...] = ("agent", "user_sim", "judge", "user_audit")
_OPTIONAL_ROLES = ("user_audit",)  # in cost tables only when a run made such calls (older bytes kept)


def roles_in(ledger: Iterable[LedgerRecord]) -> tuple[str, ...]:
    """The roles a run's cost tables list, in order: the three always, ``user_audit`` when it was called."""
    seen = {x.role for x in ledger}
    return tuple(r for r in ROLES if r not in _OPTIONAL_ROLES or r in seen)


"""Every role of a model call, in the order reports list them."""
JudgeChoice = Literal["A", "B", "tie", "error"]


def _shared_strings(data: Mapping[str, Any], unique: Container[str] = ()) -> dict[str, Any]:
    """``data`` with its short string values interned: a run's records and ledger lines repeat the same
    suite, task, agent, model, role and status names thousands of times, and each line read from JSON
    would otherwise hold its own copies (a fifth of the ledger's memory at the end of a run). The values
    of the ``unique`` keys (one or a few lines each: a call id, a unit of work) are left alone: the
    interpreter's table of interned strings never shrinks (a ledger's 12,000 call ids and 9,000 units
    grew it by 3.7 MB for the rest of the run)."""
    return {
        k: sys.intern(v) if isinstance(v, str) and len(v) <= 80 and k not in unique else v
        for k, v in data.items()
    }


def _slot_values(obj: Any) -> dict[str, Any]:
    """A slotted dataclass's fields and values, in field order (what ``vars`` gives an unslotted one): the
    records a run keeps by the ten thousand have slots, no per-instance dict (about three times smaller)."""
    return {f.name: getattr(obj, f.name) for f in fields(obj)}


_CANONICAL = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"))
"""One encoder for every canonical line (``json.dumps`` with options builds one per call: a fifth of a
small line's time, tens of thousands of lines at the end of a run). Stateless between calls."""


def dumps(obj: Any) -> str:
    """Canonical JSON: sorted keys, no spaces, UTF-8 kept; the same object always gives the same bytes."""
    return _CANONICAL.encode(obj)


def content_hash(text: str) -> str:
    """The SHA-256 of a text (hex): the manifest's hashes of tasks and prompts."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage in the ledger's one convention, whatever the wire format (docs/protocol.md#usage).

    ``input_tokens`` is the uncached input only; ``cached_input_tokens`` the input read from the
    provider's prompt cache, ``cache_write_tokens`` the input written to it (all cache writes), and
    ``cache_write_1h_tokens`` the part of those writes made to a one-hour cache (Anthropic's
    ``ephemeral_1h_input_tokens``, priced at its own rate). ``output_tokens`` is every output token,
    ``reasoning_tokens`` the part of them spent reasoning. A detail the format did not report is None
    (null). ``raw`` is the format's own usage object as the server sent it (written on the ledger line;
    never compared). Each wire format maps its usage here (``gateway/wire/<format>.py``'s ``usage``).
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int | None = None
    cache_write_tokens: int | None = None
    cache_write_1h_tokens: int | None = None
    reasoning_tokens: int | None = None
    raw: Mapping[str, Any] | None = field(default=None, compare=False, hash=False, repr=False)

    @property
    def prompt_tokens(self) -> int:
        """Every input token: uncached, read from the cache and written to it (Chat's ``prompt_tokens``)."""
        return self.input_tokens + (self.cached_input_tokens or 0) + (self.cache_write_tokens or 0)

    @property
    def completion_tokens(self) -> int:
        """Every output token (Chat's ``completion_tokens``)."""
        return self.output_tokens

    @property
    def total_tokens(self) -> int:
        """Every input and output token."""
        return self.prompt_tokens + self.output_tokens

    @property
    def cached_tokens(self) -> int | None:
        """The cache reads under their Chat Completions name (``prompt_tokens_details.cached_tokens``)."""
        return self.cached_input_tokens

    def to_json(self) -> JSONObject:
        """The ledger's ``usage`` (format version 2): the counts, the details (null when not sent) and
        the format's own object under ``raw`` (left out when there is none)."""
        data = _slot_values(self)
        if data["raw"] is None:
            del data["raw"]
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Usage:
        """A ledger line's ``usage``: format version 2 (this class's fields), or version 1's chat form
        (``prompt_tokens`` with the cached tokens inside, ``cached_tokens``, ``completion_tokens``)."""
        if "input_tokens" not in data and "prompt_tokens" in data:  # a version 1 line
            prompt = int(data.get("prompt_tokens") or 0)
            cached = data.get("cached_tokens")
            cached = None if cached is None else min(int(cached), prompt)
            return cls(
                input_tokens=prompt - (cached or 0),
                output_tokens=int(data.get("completion_tokens") or 0),
                cached_input_tokens=cached,
                reasoning_tokens=data.get("reasoning_tokens"),
            )
        known = {k: data[k] for k in _USAGE_FIELDS if k in data}
        raw = known.get("raw")
        if isinstance(raw, dict):  # its field names, shared by every line rather than a copy each
            known["raw"] = {sys.intern(k): v for k, v in raw.items()}
        return cls(**known)

    def __add__(self, other: Usage) -> Usage:
        def both(a: int | None, b: int | None) -> int | None:
            return None if a is None and b is None else (a or 0) + (b or 0)

        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            both(self.cached_input_tokens, other.cached_input_tokens),
            both(self.cache_write_tokens, other.cache_write_tokens),
            both(self.cache_write_1h_tokens, other.cache_write_1h_tokens),
            both(self.reasoning_tokens, other.reasoning_tokens),
        )


_USAGE_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cached_input_tokens",
    "cache_write_tokens",
    "cache_write_1h_tokens",
    "reasoning_tokens",
    "raw",
)


@dataclass(frozen=True)
class ChatResult:
    """What a gateway call returned, already parsed: text, tool calls and the finish reason."""

    content: str
    tool_calls: tuple[JSONObject, ...]
    finish_reason: str | None
    usage: Usage | None = None
    cost: float | None = None


@dataclass
class ToolCall:
    """One tool call made by an agent, with what the local executor returned.

    ``arguments`` is the parsed JSON object, or None when ``raw_arguments`` was not valid JSON
    (a recorded agent mistake). ``return_code`` is 0 on success, non-zero for a tool error,
    124 for a timeout, 2 for malformed arguments, 127 for an unknown tool.
    """

    id: str
    name: str
    raw_arguments: str
    arguments: JSONObject | None
    result: str = ""
    return_code: int = 0
    latency_s: float = 0.0
    error: str | None = None


@dataclass
class Turn:
    """One message of a conversation: ``user`` (simulated user), ``assistant`` (agent) or ``tool``.

    ``truncated``: the model stopped at its ``max_tokens`` (``finish_reason: "length"``), so the message
    may be cut short. Written to JSON only when true (older transcripts read as not truncated); so is
    ``empty`` (see :attr:`empty`, computed from the content, never read back).
    """

    role: Literal["user", "assistant", "tool"]
    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None
    truncated: bool = False

    @property
    def empty(self) -> bool:
        """Nothing said: blank or whitespace-only text and no tool call (a small model's ``""``, a tool
        that printed nothing). Flagged in the transcript, counted in conclusion.md, gateable."""
        return not self.content.strip() and not self.tool_calls

    def to_json(self) -> JSONObject:
        """The JSON form, ``truncated`` only when set, ``"empty": true`` on an empty turn."""
        data = {**vars(self), "tool_calls": [dict(vars(c)) for c in self.tool_calls]}
        if not self.truncated:
            del data["truncated"]
        if self.empty:
            data["empty"] = True
        return data


@dataclass
class Transcript:
    """A finished conversation for (task, agent, sample), produced once per run and shared by every case.

    ``ended_by``: ``user_done`` (the simulated user said done), ``max_turns``, ``step_limit`` (tool
    loop limit hit) or ``error`` (a gateway failure; ``error`` holds the cause).
    ``workspace_checks``: what the workspace rules (``file_exists``, ``file_contains``,
    ``command_succeeds``) saw in the transcript's workspace after the dialogue, by rule key
    (``{"passed": bool, "detail": str}``); written only when the task has such rules.
    """

    task_id: str
    agent: str
    sample: int
    turns: list[Turn]
    final_reply: str
    user_satisfied: bool | None
    ended_by: str
    error: str | None = None
    strategy: str = "single"
    workspace_checks: dict[str, JSONObject] = field(default_factory=dict)
    # a program agent's own view of each turn ({"session", "usage", "cost_usd"}), beside the ledger's;
    # written only when there is one
    program_turns: list[JSONObject] = field(default_factory=list)
    # the judge-model audit's finding on the simulated user's turns (its reason), when it found an error;
    # written only then (docs/protocol.md#user-audit)
    user_audit: str | None = None
    # the requests of a program agent its proxy route refused (a model or a limit it was not given), one
    # line each; written only when there is one (docs/protocol.md#route-policy)
    proxy_refusals: list[str] = field(default_factory=list)

    def agent_turns(self) -> list[str]:
        return [t.content for t in self.turns if t.role == "assistant"]

    def tool_calls(self) -> list[ToolCall]:
        return [c for t in self.turns if t.role == "assistant" for c in t.tool_calls]

    def to_json(self) -> JSONObject:
        """The JSON form (``dataclasses.asdict`` without its deep copy: the result is serialised at
        once, and asdict was most of the end-of-run cost on large suites)."""
        data = dict(vars(self))
        data["turns"] = [t.to_json() for t in self.turns]
        if not self.workspace_checks:  # written only for tasks with workspace rules (older bytes kept)
            del data["workspace_checks"]
        if not self.program_turns:
            del data["program_turns"]
        if self.user_audit is None:
            del data["user_audit"]
        if not self.proxy_refusals:
            del data["proxy_refusals"]
        return data

    @classmethod
    def from_json(cls, data: JSONObject) -> Transcript:
        turns = [
            Turn(
                role=t["role"],
                content=t["content"],
                tool_calls=[ToolCall(**c) for c in t.get("tool_calls", [])],
                tool_call_id=t.get("tool_call_id"),
                truncated=bool(t.get("truncated", False)),
            )
            for t in data["turns"]
        ]
        fields = {k: v for k, v in data.items() if k != "turns"}
        return cls(turns=turns, **fields)


@dataclass(slots=True)
class Judgment:
    """One verdict of one judge call (a repeat or a second judge model), in slot terms.

    ``response_format`` is how the judge was asked for JSON (``json_schema``, ``json_object`` or ``none``
    for the prompt alone; None in records written before it was kept).
    """

    judge: str
    repeat: int
    choice: JudgeChoice
    reward_a: float | None
    reward_b: float | None
    reason: str
    raw: str | None = None
    error: str | None = None
    response_format: str | None = None


@dataclass(slots=True)
class CaseRecord:
    """One judged case (task × pair × order): the row of ``pairs/pair_results.jsonl``
    (docs/protocol.md#case-record).

    ``agent_left``/``agent_right`` are the pair as declared; ``blind_order`` says who sat in slot A.
    ``judge_choice`` and ``judge_reward_*`` are in slot terms; ``reward_*`` are the rule verifier's.
    ``*_incl_shared`` (tokens and cost) cover the case's judge calls plus both transcripts it judged
    (transcripts are shared, so summing cases double-counts them: suite totals come from the ledger).
    ``est_cost_incl_shared`` is None when a model involved has no configured price.
    ``judge_response_format`` is how the (first) judge was asked for JSON: ``json_schema``,
    ``json_object`` or ``none``. ``empty_turns_*``: the side's turns with nothing said;
    ``judge_prompt_cut``: characters of the two transcripts elided from the judge's prompt to fit its
    context; ``unpriced_calls``: the case's calls answered without usage (``est_cost_incl_shared`` is
    then a lower bound); ``user_flags_*``: the user simulator's errors on that side's transcript
    (docs/protocol.md#user-audit); all written only when not 0 or empty.
    """

    suite: str
    case_id: str
    pair_id: str
    task_id: str
    category: str
    agent_left: str
    agent_right: str
    order: Literal["AB", "BA"]
    blind_order: Literal["A=left", "A=right"]
    sample: int
    judge_choice: JudgeChoice
    reward_left: float
    reward_right: float
    selected_reward: float | None
    lower_reward_selected: bool | None
    task_success_left: bool
    task_success_right: bool
    user_sat_left: bool | None
    user_sat_right: bool | None
    input_tokens_incl_shared: int
    output_tokens_incl_shared: int
    est_cost_incl_shared: float | None
    judge_reward_a: float | None
    judge_reward_b: float | None
    judge_reason: str
    judge_raw: str | None
    judge_error: str | None
    chars_left: int
    chars_right: int
    judgments: list[Judgment] = field(default_factory=list)
    judge_response_format: str | None = None
    format_version: int = CASE_FORMAT_VERSION
    empty_turns_left: int = 0  # turns of the transcript with nothing said (see Turn.empty)
    empty_turns_right: int = 0
    judge_prompt_cut: int = 0  # characters of the transcripts left out to fit the judge's context
    unpriced_calls: int = 0  # calls without usage among the case's: est_cost_incl_shared is a lower bound
    user_flags_left: list[str] = field(default_factory=list)  # the user simulator's errors (user audit)
    user_flags_right: list[str] = field(default_factory=list)

    @property
    def preferred_agent(self) -> str | None:
        """The agent (not slot) the judge preferred; None on tie or error."""
        if self.judge_choice not in ("A", "B"):
            return None
        left_in_a = self.blind_order == "A=left"
        return self.agent_left if (self.judge_choice == "A") == left_in_a else self.agent_right

    def to_json(self) -> JSONObject:
        """The JSON form (``dataclasses.asdict``'s result, without its deep copy)."""
        data = _slot_values(self)
        data["judgments"] = [_slot_values(j) for j in self.judgments]
        for name in (
            "empty_turns_left",
            "empty_turns_right",
            "judge_prompt_cut",
            "unpriced_calls",
            "user_flags_left",
            "user_flags_right",
        ):
            if not data[name]:
                del data[name]
        return data

    @classmethod
    def from_json(cls, data: JSONObject) -> CaseRecord:
        """A case record's JSON form, also as older versions wrote it (see :func:`case_json`)."""
        data = case_json(data)
        judgments = [Judgment(**_shared_strings(j)) for j in data.get("judgments", [])]
        fields = {k: v for k, v in _shared_strings(data).items() if k != "judgments"}
        return cls(judgments=judgments, **fields)


_OLD_CASE_NAMES: Final = {
    "input_tokens": "input_tokens_incl_shared",
    "output_tokens": "output_tokens_incl_shared",
    "est_cost": "est_cost_incl_shared",
}


def case_json(data: Mapping[str, Any]) -> JSONObject:
    """A case record's JSON with the names older versions gave its fields replaced by this version's
    (records, record logs, baselines and run folders written before the token and cost fields were
    named ``*_incl_shared``), so every reader of the format loads old and new lines alike."""
    return {_OLD_CASE_NAMES.get(k, k): v for k, v in data.items()}


_OPTIONAL_LEDGER_FIELDS = (
    "retry_after",
    "served_model",
    "gateway_retries",
    "gateway_cost",
    "key_variable",
    "batched",
)


@dataclass(slots=True)
class LedgerRecord:
    """One gateway attempt (docs/protocol.md#ledger). A retried call has several records sharing ``call_id``.

    ``work`` names what the call belongs to: ``transcript/<task>/<agent>/<sample>`` or
    ``judge/<case_id>/<judge>/<repeat>``. ``call_id`` is ``<work>#<n>`` (n-th call of that work),
    so ids are identical whichever worker made the call. ``cost`` is nominal (what the call cost
    when it was made, also for cache hits); None when the model has no price or usage is missing.
    ``request`` is the request's cache key (None with the cache off): calls of different work that
    send the same request share one gateway call (see
    :func:`pytest_gauge._internal.gateway.ledger.merge_ledgers`).
    """

    run_id: str
    call_id: str
    attempt: int
    status: str
    suite: str
    task_id: str
    role: Role
    model: str
    strategy: str
    work: str
    usage: Usage | None
    usage_missing: bool
    latency_s: float
    finish_reason: str | None
    cache_hit: bool
    cost: float | None
    http_status: int | None = None
    error: str | None = None
    possibly_billed: bool = False
    worker: str = "main"
    ts: float = 0.0
    request: str | None = None
    format_version: int = LEDGER_FORMAT_VERSION
    # what the gateway said beside the body (written only when present, so other lines keep
    # their bytes): the wait it asked for (seconds), the model that answered when it is not the one
    # requested, the retries a proxy made upstream within this attempt, and the cost it reported
    retry_after: float | None = None
    served_model: str | None = None
    gateway_retries: int | None = None
    gateway_cost: float | None = None
    key_variable: str | None = None  # live calls: the variable whose key was sent (its name, never the key)
    api: str = NEUTRAL_API  # the wire format of the call (gateway/wire): one of APIS
    batched: bool | None = None  # sent in a batch (--gauge-batch), priced at the batch price; else absent

    def to_json(self) -> JSONObject:
        """The JSON form (``dataclasses.asdict``'s result, without its deep copy: every gateway
        attempt pays for it); the gateway's optional reports only when present."""
        data = _slot_values(self)
        data["usage"] = self.usage.to_json() if self.usage is not None else None
        for key in _OPTIONAL_LEDGER_FIELDS:
            if data[key] is None:
                del data[key]
        return data

    @classmethod
    def from_json(cls, data: JSONObject) -> LedgerRecord:
        """A ledger line of this format version or an earlier one (version 1: chat usage, no ``api``),
        read into this version's record (written back, it is a version-2 line)."""
        usage = Usage.from_json(data["usage"]) if data.get("usage") else None
        shared = _shared_strings(data, unique=("call_id", "request", "work"))
        fields = {k: v for k, v in shared.items() if k not in ("usage", "format_version")}
        return cls(usage=usage, **fields)

    def sort_key(self) -> tuple[str, str, int, int]:
        """Deterministic merge order: by suite, then work, call number and attempt (never by time)."""
        work, _, n = self.call_id.rpartition("#")
        return (self.suite, work, int(n or 0), self.attempt)


# ----- the engine's unit results (one per transcript or judgment; shared by every case using it) ---


@dataclass(frozen=True)
class UnitSpend:
    """Tokens and nominal cost of one unit of work (``cost`` None: a model without a price).
    ``unpriced_calls`` counts its calls answered without usage: their cost is unknown, so ``cost`` is then a
    lower bound (written only when not 0)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = 0.0
    unpriced_calls: int = 0

    def __add__(self, other: UnitSpend) -> UnitSpend:
        cost = None if self.cost is None or other.cost is None else self.cost + other.cost
        return UnitSpend(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            cost,
            self.unpriced_calls + other.unpriced_calls,
        )

    def to_json(self) -> UnitSpendJSON:
        data: UnitSpendJSON = {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost": self.cost,
        }
        if self.unpriced_calls:
            data["unpriced_calls"] = self.unpriced_calls
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> UnitSpend:
        unpriced = int(data.get("unpriced_calls", 0))
        return cls(int(data["input_tokens"]), int(data["output_tokens"]), data["cost"], unpriced)


@dataclass(frozen=True)
class TranscriptResult:
    """A produced transcript of (task, agent, sample) with what its calls spent and the rule verifier's
    verdict on it (``score``: the JSON of :meth:`pytest_gauge._internal.suite.rules.Score.to_json`, written
    beside the transcript to ``agents/<agent>.jsonl``; None in entries written before it was kept)."""

    transcript: Transcript
    spend: UnitSpend
    score: Mapping[str, object] | None = None

    def to_json(self) -> JSONObject:
        return {
            "ok": True,
            "transcript": self.transcript.to_json(),
            "spend": self.spend.to_json(),
            "score": self.score,
        }


@dataclass(frozen=True)
class JudgmentResult:
    """One verdict of (case, judge, repeat) with what its call spent."""

    judgment: Judgment
    spend: UnitSpend

    def to_json(self) -> JSONObject:
        return {"ok": True, "judgment": _slot_values(self.judgment), "spend": self.spend.to_json()}


@dataclass(frozen=True)
class WorkFailure:
    """A unit of work the gateway could not complete: ``error`` says why; ``fatal`` stops the run
    (a configuration error, not a failed call); ``kind`` is the gateway error's class name."""

    error: str
    fatal: bool = False
    kind: str = "GatewayError"

    def to_json(self) -> JSONObject:
        return {"ok": False, "error": self.error, "fatal": self.fatal, "kind": self.kind}


WorkResult = TranscriptResult | JudgmentResult | WorkFailure
"""What a unit of work produced; its JSON form is the entry of the run's work store."""


def work_result_from_json(data: Mapping[str, Any]) -> WorkResult:
    """The typed result of a work-store entry (written by :meth:`to_json` in any process)."""
    if not data.get("ok"):
        return WorkFailure(
            str(data.get("error")), bool(data.get("fatal")), str(data.get("kind", "GatewayError"))
        )
    spend = UnitSpend.from_json(data["spend"])
    if "judgment" in data:
        return JudgmentResult(Judgment(**data["judgment"]), spend)
    return TranscriptResult(Transcript.from_json(data["transcript"]), spend, data.get("score"))


# ----- the suite as the controller sees it (it collects nothing under xdist) ---------------------


@dataclass(frozen=True, slots=True)
class CaseKey:
    """A case's parts as :mod:`pytest_gauge._internal.suite.cases` composed them, so no id is ever
    re-parsed. Slotted, with its task, agent and order names shared once read: the controller holds one
    per case of every suite (some 250 bytes a case less at the end of a run)."""

    case_id: str
    task_id: str
    left: str
    right: str
    order: str
    sample: int = 0

    def to_json(self) -> list[Any]:
        return [self.case_id, self.task_id, self.left, self.right, self.order, self.sample]

    @classmethod
    def from_json(cls, data: list[Any]) -> CaseKey:
        case_id, task_id, left, right, order, sample = data
        shared = sys.intern
        return cls(
            str(case_id),
            shared(str(task_id)),
            shared(str(left)),
            shared(str(right)),
            shared(str(order)),
            int(sample),
        )


@dataclass(frozen=True)
class SuiteMeta:
    """What the controller needs about a collected suite: outputs, manifest, reports and gates.

    ``tasks`` are the task file's rows as read (written back verbatim to ``tasks.jsonl``); ``cases`` every
    case in collection order; ``selected`` the case ids this run selected (``<suite>::<case_id>``);
    ``models`` the model per role and agent (``agent:<name>``, ``user_sim``, ``judge:<i>``); ``families``
    the compute tiers per agent family; ``judge_format`` the first ``response_format`` the judge is asked
    with (``json_schema``, ``json_object`` or ``none``); ``prompts`` the system prompts hashed into the
    manifest; ``shard_tasks`` the tasks this shard runs (``--gauge-shard``; None otherwise).
    """

    name: str
    folder: str
    module_path: str
    nodeid_prefix: str
    tasks_file: str
    tasks: tuple[Mapping[str, object], ...]
    categories: Mapping[str, str]
    agents: tuple[str, ...]
    pairs: tuple[tuple[str, str], ...]
    models: Mapping[str, str | None]
    judge_models: tuple[str, ...]
    judge_repeats: int
    judge_format: str
    user_max_turns: int
    orders: str
    samples: int
    gates: tuple[str, ...]
    tools: tuple[str, ...]
    cases: tuple[CaseKey, ...]
    families: Mapping[str, tuple[tuple[str, str], ...]]
    prompts: Mapping[str, str | None]
    selected: tuple[str, ...] = ()
    shard_tasks: tuple[str, ...] | None = None
    settings: Mapping[str, Any] = field(default_factory=dict)  # the judge's and user's sampling settings

    @property
    def case_ids(self) -> list[str]:
        return [c.case_id for c in self.cases]

    def selected_cases(self) -> list[CaseKey]:
        """The cases this run selected, in collection order."""
        chosen = set(self.selected)
        return [c for c in self.cases if f"{self.name}::{c.case_id}" in chosen]

    def to_json(self) -> JSONObject:
        """The JSON form (``shard.json``'s ``meta``): every field, the cases both structured
        (``cases``) and as ids (``case_ids``), ``shard_tasks`` only in a shard."""
        data = dict(vars(self))
        data["cases"] = [c.to_json() for c in self.cases]
        data["case_ids"] = self.case_ids
        if self.shard_tasks is None:
            del data["shard_tasks"]
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SuiteMeta:
        fields = {k: v for k, v in data.items() if k != "case_ids"}
        fields["cases"] = tuple(CaseKey.from_json(c) for c in data["cases"])
        fields["families"] = {
            f: tuple((str(t), str(a)) for t, a in tiers) for f, tiers in data["families"].items()
        }
        fields["pairs"] = tuple((str(a), str(b)) for a, b in data["pairs"])
        for name in ("tasks", "agents", "judge_models", "gates", "tools", "selected"):
            fields[name] = tuple(data[name])
        if data.get("shard_tasks") is not None:
            fields["shard_tasks"] = tuple(data["shard_tasks"])
        return cls(**fields)


# ----- a process's end-of-run summary (an xdist worker sends it through ``workeroutput``) ----------


@dataclass(frozen=True)
class WorkerSummary:
    """What one process did in a normally finished run: work units it produced (transcripts and
    judgments), requests it sent to the gateway (retries included) and how many were retries, calls it
    answered from the response cache, tokens and cost of what it sent (None: unknown, a model had no
    price), rate-limit waits, and the most requests it had in flight at once.

    An xdist worker sends it through ``config.workeroutput`` (builtins only: execnet sends nothing
    else), the controller shows one line per worker under ``-v``. The split between workers depends on
    timing, so it goes into no output file (reports, ``metrics.json`` and ledgers stay the same with
    ``-n 0`` and ``-n 4``); the sums over workers do not depend on it."""

    worker: str
    units: int
    attempts: int
    retries: int
    cached: int
    tokens: int
    cost: float | None  # None: an attempt reported usage for a model without a price
    rate_limit_waits: int
    peak_in_flight: int

    def to_json(self) -> JSONObject:
        return dict(vars(self))

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> WorkerSummary:
        return cls(
            worker=str(data["worker"]),
            units=int(data["units"]),
            attempts=int(data["attempts"]),
            retries=int(data["retries"]),
            cached=int(data["cached"]),
            tokens=int(data["tokens"]),
            cost=None if data["cost"] is None else float(data["cost"]),
            rate_limit_waits=int(data["rate_limit_waits"]),
            peak_in_flight=int(data["peak_in_flight"]),
        )
