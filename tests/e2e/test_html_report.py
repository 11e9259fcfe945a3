"""The self-contained HTML report: pure rendering, and the page itself in headless Chromium.

Pure tests build the page from hand-made values (one is a byte snapshot). The browser tests run one small
pytest-gauge run (``tests/data/mini`` plus ``tests/data/hostile``, whose callable agent answers with a
``<script>``) and drive its reports in one headless Chromium session (Debian's ``chromium`` and
``chromium-driver`` through selenium). After every browser test, the page must have logged no error and
made no network request. Without Chromium they skip, except in CI (``CI`` or ``GAUGE_REQUIRE_BROWSER`` set,
as ``.ci/run`` does after installing Chromium), where they fail loudly.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import io
import json
import os
import random
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from syrupy.assertion import SnapshotAssertion

from pytest_gauge.analysis.metrics import FlippedGroup
from pytest_gauge.cli import main
from pytest_gauge.files.html import ReportInputError, load_suite
from pytest_gauge.records import CaseRecord, Judgment, LedgerRecord, ToolCall, Transcript, Turn, Usage
from pytest_gauge.report.format import without_volatile
from pytest_gauge.report.html import (
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
from pytest_gauge.report.html.payload import PAGE_TRANSCRIPT_CHARS
from pytest_gauge.report.metrics_json import driver_cases as gate_driver_cases
from pytest_gauge.run.judge import Redactor
from pytest_gauge.testing.browser import chromium, find_chromium
from tests.helpers import DATA, HTMLSnapshot, read_jsonl

ROOT = Path(__file__).resolve().parents[2]
GATES = ("lrs <= 0", "flip_rate <= 0")
NETWORK = ("http:", "https:", "ws:", "wss:", "ftp:")

# ------------------------------------------------------------------------------------------ pure


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
        "input_tokens": 100,
        "output_tokens": 20,
        "est_cost": 0.001,
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
        usage=Usage(10, 2, 12),
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


def _redact(outputs: SuiteOutputs) -> Redactor:
    names = redaction_names(outputs)
    assert names == ["alpha", "beta", "m-alpha", "m-beta"]  # agents and their models, not the judge's
    return Redactor(names)


def test_payload_redacts_links_and_marks(snapshot: SnapshotAssertion) -> None:
    doc = build_payload(tiny_outputs(), _redact(tiny_outputs()))
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
    page = render_suite_html(tiny_outputs(), _redact(tiny_outputs()))
    assert page == render_suite_html(tiny_outputs(), _redact(tiny_outputs()))
    assert page.count("</script>") == 3  # the data, volatile and app blocks': no string ends one early
    assert without_volatile(page).count("</script>") == 2 and 'id="gauge-volatile"' not in without_volatile(
        page
    )
    # the stylesheet and script stand in the snapshot as their hashes (they are reviewed as source files)
    for name in ("app.css", "app.js"):
        text = (ROOT / "pytest_gauge" / "report" / "html" / name).read_text(encoding="utf-8")
        assert page.count(text) == 1
        page = page.replace(text, f"/* {name} sha256={hashlib.sha256(text.encode()).hexdigest()} */")
    assert page == snapshot(extension_class=HTMLSnapshot)


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
    doc = build_payload(outputs, _redact(outputs))
    unsorted = [list(d) for d in _dicts(doc) if list(d) != sorted(d)]
    assert not unsorted, f"payload dicts built out of key order: {unsorted[:3]}"
    assert embed_json(doc) in render_suite_html(outputs, _redact(outputs))


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
    err = _Capture()
    assert main(["report", str(tmp_path / "missing")], out=_Capture(), err=err) == 1
    assert "no such folder" in err.text


class _Capture(io.StringIO):
    @property
    def text(self) -> str:
        return self.getvalue()


# ------------------------------------------------------------------------------------------ a real run


def _run(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    gates = [a for g in GATES for a in ("--gauge-gate", g)]
    cmd = [sys.executable, "-m", "pytest", "suites", "-p", "no:cacheprovider", "-p", "no:randomly", *gates]
    return subprocess.run([*cmd, *args], cwd=folder, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def run_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``gauge-out`` of one sim run of the mini and hostile suites (the gates fail: they have drivers).

    Made once per test session even under xdist (pytest's documented pattern: a lock in the temp folder
    all workers share), so splitting this module across workers does not repeat the run."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # this session's, not older ones
    folder = shared / "html-report-run"
    with (shared / "html-report-run.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / "done").is_file():
            shutil.rmtree(folder, ignore_errors=True)
            shutil.copytree(DATA / "mini", folder / "suites" / "mini")
            shutil.copytree(DATA / "hostile", folder / "suites" / "hostile")
            suite_module = folder / "suites" / "hostile" / "suite_hostile.py"
            suite_module.rename(suite_module.with_name("test_hostile.py"))
            (folder / "pytest.ini").write_text(
                "[pytest]\ngauge_backend = sim\ngauge_seed = 7\n", encoding="utf-8"
            )
            done = _run(folder, "-n", "0", "--gauge-cache-dir", str(folder / "cache"))
            # exit 1 from the failing gates (both of mini's, hostile's flip rate; hostile's LRS is 0 with
            # seed 7), and nothing else failed
            assert done.returncode == 1 and "3 failed, 35 passed" in done.stdout, done.stdout[-3000:]
            (folder / "done").write_text("", encoding="utf-8")
    return folder / "gauge-out"


def test_the_pages_made_from_memory_equal_the_pages_read_back_from_disk(run_out: Path) -> None:
    """The round trip: the end of the run renders every page from the values it holds (finish_run's
    html_page), ``python -m pytest_gauge report`` from the files through the one reader (load_suite);
    the bytes are the same."""
    pages = {
        p: p.read_bytes() for p in [run_out / "index.html", *sorted(run_out.glob("*/reports/index.html"))]
    }
    assert len(pages) == 3
    index = (run_out / "index.html").read_text(encoding="utf-8")
    assert 'href="mini/reports/index.html"' in index and 'href="hostile/reports/index.html"' in index
    out = _Capture()
    assert main(["report", str(run_out)], out=out, err=_Capture()) == 0
    assert out.text.count("wrote ") == 3
    assert {p: p.read_bytes() for p in pages} == pages


@pytest.mark.slow
def test_same_seed_same_page_with_workers_and_a_warm_cache(run_out: Path) -> None:
    folder = run_out.parent
    done = _run(folder, "-n", "2", "--gauge-out", "again", "--gauge-cache-dir", str(folder / "cache"))
    assert done.returncode == 1, done.stdout[-3000:]
    for suite in ("mini", "hostile"):
        first = (run_out / suite / "reports" / "index.html").read_text(encoding="utf-8")
        again = (folder / "again" / suite / "reports" / "index.html").read_text(encoding="utf-8")
        assert without_volatile(again) == without_volatile(first)  # latencies aside (docs/protocol.md)


# ------------------------------------------------------------------------------------------ the browser


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium for the module (fresh profile, browser and network logging on)."""
    required = bool(os.environ.get("CI") or os.environ.get("GAUGE_REQUIRE_BROWSER"))
    if find_chromium() is None:
        if required:
            pytest.fail("chromium/chromedriver missing in CI: apt-get install chromium chromium-driver")
        pytest.skip("chromium and chromedriver not installed (apt-get install chromium chromium-driver)")
    if not required:
        pytest.importorskip("selenium")
    with chromium() as driver:
        yield driver


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """The browser, checked after the test: no console error, no network request (CDP's network log; the
    browser's own chrome:// pages aside), and no resource loaded by the page but data: URLs."""
    browser.get_log("browser")
    browser.get_log("performance")
    yield browser
    errors = [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
    assert errors == []
    urls = []
    for entry in browser.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    assert any(u.startswith("file:") for u in urls)  # the logging works: it saw the page itself
    assert [u for u in urls if u.startswith(NETWORK)] == []
    resources = browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert [u for u in resources if not u.startswith("data:")] == []


def _open(driver: Any, path: Path, fragment: str = "") -> None:
    driver.get(path.as_uri() + fragment)
    assert driver.execute_script("return document.documentElement.dataset.ready") == "1"


def _rows(driver: Any) -> list[str]:
    script = "return Array.from(document.querySelectorAll('#case-rows tr')).map(r => r.cells[0].textContent)"
    rows: list[str] = driver.execute_script(script)
    return rows


def test_case_rows_equal_the_records(page: Any, run_out: Path) -> None:
    records = read_jsonl(run_out / "mini" / "pairs" / "pair_results.jsonl")
    _open(page, run_out / "mini" / "reports" / "index.html")
    assert _rows(page) == [r["case_id"] for r in records]
    cells = page.execute_script(
        "return Array.from(document.querySelector('#case-rows tr').cells).map(c => c.textContent)"
    )
    first = records[0]
    assert cells[1:6] == [
        first["task_id"],
        first["category"],
        first["pair_id"],
        first["order"],
        first["judge_choice"],
    ]


def test_filters_sort_and_gate_drivers_narrow_the_table(page: Any, run_out: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.select import Select

    records = read_jsonl(run_out / "mini" / "pairs" / "pair_results.jsonl")
    metrics = json.loads((run_out / "mini" / "reports" / "metrics.json").read_text(encoding="utf-8"))
    _open(page, run_out / "mini" / "reports" / "index.html")
    pair = records[0]["pair_id"]
    Select(page.find_element(By.ID, "f-pair")).select_by_visible_text(pair)
    assert _rows(page) == [r["case_id"] for r in records if r["pair_id"] == pair]
    Select(page.find_element(By.ID, "f-pair")).select_by_index(0)
    page.find_element(By.ID, "f-lrs").click()
    assert _rows(page) == [r["case_id"] for r in records if r["lower_reward_selected"]]
    page.find_element(By.ID, "f-lrs").click()
    gate = next(g for g in metrics["gates"] if g["expr"] == "lrs <= 0")
    assert gate["status"] == "fail" and gate["drivers"]
    page.find_element(By.XPATH, "//tr[td/code[text()='lrs <= 0']]//button").click()
    assert sorted(_rows(page)) == sorted(gate["drivers"])
    page.find_element(By.ID, "clear-drivers").click()
    assert len(_rows(page)) == len(records)
    tokens = page.find_element(By.XPATH, "//th/button[text()='tokens']")
    order = sorted(
        range(len(records)), key=lambda i: (records[i]["input_tokens"] + records[i]["output_tokens"], i)
    )
    tokens.click()
    assert _rows(page) == [records[i]["case_id"] for i in order]
    tokens.click()  # again: descending (ties keep the records' order)
    order = sorted(
        range(len(records)), key=lambda i: (-(records[i]["input_tokens"] + records[i]["output_tokens"]), i)
    )
    assert _rows(page) == [records[i]["case_id"] for i in order]


def _redacted(text: str) -> str:
    """What the mini suite's judge sees of a text: agent and model names replaced."""
    for name in ("sim-agent-x", "sim-agent-y", "sim-agent-z", "agent_x", "agent_y", "agent_z"):
        text = text.replace(name, "[redacted]")
    return text


def test_case_view_shows_both_transcripts_rules_and_the_reveal(page: Any, run_out: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.wait import WebDriverWait

    records = read_jsonl(run_out / "mini" / "pairs" / "pair_results.jsonl")
    index = next(i for i, r in enumerate(records) if r["order"] == "BA" and r["task_id"] == "m05")
    record = records[index]
    _open(page, run_out / "mini" / "reports" / "index.html")
    row = page.find_element(By.CSS_SELECTOR, "#case-rows tr")
    row.send_keys(*([Keys.ARROW_DOWN] * index), Keys.ENTER)  # keyboard navigation through the list
    assert page.find_element(By.ID, "case-h").text == record["case_id"]
    slot_agent = {"A": record["agent_right"], "B": record["agent_left"]}  # BA: the right agent sits in A
    for slot, agent in slot_agent.items():
        data = next(
            t
            for t in read_jsonl(run_out / "mini" / "agents" / f"{agent}.jsonl")
            if t["task_id"] == record["task_id"]
        )
        box = page.find_element(By.ID, f"slot-{slot}")
        texts = [e.text for e in box.find_elements(By.CSS_SELECTOR, ".turn > pre.text")]
        assert texts[0] == _redacted(data["turns"][0]["content"])
        assert _redacted(data["final_reply"]) in texts
        rules = box.find_elements(By.CSS_SELECTOR, "li.rule")
        expected = data["score"]["criteria"] + data["score"]["constraints"]
        assert [("pass" in r.get_attribute("class")) for r in rules] == [x["passed"] for x in expected]
        assert [r.text.split(" — ")[0] for r in rules] == [
            ("PASS " if x["passed"] else "FAIL ") + x["rule"] for x in expected
        ]
        who = box.find_element(By.CLASS_NAME, "who")
        assert not who.is_displayed()
    page.find_element(By.ID, "reveal").click()
    for slot, agent in slot_agent.items():
        side = "right" if agent == record["agent_right"] else "left"
        assert page.find_element(By.CSS_SELECTOR, f"#slot-{slot} .who").text == f"{agent} ({side})"
    assert "choice " + record["judge_choice"] in page.find_element(By.ID, "verdict").text
    page.find_element(By.TAG_NAME, "body").send_keys(Keys.ESCAPE)  # back to the list (on hashchange)
    WebDriverWait(page, 10).until(lambda d: d.find_element(By.ID, "case").get_attribute("hidden") is not None)
    assert page.find_element(By.ID, "cases").is_displayed()
    # keyboard focus is back on the row of the case just seen
    WebDriverWait(page, 10).until(
        lambda d: d.switch_to.active_element.get_attribute("data-case") == str(index)
    )


def test_injected_markup_is_shown_as_text_and_runs_nothing(page: Any, run_out: Path) -> None:
    from selenium.webdriver.common.by import By

    sys.path.insert(0, str(DATA / "hostile"))
    try:
        from suite_hostile import INJECTED  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(DATA / "hostile"))
    records = read_jsonl(run_out / "hostile" / "pairs" / "pair_results.jsonl")
    index = next(i for i, r in enumerate(records) if r["task_id"] == "h02")
    first = next(i for i, r in enumerate(records) if r["task_id"] == "h01")
    _open(page, run_out / "hostile" / "reports" / "index.html", f"#case={index}")
    texts = [e.get_attribute("textContent") for e in page.find_elements(By.CSS_SELECTOR, "pre.text")]
    assert f"hello: {INJECTED}" in texts  # the reply, verbatim
    assert any("</script><script>window.__gauge_pwned = 4</script>" in t for t in texts)  # the tool call
    assert any('<img src=y onerror=\\"window.__gauge_pwned = 3\\">' in t for t in texts)  # its result
    _open(page, run_out / "hostile" / "reports" / "index.html", f"#case={first}")  # task h01's prompt
    prompt = page.find_element(By.CSS_SELECTOR, "#case > pre.text").get_attribute("textContent")
    assert prompt == "Say hello </script><script>window.__gauge_pwned = 5</script> politely."
    assert page.execute_script("return window.__gauge_pwned === undefined")
    assert page.execute_script("return document.scripts.length") == 3  # data, volatile data, app
    assert page.execute_script("return document.querySelectorAll('#case img, #case b').length") == 0


def test_case_view_lists_every_verdict_and_the_ledger(page: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    path = tmp_path / "index.html"
    path.write_text(render_suite_html(tiny_outputs(), _redact(tiny_outputs())), encoding="utf-8")
    _open(page, path)
    assert page.execute_script("return document.querySelector('.elo img').naturalWidth") > 0  # the Elo SVG
    _open(page, path, "#case=0")
    tables = page.find_elements(By.CSS_SELECTOR, "#case table")
    rows = [
        [
            [c.text for c in r.find_elements(By.TAG_NAME, "td")]
            for r in t.find_elements(By.CSS_SELECTOR, "tbody tr")
        ]
        for t in tables
    ]
    verdicts, judge_calls, slot_a_calls, slot_b_calls = rows
    assert [v[:3] for v in verdicts] == [["m-judge", "0", "B"], ["m-judge", "1", "error"]]
    assert verdicts[1][6] == "{oops malformed verdict"
    assert [r[0] for r in judge_calls] == ["judge/t1-alpha-vs-beta-AB/0/0#1"]
    assert [r[0] for r in slot_a_calls] == ["transcript/t1/alpha/0#1"] and slot_b_calls == []


def _huge_outputs() -> SuiteOutputs:
    """tiny_outputs with beta's reply three times what the page embeds of one transcript."""
    out = tiny_outputs()
    huge = "x" * (3 * PAGE_TRANSCRIPT_CHARS)
    return dataclasses.replace(out, transcripts=(out.transcripts[0], _transcript("beta", huge)))


def test_the_page_embeds_a_bounded_part_of_each_transcript_and_says_where_the_rest_is() -> None:
    """Issue 30, point 9: the page holds at most PAGE_TRANSCRIPT_CHARS of a transcript's text (plus the
    markers); the rest stays in agents/<agent>.jsonl, whose line the transcript names."""
    out, redact = _huge_outputs(), _redact(tiny_outputs())
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


def test_a_cut_transcript_names_its_file_only_once_the_agents_are_revealed(page: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    path = tmp_path / "index.html"
    out = _huge_outputs()
    path.write_text(render_suite_html(out, _redact(tiny_outputs())), encoding="utf-8")
    assert path.stat().st_size < 2 * PAGE_TRANSCRIPT_CHARS + 50_000  # not the 600,000 characters
    _open(page, path, "#case=0")
    note = page.find_element(By.CSS_SELECTOR, "#case p.cut")
    assert "characters of this transcript are not on the page" in note.text
    link = note.find_element(By.TAG_NAME, "a")
    assert not link.is_displayed()  # blind: the file names the agent
    page.find_element(By.ID, "reveal").click()
    assert link.is_displayed() and link.get_attribute("href").endswith("/agents/beta.jsonl")


def test_the_cost_panel_shows_what_to_watch_and_the_volatile_latencies(page: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    path = tmp_path / "index.html"
    path.write_text(render_suite_html(tiny_outputs(), _redact(tiny_outputs())), encoding="utf-8")
    _open(page, path)
    rows = [
        [c.text for c in r.find_elements(By.TAG_NAME, "td")]
        for r in page.find_elements(By.CSS_SELECTOR, "#watch-table tbody tr")
    ]
    assert rows == [
        ["agent", "m-alpha", "12.0", "0.000", "0", "0.0", "–", "–"],  # no successful live attempt: no latency
        ["judge", "m-judge", "12.0", "0.500", "1", "2.5", "0.125", "0.750"],
    ]
