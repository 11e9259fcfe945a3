"""The self-contained HTML report end to end: the page of a real run, and the page itself in headless
Chromium (the pure rendering from hand-made values is tests/unit/report/test_html.py).

The browser tests run one small pytest-gauge run (``tests/data/mini`` plus ``tests/data/hostile``,
whose callable agent answers with a ``<script>``) and drive its reports in one headless Chromium session
(Debian's ``chromium`` and ``chromium-driver`` through selenium). After every browser test, the page
must have logged no error and made no network request. Without Chromium they skip, except in CI (``CI``
or ``GAUGE_REQUIRE_BROWSER`` set, as ``.ci/run`` does after installing Chromium), where they fail loudly.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import filelock
import pytest

from pytest_gauge._internal.cli import main
from pytest_gauge._internal.report.format import without_volatile
from pytest_gauge._internal.report.html import (
    render_suite_html,
)
from pytest_gauge._internal.report.html.payload import PAGE_TRANSCRIPT_CHARS
from pytest_gauge.testing.browser import chromium, find_chromium
from tests.helpers import DATA, read_jsonl
from tests.unit.report.test_html import ROOT, Capture, bulk_page, huge_outputs, redactor_of, tiny_outputs

GATES = ("lrs <= 0", "flip_rate <= 0")
NETWORK = ("http:", "https:", "ws:", "wss:", "ftp:")

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
    with filelock.FileLock(shared / "html-report-run.lock"):
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
    out = Capture()
    assert main(["report", str(run_out)], out=out, err=Capture()) == 0
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
# Every browser test is ``slow``: the full run's, not the not-slow tier's (a Chromium session costs about
# 6 s of CPU to start and a few more to drive; CONTRIBUTING.md#test-tiers).


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
    for _ in range(200):  # a large page inflates its bulk block first (a few ms here)
        if driver.execute_script("return document.documentElement.dataset.ready") == "1":
            return
        time.sleep(0.05)
    raise AssertionError("the page did not finish its first render")


def _rows(driver: Any) -> list[str]:
    script = "return Array.from(document.querySelectorAll('#case-rows tr')).map(r => r.cells[0].textContent)"
    rows: list[str] = driver.execute_script(script)
    return rows


@pytest.mark.slow
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


@pytest.mark.slow
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
    tokens = page.find_element(By.XPATH, "//th/button[text()='tokens incl. shared']")
    order = sorted(
        range(len(records)),
        key=lambda i: (records[i]["input_tokens_incl_shared"] + records[i]["output_tokens_incl_shared"], i),
    )
    tokens.click()
    assert _rows(page) == [records[i]["case_id"] for i in order]
    tokens.click()  # again: descending (ties keep the records' order)
    order = sorted(
        range(len(records)),
        key=lambda i: (
            -(records[i]["input_tokens_incl_shared"] + records[i]["output_tokens_incl_shared"]),
            i,
        ),
    )
    assert _rows(page) == [records[i]["case_id"] for i in order]


def _redacted(text: str) -> str:
    """What the mini suite's judge sees of a text: agent and model names replaced."""
    for name in ("sim-agent-x", "sim-agent-y", "sim-agent-z", "agent_x", "agent_y", "agent_z"):
        text = text.replace(name, "[redacted]")
    return text


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_case_view_lists_every_verdict_and_the_ledger(page: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    path = tmp_path / "index.html"
    path.write_text(render_suite_html(tiny_outputs(), redactor_of(tiny_outputs())), encoding="utf-8")
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


@pytest.mark.slow
def test_ledger_tables_show_cache_reads_and_writes_when_a_call_used_the_cache(
    page: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    from pytest_gauge._internal.records import Usage

    out = tiny_outputs()
    cached = Usage(10, 2, cached_input_tokens=300, cache_write_tokens=40)
    out = replace(out, ledger=tuple(replace(x, usage=cached) if x.role == "judge" else x for x in out.ledger))
    path = tmp_path / "index.html"
    path.write_text(render_suite_html(out, redactor_of(tiny_outputs())), encoding="utf-8")
    _open(page, path, "#case=0")
    judge_calls = page.find_elements(By.CSS_SELECTOR, "#case table")[1]
    head = [th.text for th in judge_calls.find_elements(By.CSS_SELECTOR, "thead th")]
    assert head[5:8] == ["in", "cache read", "cache write"]
    cells = [td.text for td in judge_calls.find_elements(By.CSS_SELECTOR, "tbody td")]
    assert cells[5:9] == ["350", "300", "40", "2"]  # every input token, then the cache's parts, then out


@pytest.mark.slow
def test_a_cut_transcript_names_its_file_only_once_the_agents_are_revealed(page: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    path = tmp_path / "index.html"
    out = huge_outputs()
    path.write_text(render_suite_html(out, redactor_of(tiny_outputs())), encoding="utf-8")
    assert path.stat().st_size < 2 * PAGE_TRANSCRIPT_CHARS + 50_000  # not the 600,000 characters
    _open(page, path, "#case=0")
    note = page.find_element(By.CSS_SELECTOR, "#case p.cut")
    assert "characters of this transcript are not on the page" in note.text
    link = note.find_element(By.TAG_NAME, "a")
    assert not link.is_displayed()  # blind: the file names the agent
    page.find_element(By.ID, "reveal").click()
    assert link.is_displayed() and link.get_attribute("href").endswith("/agents/beta.jsonl")


@pytest.mark.slow
def test_the_cost_panel_shows_what_to_watch_and_the_volatile_latencies(page: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    path = tmp_path / "index.html"
    path.write_text(render_suite_html(tiny_outputs(), redactor_of(tiny_outputs())), encoding="utf-8")
    _open(page, path)
    rows = [
        [c.text for c in r.find_elements(By.TAG_NAME, "td")]
        for r in page.find_elements(By.CSS_SELECTOR, "#watch-table tbody tr")
    ]
    assert rows == [
        ["agent", "m-alpha", "12.0", "0.000", "0", "0.0", "–", "–"],  # no successful live attempt: no latency
        ["judge", "m-judge", "12.0", "0.500", "1", "2.5", "0.125", "0.750"],
    ]


# ------------------------------------------------------------------------------------------ labelling


@pytest.mark.slow
def test_five_cases_labelled_blind_with_the_keyboard_feed_a_run_with_gauge_labels(
    page: Any, run_out: Path, tmp_path: Path
) -> None:
    """The labelling mode shows a case as the judge saw it (no verdict, no reward,
    no name), keys 1/2/3 label it and move on, the export is labels.jsonl, and a run given that file
    reports the judge's agreement with it (the cache is warm: the same cases, no model call)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    records = read_jsonl(run_out / "mini" / "pairs" / "pair_results.jsonl")
    _open(page, run_out / "mini" / "reports" / "index.html", "#label")
    page.execute_script("window.localStorage.clear()")
    _open(page, run_out / "mini" / "reports" / "index.html", "#label")
    view = page.find_element(By.ID, "label")
    assert view.is_displayed() and not page.find_element(By.ID, "cases").is_displayed()
    text = view.text
    for hidden in ("sim-agent-x", "agent_x", "agent_y", "reward", "choice ", "PASS ", "FAIL "):
        assert hidden not in text
    name = page.find_element(By.ID, "labeller")
    name.send_keys("ada")
    keys = ["1", "2", "3", "1", "2"]
    seen = []
    for key in keys:
        seen.append(page.execute_script("return location.hash"))
        page.find_element(By.ID, "label-h").send_keys(key)  # focus off the inputs: the page's keys
    exported = page.find_element(By.ID, "label-export").get_attribute("value")
    lines = [json.loads(x) for x in exported.splitlines()]
    by_hash = {int(h.split("=")[1]) if "=" in h else 0: k for h, k in zip(seen, keys, strict=True)}
    expected = {records[i]["case_id"]: {"1": "A", "2": "B", "3": "tie"}[k] for i, k in by_hash.items()}
    assert {x["case_id"]: x["label"] for x in lines} == expected
    assert {x["labeller"] for x in lines} == {"ada"} and {x["suite"] for x in lines} == {"mini"}
    # kept in local storage: a reload shows the same export
    _open(page, run_out / "mini" / "reports" / "index.html", "#label")
    assert page.find_element(By.ID, "label-export").get_attribute("value").count("\n") == 5
    page.find_element(By.TAG_NAME, "body").send_keys(Keys.ESCAPE)
    labels = tmp_path / "labels.jsonl"
    labels.write_text(page.find_element(By.ID, "label-export").get_attribute("value"), encoding="utf-8")
    folder = run_out.parent
    done = _run(
        folder,
        "-n",
        "0",
        "suites/mini",
        "--gauge-out",
        "labelled",
        "--gauge-cache-dir",
        str(folder / "cache"),
        f"--gauge-labels={labels}",
        "--gauge-gate",
        "human_judge_agreement >= 0",
    )
    assert done.returncode == 1, done.stdout[-3000:]  # mini's own failing gates, nothing else
    metrics = json.loads((folder / "labelled" / "mini" / "reports" / "metrics.json").read_text("utf-8"))
    human = metrics["human"]
    assert human["cases"] == 5 and human["labellers"] == ["ada"] and human["unknown_cases"] == []
    choice = {r["case_id"]: r["judge_choice"] for r in records}
    agree = sum(lab == choice[cid] for cid, lab in expected.items())
    assert metrics["metrics"]["human_judge_agreement"]["value"] == pytest.approx(agree / 5)
    gate = next(g for g in metrics["gates"] if g["expr"].startswith("human_judge_agreement"))
    assert gate["status"] == "pass"
    conclusion = (folder / "labelled" / "mini" / "reports" / "conclusion.md").read_text("utf-8")
    assert "## The judge against people" in conclusion and "`ada`" in conclusion
    _open(page, folder / "labelled" / "mini" / "reports" / "index.html")
    assert page.find_element(By.ID, "human-table").is_displayed()


@pytest.mark.slow
def test_labels_sample_writes_a_weighted_sample_the_page_offers_first(
    page: Any, run_out: Path, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    out = tmp_path / "gauge-out"
    shutil.copytree(run_out, out)
    said = Capture()
    assert (
        main(["labels", "sample", "--from", str(out), "--n", "6", "--seed", "5"], out=said, err=Capture())
        == 0
    )
    assert (
        "mini/labels/sample.jsonl: 6 of" in said.text and said.text.count("wrote ") == 5
    )  # 2 samples, 3 pages
    records = read_jsonl(out / "mini" / "pairs" / "pair_results.jsonl")
    sample = read_jsonl(out / "mini" / "labels" / "sample.jsonl")
    assert [s["position"] for s in sample] == list(range(6))
    assert {s["case_id"] for s in sample} <= {r["case_id"] for r in records}
    assert sum(s["weight"] for s in sample) == pytest.approx(len(records))  # each stratum's size, summed
    _open(page, out / "mini" / "reports" / "index.html", "#label")
    page.execute_script("window.localStorage.clear()")
    _open(page, out / "mini" / "reports" / "index.html", "#label")
    first = [r["case_id"] for r in records].index(sample[0]["case_id"])
    assert page.execute_script("return location.hash") in ("#label", f"#label={first}")
    assert "the 6 cases of the labelling sample first" in page.find_element(By.ID, "label-progress").text
    page.find_element(By.ID, "label-h").send_keys("3")
    exported = json.loads(page.find_element(By.ID, "label-export").get_attribute("value"))
    assert exported["case_id"] == sample[0]["case_id"] and exported["weight"] == sample[0]["weight"]
    assert exported["stratum"] == sample[0]["stratum"] and exported["label"] == "tie"
    assert main(["labels", "sample", "--from", str(tmp_path / "nothing")], out=Capture(), err=Capture()) == 1


@pytest.mark.slow
def test_since_the_baseline_lists_the_regressed_and_fixed_tasks_with_both_transcripts(
    page: Any, tmp_path: Path
) -> None:
    """The overview's "Since the baseline" section from metrics.json's baseline block (as the end of a
    run and `report` both read it): per-agent deltas, each regressed and fixed task linked to both
    transcripts, the judge and cost deltas; a tiny cost sits inside its interval."""
    import dataclasses

    from selenium.webdriver.common.by import By

    def est(value: float, low: float, high: float) -> dict[str, Any]:
        return {"value": value, "n": 6, "low": low, "high": high, "method": "paired-bootstrap"}

    def flip(task: str, before: float, now: float) -> dict[str, Any]:
        return {
            "reward_before": before,
            "reward_now": now,
            "sample": 0,
            "task_id": task,
            "transcript_before": f"../../base/alpha.jsonl#{task}",
            "transcript_now": f"../agents/alpha.jsonl#{task}",
        }

    agent = {
        "changed": ["model"],
        "delta(mean_reward)": est(-0.2, -0.4, 0.0),
        "delta(success_rate)": est(-0.333, -0.6, -0.05),
        "fixes": [flip("t9", 0.0, 1.0)],
        "mcnemar_p": 0.5,
        "min_detectable_regression": 0.3,
        "noise_floor": None,
        "regressions": [flip("t1", 1.0, 0.5), flip("t4", 1.0, 0.0)],
        "success_rate_before": 0.9,
        "success_rate_now": 0.6,
    }
    baseline: dict[str, Any] = {
        "added_agents": [],
        "added_tasks": [],
        "agents": {"alpha": agent},
        "delta(cost_per_success)": est(0.0005, 0.0003, 0.0007),
        "elo": {},
        "elo_reference": None,
        "judge": {"delta(flip_rate)": est(0.1, -0.1, 0.3)},
        "removed_agents": [],
        "removed_tasks": [],
        "setup_changes": ["judge:0 model sim-judge -> sim-judge-2"],
        "shared_tasks": 6,
    }
    out = dataclasses.replace(tiny_outputs(), baseline=baseline)
    path = tmp_path / "index.html"
    path.write_text(render_suite_html(out, redactor_of(tiny_outputs())), encoding="utf-8")
    _open(page, path)
    items = page.find_elements(By.CSS_SELECTOR, "#baseline-regressed li")
    assert [i.get_attribute("data-task") for i in items] == ["t1", "t4"]
    links = items[0].find_elements(By.TAG_NAME, "a")
    assert [a.get_attribute("href").rsplit("/", 2)[-2:] for a in links] == [
        ["base", "alpha.jsonl#t1"],
        ["agents", "alpha.jsonl#t1"],
    ]
    assert [
        i.get_attribute("data-task") for i in page.find_elements(By.CSS_SELECTOR, "#baseline-fixed li")
    ] == ["t9"]
    cost = page.find_element(
        By.XPATH, "//table[@id='baseline-judge']//tr[td/code[text()='delta(cost_per_success)']]"
    )
    assert cost.text.split()[1:] == ["+0.0005", "[0.0003,", "0.0007]"]
    changes = page.find_element(By.ID, "baseline-changes").text  # every difference, named
    assert changes == "What else changed: alpha (model); judge:0 model sim-judge -> sim-judge-2"


_NO_VALUE = r"(?<![A-Za-z])(null|undefined|NaN)"  # "nullnullnull" too: no boundary inside


@pytest.mark.slow
def test_no_view_of_the_page_shows_null_undefined_or_nan(page: Any, run_out: Path) -> None:
    """The overview, every case view and the labelling view: no text a missing value leaks as."""
    import re

    path = run_out / "mini" / "reports" / "index.html"
    records = read_jsonl(run_out / "mini" / "pairs" / "pair_results.jsonl")
    script = "return document.body.innerText"
    views = ["", "#cases", *(f"#case={i}" for i in range(len(records))), "#label=0"]
    leaks = {}
    for fragment in views:
        _open(page, path, fragment)
        found = re.findall(_NO_VALUE, page.execute_script(script))
        if found:
            leaks[fragment or "overview"] = found
    assert leaks == {}
    page.get((run_out / "index.html").as_uri())  # the front page over the suites
    assert re.findall(_NO_VALUE, page.execute_script(script)) == []


@pytest.mark.slow
def test_the_overview_opens_with_the_verdict_and_the_headline_drawn(page: Any, run_out: Path) -> None:
    """The first screen: the verdict, LRS close against distant with intervals, flip rate and position
    bias per pair, satisfied-but-failed per agent, the bill by role; the full metric table folded."""
    metrics = json.loads((run_out / "mini" / "reports" / "metrics.json").read_text())["metrics"]
    _open(page, run_out / "mini" / "reports" / "index.html")
    assert page.execute_script("return document.getElementById('verdict-line').textContent").startswith(
        "Verdict: FAIL (2 fail)"
    )  # the run's gates lrs <= 0 and flip_rate <= 0 fail
    chart = "document.getElementById('headline-chart')"
    top = page.execute_script(f"return {chart}.getBoundingClientRect().top")
    assert 0 < top < page.execute_script("return window.innerHeight")  # on the first screen
    script = f"return Array.from({chart}.querySelectorAll('text')).map(t => t.textContent)"
    labels = page.execute_script(script)
    rows = ("lrs_close", "lrs_distant", "flip_rate(agent_x, agent_y)", "position_bias(agent_y, agent_z)")
    for name in (*rows, "sat_but_failed_rate(agent_z)"):
        shown = labels[labels.index(name) + 1]  # the value beside it: its own, or "–" when it has none
        value, n = metrics[name]["value"], metrics[name]["n"]
        assert shown == ("–" if value is None else f"{value:.2f}") + f" (n={n})", name
    assert page.execute_script(f"return {chart}.querySelectorAll('line.ci').length") >= 5  # drawn intervals
    bill = page.execute_script("return document.getElementById('bill-line').textContent")
    assert bill.startswith("The bill by role: agent ") and "judge" in bill and "% of tokens" in bill
    assert page.execute_script("return document.getElementById('all-metrics').open") is False  # folded


@pytest.mark.slow
def test_a_judge_sharing_a_contestants_model_has_its_self_preference_drawn(page: Any, tmp_path: Path) -> None:
    import dataclasses

    def est(value: float, low: float, high: float, n: int) -> dict[str, Any]:
        return {"value": value, "n": n, "low": low, "high": high, "method": "wilson"}

    block = {
        "judge_model": "m-judge",
        "agents": ["alpha"],
        "own": est(0.75, 0.3, 0.95, 4),
        "others": est(0.25, 0.05, 0.7, 4),
        "difference": est(0.5, -0.1, 0.8, 4),
    }
    out = dataclasses.replace(tiny_outputs(), self_preference=block)
    path = tmp_path / "index.html"
    path.write_text(render_suite_html(out, redactor_of(tiny_outputs())), encoding="utf-8")
    _open(page, path)
    rows = page.execute_script(
        "return Array.from(document.querySelectorAll('#self-preference-table tbody tr'))"
        ".map(r => Array.from(r.cells).map(c => c.textContent))"
    )
    assert rows == [
        ["its own model's", "0.750", "[0.300, 0.950]", "4"],
        ["another agent's", "0.250", "[0.050, 0.700]", "4"],
        ["difference (own − others)", "0.500", "[-0.100, 0.800]", "4"],
    ]


@pytest.mark.slow
def test_a_large_page_inflates_its_bulk_block_and_shows_what_the_inline_page_shows(
    page: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page of a large suite (threshold lowered) carries its cases, transcripts and ledger gzipped:
    the browser shows the same case table and the same case view (both transcripts, every ledger
    table) as the page with everything inline."""
    outputs = tiny_outputs()
    inline, packed = tmp_path / "inline.html", tmp_path / "packed.html"
    inline.write_text(render_suite_html(outputs, redactor_of(outputs)), encoding="utf-8")
    packed.write_text(bulk_page(outputs, monkeypatch), encoding="utf-8")
    assert 'id="gauge-bulk"' in packed.read_text(encoding="utf-8")
    shown = []
    for path in (inline, packed):
        _open(page, path)
        rows = _rows(page)
        _open(page, path, "#case=0")
        shown.append((rows, page.execute_script("return document.getElementById('case').innerText")))
    assert shown[0] == shown[1] and shown[0][0] and "transcript/t1/alpha/0#1" in shown[0][1]
