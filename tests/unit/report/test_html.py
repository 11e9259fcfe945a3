"""The HTML report, pure: the page built from hand-made values (its JSON document, redaction, driver
labels, bounded transcripts, one byte snapshot) and a bad output file named by the reader."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import random
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from syrupy.assertion import SnapshotAssertion

from pytest_gauge._internal.analysis.metrics import FlippedGroup
from pytest_gauge._internal.cli import main
from pytest_gauge._internal.files.html import ReportInputError, load_suite
from pytest_gauge._internal.records import (
    CaseRecord,
    Judgment,
    LedgerRecord,
    ToolCall,
    Transcript,
    Turn,
    Usage,
)
from pytest_gauge._internal.report.format import without_volatile
from pytest_gauge._internal.report.html import (
    GateRow,
    LatencyRow,
    MetricRow,
    RoleCost,
    RuleRow,
    SuiteOutputs,
    TaskRow,
    TranscriptRow,
    WatchRow,
    build_payload,
    driver_cases,
    embed_json,
    redaction_names,
    render_suite_html,
)
from pytest_gauge._internal.report.html.payload import PAGE_TRANSCRIPT_CHARS
from pytest_gauge._internal.report.metrics_json import driver_cases as gate_driver_cases
from pytest_gauge._internal.run.judge import Redactor
from tests.helpers import HTMLSnapshot

ROOT = Path(__file__).resolve().parents[3]


def test_embedded_json_cannot_end_its_script_block() -> None:
    doc = {"reply": "</script><script>alert(1)</script><!-- & -->\u2028\u2029", "n": [1, 2.5, None]}
    text = embed_json(doc)
    assert not any(ch in text for ch in "<>&\u2028\u2029")
    assert json.loads(text) == doc


def _case(case_id: str, order: str, choice: str, **kw: Any) -> CaseRecord:
    fields: dict[str, Any] = {
        "suite": "tiny",
        "case_id": case_id,
        "pair_id": "alpha-vs-beta",
        "task_id": "t1",
        "category": "constraint",
        "agent_left": "alpha",
        "agent_right": "beta",
        "order": order,
        "blind_order": "A=left" if order == "AB" else "A=right",
        "sample": 0,
        "judge_choice": choice,
        "reward_left": 1.0,
        "reward_right": 0.5,
        "selected_reward": None,
        "lower_reward_selected": None,
        "task_success_left": True,
        "task_success_right": False,
        "user_sat_left": True,
        "user_sat_right": True,
        "input_tokens_incl_shared": 100,
        "output_tokens_incl_shared": 20,
        "est_cost_incl_shared": 0.001,
        "judge_reward_a": 0.9,
        "judge_reward_b": 0.4,
        "judge_reason": "beta & alpha <differ>",
        "judge_raw": None,
        "judge_error": None,
        "chars_left": 10,
        "chars_right": 12,
    }
    fields.update(kw)
    return CaseRecord(**fields)


def _transcript(agent: str, reply: str) -> TranscriptRow:
    call = ToolCall("c1", "lookup", '{"id": "1"}', {"id": "1"}, result="rc is 4", return_code=4)
    turns = [
        Turn("user", "Do the </script> thing, alpha"),
        Turn("assistant", "", tool_calls=[call]),
        Turn("tool", "rc is 4", tool_call_id="c1"),
        Turn("assistant", reply),
    ]
    return TranscriptRow(
        task_id="t1",
        agent=agent,
        sample=0,
        transcript=Transcript("t1", agent, 0, turns, reply, True, "user_done"),
        error=None,
        input_tokens=50,
        output_tokens=7,
        cost=0.0004,
        reward=1.0 if agent == "alpha" else 0.5,
        task_success=agent == "alpha",
        criteria=(
            RuleRow("The reply mentions done.", True, "found"),
            RuleRow("Calls lookup.", agent == "alpha", "x"),
        ),
        constraints=(RuleRow("At most 9 words.", True, "3 words"),),
    )


def _ledger(work: str, role: str) -> LedgerRecord:
    return LedgerRecord(
        run_id="r1",
        call_id=f"{work}#1",
        attempt=1,
        status="ok",
        suite="tiny",
        task_id="t1",
        role=role,  # type: ignore[arg-type]
        model="m-judge" if role == "judge" else "m-alpha",
        strategy="single",
        work=work,
        usage=Usage(10, 2),
        usage_missing=False,
        latency_s=0.1,
        finish_reason="stop",
        cache_hit=False,
        cost=0.0001,
    )


def tiny_outputs() -> SuiteOutputs:
    """One task, one pair judged in both orders (the BA verdict flips), a failing gate driven by AB."""
    records = (
        _case(
            "t1-alpha-vs-beta-AB",
            "AB",
            "B",
            selected_reward=0.5,
            lower_reward_selected=True,
            judgments=[
                Judgment("m-judge", 0, "B", 0.9, 0.4, "beta is right"),
                Judgment("m-judge", 1, "error", None, None, "", raw="{oops", error="malformed verdict"),
            ],
        ),
        _case("t1-alpha-vs-beta-BA", "BA", "B", selected_reward=1.0, lower_reward_selected=False),
    )
    return SuiteOutputs(
        name="tiny",
        seed=3,
        backend="sim",
        models={"agent:alpha": "m-alpha", "agent:beta": "m-beta", "judge:0": "m-judge"},
        tasks=(TaskRow("t1", "constraint", "Do the thing, alpha <b>now</b>"),),
        records=records,
        transcripts=(
            _transcript("alpha", "done by m-alpha"),
            _transcript("beta", "done <script>x()</script>"),
        ),
        ledger=(
            _ledger("transcript/t1/alpha/0", "agent"),
            _ledger("judge/t1-alpha-vs-beta-AB/0/0", "judge"),
            _ledger("judge/t1-alpha-vs-beta-BA/0/0", "judge"),
        ),
        gates=(
            GateRow("judge_error_rate <= 0", "pass", 0.0, 0.0, 0.0, 2, 0.0, "PASS"),
            GateRow(
                "lrs <= 0",
                "fail",
                0.5,
                0.0,
                1.0,
                2,
                0.0,
                "FAIL",
                ("t1-alpha-vs-beta-AB",),
                ("t1-alpha-vs-beta-AB",),
            ),
        ),
        metrics=(MetricRow("lrs", 0.5, 0.0, 1.0, 2, "bootstrap-tasks"),),
        costs=(RoleCost("agent", 1, 1, 10, 2, 0.0001), RoleCost("judge", 2, 2, 20, 4, 0.0002)),
        watch=(
            WatchRow("agent", "m-alpha", 12.0, 0.0, 0, 0.0),
            WatchRow("judge", "m-judge", 12.0, 0.5, 1, 2.5),
        ),
        latency=(LatencyRow("judge", "m-judge", 2, 0.125, 0.75),),
        total_cost=0.0003,
        pair_class={"alpha-vs-beta": "distant"},
        flipped=(("t1", "alpha-vs-beta", 0),),
        elo_svg='<svg xmlns="http://www.w3.org/2000/svg"><text>alpha</text></svg>',
    )


def redactor_of(outputs: SuiteOutputs) -> Redactor:
    names = redaction_names(outputs)
    assert names == ["alpha", "beta", "m-alpha", "m-beta"]  # agents and their models, not the judge's
    return Redactor(names)


def test_payload_redacts_links_and_marks(snapshot: SnapshotAssertion) -> None:
    doc = build_payload(tiny_outputs(), redactor_of(tiny_outputs()))
    assert [g["status"] for g in doc["gates"]] == ["fail", "pass"]  # failing first
    assert doc["gates"][0]["drivers"] == [0]
    ab, ba = doc["cases"]
    assert (ab["L"], ab["R"], ba["L"], ba["R"]) == (0, 1, 0, 1)  # each transcript once, referenced twice
    assert len(doc["transcripts"]) == 2
    assert ab["lrs"] and not ba["lrs"] and ab["flip"] and ba["flip"] and ab["sbf"]  # beta satisfied, failed
    assert (ab["lg"], ba["lg"], doc["transcripts"][0]["lg"], doc["transcripts"][1]["lg"]) == (
        [1],
        [2],
        [0],
        [],
    )
    alpha = doc["transcripts"][0]["turns"]
    assert alpha[0]["c"] == "Do the </script> thing, [redacted]" and alpha[-1]["c"] == "done by [redacted]"
    assert alpha[2] == {"r": "tool", "c": "rc is 4", "id": "c1", "rc": 4}
    assert ab["j"][2] == "[redacted] & [redacted] <differ>"
    assert doc["tasks"] == [["t1", "constraint", "Do the thing, [redacted] <b>now</b>"]]
    assert [j[:3] for j in ab["js"]] == [["m-judge", 0, "B"], ["m-judge", 1, "error"]]
    assert ab["js"][0][5] == "[redacted] is right" and ab["js"][1][6:] == ["{oops", "malformed verdict"]


def test_page_bytes_snapshot(snapshot: SnapshotAssertion) -> None:
    page = render_suite_html(tiny_outputs(), redactor_of(tiny_outputs()))
    assert page == render_suite_html(tiny_outputs(), redactor_of(tiny_outputs()))
    assert page.count("</script>") == 3  # the data, volatile and app blocks': no string ends one early
    assert without_volatile(page).count("</script>") == 2 and 'id="gauge-volatile"' not in without_volatile(
        page
    )
    # the stylesheet and script stand in the snapshot as their hashes (they are reviewed as source files)
    for name in ("app.css", "app.js"):
        text = (ROOT / "pytest_gauge" / "_internal" / "report" / "html" / name).read_text(encoding="utf-8")
        assert page.count(text) == 1
        page = page.replace(text, f"/* {name} sha256={hashlib.sha256(text.encode()).hexdigest()} */")
    assert page == snapshot(extension_class=HTMLSnapshot)


def bulk_page(outputs: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    """``outputs``' page rendered as a large suite's: its cases, transcripts and ledger in the gzipped
    ``gauge-bulk`` block (the threshold lowered to 0)."""
    from pytest_gauge._internal.report.html import render

    monkeypatch.setattr(render, "BULK_CHARS", 0)
    return render_suite_html(outputs, redactor_of(outputs))


def test_a_large_pages_bulk_block_holds_exactly_the_documents_cases_transcripts_and_ledger(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import base64
    import gzip

    outputs = tiny_outputs()
    doc = build_payload(outputs, redactor_of(outputs))
    assert 'id="gauge-bulk"' not in render_suite_html(outputs, redactor_of(outputs))  # small: inline
    page = bulk_page(outputs, monkeypatch)
    data = json.loads(page.split('id="gauge-data">', 1)[1].split("</script>", 1)[0])
    block = page.split('id="gauge-bulk">', 1)[1].split("</script>", 1)[0]
    bulk = json.loads(gzip.decompress(base64.b64decode(block)))
    assert sorted(bulk) == data["bulk"] == ["cases", "ledger", "transcripts"]
    assert bulk == {k: doc[k] for k in bulk} and doc["cases"] and doc["transcripts"] and doc["ledger"]
    assert {**data, **bulk, "bulk": None} == {**doc, "bulk": None}  # the rest stays inline, as it was
    assert list(data) == sorted(data)
    assert page == bulk_page(outputs, monkeypatch)  # deterministic bytes (gzip without a time stamp)


def _dicts(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        yield value
        value = list(value.values())
    if isinstance(value, list):
        for item in value:
            yield from _dicts(item)


def test_page_document_is_built_in_key_order() -> None:
    """The page encodes its document without ``sort_keys`` (faster), so every dict must be built sorted,
    and the page's JSON block must be exactly the canonical :func:`embed_json` of the document."""
    outputs = tiny_outputs()
    doc = build_payload(outputs, redactor_of(outputs))
    unsorted = [list(d) for d in _dicts(doc) if list(d) != sorted(d)]
    assert not unsorted, f"payload dicts built out of key order: {unsorted[:3]}"
    assert embed_json(doc) in render_suite_html(outputs, redactor_of(outputs))


