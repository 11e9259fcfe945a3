"""The judge against people: human-label agreement and kappa by hand, weights, several
labellers, unknown cases, gate lookups, the labels files and the stratified sample."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from pytest_gauge._internal.analysis.estimates import kappa_of
from pytest_gauge._internal.analysis.human import human_findings, jackknife_kappa, rules_choice
from pytest_gauge._internal.analysis.label_sample import allocate, sample_cases, strata_of
from pytest_gauge._internal.analysis.metrics import compute_metrics
from pytest_gauge._internal.files.labels import (
    LabelsError,
    read_labels,
    read_sample,
    write_labels,
    write_sample,
)
from pytest_gauge._internal.records import CaseRecord, Judgment
from pytest_gauge._internal.records.labels import Label
from tests.unit.analysis.test_metrics import case


def _records() -> list[CaseRecord]:
    """Four tasks, two cases each (AB and BA) of one pair; left's reward 1, right's 0."""
    choices = {"t1": ("A", "B"), "t2": ("A", "A"), "t3": ("B", "tie"), "t4": ("A", "B")}
    out = []
    for task, (ab, ba) in choices.items():
        out.append(case(task, "p", "x", "y", "AB", ab, rewards=(1.0, 0.0)))
        out.append(case(task, "p", "x", "y", "BA", ba, rewards=(1.0, 0.0)))
    return out


def _label(case_id: str, label: str, who: str = "ada", weight: float = 1.0) -> Label:
    return Label("s", case_id, label, who, weight=weight)


def test_agreement_kappa_and_rules_by_hand() -> None:
    records = _records()
    # the people say the rules' side every time: A on AB cases, B on BA cases
    labels = [_label(r.case_id, "A" if r.order == "AB" else "B") for r in records]
    found = human_findings(records, labels)
    # the judge agreed on t1 AB, t1 BA, t2 AB, t4 AB, t4 BA: 5 of 8
    assert found.agreement["main"].value == pytest.approx(5 / 8)
    assert found.agreement["main"].n == 8 and found.agreement["main"].method == "cluster-wilson"
    assert found.rules.value == 1.0
    table = np.zeros(9)
    for r, lab in zip(records, labels, strict=True):
        cats = {"A": 0, "B": 1, "tie": 2}
        table[3 * cats[r.judge_choice] + cats[lab.label]] += 1
    assert found.kappa["main"].value == pytest.approx(float(kappa_of(table[None, :])[0]))
    k = found.kappa["main"]
    assert k.low is not None and k.high is not None and k.value is not None and k.low < k.value < k.high
    assert sorted(found.drivers["main"]) == sorted(
        r.case_id for r in records if r.case_id.endswith(("t2-p-BA-0", "t3-p-AB-0", "t3-p-BA-0"))
    )
    assert rules_choice(records[1]) == "B"  # BA: the left (higher) side sits in slot B


def test_weights_count_each_case_once_and_scale_agreement() -> None:
    records = _records()
    agreeing, other = records[0], records[5]  # t1 AB (judge A), t3 BA (judge tie)
    plain = human_findings(records, [_label(agreeing.case_id, "A"), _label(other.case_id, "A")])
    assert plain.agreement["main"].value == pytest.approx(0.5)
    weighted = human_findings(
        records, [_label(agreeing.case_id, "A", weight=3.0), _label(other.case_id, "A", weight=1.0)]
    )
    assert weighted.agreement["main"].value == pytest.approx(0.75)
    two = human_findings(
        records,
        [_label(agreeing.case_id, "A"), _label(agreeing.case_id, "B", "bob"), _label(other.case_id, "A")],
    )
    # the doubly labelled case weighs one case: (0.5 + 0) / 2
    assert two.agreement["main"].value == pytest.approx(0.25)
    assert two.labeller_agreement.value == 0.0 and two.labeller_agreement.n == 1
    assert two.labellers == ["ada", "bob"] and two.cases == 2 and two.labels == 3


def test_unknown_cases_are_reported_and_ignored_and_models_and_panel_are_compared() -> None:
    judged = [
        Judgment("m1", 0, "A", None, None, ""),
        Judgment("m2", 0, "B", None, None, ""),
        Judgment("m3", 0, "A", None, None, ""),
    ]
    r = case("t1", "p", "x", "y", "AB", "A", rewards=(1.0, 0.0), judgments=judged)
    found = human_findings([r], [_label(r.case_id, "B"), _label("gone", "A")])
    assert found.unknown == ["gone"] and found.cases == 1
    assert found.agreement["m1"].value == 0.0 and found.agreement["m2"].value == 1.0
    assert found.agreement["panel"].value == 0.0  # the majority said A
    assert found.lookup("human_judge_agreement", ("m2",)).value == 1.0
    with pytest.raises(KeyError, match="unknown judge model"):
        found.lookup("human_judge_kappa", ("nope",))


def test_metrics_carry_the_labels_only_when_given() -> None:
    records = _records()
    assert compute_metrics(records, rounds=50).human is None
    m = compute_metrics(records, rounds=50, labels=[_label(records[0].case_id, "A")])
    assert m.human is not None and m.lookup("human_judge_agreement").value == 1.0
    assert compute_metrics(records, rounds=50).lookup("human_judge_agreement").value is None


def test_jackknife_kappa_needs_two_tasks() -> None:
    one = np.zeros((1, 9))
    one[0, 0] = one[0, 4] = 3
    assert jackknife_kappa(one).low is None and jackknife_kappa(one).value == 1.0
    assert jackknife_kappa(np.zeros((3, 9))).value is None


def test_labels_files_round_trip_and_bad_lines_name_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    write_labels(path, [_label("c1", "A"), _label("c1", "B"), _label("c2", "tie", "bob", 2.5)])
    assert [(x.case_id, x.label) for x in read_labels([path])] == [("c1", "B"), ("c2", "tie")]
    path.write_text('{"suite": "s", "case_id": "c", "label": "X", "labeller": "a"}\n', encoding="utf-8")
    with pytest.raises(LabelsError, match=r"labels.jsonl:1: field 'label' must be one of A, B, tie"):
        read_labels([path])
    path.write_text('{"suite": "s", "case_id": "c", "label": "A", "labeller": "a", "weight": 0}\n', "utf-8")
    with pytest.raises(LabelsError, match=r":1: field 'weight' must be a number above 0"):
        read_labels([path])


def test_stratified_sample_allocates_weights_and_is_seeded(tmp_path: Path) -> None:
    assert allocate([2, 10, 0, 10], 12) == [2, 5, 0, 5]
    assert allocate([3, 3], 40) == [3, 3]
    records = []
    for t in range(20):
        records.append(case(f"t{t:02}", "p", "x", "y", "AB", "A" if t % 3 else "B", rewards=(1.0, 0.0)))
        records.append(case(f"t{t:02}", "p", "x", "y", "BA", "B", rewards=(1.0, 0.0)))
    strata = strata_of(records)
    assert len(strata["disagree"]) == 7 and strata["close"] == []
    sample = sample_cases(records, 12, seed=3)
    assert sample == sample_cases(records, 12, seed=3) and sample != sample_cases(records, 12, seed=4)
    drawn = Counter(c.stratum for c in sample)
    assert sum(drawn.values()) == 12 and len({c.case_id for c in sample}) == 12
    for c in sample:  # weight: the stratum's size over the cases drawn from it
        assert c.weight == pytest.approx(len(strata[c.stratum]) / drawn[c.stratum])
    path = tmp_path / "labels" / "sample.jsonl"
    write_sample(path, sample)
    assert read_sample(path) == sample and read_sample(tmp_path / "none.jsonl") == []


def test_a_human_gate_without_labels_is_inconclusive_saying_why() -> None:
    from pytest_gauge._internal.analysis.gate_source import GateSource
    from pytest_gauge._internal.analysis.gates import evaluate_gates, parse_gates

    records = _records()
    gates = parse_gates(["lower(human_judge_agreement) >= 0.8"])
    (none,) = evaluate_gates(gates, GateSource(compute_metrics(records, rounds=50), None))
    assert none.status == "inconclusive" and "--gauge-labels" in none.message
    labels = [_label(r.case_id, r.judge_choice) for r in records]
    (some,) = evaluate_gates(gates, GateSource(compute_metrics(records, rounds=50, labels=labels), None))
    assert some.status in ("pass", "fail") and some.value == 1.0
