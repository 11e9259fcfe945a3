"""Gates checked at collection: every gate's metric names and arguments against the suite's
declaration (agents, pairs, compute tiers, judge models), before any call is made, so a typo costs
nothing. The evaluator (:mod:`.gates`, :mod:`.gate_source`) still checks at the end: this is the cheap,
early copy of the same rules, read from the one metric table (:mod:`.metric_table`'s signatures).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..run.user_audit import USER_AUDIT_KINDS
from .gate_grammar import BASELINE_METRICS, DELTA, Gate, Term, parse_gates, parse_term
from .metric_table import DELTA_METRICS, SIGNATURES, ArgKind

__all__ = ["SIGNATURES", "ArgKind", "SuiteShape", "check_gate", "check_gates", "missing_baseline"]

_FIXED = {
    "class": ("close", "distant"),
    "agreement": ("repeats", "judges", "all"),
    "user_error": USER_AUDIT_KINDS,
}


@dataclass(frozen=True)
class SuiteShape:
    """What a gate may name in one suite: its agents, declared pairs, tiered agents and judge models."""

    name: str
    agents: tuple[str, ...]
    pairs: tuple[tuple[str, str], ...]
    tiers: tuple[str, ...]
    judges: tuple[str, ...]

    def choices(self, kind: ArgKind) -> tuple[str, ...]:
        if kind == "agent":
            return self.agents
        if kind == "tier":
            return self.tiers
        if kind == "judge":  # with extra_models, "panel" is the models' majority verdict
            return (*self.judges, "panel") if len(self.judges) > 1 else self.judges
        return _FIXED.get(kind, ())


def _nearest(word: str, choices: Iterable[str]) -> str:
    options = sorted(set(choices))
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"{hint} (valid: {', '.join(options) or 'none'})"


def _signature_text(name: str) -> str:
    forms = [f"{name}({', '.join(s)})" if s else name for s in SIGNATURES[name]]
    return " or ".join(forms)


def _check_term(term: Term, shape: SuiteShape) -> str | None:
    """Why ``term`` cannot be evaluated on this suite, or None (``delta(TERM)``: the inner term's)."""
    if term.name == DELTA and len(term.args) == 1:
        inner = parse_term(term.args[0])
        if inner.name not in DELTA_METRICS:
            return f"{term}: delta(...) takes {', '.join(DELTA_METRICS)}{_nearest(inner.name, DELTA_METRICS)}"
        return _check_term(inner, shape)
    if term.name not in SIGNATURES:
        return f"unknown metric {term.name!r}{_nearest(term.name, SIGNATURES)}"
    args = tuple(a.strip() for a in term.args)
    fitting = [s for s in SIGNATURES[term.name] if len(s) == len(args)]
    if not fitting:
        return f"{term}: wrong number of arguments, expected {_signature_text(term.name)}"
    problems: list[str] = []
    for signature in fitting:
        problem = _check_args(term, args, signature, shape)
        if problem is None:
            return None
        problems.append(problem)
    return problems[0]


def _check_args(
    term: Term, args: tuple[str, ...], signature: Sequence[ArgKind], shape: SuiteShape
) -> str | None:
    for arg, kind in zip(args, signature, strict=True):
        if kind == "k":
            if not arg.isdigit() or int(arg) < 1:
                return f"{term}: k must be a whole number >= 1, got {arg!r}"
            continue
        choices = shape.choices(kind)
        if arg not in choices:
            what = {"tier": "agent in a compute family (best_of/reflection)"}.get(kind, kind)
            return f"{term}: unknown {what} {arg!r}{_nearest(arg, choices)}"
    if signature == ("agent", "agent"):
        a, b = args
        if not any({a, b} == set(p) for p in shape.pairs) or a == b:
            declared = ", ".join(f"({x}, {y})" for x, y in shape.pairs) or "none"
            return f"{term}: {a} and {b} are not a declared pair (declared pairs: {declared})"
    return None


def check_gate(gate: Gate, shape: SuiteShape) -> str | None:
    """The first problem with ``gate`` on this suite (naming the term and the nearest valid name), or None."""
    for term in (gate.left, gate.right):
        if term is None:
            continue
        problem = _check_term(term, shape)
        if problem is not None:
            return problem
    return None


def check_gates(gates: Iterable[Gate], shape: SuiteShape) -> list[str]:
    """One line per gate that cannot be evaluated: ``suite S: gate 'G': problem``."""
    return [
        f"suite {shape.name}: gate {gate.canonical()!r}: {problem}"
        for gate in gates
        if (problem := check_gate(gate, shape)) is not None
    ]


def missing_baseline(gates: Sequence[str], where: str) -> str | None:
    """The usage error for gates that need a baseline when none is given (None when no gate needs one)."""
    needing = [
        g.canonical()
        for g in parse_gates(list(gates))
        if any(t is not None and t.name in BASELINE_METRICS for t in (g.left, g.right))
    ]
    if not needing:
        return None
    shown = "; ".join(repr(g) for g in needing)
    return (
        f"{where}: {shown} compares with a baseline, but none was given: run with --gauge-baseline DIR "
        "(an earlier --gauge-out folder or a 'python -m pytest_gauge baseline save' folder), "
        "or set the ini key gauge_baseline"
    )
