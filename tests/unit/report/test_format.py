"""Markdown escaping: text from a model, a tool or a task can open no HTML and no link
in any renderer, while the reports' own comparisons (``p < 0.001``, ``lrs <= 0.5``) keep their bytes."""

from __future__ import annotations

import pytest

from pytest_gauge._internal.report.format import counted, md_cell, md_code, md_safe, md_text


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


def test_tiny_values_print_inside_their_intervals() -> None:
    """A cost of 0.0005 printed as ``0.0005 [0.000, 0.000]``; a nonzero value that would print
    as zero, or an interval that would print as one number, now gets significant digits, and ordinary
    rates keep three decimals."""
    from pytest_gauge._internal.analysis.estimates import Estimate
    from pytest_gauge._internal.report.format import estimate_cells, fmt_task_ci, fmt_usd

    tiny = Estimate(0.00035, 10, 0.0003, 0.0004, "x")
    assert estimate_cells(tiny) == ["0.000350", "10", "[0.000300, 0.000400]"]
    assert estimate_cells(Estimate(0.0002, 10, 0.0, 0.0009, "x")) == ["0.000200", "10", "[0.000, 0.000900]"]
    assert estimate_cells(Estimate(0.3, 10, 0.00003, 0.9, "x")) == ["0.300", "10", "[0.000, 0.900]"]
    assert estimate_cells(Estimate(0.25, 10, 0.1, 0.5, "x")) == ["0.250", "10", "[0.100, 0.500]"]
    assert estimate_cells(Estimate(0.0, 10, 0.0, 0.16, "x")) == ["0.000", "10", "[0.000, 0.160]"]
    assert fmt_usd(0.0000005) == "$0.000000500"
    assert fmt_task_ci(Estimate(0.00002, 9, 0.00001, 0.00003, "b"), fmt_usd) == " [$0.000010, $0.000030]"
    tight = Estimate(0.0000013, 9, 0.0000012, 0.0000014, "b")
    assert fmt_task_ci(tight, fmt_usd) == " [$0.00000120, $0.00000140]"


def test_counted_says_one_pair_and_two_pairs() -> None:
    assert [counted(n, "pair") for n in (0, 1, 2)] == ["0 pairs", "1 pair", "2 pairs"]
