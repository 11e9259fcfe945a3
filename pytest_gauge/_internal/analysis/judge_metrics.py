"""The judges against each other and against the rules: agreement and kappa between repeats and models,
accuracy per judge and of the panel, rank correlation, calibration and the cheaper-judge recommendation
(docs/protocol.md#metrics and #judge-accuracy), accumulated per task like every case rate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ..records import CaseRecord, Judgment, LedgerRecord
from .estimates import PAIR_CLASSES, Accumulator, Estimate, Key, chosen_left
from .judge_rules import (
    NON_INFERIORITY,
    PANEL,
    PRIMARY,
    CalibrationBin,
    CheaperJudge,
    RewardPoint,
    calibration,
    panel_choice,
    reward_points,
)

if TYPE_CHECKING:
    from ..records import FloatArray

__all__ = [
    "AGREEMENT_KINDS",
    "AgreementDetails",
    "JudgeFindings",
    "JudgeRules",
    "agreement_details",
    "judge_agreement",
    "judge_rules_of",
]

AGREEMENT_KINDS = ("all", "repeats", "judges")
_CATS = {"A": 0, "B": 1, "tie": 2}


class _Table(Protocol):
    """What the judge summaries read from the suite's statistics (``metrics._Statistics``)."""

    @property
    def stats(self) -> dict[Key, Any]: ...
    def estimate(self, key: Key) -> Estimate: ...
    def difference(self, ka: Key, kb: Key) -> Estimate: ...


@dataclass(frozen=True)
class AgreementDetails:
    """Judge agreement from ``CaseRecord.judgments``: observed agreement and Cohen's kappa on A/B/tie.

    ``repeats`` pairs every two non-error repeats of one judge on a case (earlier repeat as rater 1);
    ``judges`` pairs the lowest-numbered repeat of two different judges (alphabetically first judge as
    rater 1), both non-error; ``all`` pools both. ``confusion[kind]`` is the 3x3 table (rows rater 1,
    columns rater 2, order A, B, tie). ``accuracy[judge][cls]`` is the share of that judge's non-error,
    non-tie verdicts on unequal-reward cases that chose the higher rule reward (1 - LRS), cls in
    all/close/distant.
    """

    agreement: dict[str, Estimate]
    kappa: dict[str, Estimate]
    confusion: dict[str, list[list[int]]]
    accuracy: dict[str, dict[str, Estimate]]

    def to_json(self) -> dict[str, Any]:
        """Plain JSON form."""
        return {
            "agreement": {k: v.to_json() for k, v in self.agreement.items()},
            "kappa": {k: v.to_json() for k, v in self.kappa.items()},
            "confusion": {k: [list(r) for r in v] for k, v in self.confusion.items()},
            "accuracy": {j: {c: e.to_json() for c, e in d.items()} for j, d in self.accuracy.items()},
        }


@dataclass(frozen=True)
class JudgeRules:
    """The judge against the rule rewards (docs/protocol.md#judge-accuracy).

    ``accuracy[who][cls]``: ``who`` is ``main`` (the case's main verdict), a judge model, or ``panel``
    (majority of the models' first verdicts); ``cls`` is all, close, distant or ``category:<name>``.
    ``rank_corr[model]``: Spearman's rho between the model's rewards and the rule rewards of the same
    sides. ``calibration[model]``: judge reward bins against their mean rule reward. ``cost_per_call``
    per judge model (None: unpriced). ``cheaper``: a cheaper panel model as accurate as the main one.
    """

    main: str
    accuracy: dict[str, dict[str, Estimate]]
    rank_corr: dict[str, Estimate]
    calibration: dict[str, list[CalibrationBin]]
    cost_per_call: dict[str, float | None]
    cheaper: CheaperJudge | None

    def to_json(self) -> dict[str, Any]:
        """Plain JSON form."""
        return {
            "main": self.main,
            "accuracy": {j: {c: e.to_json() for c, e in d.items()} for j, d in self.accuracy.items()},
            "rank_corr": {j: e.to_json() for j, e in self.rank_corr.items()},
            "calibration": {j: [b.to_json() for b in bins] for j, bins in self.calibration.items()},
            "cost_per_call": dict(self.cost_per_call),
            "cheaper": None if self.cheaper is None else self.cheaper.to_json(),
            "non_inferiority": NON_INFERIORITY,
        }


def _agree(confusion: dict[str, FloatArray], kind: str, t: int, c1: str, c2: str) -> None:
    """Count one pair of A/B/tie verdicts in the ``kind`` table and in ``all``."""
    cell = 3 * _CATS[c1] + _CATS[c2]
    confusion[kind][t, cell] += 1
    confusion["all"][t, cell] += 1


def _accuracy(acc: Accumulator, r: CaseRecord, judge: str, choice: str, pair_class: str) -> None:
    """One verdict of ``judge`` (a model or the panel) against the rule rewards, if it counts."""
    if choice in ("A", "B") and r.reward_left != r.reward_right:
        correct = chosen_left(r, choice) == (r.reward_left > r.reward_right)
        for c in ("all", pair_class, f"category:{r.category}"):
            acc.add(("judge_accuracy", judge, c), acc.t_index[r.task_id], float(correct))


