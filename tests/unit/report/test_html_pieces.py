"""The suite page is written piece by piece: its JSON document is one piece, never copied into a
filled page (at 1,000 tasks the page is 5.6 MB, each copy of it as much again in memory); a large
page's bulk block is packed row by row."""

from __future__ import annotations

import copy
import gzip
import json
import random
from pathlib import Path
from typing import Any

import pytest

from pytest_gauge._internal.finish.html import write_html_pages
from pytest_gauge._internal.report.html import build_payload, render, render_suite_html, suite_html_pieces
from tests.unit.report.test_html import redactor_of, tiny_outputs


def test_the_pieces_are_the_page_and_the_document_is_one_of_them() -> None:
    outputs = tiny_outputs()
    pieces = list(suite_html_pieces(outputs, redactor_of(outputs)))
    page = render_suite_html(outputs, redactor_of(outputs))
    assert "".join(pieces) == page
    start = page.index('id="gauge-data">') + len('id="gauge-data">')
    document = page[start : page.index("</script>", start)]
    assert len(document) > 1000 and document in pieces  # not inside a larger piece: no copy of the page


def test_a_document_over_the_kept_size_is_written_a_row_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the kept size the document is made again while written, each row escaped on its own: the
    same page, with no piece holding the whole document (or a large part of it)."""
    outputs = tiny_outputs()
    page = render_suite_html(outputs, redactor_of(outputs))
    start = page.index('id="gauge-data">') + len('id="gauge-data">')
    document = page[start : page.index("</script>", start)]
    monkeypatch.setattr(render, "_KEEP_CHARS", 100)
    pieces = list(suite_html_pieces(outputs, redactor_of(outputs)))
    assert "".join(pieces) == page
    assert len(pieces) > 20 and max(len(p) for p in pieces if p in document) < len(document) / 4


def test_the_written_page_is_the_rendered_page(tmp_path: Path) -> None:
    outputs = tiny_outputs()
    (path, _index) = write_html_pages(tmp_path, [(tmp_path / "s", outputs)])
    assert path.read_text(encoding="utf-8") == render_suite_html(outputs, redactor_of(outputs))


@pytest.mark.parametrize("rows", [0, 1, 4000])
def test_the_bulk_is_packed_row_by_row_to_the_bytes_of_one_gzip(rows: int) -> None:
    """A large page's bulk block: the bytes ``gzip.compress`` gives the whole bulk's text, made with no
    row's tree left in the document once its text is made (any text, any size across the 1 MB chunks)."""
    rng = random.Random(rows)
    texts = ["é<&>\u2028", "</script>", "plain", '"quoted"\\']

    def row(i: int) -> dict[str, Any]:
        return {"i": i, "t": rng.choice(texts) * rng.randint(0, 80), "v": [rng.random()], "n": None}

    doc: dict[str, Any] = {key: [row(i) for i in range(rows)] for key in render.BULK_KEYS}
    doc["other"] = {"kept": True}
    whole = {key: copy.deepcopy(doc[key]) for key in render.BULK_KEYS}
    kept = doc["cases"]
    packed = render._packed_bulk(doc)
    assert packed == gzip.compress(render._compact(whole).encode("utf-8"), compresslevel=6, mtime=0)
    assert json.loads(gzip.decompress(packed)) == whole
    assert sorted(doc) == ["other"] and all(r is None for r in kept)


@pytest.mark.parametrize("seed", range(40))
def test_the_document_within_the_bulk_limit_is_its_compact_text_else_none(seed: int) -> None:
    """The size check that decides on a bulk block never makes a large document's whole text, and
    gives the exact compact text at or under the limit (any value, any limit around the length)."""
    rng = random.Random(seed)

    def value(depth: int) -> Any:
        pick = rng.random()
        if depth > 2 or pick < 0.3:
            return rng.choice([1, 2.5, None, "é<\u2028", True, "", -3e-7])
        if pick < 0.6:
            return [value(depth + 1) for _ in range(rng.randint(0, 4))]
        return {f"k{i}": value(depth + 1) for i in range(rng.randint(0, 3))}

    doc = {f"k{i}": value(0) for i in range(rng.randint(0, 5))}
    whole = render._compact(doc)
    for limit in (0, 2, len(whole) - 1, len(whole), len(whole) + 1, rng.randint(0, len(whole))):
        for keep in (0, 3, len(whole) // 2, limit):  # text past ``keep`` made again when it fits
            assert _compact_within(doc, limit, keep) == (whole if len(whole) <= limit else None)


def _compact_within(doc: dict[str, Any], limit: int, keep: int = render._KEEP_CHARS) -> str | None:
    """The page's size check as :func:`render._document` uses it: the compact text when it is at most
    ``limit`` characters (the kept pieces, or the document encoded again past ``keep``), else None."""
    text = render._Counted(keep)
    if not render._counted_within(doc, limit, text):
        return None
    return "".join(text.pieces if text.pieces is not None else render._compact_pieces(doc))


def test_a_lazy_document_encodes_as_the_built_one() -> None:
    """The page encodes its bulk rows as it makes them (``lazy``): the same text as the whole tree's."""
    outputs = tiny_outputs()
    whole = render._compact(build_payload(outputs, redactor_of(outputs)))
    lazy = build_payload(outputs, redactor_of(outputs), lazy=True)
    assert _compact_within(lazy, len(whole)) == whole
    assert _compact_within(lazy, len(whole) - 1) is None
