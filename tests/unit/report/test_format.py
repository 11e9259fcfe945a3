"""Markdown escaping (issue 30, point 8): text from a model, a tool or a task can open no HTML and no link
in any renderer, while the reports' own comparisons (``p < 0.001``, ``lrs <= 0.5``) keep their bytes."""

from __future__ import annotations

import pytest

from pytest_gauge.report.format import md_cell, md_code, md_safe, md_text


@pytest.mark.parametrize(
    ("text", "safe"),
    [
        ("<script>x()</script>", "&lt;script>x()&lt;/script>"),
        ("<!-- c --> <?php ?> <http://a.b>", "&lt;!-- c --> &lt;?php ?> &lt;http://a.b>"),
        ("&copy; &#60; &amp; &lt;", "&amp;copy; &amp;#60; &amp; &lt;"),
        ("[x](javascript:y) ![i](u)", "[x]\\(javascript:y) ![i]\\(u)"),
        ("p < 0.001, lrs <= 0.5, a & b, x > y", "p < 0.001, lrs <= 0.5, a & b, x > y"),
        ("two\nlines", "two lines"),
    ],
)
def test_md_safe_breaks_markup_and_keeps_comparisons(text: str, safe: str) -> None:
    assert md_safe(text) == safe
    assert md_cell(text) == safe.replace("|", "\\|")


def test_md_text_escapes_every_html_character_and_md_cell_keeps_it() -> None:
    text = md_text("a <b> & c > d [x](y)\nz")
    assert text == "a &lt;b&gt; &amp; c &gt; d [x]\\(y) z"
    assert md_cell(text) == text  # no double escaping when a table cell holds escaped text
    assert md_cell("a | b") == "a \\| b"


@pytest.mark.parametrize(
    ("text", "span"), [("m01", "`m01`"), ("a`b", "``a`b``"), ("`x", "`` `x ``"), ("a``b`", "``` a``b` ```")]
)
def test_md_code_fence_is_longer_than_any_backtick_run(text: str, span: str) -> None:
    assert md_code(text) == span
