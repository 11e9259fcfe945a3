"""The simulated user audited end to end: a suite whose simulated user is made to
leak its hidden facts, end early, stay silent or contradict its facts on known tasks gets exactly those
transcripts flagged, ``user_sim_error_rate`` equal to the known share, the flags on the case records, a
conclusion.md section and the HTML marker data; a gate on it decides the run. The optional audit model
(``UserSimulator(audit_model=...)``) flags ``judged``, one call per transcript on the ledger under role
``user_audit``, priced as the others."""

from __future__ import annotations

import json

import pytest

from tests.helpers import read_jsonl, run_inprocess

TASKS = [
    {"format_version": 1},
    # asks first (asks_clarification): the agents ask, a normal user answers the question
    {
        "task_id": "c1",
        "category": "clarification",
        "task_prompt": "Book me a table for dinner.",
        "hidden_facts": ["Party of 4", "Friday at 7pm"],
        "success_criteria": [{"type": "asks_clarification"}, {"type": "contains_all", "phrases": ["dinner"]}],
    },
    {
        "task_id": "c2",
        "category": "clarification",
        "task_prompt": "Plan my trip to Rome.",
        "hidden_facts": ["Three days in May"],
        "success_criteria": [{"type": "asks_clarification"}, {"type": "contains_all", "phrases": ["Rome"]}],
    },
    {
        "task_id": "c3",
        "category": "clarification",
        "task_prompt": "Order a birthday cake.",
        "hidden_facts": ["Cake for 8 people", "Pick up at 5pm"],
        "success_criteria": [{"type": "asks_clarification"}, {"type": "contains_all", "phrases": ["cake"]}],
    },
    # answered at once: a normal user says thanks and ends
    {
        "task_id": "p1",
        "category": "information_retrieval",
        "task_prompt": "Name the three plan tiers.",
        "hidden_facts": ["I am on the pro plan"],
        "success_criteria": [{"type": "contains_all", "phrases": ["basic", "pro", "enterprise"]}],
    },
    {
        "task_id": "p2",
        "category": "information_retrieval",
        "task_prompt": "List the two office cities.",
        "hidden_facts": ["I live near Lyon"],
        "success_criteria": [{"type": "contains_all", "phrases": ["Paris", "Berlin"]}],
    },
    {
        "task_id": "p3",
        "category": "information_retrieval",
        "task_prompt": "Name the support hours.",
        "hidden_facts": ["I work nights"],
        "success_criteria": [{"type": "contains_all", "phrases": ["nine", "five"]}],
    },
    {
        "task_id": "p4",
        "category": "information_retrieval",
        "task_prompt": "Say the refund window.",
        "success_criteria": [{"type": "contains_all", "phrases": ["30 days"]}],
    },
]

SUITE = """
from pytest_gauge import Judge, ModelAgent, SimAgent, SimJudge, SimUser, Suite, UserSimulator

suite = Suite(
    agents=[
        ModelAgent("agent_a", "sim-a", sim=SimAgent(skill=1.0, politeness=0.0)),
        ModelAgent("agent_b", "sim-b", sim=SimAgent(skill=1.0, politeness=0.0, verbosity=1.5)),
    ],
    judge=Judge("sim-judge", sim=SimJudge(noise=0.1)),
    user=UserSimulator(
        "sim-user",
        audit_model="sim-audit",
        sim=SimUser(
            leak_tasks=("p1",), end_early_tasks=("c1",), silent_tasks=("p2",), contradict_tasks=("c3",)
        ),
    ),
    gates=["user_sim_error_rate <= 0.2", "upper(user_sim_error_rate(leaked_fact)) <= 0.9"],
)
"""

KNOWN = {"p1": "leaked_fact", "c1": "ended_early", "p2": "silent", "c3": "contradicted"}
# what the (simulated) audit model also finds: the silent turn and the contradiction
JUDGED = {"p2", "c3"}


def test_a_user_made_to_err_on_known_tasks_gets_exactly_those_transcripts_flagged(
    pytester: pytest.Pytester,
) -> None:
    folder = pytester.path / "suites" / "audit"
    folder.mkdir(parents=True)
    (folder / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in TASKS), encoding="utf-8")
    (folder / "test_audit.py").write_text(SUITE, encoding="utf-8")
    prices = "gauge_prices =\n    sim-user 1 2\n    sim-audit 1 4\n"
    pytester.makeini(f"[pytest]\ngauge_backend = sim\ngauge_seed = 3\n{prices}")
    result = run_inprocess(pytester, "suites", "-n", "0")
    out = pytester.path / "gauge-out" / "audit"
    records = read_jsonl(out / "pairs" / "pair_results.jsonl")
    flags: dict[tuple[str, str], list[str]] = {}
    for r in records:
        flags[(r["task_id"], r["agent_left"])] = r.get("user_flags_left", [])
        flags[(r["task_id"], r["agent_right"])] = r.get("user_flags_right", [])
    expected = {
        (t, a): ([KNOWN[t]] if t in KNOWN else []) + (["judged"] if t in JUDGED else []) for t, a in flags
    }
    assert flags == expected
    metrics = json.loads((out / "reports" / "metrics.json").read_text(encoding="utf-8"))["metrics"]
    assert metrics["user_sim_error_rate"]["value"] == pytest.approx(8 / 14, abs=1e-6)
    assert metrics["user_sim_error_rate"]["n"] == 14
    for kind in ("leaked_fact", "ended_early", "silent", "contradicted"):
        assert metrics[f"user_sim_error_rate({kind})"]["value"] == pytest.approx(2 / 14, abs=1e-6)
    assert metrics["user_sim_error_rate(cooperative)"]["value"] == 0.0
    assert metrics["user_sim_error_rate(judged)"]["value"] == pytest.approx(4 / 14, abs=1e-6)
    # one audit call per transcript, on the ledger under its role and priced as the user's calls are
    ledger = read_jsonl(out / "agent_runs.jsonl")
    audits = [x for x in ledger if x["role"] == "user_audit"]
    users = [x for x in ledger if x["role"] == "user_sim"]
    assert len(audits) == 14 and {x["model"] for x in audits} == {"sim-audit"}
    assert all(x["cost"] is not None for x in users)
    for x in audits:  # sim-audit at 1 and 4 per million tokens
        usage = x["usage"]
        assert x["cost"] == pytest.approx(
            (usage["input_tokens"] + 4 * usage["output_tokens"]) / 1e6, rel=1e-3
        )
    conclusion = (out / "reports" / "conclusion.md").read_text(encoding="utf-8")
    assert "## The simulated user audited" in conclusion
    assert "p1/agent_a#0" in conclusion and "leaked_fact" in conclusion
    table = (out / "reports" / "pairwise_table.md").read_text(encoding="utf-8")
    assert "| user_flags |" in table and "left: leaked_fact; right: leaked_fact" in table
    page = (out / "reports" / "index.html").read_text(encoding="utf-8")
    data = json.loads(page.split('id="gauge-data">', 1)[1].split("</script>", 1)[0])
    assert {c["id"] for c in data["cases"] if c["usr"]} == {
        r["case_id"] for r in records if r["task_id"] in KNOWN
    }
    # the first gate fails on the known share, the second passes; nothing else failed
    result.assert_outcomes(passed=len(records) + 1, failed=1)
