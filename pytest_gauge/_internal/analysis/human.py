"""The judge against people: blind human labels of judged cases against the judge's
verdicts, per judge model and the panel, and against the rules, with task-cluster intervals and the
labelling sample's weights (docs/protocol.md#human-labels).

Each labelled case counts once: its labellers share its weight (the sample's inverse inclusion
probability, normalised to a mean of 1 over the labelled cases), so a case with two labellers weighs what
a case with one does. Agreement rates are weighted ratios over tasks with the cluster-adjusted Wilson
interval of every case rate; kappa (Cohen's, on A/B/tie) gets a leave-one-task-out jackknife standard
error with a t quantile on tasks - 1 df. Both were chosen by the coverage simulation in
``tests/unit/analysis/test_human_coverage.py`` (≥ 93% at 40 labelled cases).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..records import CaseRecord
from ..records.labels import Label
from .estimates import Estimate, kappa_of, none_estimate
from .intervals import cluster_wilson, cluster_wilson_df, t_quantile
from .judge_rules import PANEL, PRIMARY, panel_choice

if TYPE_CHECKING:
    from ..records import FloatArray

__all__ = [
    "HUMAN_METRICS",
    "HumanFindings",
    "human_findings",
    "jackknife_kappa",
    "rules_choice",
    "weighted_agreement",
]

HUMAN_METRICS = (
    "human_judge_agreement",
    "human_judge_kappa",
    "human_rules_agreement",
    "labeller_agreement",
    "labeller_kappa",
)
"""The gate names of the human-label metrics: (), (judge model) or (panel) for the first two."""

_CATS = {"A": 0, "B": 1, "tie": 2}


def rules_choice(r: CaseRecord) -> str:
    """The rules' verdict in slot terms: the slot whose rule reward is higher, or a tie."""
    a, b = (r.reward_left, r.reward_right) if r.blind_order == "A=left" else (r.reward_right, r.reward_left)
    return "A" if a > b else "B" if b > a else "tie"


def weighted_agreement(k: FloatArray, m: FloatArray) -> Estimate:
    """A weighted agreement rate over tasks (per-task weighted agreements ``k`` and weights ``m``) with
    the cluster-adjusted Wilson interval; ``n`` is the weight's sum rounded (the labelled cases)."""
    total = float(m.sum())
    if total <= 0:
        return none_estimate(0)
    p, low, high = cluster_wilson(k, m)
    df = float(cluster_wilson_df(k, m))
    return Estimate(float(p), round(total), float(low), float(high), "cluster-wilson", df)


def jackknife_kappa(tables: FloatArray) -> Estimate:
    """Cohen's kappa of the summed per-task 3x3 tables (rows of 9) with a leave-one-task-out jackknife
    standard error and a t quantile on (tasks with data) - 1 df, clipped to [-1, 1]."""
    used = tables[tables.sum(axis=1) > 0]
    total = used.sum(axis=0)
    n = round(float(total.sum()))
    value = float(kappa_of(total[None, :])[0])
    if math.isnan(value):
        return none_estimate(n)
    tasks = used.shape[0]
    if tasks < 2:
        return Estimate(value, n, None, None, "none")
    leave_out = kappa_of(total[None, :] - used)
    ok = leave_out[~np.isnan(leave_out)]
    if ok.size < 2:
        return Estimate(value, n, None, None, "none")
    se = math.sqrt((tasks - 1) / tasks * float(np.sum((ok - ok.mean()) ** 2)))
    half = float(t_quantile(tasks - 1.0)) * se
    return Estimate(value, n, max(-1.0, value - half), min(1.0, value + half), "jackknife-t", tasks - 1.0)


@dataclass
class _Sums:
    """Per-task weighted agreements and 3x3 tables of one comparison (a judge, the rules, two labellers)."""

    agree: FloatArray
    table: FloatArray
    drivers: list[str] = field(default_factory=list)

    @classmethod
    def empty(cls, tasks: int) -> _Sums:
        return cls(np.zeros((tasks, 2)), np.zeros((tasks, 9)))

    def add(self, t: int, first: str, second: str, w: float, case_id: str) -> None:
        self.agree[t, 0] += w * (first == second)
        self.agree[t, 1] += w
        self.table[t, 3 * _CATS[first] + _CATS[second]] += w
        if first != second and case_id not in self.drivers:
            self.drivers.append(case_id)