def _case_agreement(
    acc: Accumulator,
    confusion: dict[str, FloatArray],
    r: CaseRecord,
    pair_class: str,
    points: dict[str, list[RewardPoint]],
) -> None:
    """One case's judgments: accuracy per judge and of the panel's majority, reward points per judge,
    repeat pairs and judge pairs into the confusion tables."""
    t = acc.t_index[r.task_id]
    by_judge: dict[str, list[tuple[int, str]]] = {}
    for jd in r.judgments:
        by_judge.setdefault(jd.judge, []).append((jd.repeat, jd.choice))
        _accuracy(acc, r, jd.judge, jd.choice, pair_class)
        points.setdefault(jd.judge, []).extend(reward_points(r, jd, t))
    majority = panel_choice(r.judgments)
    if majority is not None:
        _accuracy(acc, r, PANEL, majority, pair_class)
    for verdicts in by_judge.values():
        ok = [c for _, c in sorted(verdicts) if c in _CATS]
        for i in range(len(ok)):
            for k in range(i + 1, len(ok)):
                _agree(confusion, "repeats", t, ok[i], ok[k])
    firsts = {j: min(v)[1] for j, v in by_judge.items()}
    names = sorted(firsts)
    for i in range(len(names)):
        for k in range(i + 1, len(names)):
            c1, c2 = firsts[names[i]], firsts[names[k]]
            if c1 in _CATS and c2 in _CATS:
                _agree(confusion, "judges", t, c1, c2)


@dataclass(frozen=True)
class JudgeFindings:
    """What the judgment phase found: judge models, agreement tables, reward points per judge."""

    judges: list[str]
    main: str
    confusion: dict[str, FloatArray]
    points: dict[str, list[RewardPoint]]


def judge_agreement(
    acc: Accumulator, records: Sequence[CaseRecord], classes: Mapping[str, str]
) -> JudgeFindings:
    """The judges seen in ``judgments``, the per-task 3x3 agreement tables per kind (rows of 9), and the
    judges' rewards beside the rule rewards."""
    confusion = {k: np.zeros((acc.n_tasks, 9), dtype=np.float64) for k in AGREEMENT_KINDS}
    judges = sorted({j.judge for r in records for j in r.judgments})
    panel = [PANEL] if len(judges) > 1 else []
    for j in [*judges, *panel]:
        for c in ("all", *PAIR_CLASSES):
            acc.ensure(("judge_accuracy", j, c))
    points: dict[str, list[RewardPoint]] = {}
    for r in records:
        if r.judgments:
            _case_agreement(acc, confusion, r, classes[r.pair_id], points)
        else:  # a single verdict: the case's own fields are the main judge's
            main_verdict = Judgment(PRIMARY, 0, r.judge_choice, r.judge_reward_a, r.judge_reward_b, "")
            points.setdefault(PRIMARY, []).extend(reward_points(r, main_verdict, acc.t_index[r.task_id]))
    main = next((r.judgments[0].judge for r in records if r.judgments), PRIMARY)
    return JudgeFindings(judges or [PRIMARY], main, confusion, points)


def agreement_details(
    table: _Table, confusion: dict[str, FloatArray], judges: Sequence[str]
) -> AgreementDetails:
    """Agreement, kappa, pooled confusion tables and per-judge accuracy."""
    return AgreementDetails(
        agreement={k: table.estimate(("judge_agreement", k)) for k in AGREEMENT_KINDS},
        kappa={k: table.estimate(("judge_kappa", k)) for k in AGREEMENT_KINDS},
        confusion={
            k: [[int(v) for v in row] for row in c.sum(axis=0).reshape(3, 3)] for k, c in confusion.items()
        },
        accuracy={
            j: {c: table.estimate(("judge_accuracy", j, c)) for c in ("all", *PAIR_CLASSES)} for j in judges
        },
    )


def _judge_cost_per_call(ledger: Sequence[LedgerRecord], model: str) -> float | None:
    """Nominal cost per judge call of one model (None when unpriced or never called)."""
    call_ids: set[str] = set()
    costs: list[float] = []
    unpriced = False
    for x in ledger:  # one pass, no list of the records (made anew from the ledger's columns)
        if x.role == "judge" and x.model == model:
            call_ids.add(x.call_id)
            unpriced = unpriced or (x.cost is None and x.usage is not None)
            if x.cost is not None:
                costs.append(x.cost)
    if not call_ids or unpriced:
        return None
    return math.fsum(costs) / len(call_ids)


def _cheaper_judge(
    table: _Table, found: JudgeFindings, costs: dict[str, float | None]
) -> CheaperJudge | None:
    """The cheapest panel model whose accuracy is within NON_INFERIORITY of the main model's."""
    main_cost = costs.get(found.main)
    best: CheaperJudge | None = None
    for model in found.judges:
        cost = costs.get(model)
        if model == found.main or cost is None or main_cost is None or not cost < main_cost:
            continue
        diff = table.difference(("judge_accuracy", model, "all"), ("judge_accuracy", found.main, "all"))
        if diff.value is None or diff.low is None or diff.low < -NON_INFERIORITY:
            continue
        ratio = cost / main_cost
        if best is None or ratio < best.cost_ratio:
            best = CheaperJudge(model, found.main, ratio, diff.value, diff.low)
    return best


def judge_rules_of(table: _Table, found: JudgeFindings, ledger: Sequence[LedgerRecord]) -> JudgeRules:
    """Accuracy per verdict source and class/category, rank correlation, calibration, cheaper model."""
    accuracy: dict[str, dict[str, Estimate]] = {}
    for key in sorted(k for k in table.stats if k[0] == "judge_accuracy"):
        accuracy.setdefault(key[1], {})[key[2]] = table.estimate(key)
    costs = {j: _judge_cost_per_call(ledger, j) for j in found.judges}
    return JudgeRules(
        main=found.main,
        accuracy=accuracy,
        rank_corr={j: table.estimate(("judge_rank_corr", j)) for j in found.judges},
        calibration={j: calibration(found.points.get(j, [])) for j in found.judges},
        cost_per_call=costs,
        cheaper=_cheaper_judge(table, found, costs),
    )
