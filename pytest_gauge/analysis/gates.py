"""Suite gates: parse threshold expressions such as ``upper(lrs_close) <= 0.5; min_n=20`` and evaluate
them against suite metrics into pass / fail / inconclusive / skipped results that can fail a pytest run.

One grammar serves the suite module, the ini key ``gauge_gates`` and the CLI ``--gauge-gate``::

    GATE       := BOUND_EXPR OP NUMBER ( ';' OPTION )*
    BOUND_EXPR := ('lower' | 'upper') '(' EXPR ')' | EXPR
    EXPR       := TERM ( '-' TERM )?
    TERM       := NAME ( '(' ARG (',' ARG)* ')' )? | 'delta' '(' TERM ')'
    OP         := '<=' | '>=' | '<' | '>' | '=='
    OPTION     := 'min_n' '=' INT | 'allow_inconclusive' | 'allow_unpriced'
                | 'reproducible' '=' NUMBER [':' ('fail' | 'inconclusive')] | 'exclude_flaky' '=' NUMBER

A gate on a cost (``total_cost``, ``cost_per_success``, a role's cost, the judge's share) is inconclusive
while any call of the run reported no usage (its cost is then a lower bound), unless it says
``allow_unpriced``. A gate with ``reproducible=0.9`` fails (``:inconclusive``: is inconclusive) when its
PASS would repeat on a rerun of the same tasks less than 90% of the time (analysis/reproducibility.py).
"""

from __future__ import annotations

import argparse
import math
import operator
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

from .metric_table import DELTA_METRICS, names_from

if TYPE_CHECKING:
    from .reproducibility import Reproducibility

__all__ = [
    "BASELINE_METRICS",
    "COST_METRICS",
    "COUNT_METRICS",
    "DELTA",
    "DELTA_METRICS",
    "GRAMMAR",
    "Gate",
    "GateResult",
    "GateSyntaxError",
    "MetricSource",
    "NoData",
    "Quantity",
    "QuantityLike",
    "Term",
    "count_noise",
    "evaluate_gate",
    "evaluate_gates",
    "fails_run",
    "gate_arg",
    "is_cost_gate",
    "is_count",
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
Status = Literal["pass", "fail", "inconclusive", "skipped"]

OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "<": operator.lt,
    ">": operator.gt,
    "==": operator.eq,
}
_NEGATED = {"<=": ">", ">=": "<", "<": ">=", ">": "<=", "==": "!="}
_BOUNDS = ("lower", "upper")
_OPTIONS = "min_n=INT, allow_inconclusive, allow_unpriced, reproducible=P[:inconclusive], exclude_flaky=P"
_FLAGS = ("allow_inconclusive", "allow_unpriced")
_MAX_DRIVERS = 10
DELTA = "delta"
"""``delta(TERM)`` (current minus baseline): its one argument is a whole term."""
BASELINE_METRICS: tuple[str, ...] = (DELTA, *names_from("baseline"))
"""Gate terms served by a baseline comparison (every one needs ``--gauge-baseline``)."""
SKIPPED_MESSAGE = "skipped: partial run (cases deselected), gates need the whole suite"

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


class NoData(KeyError):
    """A term a source knows but has no number for in this run (an agent without a judged case): the gate
    is inconclusive with this reason, not a failure for an unknown name."""


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
        return f"{expr} {self.op} {_number_text(self.threshold)}"

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
            text += f"; reproducible={_number_text(self.reproducible)}"
            text += "" if self.unreproducible == "fail" else f":{self.unreproducible}"
        if self.exclude_flaky is not None:
            text += f"; exclude_flaky={_number_text(self.exclude_flaky)}"
        return text


def _number_text(x: float) -> str:
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


COUNT_METRICS: tuple[str, ...] = ("regressions", "fixes")
"""Gate terms that are exact counts of this run (no sampling interval): shown as counts, never with a
zero-width "95% CI 17.000–17.000"."""


