"""The one number and table formatting of every report (so a value prints the same everywhere): rates,
numbers, dollars, counts, percentages, intervals, markdown and plain-text tables. Pure functions of
their arguments."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..analysis.metrics import Estimate

__all__ = [
    "DASH",
    "MAX_REASON",
    "VOLATILE_BEGIN",
    "VOLATILE_END",
    "VOLATILE_KEY",
    "counted",
    "estimate_cells",
    "fitted",
    "fmt_bool",
    "fmt_ci",
    "fmt_int",
    "fmt_num",
    "fmt_p_value",
    "fmt_pct",
    "fmt_per_success",
    "fmt_price",
    "fmt_rate",
    "fmt_task_ci",
    "fmt_usd",
    "md_cell",
    "md_code",
    "md_safe",
    "md_table",
    "md_text",
    "shorten",
    "task_ci_basis",
    "text_table",
    "unsign_zero",
    "usd_at_least",
    "without_volatile",
]

DASH = "–"
"""What a missing value prints as."""
MAX_REASON = 160
"""The longest one-line text (a reason, an error) a table cell shows."""
VOLATILE_BEGIN = "<!-- gauge:volatile -->"
VOLATILE_END = "<!-- /gauge:volatile -->"
"""Around the part of a markdown or HTML report that varies from run to run (latencies): comparisons of
runs (``-n 0`` against ``-n 2``, a re-run) ignore what is between them (:func:`without_volatile`)."""
VOLATILE_KEY = "volatile"
"""The top-level key of ``metrics.json`` holding what varies from run to run (latencies)."""
_VOLATILE = re.compile(re.escape(VOLATILE_BEGIN) + r".*?(?:" + re.escape(VOLATILE_END) + r"|\Z)", re.DOTALL)


def without_volatile(text: str, json_doc: bool = False) -> str:
    """A report without what varies from run to run: the marked sections of markdown or HTML, or with
    ``json_doc`` the ``volatile`` key of a JSON document (re-encoded canonically). What two runs of the
    same suite and seed must agree on, byte for byte."""
    if json_doc:
        doc: Any = json.loads(text)
        if isinstance(doc, dict):
            doc.pop(VOLATILE_KEY, None)
        return json.dumps(doc, sort_keys=True, indent=2, ensure_ascii=False) + "\n"
    return _VOLATILE.sub("", text)


def usd_at_least(total: float | None, without_usage: int) -> str:
    """A total in dollars that never shows an unknown part as $0: ``at least $X (N calls without
    usage)`` when some calls reported no usage, ``unknown`` when a price is missing."""
    if total is None or not without_usage:
        return fmt_usd(total)
    calls = "call" if without_usage == 1 else "calls"
    return f"at least {fmt_usd(total)} ({without_usage} {calls} without usage)"


def unsign_zero(text: str) -> str:
    """A formatted zero without its minus sign (``-0.000`` → ``0.000``)."""
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def fmt_p_value(p: float) -> str:
    """A p-value to three decimals, or ``< 0.001`` (never a bare 0: no finite sample proves it)."""
    return "< 0.001" if p < 0.0005 else unsign_zero(f"{p:.3f}")


def fmt_rate(x: float | None) -> str:
    """A rate or reward: three decimals; null as a dash."""
    if x is None or not math.isfinite(x):
        return DASH
    return unsign_zero(f"{x:.3f}")


def fmt_num(x: float | None) -> str:
    """Three decimals, or three significant digits for small magnitudes (gate values may be costs)."""
    if x is None or not math.isfinite(x):
        return DASH
    if x == 0 or abs(x) >= 0.01:
        return unsign_zero(f"{x:.3f}")
    return unsign_zero(f"{x:.{min(12, 2 - math.floor(math.log10(abs(x))))}f}")


def fmt_per_success(cost: float | None, successes: int, total: float | None) -> str:
    """Cost per success: ``no success`` when nothing succeeded (not a price problem), ``unknown`` when a
    model has no price, else dollars."""
    if successes == 0:
        return "no success (undefined)" if total is not None else "no success (and cost unknown)"
    return fmt_usd(cost)


def fmt_usd(x: float | None) -> str:
    """Dollars; ``unknown`` (never $0) when no price was configured."""
    if x is None or not math.isfinite(x):
        return "unknown"
    if abs(x) >= 100:
        return f"${x:,.2f}"
    if abs(x) >= 1:
        return f"${x:.4f}"
    if 0 < abs(x) < 0.000001:  # six decimals would print a real cost as $0.000000
        return "$" + fmt_num(x)
    return "$" + unsign_zero(f"{x:.6f}")


def fmt_price(x: float) -> str:
    """A price per million tokens in dollars."""
    return f"${x:g}"


def fmt_int(n: int) -> str:
    """A count with thousands separators."""
    return f"{n:,}"


def fmt_pct(x: float | None) -> str:
    """A share as a percentage with one decimal; null as a dash."""
    return DASH if x is None or not math.isfinite(x) else f"{100 * x:.1f}%"


def fmt_bool(b: bool | None) -> str:
    """``true`` / ``false``; null as a dash."""
    return DASH if b is None else ("true" if b else "false")


def fmt_ci(low: float | None, high: float | None, fmt: Callable[[float | None], str] = fmt_rate) -> str:
    """An interval ``[low, high]`` in ``fmt``; a dash without one."""
    if low is None or high is None:
        return DASH
    return f"[{fmt(low)}, {fmt(high)}]"


def fmt_task_ci(e: Estimate | None, fmt: Callable[[float | None], str]) -> str:
    """`` [low, high]`` (95%, resampling tasks) after a cost ratio, or nothing without an interval."""
    if e is None or e.low is None or e.high is None or e.method == "exact":
        return ""
    return f" {fmt_ci(e.low, e.high, fitted(fmt, e.value, e.low, e.high))}"


def task_ci_basis(e: Estimate | None) -> str:
    """What a cost ratio's interval is, or why it has none (a skewed bill on too few tasks)."""
    if e is not None and e.low is None and e.note:
        return f"no 95% interval: {e.note}"
    return "95% interval over tasks, skew-corrected"