def test_redactor_fast_path_equals_the_case_insensitive_regex() -> None:
    """The ASCII fast path may skip the regex only when it cannot match: random texts of name pieces,
    case changes and the non-ASCII letters IGNORECASE pairs with ASCII ones (Kelvin sign, long s, dotless
    i, dotted capital I) give exactly what the plain case-insensitive substitution gives."""
    names = ["sim-agent-x", "agent_x", "Kit", "gpt-4o-mini"]
    alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    # whole identifiers only, as the redactor matches them (no ASCII letter or digit touching a name)
    plain = re.compile(rf"(?<![0-9A-Za-z])(?:{alternatives})(?![0-9A-Za-z])", re.IGNORECASE)
    pieces = ["sim-", "agent", "_x", "-x", "AGENT", "kit", "KIT", "gpt-4o", "-MINI", " ", "é", "中", "x"]
    pieces += ["\u212ait", "\u017fim-", "k\u0131t", "K\u0130T"]
    rng = random.Random(0)
    redact = Redactor(names)
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 8)))
        assert redact(text) == plain.sub("[redacted]", text), text
    assert Redactor(["agent_\u00e9"])("AGENT_\u00c9 x") == "[redacted] x"  # non-ASCII names: regex only


def test_driver_labels_resolve_to_cases() -> None:
    """metrics.json carries the cases a gate's drivers name (case ids); the page only looks them up."""
    records = [
        _case("t1-alpha-vs-beta-AB", "AB", "A"),
        _case("t1-alpha-vs-beta-BA", "BA", "A"),
        _case("t2-alpha-vs-beta-AB", "AB", "A", task_id="t2"),
    ]
    flipped = [FlippedGroup("t1", "alpha-vs-beta", 0, "alpha", None)]
    ids = [r.case_id for r in records]
    assert gate_driver_cases(["t2-alpha-vs-beta-AB"], records, flipped) == [ids[2]]
    assert (
        gate_driver_cases(["t1/alpha-vs-beta#0: alpha vs tie"], records, flipped) == ids[:2]
    )  # a flip group
    assert (
        gate_driver_cases(["t1/alpha-vs-beta#0: beta vs tie"], records, flipped) == []
    )  # not this run's flip
    assert gate_driver_cases(["t2/beta#0", "t1/gamma#0", "nonsense"], records, flipped) == [
        ids[2]
    ]  # a transcript
    assert gate_driver_cases(["t2/beta#0 failed", "t1 (Elo 812)"], records, flipped) == []  # labels, no case
    assert driver_cases([ids[2], ids[0], "gone"], records) == [
        0,
        2,
    ]  # metrics.json's ids -> the page's indices