COST_METRICS: dict[str, tuple[str, ...]] = {
    "total_cost": (),
    "cost_per_success": (),
    "judge_cost_share": (),
    "agent_cost": ("agent",),
    "user_sim_cost": ("user_sim",),
    "judge_cost": ("judge",),
}
"""Gate terms that are costs, with the roles whose calls they sum (empty: every role). While a call of
those roles reported no usage its cost is unknown, so the term is a lower bound (docs/protocol.md#costs)."""


class UsageSource(Protocol):
    """A metric source that knows how many calls reported no usage (``GateSource``, ``SuiteMetrics``)."""

    def without_usage(self, roles: tuple[str, ...]) -> int:
        """Calls of ``roles`` (empty: every role) whose response had no usage."""
        ...


def _cost_terms(gate: Gate) -> list[Term]:
    """The gate's cost terms, ``delta(total_cost)``'s inner term included."""
    found: list[Term] = []
    for term in (gate.left, gate.right):
        if term is not None and term.name == DELTA and len(term.args) == 1:
            try:
                term = parse_term(term.args[0])
            except GateSyntaxError:
                continue
        if term is not None and term.name in COST_METRICS:
            found.append(term)
    return found


def is_cost_gate(gate: Gate) -> bool:
    """Whether the gate compares a cost (a lower bound while calls lack usage: see ``allow_unpriced``)."""
    return bool(_cost_terms(gate))


def _without_usage(gate: Gate, source: object) -> int:
    """Calls without usage behind the gate's cost terms (0 for a gate on no cost)."""
    terms = _cost_terms(gate)
    if not terms or not hasattr(source, "without_usage"):
        return 0
    counted: UsageSource = source
    if any(not COST_METRICS[t.name] for t in terms):
        return counted.without_usage(())
    return counted.without_usage(tuple(sorted({r for t in terms for r in COST_METRICS[t.name]})))


def _lower_bound_fails(gate: Gate, status: Status) -> bool:
    """A cost known to be at least X already above an upper limit fails whatever the unknown part is."""
    return (
        status == "fail"
        and gate.op in ("<", "<=")
        and gate.right is None
        and gate.left.name in COST_METRICS
        and gate.left.name != "judge_cost_share"
    )


def _unpriced(gate: Gate, status: Status, detail: str, missing: int) -> tuple[Status, str]:
    """A cost gate while ``missing`` calls reported no usage: inconclusive (never a pass) unless the gate
    says ``allow_unpriced`` or the known part alone already fails it."""
    calls = "call" if missing == 1 else "calls"
    note = f"{missing} {calls} without usage, so the cost is a lower bound (at least the value shown)"
    if gate.allow_unpriced:
        return status, f"{detail}; allowed (allow_unpriced): {note}"
    if _lower_bound_fails(gate, status):
        return status, f"{detail}; {note}"
    return "inconclusive", f"{note}; the known part: {detail}; add '; allow_unpriced' to gate on it"


def is_count(gate: Gate) -> bool:
    """Whether the gate compares an exact count (``regressions(agent)``, ``fixes(agent)``)."""
    return gate.right is None and gate.left.name in COUNT_METRICS


class QuantityLike(Protocol):
    """Anything with an estimate, its count and a 95% interval (``metrics.Estimate`` fits)."""

    @property
    def value(self) -> float | None: ...
    @property
    def n(self) -> int: ...
    @property
    def low(self) -> float | None: ...
    @property
    def high(self) -> float | None: ...


@dataclass(frozen=True)
class Quantity:
    """A plain estimate: point value, count, and 95% interval bounds (None when undefined)."""

    value: float | None
    n: int
    low: float | None = None
    high: float | None = None


class MetricSource(Protocol):
    """Where gates read suite metrics; raises KeyError (message lists the known names) if unknown."""

    def lookup(self, name: str, args: tuple[str, ...]) -> QuantityLike: ...

    def difference(self, left: Term, right: Term) -> QuantityLike:
        """``left - right`` with its interval taken from the same bootstrap resamples."""
        ...