@dataclass(frozen=True)
class HumanFindings:
    """What the labels say (docs/protocol.md#human-labels): agreement and kappa of each verdict source
    (``main``, every judge model, ``panel``) with the people, the people with the rules and with each
    other; the labels used, the labelled cases and their labellers, and the labels naming no case of
    this run (reported, ignored)."""

    labels: int
    cases: int
    labellers: list[str]
    unknown: list[str]
    agreement: dict[str, Estimate]
    kappa: dict[str, Estimate]
    rules: Estimate
    labeller_agreement: Estimate
    labeller_kappa: Estimate
    drivers: dict[str, list[str]]
    set_aside: int = 0  # labels given on transcripts that have since changed: not used

    def _who(self, name: str, args: tuple[str, ...]) -> str:
        if len(args) > 1 or (args and name not in HUMAN_METRICS[:2]):
            takes = "no argument, a judge model or panel" if name in HUMAN_METRICS[:2] else "no argument"
            raise KeyError(f"{name} takes {takes}")
        who = args[0].strip() if args else PRIMARY
        if who not in self.agreement:
            known = ", ".join(sorted(w for w in self.agreement if w != PRIMARY)) or "none"
            raise KeyError(f"{name}({who}): unknown judge model or no labelled verdict; judges: {known}")
        return who

    def lookup(self, name: str, args: tuple[str, ...] = ()) -> Estimate:
        """The estimate behind a gate term (KeyError for unknown arguments)."""
        if name == "human_rules_agreement" and not args:
            return self.rules
        if name == "labeller_agreement" and not args:
            return self.labeller_agreement
        if name == "labeller_kappa" and not args:
            return self.labeller_kappa
        who = self._who(name, tuple(args))
        return (self.agreement if name == "human_judge_agreement" else self.kappa)[who]

    def driver_cases(self, name: str, args: tuple[str, ...] = ()) -> list[str]:
        """The labelled cases where the compared sources disagree (a gate's drivers)."""
        if name in HUMAN_METRICS[:2]:
            try:
                return list(self.drivers.get(self._who(name, tuple(args)), []))
            except KeyError:
                return []
        return list(self.drivers.get({"human_rules_agreement": "rules"}.get(name, "labellers"), []))

    def to_json(self) -> dict[str, Any]:
        """Plain JSON form (``metrics.json``'s ``human``)."""
        return {
            "labels": self.labels,
            "cases": self.cases,
            "labellers": list(self.labellers),
            "unknown_cases": list(self.unknown),
            "set_aside": self.set_aside,
            "agreement": {k: v.to_json() for k, v in self.agreement.items()},
            "kappa": {k: v.to_json() for k, v in self.kappa.items()},
            "rules_agreement": self.rules.to_json(),
            "labeller_agreement": self.labeller_agreement.to_json(),
            "labeller_kappa": self.labeller_kappa.to_json(),
        }


def _verdicts(r: CaseRecord, judges: Sequence[str]) -> dict[str, str]:
    """Each verdict source's A/B/tie on a case: the main verdict, each model's first repeat, the panel."""
    out: dict[str, str] = {}
    if r.judge_choice in _CATS:
        out[PRIMARY] = r.judge_choice
    firsts: dict[str, tuple[int, str]] = {}
    for jd in r.judgments:
        if jd.judge not in firsts or jd.repeat < firsts[jd.judge][0]:
            firsts[jd.judge] = (jd.repeat, jd.choice)
    out |= {j: c for j, (_, c) in firsts.items() if c in _CATS}
    if len(judges) > 1:
        majority = panel_choice(r.judgments)
        if majority is not None:
            out[PANEL] = majority
    return out


def _by_case(labels: Sequence[Label], known: set[str]) -> tuple[dict[str, list[Label]], list[str]]:
    """The labels of each case of the run (labellers sorted) and the case ids naming no case of it."""
    cases: dict[str, list[Label]] = {}
    unknown: set[str] = set()
    for lab in labels:
        if lab.case_id in known:
            cases.setdefault(lab.case_id, []).append(lab)
        else:
            unknown.add(lab.case_id)
    return {c: sorted(v, key=lambda x: x.labeller) for c, v in sorted(cases.items())}, sorted(unknown)


def human_findings(
    records: Sequence[CaseRecord], labels: Sequence[Label], *, set_aside: int = 0
) -> HumanFindings:
    """The labels of one suite (already its own) against the run's records: see :class:`HumanFindings`;
    ``set_aside``: the labels given on transcripts that have since changed (not used, counted)."""
    by_id = {r.case_id: r for r in records}
    cases, unknown = _by_case(labels, set(by_id))
    tasks = {t: i for i, t in enumerate(sorted({by_id[c].task_id for c in cases}))}
    judges = sorted({j.judge for r in records for j in r.judgments})
    mean_w = math.fsum(v[0].weight for v in cases.values()) / len(cases) if cases else 1.0
    sums: dict[str, _Sums] = {}
    for who in [PRIMARY, *judges, *([PANEL] if len(judges) > 1 else []), "rules", "labellers"]:
        sums[who] = _Sums.empty(len(tasks))
    for case_id, labs in cases.items():
        r, t, w = by_id[case_id], tasks[by_id[case_id].task_id], labs[0].weight / mean_w
        share = w / len(labs)
        verdicts = _verdicts(r, judges)
        for lab in labs:
            for who, choice in verdicts.items():
                sums[who].add(t, choice, lab.label, share, case_id)
            sums["rules"].add(t, rules_choice(r), lab.label, share, case_id)
        pairs = [(a, b) for i, a in enumerate(labs) for b in labs[i + 1 :]]
        for a, b in pairs:
            sums["labellers"].add(t, a.label, b.label, w / len(pairs), case_id)
    sources = [w for w in sums if w not in ("rules", "labellers")]
    return HumanFindings(
        labels=sum(len(v) for v in cases.values()),
        cases=len(cases),
        labellers=sorted({lab.labeller for v in cases.values() for lab in v}),
        unknown=unknown,
        agreement={w: weighted_agreement(sums[w].agree[:, 0], sums[w].agree[:, 1]) for w in sources},
        kappa={w: jackknife_kappa(sums[w].table) for w in sources},
        rules=weighted_agreement(sums["rules"].agree[:, 0], sums["rules"].agree[:, 1]),
        labeller_agreement=weighted_agreement(sums["labellers"].agree[:, 0], sums["labellers"].agree[:, 1]),
        labeller_kappa=jackknife_kappa(sums["labellers"].table),
        drivers={w: s.drivers for w, s in sums.items()},
        set_aside=set_aside,
    )
