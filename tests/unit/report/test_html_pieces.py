"""The suite page is written piece by piece: its JSON document is one piece, never copied into a
filled page (at 1,000 tasks the page is 5.6 MB, each copy of it as much again in memory)."""

from __future__ import annotations

from pathlib import Path

from pytest_gauge._internal.finish.html import write_html_pages
from pytest_gauge._internal.report.html import render_suite_html, suite_html_pieces
from tests.unit.report.test_html import redactor_of, tiny_outputs


def test_the_pieces_are_the_page_and_the_document_is_one_of_them() -> None:
    outputs = tiny_outputs()
    pieces = suite_html_pieces(outputs, redactor_of(outputs))
    page = render_suite_html(outputs, redactor_of(outputs))
    assert "".join(pieces) == page
    start = page.index('id="gauge-data">') + len('id="gauge-data">')
    document = page[start : page.index("</script>", start)]
    assert len(document) > 1000 and document in pieces  # not inside a larger piece: no copy of the page


def test_the_written_page_is_the_rendered_page(tmp_path: Path) -> None:
    outputs = tiny_outputs()
    (path, _index) = write_html_pages(tmp_path, [(tmp_path / "s", outputs)])
    assert path.read_text(encoding="utf-8") == render_suite_html(outputs, redactor_of(outputs))