@dataclass(frozen=True)
class GateResult:
    """The outcome of one gate; ``drivers`` are the cases that drove it (e.g. flipped pairs)."""

    gate: Gate
    status: Status
    value: float | None
    low: float | None
    high: float | None
    n: int
    message: str
    drivers: tuple[str, ...] = ()
    needed_n: int | None = None
    needed: str = ""
    needed_samples: int | None = None
    holm_level: float | None = None  # --gauge-familywise holm: the one-sided level it was tested at
    needed_range: tuple[int | None, int | None] = (None, None)  # needed_n at the effect's 50% interval ends
    reproducibility: Reproducibility | None = None  # how often a rerun would give the same verdict

    def to_json(self) -> dict[str, object]:
        """The JSON report row: canonical expression, status, numbers, message and the suite size that
        would decide the gate (``needed_n``, for inconclusive gates and intervals across the threshold),
        or the samples per task that would at the current size (``needed_samples``, when samples help)."""
        row: dict[str, object] = {
            "expr": self.gate.canonical(),
            "status": self.status,
            "value": self.value,
            "low": self.low,
            "high": self.high,
            "n": self.n,
            "message": self.message,
            "needed_n": self.needed_n,
            "needed_samples": self.needed_samples,
        }
        if self.holm_level is not None:
            row["holm_level"] = self.holm_level
        if self.reproducibility is not None:
            row["reproducibility"] = self.reproducibility.to_json()
        return row


def fails_run(result: GateResult) -> bool:
    """Whether this result fails the run: a fail always, an inconclusive unless the gate allows it."""
    if result.status == "fail":
        return True
    return result.status == "inconclusive" and not result.gate.allow_inconclusive


def _clean(x: float | None) -> float | None:
    """NaN means 'no number' (comparisons with it are meaningless), so it is treated as None."""
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else x


def _decimals(x: float) -> int:
    """Three decimals, or three significant digits for small magnitudes."""
    if x == 0 or not math.isfinite(x) or abs(x) >= 0.01:
        return 3
    return min(12, 2 - math.floor(math.log10(abs(x))))


def _fmt(x: float | None, against: float | None = None) -> str:
    """Format a number; with ``against``, add digits until it no longer prints equal to a different one."""
    if x is None:
        return "n/a"
    if not math.isfinite(x):
        return str(x)
    d = _decimals(x)
    if against is not None and math.isfinite(against) and x != against:
        while d < 12 and f"{x:.{d}f}" == f"{against:.{d}f}":
            d += 1
    return f"{x:.{d}f}"


def _context(value: float | None, low: float | None, high: float | None, n: int, with_value: bool) -> str:
    parts = [f"value {_fmt(value)}"] if with_value else []
    if low is None or high is None:
        parts.append("no CI")
    else:
        dash = "–" if low >= 0 else " to "  # "-35.2–20.1" would read as a subtraction
        parts.append(f"95% CI {_fmt(low)}{dash}{_fmt(high)}")
    parts.append(f"n={n}")
    return ", ".join(parts)


def _binomial_half_quantile(flips: int, q: float = 0.975) -> int:
    """The least ``k`` with ``P(Bin(flips, 1/2) <= k) >= q``."""
    total = 0.0
    for k in range(flips + 1):
        total += math.comb(flips, k) / 2.0**flips
        if total >= q:
            return k
    return flips


def count_noise(gate: Gate, source: MetricSource) -> str:
    """``; noise alone: about 4 of 8 flips, up to 7`` for a regressions/fixes gate: with no change each of
    the units that flipped either way (regressions + fixes) is as likely to go one way as the other
    (McNemar's model), so noise alone gives about half of them in one direction and at most the 97.5%
    quantile of Bin(flips, 1/2) in 97.5% of unchanged runs; empty without the other count."""
    other = "fixes" if gate.left.name == "regressions" else "regressions"
    try:
        this, that = source.lookup(gate.left.name, gate.left.args), source.lookup(other, gate.left.args)
    except KeyError:
        return ""
    if this.value is None or that.value is None:
        return ""
    flips = round(float(this.value) + float(that.value))
    return f"; noise alone: about {flips / 2:g} of {flips} flips, up to {_binomial_half_quantile(flips)}"


def _drivers_text(drivers: Sequence[str]) -> str:
    shown = ", ".join(drivers[:_MAX_DRIVERS])
    extra = len(drivers) - _MAX_DRIVERS
    return f"driven by: {shown}" + (f" … and {extra} more" if extra > 0 else "")