def test_bad_output_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "s" / "pairs").mkdir(parents=True)
    (tmp_path / "s" / "pairs" / "pair_results.jsonl").write_text('{"a": 1}\n{oops\n', encoding="utf-8")
    with pytest.raises(ReportInputError, match=r"pair_results\.jsonl:2: not valid JSON"):
        load_suite(tmp_path / "s")
    err = Capture()
    assert main(["report", str(tmp_path / "missing")], out=Capture(), err=err) == 1
    assert "no such folder" in err.text


class Capture(io.StringIO):
    @property
    def text(self) -> str:
        return self.getvalue()


def huge_outputs() -> SuiteOutputs:
    """tiny_outputs with beta's reply three times what the page embeds of one transcript."""
    out = tiny_outputs()
    huge = "x" * (3 * PAGE_TRANSCRIPT_CHARS)
    return dataclasses.replace(out, transcripts=(out.transcripts[0], _transcript("beta", huge)))


def test_the_page_embeds_a_bounded_part_of_each_transcript_and_says_where_the_rest_is() -> None:
    """The page holds at most PAGE_TRANSCRIPT_CHARS of a transcript's text (plus the
    markers); the rest stays in agents/<agent>.jsonl, whose line the transcript names."""
    out, redact = huge_outputs(), redactor_of(tiny_outputs())
    doc = build_payload(out, redact)
    small, big = doc["transcripts"]
    assert "cut" not in small and "src" not in small
    text = sum(len(t["c"]) + sum(len(c["a"]) for c in t.get("calls", [])) for t in big["turns"])
    assert text < PAGE_TRANSCRIPT_CHARS + 200
    turns = out.transcripts[1].transcript.turns  # type: ignore[union-attr]
    full = sum(
        len(redact(t.content)) + sum(len(redact(c.raw_arguments)) for c in t.tool_calls) for t in turns
    )
    assert big["cut"] == full - PAGE_TRANSCRIPT_CHARS
    assert (big["src"], big["line"]) == ("../agents/beta.jsonl", 1)
    assert list(big) == sorted(big)
    assert "more characters not on this page]" in big["turns"][-1]["c"] + big["turns"][-2]["c"]


def test_the_front_page_shows_each_suites_verdict_headline_and_what_moved() -> None:
    import dataclasses

    from pytest_gauge._internal.report.html import render_index_html, suite_link

    out = dataclasses.replace(
        tiny_outputs(),
        metrics=(
            MetricRow("lrs_close", 0.25, 0.078, 0.555, 28, "bootstrap-tasks"),
            MetricRow("lrs_distant", None, None, None, 0, "none"),
        ),
        baseline={
            "agents": {"alpha": {"delta(success_rate)": {"value": -0.1, "low": -0.3, "high": 0.05}}},
            "setup_changes": ["judge:0 model a -> b"],
        },
    )
    link = suite_link(out, "tiny/reports/index.html")
    assert link.headline == (("LRS close", "0.250 [0.078, 0.555]"), ("LRS distant", "–"))
    assert link.moved == ("alpha success -0.100 [-0.300, 0.050]", "judge:0 model a -> b")
    page = render_index_html([link])
    assert ">FAIL: " in page and "LRS close 0.250 [0.078, 0.555]<br>LRS distant –" in page
    assert "judge:0 model a -&gt; b" in page and "null" not in page and "NaN" not in page
