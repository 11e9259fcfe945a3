"""Pure rendering of the HTML report: one self-contained page per suite, and the run's index page.

The page is the template ``page.html`` with the stylesheet ``app.css``, the script ``app.js`` and the
suite's JSON document (:mod:`.payload`) inlined, so it opens from disk with no server and makes no request
of any kind: a Content-Security-Policy allows only this script (by its hash), inline styles and ``data:``
images. Every string from a model, a tool or a task reaches the page only inside the JSON block (escaped
so that no ``</script>`` can end it) and is put on screen by the script as text (``textContent``).
"""

from __future__ import annotations

import base64
import gc
import hashlib
import html
import json
import re
import zlib
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from ...records.html import SuiteOutputs
from ...records.json_types import JSONObject
from .payload import LazyRows, Redact, build_payload, build_volatile

__all__ = [
    "SuiteLink",
    "embed_json",
    "render_index_html",
    "render_suite_html",
    "suite_html_pieces",
    "suite_link",
]

_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_SLOT = re.compile(r"\{\{(TITLE|CSP|CSS|JS|DATA|BULK|VOLATILE)\}\}")
BULK_CHARS = 8_000_000
"""A page whose JSON document is longer than this carries its cases, transcripts and ledger lines
gzipped in a ``gauge-bulk`` block (base64), which the script inflates before its first render: a suite
of 30,000 cases then fits in a page of about 7 MB, still one file that opens from disk."""
BULK_KEYS = ("cases", "ledger", "transcripts")
_KEEP_CHARS = 1 << 21
"""The size check keeps the text it makes up to this many characters; a document between this and
:data:`BULK_CHARS` is encoded again, a piece at a time, as the page is written."""


