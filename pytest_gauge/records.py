"""The wire formats shared by every part of the pipeline: transcripts, case records, ledger records.

Workers and the controller exchange only these plain JSON forms (xdist-serializable, diffable),
so this module is the one place that says what a field means. Definitions: docs/protocol.md#case-record
and docs/protocol.md#ledger.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "CASE_FORMAT_VERSION",
    "LEDGER_FORMAT_VERSION",
    "CaseRecord",
    "Judgment",
    "LedgerRecord",
    "ToolCall",
    "Transcript",
    "Turn",
    "Usage",
    "dumps",
]

CASE_FORMAT_VERSION = 1
LEDGER_FORMAT_VERSION = 1

Role = Literal["agent", "user_sim", "judge"]
JudgeChoice = Literal["A", "B", "tie", "error"]


def dumps(obj: Any) -> str:
    """Canonical JSON: sorted keys, no spaces, UTF-8 kept; the same object always gives the same bytes."""
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True)
class Usage:
    """Token usage as the gateway reported it (``usage`` of a chat completion).

    ``cached_tokens`` (``prompt_tokens_details.cached_tokens``, part of ``prompt_tokens``) and
    ``reasoning_tokens`` (``completion_tokens_details.reasoning_tokens``, part of ``completion_tokens``)
    are None (null) when the gateway did not send them.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None

    @classmethod
    def from_api(cls, usage: dict[str, Any]) -> Usage:
        """From a chat completion's ``usage`` object (missing counts are 0, missing details None)."""

        def detail(section: str, key: str) -> int | None:
            part = usage.get(section)
            value = part.get(key) if isinstance(part, dict) else None
            return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

        return cls(
            int(usage.get("prompt_tokens") or 0),
            int(usage.get("completion_tokens") or 0),
            int(usage.get("total_tokens") or 0),
            detail("prompt_tokens_details", "cached_tokens"),
            detail("completion_tokens_details", "reasoning_tokens"),
        )

    def to_json(self) -> dict[str, int | None]:
        """The ledger's ``usage``: the three counts and both details (null when not sent)."""
        return dict(vars(self))

    def __add__(self, other: Usage) -> Usage:
        def both(a: int | None, b: int | None) -> int | None:
            return None if a is None and b is None else (a or 0) + (b or 0)

        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.total_tokens + other.total_tokens,
            both(self.cached_tokens, other.cached_tokens),
            both(self.reasoning_tokens, other.reasoning_tokens),
        )


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
    arguments: dict[str, Any] | None
    result: str = ""
    return_code: int = 0
    latency_s: float = 0.0
    error: str | None = None


@dataclass
class Turn:
    """One message of a conversation: ``user`` (simulated user), ``assistant`` (agent) or ``tool``.

    ``truncated``: the model stopped at its ``max_tokens`` (``finish_reason: "length"``), so the message
    may be cut short. Written to JSON only when true (older transcripts read as not truncated).
    """

    role: Literal["user", "assistant", "tool"]
    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None
    truncated: bool = False

    def to_json(self) -> dict[str, Any]:
        """The JSON form, ``truncated`` only when set."""
        data = {**vars(self), "tool_calls": [dict(vars(c)) for c in self.tool_calls]}
        if not self.truncated:
            del data["truncated"]
        return data


@dataclass
class Transcript:
    """A finished conversation for (task, agent, sample), produced once per run and shared by every case.

    ``ended_by``: ``user_done`` (the simulated user said done), ``max_turns``, ``step_limit`` (tool
    loop limit hit) or ``error`` (a gateway failure; ``error`` holds the cause).
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

    def agent_turns(self) -> list[str]:
        return [t.content for t in self.turns if t.role == "assistant"]

    def tool_calls(self) -> list[ToolCall]:
        return [c for t in self.turns if t.role == "assistant" for c in t.tool_calls]

    def to_json(self) -> dict[str, Any]:
        """The JSON form (``dataclasses.asdict`` without its deep copy: the result is serialised at
        once, and asdict was most of the end-of-run cost on large suites)."""
        data = dict(vars(self))
        data["turns"] = [t.to_json() for t in self.turns]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Transcript:
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


@dataclass
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


@dataclass
class CaseRecord:
    """One judged case (task × pair × order): the row of ``pairs/pair_results.jsonl``
    (docs/protocol.md#case-record).

    ``agent_left``/``agent_right`` are the pair as declared; ``blind_order`` says who sat in slot A.
    ``judge_choice`` and ``judge_reward_*`` are in slot terms; ``reward_*`` are the rule verifier's.
    Tokens and cost cover the case's judge calls plus both transcripts it judged (transcripts are
    shared, so summing cases double-counts them: suite totals come from the ledger).
    ``est_cost`` is None when a model involved has no configured price. ``judge_response_format`` is how
    the (first) judge was asked for JSON: ``json_schema``, ``json_object`` or ``none``.
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
    input_tokens: int
    output_tokens: int
    est_cost: float | None
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

    @property
    def preferred_agent(self) -> str | None:
        """The agent (not slot) the judge preferred; None on tie or error."""
        if self.judge_choice not in ("A", "B"):
            return None
        left_in_a = self.blind_order == "A=left"
        return self.agent_left if (self.judge_choice == "A") == left_in_a else self.agent_right

    def to_json(self) -> dict[str, Any]:
        """The JSON form (``dataclasses.asdict``'s result, without its deep copy)."""
        data = dict(vars(self))
        data["judgments"] = [dict(vars(j)) for j in self.judgments]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CaseRecord:
        judgments = [Judgment(**j) for j in data.get("judgments", [])]
        fields = {k: v for k, v in data.items() if k != "judgments"}
        return cls(judgments=judgments, **fields)


@dataclass
class LedgerRecord:
    """One gateway attempt (docs/protocol.md#ledger). A retried call has several records sharing ``call_id``.

    ``work`` names what the call belongs to: ``transcript/<task>/<agent>/<sample>`` or
    ``judge/<case_id>/<judge>/<repeat>``. ``call_id`` is ``<work>#<n>`` (n-th call of that work),
    so ids are identical whichever worker made the call. ``cost`` is nominal (what the call cost
    when it was made, also for cache hits); None when the model has no price or usage is missing.
    ``request`` is the request's cache key (None with the cache off): calls of different work that
    send the same request share one gateway call (see :func:`pytest_gauge.gateway.ledger.merge_ledgers`).
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

    def to_json(self) -> dict[str, Any]:
        """The JSON form (``dataclasses.asdict``'s result, without its deep copy: every gateway
        attempt pays for it)."""
        data = dict(vars(self))
        data["usage"] = self.usage.to_json() if self.usage is not None else None
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LedgerRecord:
        usage = Usage(**data["usage"]) if data.get("usage") else None
        fields = {k: v for k, v in data.items() if k != "usage"}
        return cls(usage=usage, **fields)

    def sort_key(self) -> tuple[str, str, int, int]:
        """Deterministic merge order: by suite, then work, call number and attempt (never by time)."""
        work, _, n = self.call_id.rpartition("#")
        return (self.suite, work, int(n or 0), self.attempt)
