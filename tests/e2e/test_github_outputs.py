"""The GitHub-ready outputs of a run: the step summary (``GITHUB_STEP_SUMMARY``) and
``gauge-out/pr-comment.md`` are Markdown whose tables render (Python-Markdown's ``tables`` extension, as
GitHub renders pipe tables): the gates with their values, the metrics the gates use, the bill, and the
report link; the comment starts with its sticky marker."""

from __future__ import annotations

import re
from pathlib import Path

import markdown  # type: ignore[import-untyped]  # no types-Markdown in the test extra
import pytest

from tests.helpers import run_inprocess

FAILING = "success_rate(agent_x) >= 0.99"


def _tables(html: str) -> list[list[list[str]]]:
    """Each rendered table as rows of cell texts (header row first)."""
    tables = []
    for table in re.findall(r"<table>(.*?)</table>", html, re.S):
        rows = re.findall(r"<tr>(.*?)</tr>", table, re.S)
        tables.append([[c.strip() for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", r, re.S)] for r in rows])
    return tables


def test_the_step_summary_and_the_pr_comment_render_their_tables(
    pytester: pytest.Pytester, mini_suite: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    test = mini_suite / "test_mini.py"
    test.write_text(test.read_text().replace("suite = Suite(", f'suite = Suite(gates=["{FAILING}"],', 1))
    summary = pytester.path / "step-summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("GAUGE_REPORT_URL", "https://example.invalid/artifacts/7")
    result = run_inprocess(pytester, "suites", "-n", "0")
    assert result.ret == pytest.ExitCode.TESTS_FAILED

    text = summary.read_text()
    assert text.startswith("earlier step\n")  # appended, never overwritten
    tables = _tables(markdown.markdown(text, extensions=["tables"]))
    gates, metrics, bill = tables[0], tables[1], tables[2]
    assert gates[0] == ["status", "gate", "value", "95% interval", "n"]
    assert gates[1][:3] == ["FAIL", FAILING.replace(">", "&gt;"), "0.200"]
    assert [row[0] for row in metrics[1:]] == ["success_rate"]
    assert [row[0] for row in bill[1:]] == ["agent", "user_sim", "judge", "total"]
    assert '<a href="https://example.invalid/artifacts/7">HTML report</a>' in markdown.markdown(text)

    comment = (pytester.path / "gauge-out" / "pr-comment.md").read_text()
    assert comment.splitlines()[0] == "<!-- pytest-gauge -->"
    suites, failing = _tables(markdown.markdown(comment, extensions=["tables"]))
    assert suites[1][:3] == ["mini", "FAIL", "1 fail"]
    assert [row[1] for row in failing[1:]] == [FAILING.replace(">", "&gt;")]
