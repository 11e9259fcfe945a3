"""Human labels are bound to the transcripts they were given on: the HTML page puts the case's
transcripts hash in each exported label, and a later run whose transcripts changed sets those labels
aside and says how many, instead of counting them against verdicts on other answers."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pytest_gauge._internal.records.labels import Label
from tests.helpers import run_inprocess


def _page_cases(page: Path) -> list[dict[str, object]]:
    data = re.search(
        r'<script type="application/json" id="gauge-data">(.*?)</script>', page.read_text(), re.S
    )
    assert data is not None
    cases: list[dict[str, object]] = json.loads(data.group(1))["cases"]
    return cases


def _human(pytester: pytest.Pytester) -> dict[str, int]:
    metrics = json.loads((pytester.path / "gauge-out" / "mini" / "reports" / "metrics.json").read_text())
    human: dict[str, int] = metrics["human"]
    return human


def test_labels_on_changed_transcripts_are_set_aside_and_counted(
    pytester: pytest.Pytester, mini_suite: Path
) -> None:
    first = run_inprocess(pytester, "suites", "-n", "0")
    assert first.ret == 0
    cases = _page_cases(pytester.path / "gauge-out" / "mini" / "reports" / "index.html")
    chosen = [c for c in cases if str(c["id"]).startswith("m01-")][:4]
    chosen += [c for c in cases if str(c["id"]).startswith("m02-")][:2]
    assert len(chosen) == 6 and all(len(str(c["h"])) == 16 for c in chosen)
    labels = [Label("mini", str(c["id"]), "A", "ana", transcripts=str(c["h"])) for c in chosen]
    (pytester.path / "labels.jsonl").write_text("".join(json.dumps(x.to_json()) + "\n" for x in labels))

    same = run_inprocess(pytester, "suites", "-n", "0", "--gauge-labels", "labels.jsonl")
    human = json.loads((pytester.path / "gauge-out" / "mini" / "reports" / "metrics.json").read_text())[
        "human"
    ]
    assert same.ret == 0 and (human["labels"], human["set_aside"]) == (6, 0)  # nothing changed

    tasks = mini_suite / "tasks.jsonl"
    tasks.write_text(tasks.read_text().replace("Name the three plan tiers", "List the three plan tiers", 1))
    changed = run_inprocess(pytester, "suites", "-n", "0", "--gauge-labels", "labels.jsonl")
    assert changed.ret == 0
    human = json.loads((pytester.path / "gauge-out" / "mini" / "reports" / "metrics.json").read_text())[
        "human"
    ]
    assert (human["labels"], human["set_aside"]) == (2, 4)  # m01's transcripts changed, m02's did not
    conclusion = (pytester.path / "gauge-out" / "mini" / "reports" / "conclusion.md").read_text()
    assert "4 labels were set aside: given on transcripts that have since changed" in conclusion
