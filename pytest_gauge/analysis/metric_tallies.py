"""The suite's rates tallied per task, one phase per family (docs/protocol.md#metrics): case rates (judge
errors, verbosity words, position bias, LRS, longer-wins), position flips, and transcript rates (success,
satisfied-but-failed, empty turns, the simulated user's audit), each adding per-task sums to one
:class:`.estimates.Accumulator`; plus the declared pairs and their close / distant class.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..records import CaseRecord
from ..run.user_audit import USER_AUDIT_KINDS
from .estimates import PAIR_CLASSES, Accumulator, Key, chosen_left
from .judge_rules import PRIMARY
from .metric_table import SUITE_METRICS

__all__ = [
    "AGENT_METRICS",
    "LENGTH_STYLE_WORDS",
    "PAIR_METRICS",
    "FlippedGroup",
    "PairInfo",
    "TranscriptRates",
    "VerbosityDetails",
    "case_rates",
    "classify_pairs",
    "flips",
    "pair_gaps",
    "pair_infos",
    "transcript_rates",
]

LENGTH_STYLE_WORDS: tuple[str, ...] = (
    "more detailed",
    "more detail",
    "longer",
    "more thorough",
    "more comprehensive",
    "better tone",
    "nicer tone",
    "more polite",
    "更详细",
    "更长",
    "语气更好",
    "更全面",
)
"""Length/style words in a judge reason that signal verbosity bias (matched case-insensitively)."""


# --------------------------------------------------------------------------------------------------
# Small value types


@dataclass(frozen=True)
class PairInfo:
    """A declared pair: its agents, the gap between their mean rule rewards, and its class."""

    pair_id: str
    agent_left: str
    agent_right: str
    gap: float
    pair_class: str  # "close" | "distant"

    def to_json(self) -> dict[str, Any]:
        """Plain JSON form."""
        return {
            "pair_id": self.pair_id,
            "agent_left": self.agent_left,
            "agent_right": self.agent_right,
            "gap": self.gap,
            "class": self.pair_class,
        }


@dataclass(frozen=True)
class FlippedGroup:
    """A (task, pair, sample) group whose preferred agent differs between the two orders (None = tie)."""

    task_id: str
    pair_id: str
    sample: int
    preferred_ab: str | None  # preferred agent when A=left
    preferred_ba: str | None  # preferred agent when A=right

    def label(self) -> str:
        """Short text for reports and gate drivers, e.g. ``t3/p1#0: agent_x vs tie``."""
        ab = self.preferred_ab or "tie"
        ba = self.preferred_ba or "tie"
        return f"{self.task_id}/{self.pair_id}#{self.sample}: {ab} vs {ba}"

    def to_json(self) -> dict[str, Any]:
        """Plain JSON form."""
        return {
            "task_id": self.task_id,
            "pair_id": self.pair_id,
            "sample": self.sample,
            "preferred_ab": self.preferred_ab,
            "preferred_ba": self.preferred_ba,
        }


@dataclass(frozen=True)
class VerbosityDetails:
    """How often each length/style word occurs in non-error judge reasons, and the cases using any."""

    word_counts: dict[str, int]
    case_ids: list[str]
    reasons_checked: int
    longer_wins: int
    longer_wins_n: int

    def to_json(self) -> dict[str, Any]:
        """Plain JSON form."""
        return {
            "word_counts": dict(self.word_counts),
            "case_ids": list(self.case_ids),
            "reasons_checked": self.reasons_checked,
            "longer_wins": self.longer_wins,
            "longer_wins_n": self.longer_wins_n,
        }


# --------------------------------------------------------------------------------------------------
# Pair classification


def pair_gaps(records: Sequence[CaseRecord]) -> dict[tuple[str, str], float]:
    """|mean rule reward of left - right agent| per declared pair, over its distinct (task, sample)."""
    seen: dict[tuple[str, str], dict[tuple[str, int], tuple[float, float]]] = {}
    for r in records:
        per = seen.setdefault((r.agent_left, r.agent_right), {})
        per.setdefault((r.task_id, r.sample), (r.reward_left, r.reward_right))
    gaps: dict[tuple[str, str], float] = {}
    for pair, per in seen.items():
        left = math.fsum(v[0] for v in per.values()) / len(per)
        right = math.fsum(v[1] for v in per.values()) / len(per)
        gaps[pair] = abs(left - right)
    return gaps


def classify_pairs(records: Sequence[CaseRecord], close_threshold: float) -> dict[tuple[str, str], str]:
    """``"close"`` if a declared pair's reward gap is <= ``close_threshold``, else ``"distant"``."""
    return {p: ("close" if g <= close_threshold else "distant") for p, g in pair_gaps(records).items()}