# What could start markup in any markdown renderer: a tag, comment, declaration or autolink (``<`` before a
# letter, ``/``, ``!`` or ``?``), a character reference (``&`` before ``#`` or ``name;``, other than the
# three md_text writes) and an inline link or image (``](``).
_MARKUP = re.compile(r"<(?=[A-Za-z/!?])|&(?!(?:lt|gt|amp);)(?=#|[A-Za-z][A-Za-z0-9]*;)|\](?=\()")
_MARKUP_FIX = {"<": "&lt;", "&": "&amp;", "]": "]\\"}
_HTML = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def counted(n: int, noun: str) -> str:
    """``n`` with its noun in the right number: "1 pair", "3 pairs" (regular plurals only)."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def md_text(text: str) -> str:
    """A string from a model, a tool or a task as markdown text: one line, ``&``, ``<`` and ``>`` escaped
    for HTML and ``](`` broken, so any renderer (Python-Markdown, MkDocs, GitHub) shows it as text."""
    return " ".join(str(text).split()).translate(_HTML).replace("](", "]\\(")


def md_code(text: str) -> str:
    """``text`` as a markdown code span whose fence no backtick inside it can close (CommonMark's rule)."""
    runs = [len(m) for m in re.findall(r"`+", text)]
    fence = "`" * (max(runs, default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def md_safe(text: str) -> str:
    """One line in which no renderer finds HTML or a link: a ``<`` that opens a tag, a character reference
    and ``](`` are escaped; ``p < 0.001`` or ``lrs <= 0.5`` stay as they are (they open no markup)."""
    return _MARKUP.sub(lambda m: _MARKUP_FIX[m.group(0)[0]], " ".join(str(text).split()))


def md_cell(text: str) -> str:
    """Text safe inside a markdown table cell: :func:`md_safe`, pipes escaped."""
    return md_safe(text).replace("|", "\\|")


def shorten(text: str, limit: int = MAX_REASON) -> str:
    """The text on one line, cut with an ellipsis past ``limit`` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def md_table(header: Sequence[str], rows: Iterable[Sequence[str]], align: str | None = None) -> list[str]:
    """A markdown table; ``align`` has one 'l' or 'r' per column."""
    align = align or "l" * len(header)
    marks = ["---:" if a == "r" else "---" for a in align]
    out = ["| " + " | ".join(md_cell(h) for h in header) + " |", "| " + " | ".join(marks) + " |"]
    out.extend("| " + " | ".join(md_cell(c) for c in row) + " |" for row in rows)
    return out


def text_table(rows: Sequence[Sequence[str]], align: str) -> list[str]:
    """A plain-text table with padded columns (first row is the header)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [c.rjust(w) if a == "r" else c.ljust(w) for c, w, a in zip(row, widths, align, strict=True)]
        lines.append("  ".join(cells).rstrip())
    return lines


def _usd_fine(x: float | None) -> str:
    """Dollars with three significant digits below a cent's hundredth (``$0.000000523``)."""
    if x is None or not math.isfinite(x) or x == 0 or abs(x) >= 0.0001:
        return fmt_usd(x)
    return "$" + fmt_num(x)


_FINER: dict[Callable[[float | None], str], Callable[[float | None], str]] = {}


def fitted(fmt: Callable[[float | None], str], *values: float | None) -> Callable[[float | None], str]:
    """``fmt``, or a finer one (significant digits) when ``fmt`` would print the nonzero value (the first
    of ``values``) as zero or an interval (the next two) of some width as one number: a cost of 0.0005
    in [0.0003, 0.0004] never prints as ``0.001 [0.000, 0.000]``."""
    finer = _FINER.get(fmt)
    if finer is None or not values:
        return fmt
    value, *bounds = values
    if value is not None and math.isfinite(value) and value != 0 and fmt(value) == fmt(0.0):
        return finer
    if len(bounds) == 2 and None not in bounds:
        low, high = bounds
        assert low is not None and high is not None
        if high - low > 1e-12 and fmt(low) == fmt(high):
            return finer
    return fmt


def estimate_cells(e: Estimate | None, fmt: Callable[[float | None], str] = fmt_rate) -> list[str]:
    """An estimate's table cells: value, n and interval (digits enough to tell them apart: :func:`fitted`)."""
    if e is None:
        return [DASH, "0", DASH]
    fmt = fitted(fmt, e.value, e.low, e.high)
    return [fmt(e.value), str(e.n), fmt_ci(e.low, e.high, fmt)]


_FINER.update({fmt_rate: fmt_num, fmt_usd: _usd_fine})
