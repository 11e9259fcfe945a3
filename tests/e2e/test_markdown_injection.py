"""Markdown reports escape model, tool and task text: a live run on loopback whose
every model reply, judge reason and task id carries markup; each markdown report rendered with
Python-Markdown (what MkDocs uses) and opened in headless Chromium shows it as text and runs nothing."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_gauge.testing import LoopbackServer
from pytest_gauge.testing.browser import chromium, find_chromium
from pytest_gauge.testing.responders import Responder
from pytest_gauge.testing.simserver import sim_responder
from tests.helpers import MINI_INI, run_inprocess

SCRIPT = "<script>window.__gauge_pwned = 1</script>"
PAYLOAD = (
    f'{SCRIPT}<img src=x onerror="window.__gauge_pwned = 2"><svg onload="window.__gauge_pwned = 3">'
    "[click](javascript:window.__gauge_pwned=4) &lt;b&gt; | `tick` <b>bold</b>"
)
TASK_ID = "m01<b>x`y&amp;<i>"  # task ids allow no spaces, '/' or brackets, but markup and backticks


def _hostile(respond: Responder) -> Responder:
    """The sim's answers with the payload in every reply and judge reason (and one judge answer that is
    not a verdict, so an error quoting it reaches the reports)."""

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        out = respond(body)
        message = out["choices"][0]["message"]
        content = message.get("content")
        if body.get("model") == "sim-judge" and isinstance(content, str):
            if "m03" in json.dumps(body["messages"]):
                message["content"] = f"no verdict {PAYLOAD}"
            else:
                verdict = json.loads(content)
                verdict["reason"] = f"{verdict.get('reason', '')} {PAYLOAD}"
                message["content"] = json.dumps(verdict)
        elif isinstance(content, str):
            message["content"] = f"{content} {PAYLOAD}"
        return out

    return answer


@pytest.fixture
def reports(pytester: pytest.Pytester, mini_suite: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """``gauge-out/mini/reports`` of a live run against the hostile answers."""
    tasks = mini_suite / "tasks.jsonl"
    text = tasks.read_text(encoding="utf-8").replace('"m01"', json.dumps(TASK_ID))
    tasks.write_text(text, encoding="utf-8")
    with LoopbackServer(_hostile(sim_responder(mini_suite / "test_mini.py", seed=7))) as srv:
        monkeypatch.setenv("TAOTOKEN_API_KEY", "tt-test-key")
        monkeypatch.setenv("TAOTOKEN_BASE_URL", srv.base_url)
        pytester.makeini(MINI_INI.replace("gauge_backend = sim", "gauge_backend = live"))
        run_inprocess(pytester, "suites", "-n", "0", "--gauge-gate", "success_rate >= 0.99")
    folder = pytester.path / "gauge-out" / "mini" / "reports"
    assert (folder / "pairwise_table.md").is_file()
    yield folder


def _page(markdown_text: str) -> str:
    import markdown  # type: ignore[import-untyped]  # no types-Markdown in the test extra

    body = markdown.markdown(markdown_text, extensions=["tables"])
    return f'<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>{body}</body></html>'


@pytest.mark.slow  # the full tier only: a plugin run and a Chromium session (~4 s CPU)
def test_markdown_reports_show_injected_markup_as_text_and_run_nothing(reports: Path) -> None:
    pytest.importorskip("markdown")
    texts = {p.name: p.read_text(encoding="utf-8") for p in sorted(reports.glob("*.md"))}
    assert {"pairwise_table.md", "conclusion.md", "token_cost.md"} <= set(texts)
    joined = "".join(texts.values())
    assert "&lt;script&gt;window.__gauge_pwned = 1&lt;/script&gt;" in texts["pairwise_table.md"]
    assert "](javascript:" not in joined and "<script>" not in joined and "<img" not in joined
    for name, text in texts.items():
        (reports / f"{name}.html").write_text(_page(text), encoding="utf-8")
    if find_chromium() is None:
        if os.environ.get("CI") or os.environ.get("GAUGE_REQUIRE_BROWSER"):
            pytest.fail("chromium/chromedriver missing in CI: apt-get install chromium chromium-driver")
        pytest.skip("chromium and chromedriver not installed (apt-get install chromium chromium-driver)")
    pytest.importorskip("selenium")
    shown = ""
    with chromium() as driver:
        for name in texts:
            driver.get((reports / f"{name}.html").as_uri())
            assert driver.execute_script("return window.__gauge_pwned === undefined"), name
            # conclusion.md's own picture is elo.svg; nothing else may be an element the text made
            found = "script, img:not([src='elo.svg']), svg, b, i, iframe, a[href^=javascript]"
            assert driver.execute_script(f'return document.querySelectorAll("{found}").length') == 0, name
            shown += driver.execute_script("return document.body.textContent")
    assert SCRIPT in shown  # the judge's reason, shown as text
    assert TASK_ID.replace("&amp;", "&") in shown or TASK_ID in shown  # the task id, as text
