"""The gate grammar: :class:`Gate` and :class:`Term`, the parser of threshold expressions such as
``upper(lrs_close) <= 0.5; min_n=20``, and :class:`GateSyntaxError` with a caret at the fault.

One grammar serves the suite module, the ini key ``gauge_gates`` and the CLI ``--gauge-gate``::

    GATE       := BOUND_EXPR OP NUMBER ( ';' OPTION )*
    BOUND_EXPR := ('lower' | 'upper') '(' EXPR ')' | EXPR
    EXPR       := TERM ( '-' TERM )?
    TERM       := NAME ( '(' ARG (',' ARG)* ')' )? | 'delta' '(' TERM ')'
    OP         := '<=' | '>=' | '<' | '>' | '=='
    OPTION     := 'min_n' '=' INT | 'allow_inconclusive' | 'allow_unpriced'
                | 'reproducible' '=' NUMBER [':' ('fail' | 'inconclusive')] | 'exclude_flaky' '=' NUMBER

No numpy here: every process parses gates at collection (:mod:`.gate_precheck`); :mod:`.gates` evaluates them.
"""

from __future__ import annotations

import argparse
import math
import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from .metric_table import names_from

__all__ = [
    "BASELINE_METRICS",
    "DELTA",
    "GRAMMAR",
    "OPS",
    "Bound",
    "Gate",
    "GateSyntaxError",
    "Term",
    "gate_arg",
    "number_text",
    "parse_gate",
    "parse_gates",
    "parse_term",
]

GRAMMAR = (
    "(EXPR | lower(EXPR) | upper(EXPR)) OP NUMBER [; min_n=INT] [; allow_inconclusive] [; allow_unpriced] "
    "[; reproducible=P[:inconclusive]] [; exclude_flaky=P], "
    "EXPR = METRIC[(ARG, ...)] [- METRIC[(ARG, ...)]] or delta(METRIC[(ARG, ...)]), "
    "OP = <= >= < > ==, "
    "e.g. 'upper(lrs_close) <= 0.5; min_n=20'"
)

Bound = Literal["point", "lower", "upper"]

OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "<": operator.lt,
    ">": operator.gt,
    "==": operator.eq,
}
_BOUNDS = ("lower", "upper")
_OPTIONS = "min_n=INT, allow_inconclusive, allow_unpriced, reproducible=P[:inconclusive], exclude_flaky=P"
_FLAGS = ("allow_inconclusive", "allow_unpriced")
DELTA = "delta"
"""``delta(TERM)`` (current minus baseline): its one argument is a whole term."""
BASELINE_METRICS: tuple[str, ...] = (DELTA, *names_from("baseline"))
"""Gate terms served by a baseline comparison (every one needs ``--gauge-baseline``)."""

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ARG_RE = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_@.\-]*[A-Za-z0-9_])?")
_OPTION_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*")
_WORD_RE = re.compile(r"[A-Za-z0-9_.+\-]+")  # a run that should be one number
_NUMBER_RE = re.compile(r"(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_INT_RE = re.compile(r"\d+")
# Common near-misses for operators, with the fix to suggest (checked before the valid operators).
_OP_HINTS = (
    ("=<", "write '<=' instead of '=<'"),
    ("=>", "write '>=' instead of '=>'"),
    ("!=", "'!=' is not supported; use '<', '>', '<=', '>=' or '=='"),
    ("<>", "'<>' is not supported; use '<', '>', '<=', '>=' or '=='"),
    ("≤", "write '<=' instead of '≤'"),
    ("≥", "write '>=' instead of '≥'"),
    ("≠", "'≠' is not supported; use '<', '>', '<=', '>=' or '=='"),
)


class GateSyntaxError(ValueError):
    """A gate expression that does not parse; the message shows the text, a caret at the fault, the grammar.

    ``column`` is 1-based; ``reason`` is the short cause; ``line`` is set by :func:`parse_gates` (1-based).
    """

    def __init__(self, text: str, column: int, reason: str, line: int | None = None) -> None:
        self.text = text
        self.column = column
        self.reason = reason
        self.line = line
        where = f"line {line}, column {column}" if line is not None else f"column {column}"
        shown = "".join(" " if ch.isspace() else ch for ch in text)
        message = (
            f"invalid gate {text.strip()!r} at {where}: {reason}\n"
            f"  {shown}\n"
            f"  {' ' * (column - 1)}^\n"
            f"  grammar: {GRAMMAR}"
        )
        super().__init__(message)

    def __reduce__(self) -> tuple[type[GateSyntaxError], tuple[str, int, str, int | None]]:
        return (type(self), (self.text, self.column, self.reason, self.line))


@dataclass(frozen=True)
class Term:
    """One metric reference: a name and optional arguments, e.g. ``flip_rate(agent_x, agent_y)``."""

    name: str
    args: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"{self.name}({', '.join(self.args)})" if self.args else self.name


@dataclass(frozen=True)
class Gate:
    """A parsed gate. Equality ignores ``text`` (the source as written), so ``parse(g.canonical()) == g``."""

    text: str = field(compare=False)
    bound: Bound
    left: Term
    right: Term | None
    op: str
    threshold: float
    min_n: int | None = None
    allow_inconclusive: bool = False
    allow_unpriced: bool = False
    reproducible: float | None = None  # a PASS must repeat on at least this share of same-task reruns
    unreproducible: Literal["fail", "inconclusive"] = "fail"  # what a PASS below it becomes
    exclude_flaky: float | None = None  # tasks whose history flake rate is above it are left out (flaky.py)

    def __post_init__(self) -> None:
        if self.op not in OPS:
            raise ValueError(f"unknown comparison operator {self.op!r}; expected one of {', '.join(OPS)}")
        if self.bound not in ("point", *_BOUNDS):
            raise ValueError(f"unknown bound {self.bound!r}; expected point, lower or upper")

    def expression(self) -> str:
        """The compared expression and comparison without options, e.g. ``upper(lrs_close) <= 0.5``."""
        expr = str(self.left) if self.right is None else f"{self.left} - {self.right}"
        if self.bound != "point":
            expr = f"{self.bound}({expr})"
        return f"{expr} {self.op} {number_text(self.threshold)}"

    def canonical(self) -> str:
        """Normalised text (single spaces, fixed option order); stable, so it serves as the gate's test id."""
        text = self.expression()
        if self.min_n is not None:
            text += f"; min_n={self.min_n}"
        if self.allow_inconclusive:
            text += "; allow_inconclusive"
        if self.allow_unpriced:
            text += "; allow_unpriced"
        if self.reproducible is not None:
            text += f"; reproducible={number_text(self.reproducible)}"
            text += "" if self.unreproducible == "fail" else f":{self.unreproducible}"
        if self.exclude_flaky is not None:
            text += f"; exclude_flaky={number_text(self.exclude_flaky)}"
        return text


def number_text(x: float) -> str:
    """Shortest text that reads back as exactly ``x`` (``-20`` rather than ``-20.0``)."""
    if math.isfinite(x) and x.is_integer() and abs(x) < 1e15:
        return str(int(x))
    return repr(x)


class _Parser:
    """Recursive descent over the raw text (no tokenizer: '-' separates terms but may sit inside args)."""

    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0
        self.flaky: float | None = None  # exclude_flaky=P

    def error(self, pos: int, reason: str) -> GateSyntaxError:
        return GateSyntaxError(self.s, pos + 1, reason)

    def ws(self) -> None:
        while self.i < len(self.s) and self.s[self.i].isspace():
            self.i += 1

    def at_end(self) -> bool:
        return self.i >= len(self.s)

    def peek(self) -> str:
        return self.s[self.i] if self.i < len(self.s) else ""

    def found(self) -> str:
        """What stands at the cursor, for error messages."""
        if self.at_end():
            return "the end of the expression"
        m = _WORD_RE.match(self.s, self.i)
        return repr(m.group(0) if m else self.s[self.i])

    def parse(self) -> Gate:
        self.ws()
        if self.at_end():
            raise self.error(self.i, "empty gate expression")
        start = self.i
        m = _NAME_RE.match(self.s, self.i)
        bound: Bound = "point"
        if m and m.group(0) in _BOUNDS:
            self.i = m.end()
            self.ws()
            if self.peek() != "(":
                raise self.error(
                    self.i,
                    f"expected '(' after {m.group(0)!r}, found {self.found()}: "
                    f"{m.group(0)}(...) wraps an expression, e.g. {m.group(0)}(flip_rate)",
                )
            self.i += 1
            bound = "lower" if m.group(0) == "lower" else "upper"
            left, right = self.expr()
            self.ws()
            if self.peek() != ")":
                raise self.error(
                    self.i, f"expected ')' to close {bound}( at column {start + 1}, found {self.found()}"
                )
            self.i += 1
        else:
            left, right = self.expr()
        op = self.op()
        threshold = self.number()
        min_n, flags, reproducible = self.options()
        return Gate(
            self.s.strip(),
            bound,
            left,
            right,
            op,
            threshold,
            min_n,
            "allow_inconclusive" in flags,
            "allow_unpriced" in flags,
            None if reproducible is None else reproducible[0],
            "fail" if reproducible is None else reproducible[1],
            self.flaky,
        )

    def expr(self) -> tuple[Term, Term | None]:
        left = self.term()
        self.ws()
        if self.peek() != "-":
            return left, None
        self.i += 1
        return left, self.term()

    def term(self) -> Term:
        self.ws()
        m = _NAME_RE.match(self.s, self.i)
        if not m:
            raise self.error(self.i, f"expected a metric name, found {self.found()}")
        name = m.group(0)
        if name.lower() in _BOUNDS:
            if name in _BOUNDS:
                reason = f"{name!r} is not a metric: lower(...)/upper(...) wrap the whole expression, once"
            else:
                reason = f"{name!r} is reserved: write the bound in lower case, {name.lower()}(...)"
            raise self.error(self.i, reason)
        self.i = m.end()
        save = self.i
        self.ws()
        if self.peek() != "(":
            self.i = save
            return Term(name)
        self.i += 1
        if name == DELTA:
            return self.delta_term()
        args: list[str] = []
        while True:
            self.ws()
            a = _ARG_RE.match(self.s, self.i)
            if not a:
                raise self.error(
                    self.i, f"expected an argument of {name}(...) (e.g. agent_x), found {self.found()}"
                )
            args.append(a.group(0))
            self.i = a.end()
            self.ws()
            ch = self.peek()
            if ch == ",":
                self.i += 1
            elif ch == ")":
                self.i += 1
                return Term(name, tuple(args))
            else:
                raise self.error(
                    self.i,
                    f"expected ',' or ')' in {name}(...), found {self.found()} "
                    "('@', '.', '-' may appear only inside an argument)",
                )

    def delta_term(self) -> Term:
        """``delta(TERM)``: the inner term's canonical text is the one argument (so ``str`` round-trips)."""
        inner = self.term()
        self.ws()
        if self.peek() != ")":
            raise self.error(self.i, f"expected ')' to close delta({inner}, found {self.found()}")
        self.i += 1
        if inner.name == DELTA:
            raise self.error(self.i - 1, "delta(delta(...)) is not supported")
        return Term(DELTA, (str(inner),))

    def op(self) -> str:
        self.ws()
        for bad, hint in _OP_HINTS:
            if self.s.startswith(bad, self.i):
                raise self.error(self.i, hint)
        for op in ("<=", ">=", "==", "<", ">"):
            if self.s.startswith(op, self.i):
                self.i += len(op)
                return op
        if self.peek() == "=":
            raise self.error(self.i, "a single '=' is not a comparison; use '==', '<=' or '>='")
        raise self.error(self.i, f"expected a comparison operator (<=, >=, <, >, ==), found {self.found()}")

    def number(self) -> float:
        self.ws()
        start = self.i
        sign = 1.0
        if self.peek() == "-":
            sign = -1.0
            self.i += 1
            self.ws()
        m = _WORD_RE.match(self.s, self.i)
        if not m:
            raise self.error(self.i, f"expected a number after the operator, found {self.found()}")
        word = m.group(0)
        if not _NUMBER_RE.fullmatch(word):
            raise self.error(
                start if sign < 0 else self.i, f"{word!r} is not a number (expected e.g. 0.15, -20 or 1e-3)"
            )
        value = sign * float(word)
        if not math.isfinite(value):
            raise self.error(start, f"{word!r} is out of range")
        self.i = m.end()
        return value

    def options(self) -> tuple[int | None, set[str], tuple[float, Literal["fail", "inconclusive"]] | None]:
        """The options after the threshold: ``min_n``, the flags that were given and ``reproducible``."""
        min_n: int | None = None
        reproducible: tuple[float, Literal["fail", "inconclusive"]] | None = None
        seen: set[str] = set()
        while True:
            self.ws()
            if self.at_end():
                return min_n, seen - {"min_n", "reproducible", "exclude_flaky"}, reproducible
            if self.peek() != ";":
                what = "option" if seen else "threshold"
                raise self.error(
                    self.i, f"unexpected {self.found()} after the {what} (options go after ';': {_OPTIONS})"
                )
            self.i += 1
            self.ws()
            m = _OPTION_RE.match(self.s, self.i)
            if not m:
                raise self.error(self.i, f"expected an option after ';' ({_OPTIONS}), found {self.found()}")
            name = m.group(0)
            if name in seen:
                raise self.error(self.i, f"option {name!r} given twice")
            if name == "min_n":
                min_n = self.min_n(m.end())
            elif name == "reproducible":
                reproducible = self.reproducible(m.end())
            elif name == "exclude_flaky":
                self.flaky = self.flake_bound(m.end())
            elif name in _FLAGS:
                self.i = m.end()
                save = self.i
                self.ws()
                if self.peek() == "=":
                    raise self.error(self.i, f"{name} takes no value")
                self.i = save
            else:
                raise self.error(self.i, f"unknown option {name!r} (known: {_OPTIONS})")
            seen.add(name)

    def reproducible(self, at: int) -> tuple[float, Literal["fail", "inconclusive"]]:
        """``reproducible=P`` (a share in (0, 1)) and its optional ``:fail`` / ``:inconclusive``."""
        self.i = at
        self.ws()
        if self.peek() != "=":
            raise self.error(
                self.i, f"expected '=' after reproducible (reproducible=0.9), found {self.found()}"
            )
        self.i += 1
        self.ws()
        v = _NUMBER_RE.match(self.s, self.i)
        if not v or not 0.0 < float(v.group(0)) < 1.0:
            raise self.error(
                self.i, f"reproducible needs a share between 0 and 1 (e.g. 0.9), found {self.found()}"
            )
        self.i = v.end()
        self.ws()
        if self.peek() != ":":
            return float(v.group(0)), "fail"
        self.i += 1
        self.ws()
        w = _OPTION_RE.match(self.s, self.i)
        if not w or w.group(0) not in ("fail", "inconclusive"):
            raise self.error(
                self.i, f"expected 'fail' or 'inconclusive' after 'reproducible=P:', found {self.found()}"
            )
        self.i = w.end()
        return float(v.group(0)), "fail" if w.group(0) == "fail" else "inconclusive"

    def flake_bound(self, at: int) -> float:
        """``exclude_flaky=P``: a flake rate in [0, 1) above which a task is left out."""
        self.i = at
        self.ws()
        v = _NUMBER_RE.match(self.s, self.i + 1) if self.peek() == "=" else None
        if v is None or not float(v.group(0)) < 1.0:
            found = self.found() if v is None else repr(v.group(0))
            raise self.error(
                self.i, f"exclude_flaky needs '=' and a rate in [0, 1) (exclude_flaky=0.3), found {found}"
            )
        self.i = v.end()
        return float(v.group(0))

    def min_n(self, at: int) -> int:
        """``min_n=INT`` from after its name."""
        self.i = at
        self.ws()
        if self.peek() != "=":
            raise self.error(self.i, f"expected '=' after min_n (min_n=INT), found {self.found()}")
        self.i += 1
        self.ws()
        v = _WORD_RE.match(self.s, self.i)
        if not v or not _INT_RE.fullmatch(v.group(0)):
            raise self.error(self.i, f"min_n needs a whole number >= 0, found {self.found()}")
        self.i = v.end()
        return int(v.group(0))


def parse_gate(text: str) -> Gate:
    """Parse one gate expression; raises :class:`GateSyntaxError` pointing at the offending column."""
    return _Parser(text).parse()


def parse_term(text: str) -> Term:
    """Parse one metric term, e.g. the inner ``success_rate(agent_x)`` of ``delta(...)``."""
    parser = _Parser(text)
    term = parser.term()
    parser.ws()
    if not parser.at_end():
        raise parser.error(parser.i, f"unexpected {parser.found()} after the term")
    return term


def parse_gates(lines: str | Sequence[str]) -> list[Gate]:
    """Parse an ini value, one gate a line; blank lines, ``#`` comment lines and ``# ...`` tails are ignored.

    A syntax error is re-raised with its 1-based line number among the given lines.
    """
    items = [lines] if isinstance(lines, str) else lines
    raw = [part for item in items for part in item.splitlines()]
    gates: list[Gate] = []
    for number, line in enumerate(raw, start=1):
        text = line.split("#", 1)[0]
        if not text.strip():
            continue
        try:
            gates.append(parse_gate(text))
        except GateSyntaxError as err:
            raise GateSyntaxError(err.text, err.column, err.reason, line=number) from None
    return gates


def gate_arg(text: str) -> Gate:
    """argparse ``type=`` for ``--gauge-gate``: the gate, or ArgumentTypeError carrying the syntax message."""
    try:
        return parse_gate(text)
    except GateSyntaxError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