def embed_json(doc: Any) -> str:
    """Canonical JSON safe inside ``<script type="application/json">``: ``<``, ``>``, ``&``, U+2028 and
    U+2029 as ``\\u`` escapes (they occur only inside JSON strings, where the escape means the same)."""
    return _escaped(
        json.dumps(doc, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    )


def _escaped(text: str) -> str:
    for char, escape in _ESCAPES.items():  # no escape holds an escaped character: order does not matter
        text = text.replace(char, escape)
    return text


@cache
def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def _csp_hash(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


def _pieces(template: str, slots: dict[str, str | Iterable[str]]) -> Iterator[str]:
    """The template cut at its placeholders with each slot's text (or its pieces) in its place (one pass
    over the template, so a placeholder inside the data is never expanded); joined, the filled page."""
    at = 0
    for m in _SLOT.finditer(template):
        yield template[at : m.start()]
        slot = slots[m.group(1)]
        if isinstance(slot, str):
            yield slot
        else:
            yield from slot
        at = m.end()
    yield template[at:]


def render_suite_html(outputs: SuiteOutputs, redact: Redact) -> str:
    """``reports/index.html`` of one suite: overview, case table and case view in one file; ``redact``
    hides agent and model names in what the judge saw (see :func:`.payload.build_payload`)."""
    return "".join(suite_html_pieces(outputs, redact))


def suite_html_pieces(outputs: SuiteOutputs, redact: Redact) -> Iterator[str]:
    """:func:`render_suite_html`'s page as the template's pieces and the filled slots in order, to be
    written one after the other: the page is never one more copy of its JSON document in memory, and a
    document over :data:`_KEEP_CHARS` is made (and escaped) a row at a time as it is written."""
    script = _asset("app.js")
    style = _asset("app.css")
    csp = (
        f"default-src 'none'; script-src '{_csp_hash(script)}'; style-src '{_csp_hash(style)}'; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )
    data, bulk = _document(outputs, redact)
    return _pieces(
        _asset("page.html"),
        {
            "TITLE": html.escape(f"pytest-gauge: {outputs.name}"),
            "CSP": html.escape(csp),
            "CSS": style,
            "JS": script,
            "DATA": data,
            "BULK": bulk,
            "VOLATILE": embed_json(build_volatile(outputs)),
        },
    )


def _document(outputs: SuiteOutputs, redact: Redact) -> tuple[Iterable[str], str]:
    """The page's JSON block (its escaped text, in pieces), and its ``gauge-bulk`` block (empty unless
    the document is longer than :data:`BULK_CHARS`). A document that fits but is longer than
    :data:`_KEEP_CHARS` is not kept as text: its pieces are made again while the page is written (at
    1,000 tasks its 5.5 MB text, joined and escaped, was some 24 MB of the end of the run's peak)."""
    with _gc_paused():
        doc = build_payload(outputs, redact, lazy=True)  # keys sorted, a fresh tree: no cycle
        text = _Counted(_KEEP_CHARS)
        if _counted_within(doc, BULK_CHARS, text):
            if text.pieces is None:
                return _escaped_pieces(doc), ""
            return [_escaped("".join(text.pieces))], ""
        block = base64.b64encode(_packed_bulk(doc)).decode("ascii")
        doc["bulk"] = list(BULK_KEYS)
        return (
            [_escaped(_compact(dict(sorted(doc.items()))))],
            f'<script type="application/octet-stream" id="gauge-bulk">{block}</script>',
        )


@contextmanager
def _gc_paused() -> Iterator[None]:
    """The cyclic garbage collector paused: the document is some 100,000 fresh acyclic lists and dicts
    at 5,000 cases, whose allocation set off collections that walked them and the run's records again
    and again (a third of the render time)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _escaped_pieces(doc: JSONObject) -> Iterator[str]:
    """The document's compact text, escaped, a top-level value (a bulk list's row) at a time."""
    with _gc_paused():
        for piece in _compact_pieces(doc):
            yield _escaped(piece)


def _packed_bulk(doc: JSONObject) -> bytes:
    """``gzip.compress(_compact({key: doc.pop(key) for key in BULK_KEYS}).encode(), 6, mtime=0)``'s bytes,
    made a row at a time: each row is encoded, fed to the compressor (a megabyte at a time) and dropped
    from the document, so the bulk's text and bytes (some 27 MB each at 30,000 cases) are never whole."""
    packer = zlib.compressobj(6, zlib.DEFLATED, 31)  # what gzip.compress does with mtime=0
    packed: list[bytes] = []
    chunk: list[str] = []
    size = 0

    def add(text: str) -> None:
        nonlocal size
        chunk.append(text)
        size += len(text)
        if size >= 1 << 20:
            packed.append(packer.compress("".join(chunk).encode("utf-8")))
            chunk.clear()
            size = 0

    for n, key in enumerate(BULK_KEYS):
        value = doc.pop(key)
        add(("{" if n == 0 else ",") + _compact(key) + ":")
        if not isinstance(value, list | LazyRows):
            add(_compact(value))
            continue
        add("[")
        for i in range(len(value)):
            add(("," if i else "") + _compact(value[i]))
            if isinstance(value, list):
                value[i] = None  # the row's tree goes once its text is made (a lazy one is made then)
        add("]")
    add("}")
    packed.append(packer.compress("".join(chunk).encode("utf-8")))
    packed.append(packer.flush())
    return b"".join(packed)


def _compact_pieces(doc: JSONObject) -> Iterator[str]:
    """``_compact(doc)`` in pieces, a top-level value (a list's row) at a time."""
    yield "{"
    for n, (key, value) in enumerate(doc.items()):
        yield ("," if n else "") + _compact(key) + ":"
        if isinstance(value, list | LazyRows):
            yield "["
            for i in range(len(value)):
                yield ("," if i else "") + _compact(value[i])
            yield "]"
        else:
            yield _compact(value)
    yield "}"


def _counted_within(doc: JSONObject, limit: int, text: _Counted) -> bool:
    """Whether ``_compact(doc)`` is at most ``limit`` characters, its pieces added to ``text`` and given
    up once over: a large document's whole text (twice, while joined) was the peak of the end of a large
    run, only to learn its length."""
    for piece in _compact_pieces(doc):
        text.add(piece)
        if text.size > limit:
            return False
    return True


class _Counted:
    """Text pieces counted, and kept until they pass ``keep`` characters."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.size = 0
        self.pieces: list[str] | None = []

    def add(self, piece: str) -> None:
        self.size += len(piece)
        if self.pieces is not None:
            self.pieces.append(piece)
            if self.size > self.keep:
                self.pieces = None


_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False, check_circular=False)
"""One encoder for the page's pieces (``json.dumps`` with options builds one per call, per row)."""


def _compact(doc: Any) -> str:
    """``doc`` (keys already sorted) as compact JSON."""
    return _COMPACT.encode(doc)


@dataclass(frozen=True)
class SuiteLink:
    """One suite on the run's index page: where its report is and the headline numbers."""

    name: str
    href: str
    cases: int
    gates_failed: int
    gates_total: int
    total_cost: float | None
    usage_missing: int = 0  # calls without usage: the total is then a lower bound
    headline: tuple[tuple[str, str], ...] = ()  # (label, "value [low, high]") of the method's headline
    moved: tuple[str, ...] = ()  # with a baseline: each agent's success-rate delta, and what else changed


_HEADLINE = (("LRS close", "lrs_close"), ("LRS distant", "lrs_distant"), ("flip rate", "flip_rate"),
             ("judge share of cost", "judge_cost_share"))  # fmt: skip


def _figure(value: float | None, low: float | None, high: float | None) -> str:
    if value is None:
        return "–"
    interval = "" if low is None or high is None else f" [{low:.3f}, {high:.3f}]"
    return f"{value:.3f}{interval}"


def suite_link(outputs: SuiteOutputs, href: str) -> SuiteLink:
    """A suite's row of the index page: verdict, headline figures and, with a baseline, what moved."""
    metrics = {m.name: m for m in outputs.metrics}
    headline = tuple(
        (label, _figure(metrics[name].value, metrics[name].low, metrics[name].high))
        for label, name in _HEADLINE
        if name in metrics
    )
    moved: list[str] = []
    base = outputs.baseline or {}
    for agent, row in sorted((base.get("agents") or {}).items()):
        delta = row.get("delta(success_rate)") or {}
        value = delta.get("value")
        sign = "" if value is None or value < 0 else "+"
        moved.append(f"{agent} success {sign}{_figure(value, delta.get('low'), delta.get('high'))}")
    moved += [str(c) for c in base.get("setup_changes") or ()]
    return SuiteLink(
        name=outputs.name,
        href=href,
        cases=len(outputs.records),
        gates_failed=sum(g.status in ("fail", "inconclusive") for g in outputs.gates),
        gates_total=len(outputs.gates),
        total_cost=outputs.total_cost,
        usage_missing=outputs.usage_missing,
        headline=headline,
        moved=tuple(moved),
    )


def _row(s: SuiteLink) -> str:
    e = html.escape
    status = "FAIL" if s.gates_failed else "ok"
    cost = "unknown" if s.total_cost is None else f"${s.total_cost:.6f}"
    if s.total_cost is not None and s.usage_missing:  # a lower bound, never a plain $0
        calls = "call" if s.usage_missing == 1 else "calls"
        cost = f"at least {cost} ({s.usage_missing} {calls} without usage)"
    passing = s.gates_total - s.gates_failed
    headline = "<br>".join(f"{e(label)} {e(value)}" for label, value in s.headline) or "–"
    moved = "<br>".join(e(x) for x in s.moved) or "–"
    return (
        f'<tr><td><a href="{e(s.href)}">{e(s.name)}</a></td><td class="num">{s.cases}</td>'
        f'<td class="{status.lower()}">{status}: {passing}/{s.gates_total} gates pass</td>'
        f'<td class="headline-figures">{headline}</td><td class="moved">{moved}</td>'
        f'<td class="num">{e(cost)}</td></tr>'
    )


def render_index_html(suites: Sequence[SuiteLink]) -> str:
    """``gauge-out/index.html``: a link to every suite's report (static HTML, no script)."""
    rows = "\n".join(_row(s) for s in sorted(suites, key=lambda s: s.name))
    style = _asset("app.css")
    csp = f"default-src 'none'; style-src '{_csp_hash(style)}'; img-src data:; base-uri 'none'"
    body = (
        '<main id="index"><h1>pytest-gauge reports</h1>\n'
        '<table class="grid"><thead><tr><th>suite</th><th>cases</th><th>gates</th>'
        "<th>headline (95% intervals)</th><th>since the baseline</th><th>total cost</th></tr>"
        f"</thead>\n<tbody>\n{rows}\n</tbody></table></main>"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{html.escape(csp)}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<link rel="icon" href="data:,">\n<title>pytest-gauge reports</title>\n'
        f"<style>{style}</style></head>\n<body>{body}</body></html>\n"
    )