def evaluate_gate(
    gate: Gate,
    source: MetricSource,
    *,
    partial_run: bool = False,
    missing_cases: int = 0,
    drivers: Callable[[Gate], Sequence[str]] | None = None,
) -> GateResult:
    """Evaluate one gate: skipped on a partial run, fail on an unknown metric, inconclusive without a
    number to compare or with n < min_n, else pass/fail by comparing the point value or interval bound."""
    if partial_run:
        return GateResult(gate, "skipped", None, None, None, 0, SKIPPED_MESSAGE)
    expr = gate.expression()
    try:
        if gate.right is None:
            q = source.lookup(gate.left.name, gate.left.args)
        else:
            q = source.difference(gate.left, gate.right)
    except NoData as err:
        reason = err.args[0] if err.args and isinstance(err.args[0], str) else str(err)
        return GateResult(gate, "inconclusive", None, None, None, 0, f"INCONCLUSIVE {expr}: {reason}")
    except KeyError as err:
        reason = err.args[0] if err.args and isinstance(err.args[0], str) else str(err)
        if "unknown" not in reason.lower():
            reason = f"unknown metric: {reason}"
        return GateResult(gate, "fail", None, None, None, 0, f"FAIL {expr}: {reason}")

    value, low, high, n = _clean(q.value), _clean(q.low), _clean(q.high), int(q.n)
    compared = {"point": value, "lower": low, "upper": high}[gate.bound]
    label = {"point": "value", "lower": "lower 95% bound", "upper": "upper 95% bound"}[gate.bound]

    status: Status
    if compared is None:
        status = "inconclusive"
        if n == 0:
            detail = "no data (n=0)"
        elif gate.bound == "point":
            detail = f"the value is undefined ({_context(value, low, high, n, False)})"
        else:
            note = getattr(q, "note", None)
            why = f": {note}" if note else ""
            detail = f"no 95% interval{why}, so no {gate.bound} bound ({_context(value, low, high, n, True)})"
    elif gate.min_n is not None and n < gate.min_n:
        status = "inconclusive"
        shown_ctx = f"count {value:.0f}, n={n}" if is_count(gate) and value is not None else None
        detail = f"n={n} < min_n={gate.min_n} ({shown_ctx or _context(value, low, high, n, True)})"
    else:
        ok = OPS[gate.op](compared, gate.threshold)
        status = "pass" if ok else "fail"
        relation = gate.op if ok else _NEGATED[gate.op]
        if is_count(gate):  # an exact count: no interval to show, whatever the bound
            label, shown, context = "count", f"{compared:.0f}", f"n={n}{count_noise(gate, source)}"
        else:
            context = _context(value, low, high, n, gate.bound != "point")
            shown = _fmt(compared, gate.threshold)
        detail = f"{label} {shown} ({context}) {relation} {_number_text(gate.threshold)}"

    missing = _without_usage(gate, source)
    if missing:
        status, detail = _unpriced(gate, status, detail, missing)
    parts = [f"{status.upper()} {expr}: {detail}"]
    if status == "inconclusive" and gate.allow_inconclusive:
        parts.append("allowed (allow_inconclusive)")
    if missing_cases > 0:
        noun = "case" if missing_cases == 1 else "cases"
        parts.append(f"{missing_cases} {noun} missing (errored); computed on the rest")
    found = tuple(drivers(gate)) if drivers is not None else ()
    if found:
        parts.append(_drivers_text(found))
    return GateResult(gate, status, value, low, high, n, "; ".join(parts), found)


def evaluate_gates(
    gates: Iterable[Gate],
    source: MetricSource,
    *,
    partial_run: bool = False,
    missing_cases: int = 0,
    drivers: Callable[[Gate], Sequence[str]] | None = None,
) -> list[GateResult]:
    """Evaluate every gate against the same source, in order."""
    return [
        evaluate_gate(g, source, partial_run=partial_run, missing_cases=missing_cases, drivers=drivers)
        for g in gates
    ]