def pair_infos(records: Sequence[CaseRecord], close_threshold: float) -> dict[str, PairInfo]:
    """Every declared pair seen in the records with its gap and class, sorted by pair id."""
    classes = classify_pairs(records, close_threshold)
    gaps = pair_gaps(records)
    pairs: dict[str, PairInfo] = {}
    for r in records:
        if r.pair_id not in pairs:
            lr = (r.agent_left, r.agent_right)
            pairs[r.pair_id] = PairInfo(r.pair_id, lr[0], lr[1], gaps[lr], classes[lr])
    return dict(sorted(pairs.items()))


# --------------------------------------------------------------------------------------------------
# The phases, each adding per-task sums to one accumulator


PAIR_METRICS = tuple(m.name for m in SUITE_METRICS if m.per == "pair")
"""The metrics also estimated per pair (``lrs(agent_x, agent_y)``...), in the table's order."""
AGENT_METRICS = tuple(m.name for m in SUITE_METRICS if m.per == "agent")
"""The metrics also estimated per agent (``success_rate(agent_x)``...), in the table's order."""


def _verdict_rates(acc: Accumulator, r: CaseRecord, pair_class: str) -> None:
    """Position bias, LRS and longer-wins of one non-error, non-tie verdict."""
    t = acc.t_index[r.task_id]
    is_a = float(r.judge_choice == "A")
    acc.add(("position_bias",), t, is_a)
    acc.add(("position_bias", "pair", r.pair_id), t, is_a)
    if is_a:  # the numerator: verdicts for slot A
        acc.drive([("position_bias",), ("position_bias", "pair", r.pair_id)], r.case_id)
    if r.reward_left != r.reward_right:
        picked_low = float(r.lower_reward_selected is True)
        for key in (("lrs",), ("lrs", pair_class), ("lrs", "pair", r.pair_id)):
            acc.add(key, t, picked_low)
            if picked_low:
                acc.drive([key], r.case_id)
        for cls in ("all", pair_class, f"category:{r.category}"):
            acc.add(("judge_accuracy", PRIMARY, cls), t, 1.0 - picked_low)
            if picked_low:
                acc.drive([("judge_accuracy", PRIMARY, cls)], r.case_id)
    elif r.chars_left != r.chars_right:
        left = chosen_left(r, r.judge_choice)
        longer_left = r.chars_left > r.chars_right
        acc.add(("longer_wins_rate",), t, float(left == longer_left))
        if left == longer_left:
            acc.drive([("longer_wins_rate",)], r.case_id)


def case_rates(
    acc: Accumulator, records: Sequence[CaseRecord], pairs: dict[str, PairInfo]
) -> VerbosityDetails:
    """Case-level rates: judge errors, verbosity words, then position bias, LRS and longer-wins."""
    for pid in pairs:
        for m in PAIR_METRICS:
            acc.ensure((m, "pair", pid))
    for key in [*((m,) for m in PAIR_METRICS), ("lrs", "close"), ("lrs", "distant")]:
        acc.ensure(key)
    for cls in ("all", *PAIR_CLASSES, *sorted({f"category:{r.category}" for r in records})):
        acc.ensure(("judge_accuracy", PRIMARY, cls))
    acc.ensure(("verbosity_word_rate",))
    acc.ensure(("longer_wins_rate",))
    word_counts = dict.fromkeys(LENGTH_STYLE_WORDS, 0)
    verbose_cases: list[str] = []
    reasons_checked = 0
    for r in records:
        t = acc.t_index[r.task_id]
        is_error = r.judge_choice == "error"
        acc.add(("judge_error_rate",), t, float(is_error))
        if is_error:
            acc.drive([("judge_error_rate",), ("judge_error_rate", "pair", r.pair_id)], r.case_id)
        acc.add(("judge_error_rate", "pair", r.pair_id), t, float(is_error))
        if is_error:
            continue
        reasons_checked += 1
        reason = r.judge_reason.casefold()
        hits = [w for w in LENGTH_STYLE_WORDS if w.casefold() in reason]
        for w in hits:
            word_counts[w] += 1
        if hits:
            verbose_cases.append(r.case_id)
            acc.drive([("verbosity_word_rate",)], r.case_id)
        acc.add(("verbosity_word_rate",), t, float(bool(hits)))
        if r.judge_choice != "tie":
            _verdict_rates(acc, r, pairs[r.pair_id].pair_class)
    return VerbosityDetails(
        word_counts=word_counts,
        case_ids=sorted(verbose_cases),
        reasons_checked=reasons_checked,
        longer_wins=acc.total(("longer_wins_rate",), 0),
        longer_wins_n=acc.total(("longer_wins_rate",), 1),
    )


def flips(acc: Accumulator, records: Sequence[CaseRecord]) -> list[FlippedGroup]:
    """Position flips: (task, pair, sample) groups judged in both orders, neither an error."""
    groups: dict[tuple[str, str, int], dict[str, CaseRecord]] = {}
    for r in records:
        groups.setdefault((r.task_id, r.pair_id, r.sample), {}).setdefault(r.blind_order, r)
    flipped: list[FlippedGroup] = []
    for (task_id, pid, sample), by_order in sorted(groups.items()):
        ab, ba = by_order.get("A=left"), by_order.get("A=right")
        if ab is None or ba is None or "error" in (ab.judge_choice, ba.judge_choice):
            continue
        flip = ab.preferred_agent != ba.preferred_agent
        t = acc.t_index[task_id]
        acc.add(("flip_rate",), t, float(flip))
        acc.add(("flip_rate", "pair", pid), t, float(flip))
        if flip:
            group = FlippedGroup(task_id, pid, sample, ab.preferred_agent, ba.preferred_agent)
            flipped.append(group)
            acc.drive([("flip_rate",), ("flip_rate", "pair", pid)], group.label())
    return flipped


@dataclass(frozen=True)
class TranscriptRates:
    """What the transcript phase found: the agents, satisfied-but-failed transcripts, successes."""

    agents: list[str]
    sat_failed: list[tuple[str, str, int]]
    successes: int


def _empty_turns(acc: Accumulator, records: Sequence[CaseRecord]) -> None:
    """``empty_turn_rate``: distinct transcripts with at least one empty turn (a small model's ``""``)."""
    empty: dict[tuple[str, str, int], int] = {}
    for r in records:
        empty.setdefault((r.task_id, r.agent_left, r.sample), r.empty_turns_left)
        empty.setdefault((r.task_id, r.agent_right, r.sample), r.empty_turns_right)
    for (task_id, agent, sample), count in sorted(empty.items()):
        keys: list[Key] = [("empty_turn_rate",), ("empty_turn_rate", "agent", agent)]
        if count:
            acc.drive(keys, f"{task_id}/{agent}#{sample}")
        for key in keys:
            acc.add(key, acc.t_index[task_id], float(count > 0))


def _user_audit(acc: Accumulator, records: Sequence[CaseRecord]) -> None:
    """``user_sim_error_rate`` and per kind: distinct transcripts whose simulated user erred
    (docs/protocol.md#user-audit)."""
    flags: dict[tuple[str, str, int], list[str]] = {}
    for r in records:
        flags.setdefault((r.task_id, r.agent_left, r.sample), r.user_flags_left)
        flags.setdefault((r.task_id, r.agent_right, r.sample), r.user_flags_right)
    acc.ensure(("user_sim_error_rate",))
    for kind in USER_AUDIT_KINDS:
        acc.ensure(("user_sim_error_rate", "kind", kind))
    for (task_id, agent, sample), kinds in sorted(flags.items()):
        t = acc.t_index[task_id]
        acc.add(("user_sim_error_rate",), t, float(bool(kinds)))
        if kinds:
            acc.drive([("user_sim_error_rate",)], f"{task_id}/{agent}#{sample}: {', '.join(kinds)}")
        for kind in USER_AUDIT_KINDS:
            acc.add(("user_sim_error_rate", "kind", kind), t, float(kind in kinds))
            if kind in kinds:
                acc.drive([("user_sim_error_rate", "kind", kind)], f"{task_id}/{agent}#{sample}")


def transcript_rates(acc: Accumulator, records: Sequence[CaseRecord]) -> TranscriptRates:
    """Success and satisfied-but-failed rates over distinct (task, agent, sample) transcripts."""
    transcripts: dict[tuple[str, str, int], tuple[bool, bool | None]] = {}
    for r in records:
        transcripts.setdefault((r.task_id, r.agent_left, r.sample), (r.task_success_left, r.user_sat_left))
        transcripts.setdefault((r.task_id, r.agent_right, r.sample), (r.task_success_right, r.user_sat_right))
    agents = sorted({a for _, a, _ in transcripts})
    for name in AGENT_METRICS:
        acc.ensure((name,))
        for a in agents:
            acc.ensure((name, "agent", a))
    _empty_turns(acc, records)
    _user_audit(acc, records)
    sat_failed: list[tuple[str, str, int]] = []
    successes = 0
    for (task_id, agent, sample), (success, sat) in sorted(transcripts.items()):
        t = acc.t_index[task_id]
        successes += int(success)
        for key in (("success_rate",), ("success_rate", "agent", agent)):
            acc.add(key, t, float(success))
        if not success:  # what pulls a success rate down: the failed transcripts
            acc.drive(
                [("success_rate",), ("success_rate", "agent", agent)], f"{task_id}/{agent}#{sample} failed"
            )
        if sat is None:
            continue
        bad = bool(sat) and not success
        keys: list[Key] = [("sat_but_failed_rate",), ("sat_but_failed_rate", "agent", agent)]
        if bad:
            sat_failed.append((task_id, agent, sample))
            acc.drive(keys, f"{task_id}/{agent}#{sample}")
        for bad_key in keys:
            acc.add(bad_key, t, float(bad))
    return TranscriptRates(agents, sat_failed, successes)
