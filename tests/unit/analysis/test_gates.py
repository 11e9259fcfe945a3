"""Gates: the expression grammar (parse, errors with columns, canonical round trip) and evaluation into
pass / fail / inconclusive / skipped against a hand-made metric source."""

from __future__ import annotations

import argparse
import json
import math
import pickle
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from pytest_gauge.analysis.gate_precheck import missing_baseline
from pytest_gauge.analysis.gates import (
    GRAMMAR,
    Gate,
    GateResult,
    GateSyntaxError,
    Quantity,
    Term,
    evaluate_gate,
    evaluate_gates,
    fails_run,
    gate_arg,
    parse_gate,
    parse_gates,
)

# --------------------------------------------------------------------------------------------------
# parsing the documented examples


def _g(
    bound: str,
    left: Term,
    right: Term | None,
    op: str,
    threshold: float,
    min_n: int | None = None,
    allow: bool = False,
) -> Gate:
    return Gate("", bound, left, right, op, threshold, min_n, allow)  # type: ignore[arg-type]


EXAMPLES: list[tuple[str, Gate, str]] = [
    ("flip_rate <= 0.15", _g("point", Term("flip_rate"), None, "<=", 0.15), "flip_rate <= 0.15"),
    (
        "upper(lrs_close) <= 0.5",
        _g("upper", Term("lrs_close"), None, "<=", 0.5),
        "upper(lrs_close) <= 0.5",
    ),
    (
        "cost_per_success <= 0.02; min_n=50",
        _g("point", Term("cost_per_success"), None, "<=", 0.02, min_n=50),
        "cost_per_success <= 0.02; min_n=50",
    ),
    (
        "lower(elo(agent_y) - elo(agent_x)) >= -20",
        _g("lower", Term("elo", ("agent_y",)), Term("elo", ("agent_x",)), ">=", -20.0),
        "lower(elo(agent_y) - elo(agent_x)) >= -20",
    ),
    (
        "elo_per_1k_tokens(agent_x@bo8) >= 1.0",
        _g("point", Term("elo_per_1k_tokens", ("agent_x@bo8",)), None, ">=", 1.0),
        "elo_per_1k_tokens(agent_x@bo8) >= 1",
    ),
    (
        "lrs(close) <= 0.6; min_n=10; allow_inconclusive",
        _g("point", Term("lrs", ("close",)), None, "<=", 0.6, min_n=10, allow=True),
        "lrs(close) <= 0.6; min_n=10; allow_inconclusive",
    ),
    (
        "flip_rate(agent_x, agent_y) <= 0.3",
        _g("point", Term("flip_rate", ("agent_x", "agent_y")), None, "<=", 0.3),
        "flip_rate(agent_x, agent_y) <= 0.3",
    ),
]


@pytest.mark.parametrize(("text", "expected", "canonical"), EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_documented_examples_parse(text: str, expected: Gate, canonical: str) -> None:
    gate = parse_gate(text)
    assert gate == expected
    # fields one by one too, since equality ignores ``text``
    assert (gate.bound, gate.left, gate.right, gate.op, gate.threshold) == (
        expected.bound,
        expected.left,
        expected.right,
        expected.op,
        expected.threshold,
    )
    assert (gate.min_n, gate.allow_inconclusive) == (expected.min_n, expected.allow_inconclusive)
    assert gate.text == text
    assert gate.canonical() == canonical
    assert parse_gate(gate.canonical()) == gate


def test_whitespace_is_insignificant() -> None:
    spaced = parse_gate(
        "  lower (  elo ( agent_y )  -  elo( agent_x ) )  >=  - 20 ;  min_n = 5 ; allow_inconclusive  "
    )
    tight = parse_gate("lower(elo(agent_y)-elo(agent_x))>=-20;min_n=5;allow_inconclusive")
    tabs = parse_gate("lower(elo(agent_y)\t-\telo(agent_x))\n>=\t-20;\tmin_n=5;allow_inconclusive")
    assert spaced == tight == tabs
    assert tight.canonical() == "lower(elo(agent_y) - elo(agent_x)) >= -20; min_n=5; allow_inconclusive"


@pytest.mark.parametrize(
    ("text", "threshold"),
    [
        ("m <= 1e-3", 0.001),
        ("m <= -1E3", -1000.0),
        ("m <= .5", 0.5),
        ("m <= 5.", 5.0),
        ("m <= 2.5e+2", 250.0),
        ("m <= 0", 0.0),
        ("m <= -0.25", -0.25),
    ],
)
def test_number_forms(text: str, threshold: float) -> None:
    assert parse_gate(text).threshold == threshold


@pytest.mark.parametrize("op", ["<=", ">=", "<", ">", "=="])
def test_every_operator(op: str) -> None:
    gate = parse_gate(f"flip_rate {op} 0.1")
    assert gate.op == op
    assert gate.canonical() == f"flip_rate {op} 0.1"


def test_args_may_contain_at_dot_dash_inside() -> None:
    gate = parse_gate("elo(gpt-4.1-mini@bo4, agent_x) - elo(claude.v2) > 0")
    assert gate.left == Term("elo", ("gpt-4.1-mini@bo4", "agent_x"))
    assert gate.right == Term("elo", ("claude.v2",))
    assert gate.bound == "point"


def test_difference_without_args_and_options_in_any_order() -> None:
    gate = parse_gate("flip_rate - lrs < 0.1; allow_inconclusive; min_n=3")
    assert gate == _g("point", Term("flip_rate"), Term("lrs"), "<", 0.1, min_n=3, allow=True)
    assert gate.canonical() == "flip_rate - lrs < 0.1; min_n=3; allow_inconclusive"


def test_term_str() -> None:
    assert str(Term("flip_rate")) == "flip_rate"
    assert str(Term("flip_rate", ("agent_x", "agent_y"))) == "flip_rate(agent_x, agent_y)"


def test_equality_ignores_source_text_but_not_meaning() -> None:
    a, b = parse_gate("flip_rate<=0.15"), parse_gate("flip_rate <= 0.150")
    assert a == b and hash(a) == hash(b) and a.text != b.text
    assert parse_gate("flip_rate <= 0.15") != parse_gate("flip_rate < 0.15")
    assert parse_gate("flip_rate <= 0.15") != parse_gate("upper(flip_rate) <= 0.15")
    assert parse_gate("flip_rate <= 0.15") != parse_gate("flip_rate <= 0.15; allow_inconclusive")


def test_gate_rejects_unknown_operator_or_bound() -> None:
    with pytest.raises(ValueError, match="operator"):
        Gate("", "point", Term("m"), None, "!=", 1.0, None, False)
    with pytest.raises(ValueError, match="bound"):
        Gate("", "middle", Term("m"), None, "<=", 1.0, None, False)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------------
# malformed input: the column (1-based) points at the problem

MALFORMED: list[tuple[str, int, str]] = [
    # text, column, fragment of the reason
    ("", 1, "empty"),
    ("   ", 4, "empty"),
    ("flip_rate 0.15", 11, "comparison operator"),
    ("flip_rate", 10, "comparison operator"),
    ("flip_rate <=", 13, "expected a number"),
    ("flip_rate <= abc", 14, "'abc' is not a number"),
    ("flip_rate <= 0.1.5", 14, "'0.1.5' is not a number"),
    ("flip_rate <= 1_000", 14, "not a number"),
    ("flip_rate <= inf", 14, "not a number"),
    ("flip_rate <= nan", 14, "not a number"),
    ("flip_rate <= +0.5", 14, "not a number"),
    ("flip_rate <= -x", 14, "not a number"),
    ("flip_rate <= 0.15; foo", 20, "unknown option 'foo'"),
    ("flip_rate <= 0.15; min-n=3", 20, "unknown option 'min-n'"),
    ("flip_rate <= 0.15; min_n", 25, "expected '='"),
    ("flip_rate <= 0.15; min_n=", 26, "whole number"),
    ("flip_rate <= 0.15; min_n=5.5", 26, "whole number"),
    ("flip_rate <= 0.15; min_n=-1", 26, "whole number"),
    ("flip_rate <= 0.15; min_n=1; min_n=2", 29, "given twice"),
    ("flip_rate <= 0.15; allow_inconclusive=yes", 38, "takes no value"),
    ("flip_rate <= 0.15;", 19, "expected an option"),
    ("flip_rate <= 0.15;;", 19, "expected an option"),
    ("flip_rate <= 0.15 extra", 19, "unexpected 'extra' after the threshold"),
    ("flip_rate <= 0.15)", 18, "unexpected ')'"),
    ("flip_rate <= 0.15; min_n=3 x", 28, "after the option"),
    ("lower flip_rate >= 0.1", 7, "expected '(' after 'lower'"),
    ("upper <= 0.5", 7, "expected '(' after 'upper'"),
    ("lower", 6, "expected '(' after 'lower'"),
    ("upper(lrs_close <= 0.5", 17, "expected ')' to close upper("),
    ("upper(lrs_close)) <= 0.5", 17, "comparison operator"),
    ("upper(lower(x)) <= 1", 7, "'lower' is not a metric"),
    ("flip_rate - upper <= 1", 13, "'upper' is not a metric"),
    ("Lower(flip_rate) >= 0.1", 1, "reserved"),
    ("upper() <= 1", 7, "expected a metric name"),
    ("(flip_rate) <= 1", 1, "expected a metric name"),
    ("0.5 >= flip_rate", 1, "expected a metric name"),
    ("flip_rate - <= 1", 13, "expected a metric name"),
    ("flip_rate - lrs - elo <= 1", 17, "comparison operator"),
    ("flip_rate() <= 1", 11, "expected an argument"),
    ("flip_rate(a,) <= 1", 13, "expected an argument"),
    ("flip_rate(a b) <= 1", 13, "expected ',' or ')'"),
    ("flip_rate(agent-) <= 1", 16, "expected ',' or ')'"),
    ("flip_rate(-agent) <= 1", 11, "expected an argument"),
    ("flip_rate(a <= 1", 13, "expected ',' or ')'"),
    ("flip_rate = 0.15", 11, "single '='"),
    ("flip_rate =< 0.15", 11, "'<='"),
    ("flip_rate => 0.15", 11, "'>='"),
    ("flip_rate != 0.15", 11, "not supported"),
    ("flip_rate ≤ 0.15", 11, "'<='"),
    ("flip_rate ≥ 0.15", 11, "'>='"),
]


@pytest.mark.parametrize(("text", "column", "reason"), MALFORMED, ids=[repr(m[0]) for m in MALFORMED])
def test_malformed_input_points_at_the_column(text: str, column: int, reason: str) -> None:
    with pytest.raises(GateSyntaxError) as info:
        parse_gate(text)
    err = info.value
    assert err.column == column
    assert reason in err.reason
    assert isinstance(err, ValueError)
    message = str(err)
    assert f"column {column}" in message
    assert reason in message
    lines = message.splitlines()
    # the expression is shown, and under it a caret at the column (both indented by two spaces)
    shown = (
        next(i for i, line in enumerate(lines) if line.startswith("  ") and line.strip().endswith("^")) - 1
    )
    assert lines[shown + 1] == "  " + " " * (column - 1) + "^"
    assert lines[shown][2:].replace("\t", " ") == text.replace("\t", " ")
    assert any(line.strip() == f"grammar: {GRAMMAR}" for line in lines)


def test_grammar_is_one_line_and_names_every_piece() -> None:
    assert "\n" not in GRAMMAR
    for piece in ("lower(", "upper(", "min_n=INT", "allow_inconclusive", "allow_unpriced", "<=", ">=", "=="):
        assert piece in GRAMMAR


def test_caret_lines_up_under_tabs() -> None:
    text = "flip_rate\t<=\tbad"
    with pytest.raises(GateSyntaxError) as info:
        parse_gate(text)
    lines = str(info.value).splitlines()
    assert info.value.column == 14
    assert lines[1] == "  flip_rate <= bad"
    assert lines[2].index("^") == lines[1].index("bad")


def test_syntax_error_survives_pickling() -> None:
    with pytest.raises(GateSyntaxError) as info:
        parse_gate("flip_rate 0.15")
    copy = pickle.loads(pickle.dumps(info.value))
    assert isinstance(copy, GateSyntaxError)
    assert (copy.text, copy.column, copy.reason, str(copy)) == (
        info.value.text,
        info.value.column,
        info.value.reason,
        str(info.value),
    )


# --------------------------------------------------------------------------------------------------
# canonical round trip: structures generated independently of the parser


def _rand_name(rng: random.Random) -> str:
    while True:
        head = rng.choice("abcdefghijklmnopqrstuvwxyz_ABC")
        tail = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789_") for _ in range(rng.randint(0, 12)))
        name = head + tail
        if name.lower() not in ("lower", "upper"):
            return name


def _rand_arg(rng: random.Random) -> str:
    edge = "abcdefghijklmnopqrstuvwxyz0123456789_"
    inside = edge + "@.-"
    if rng.random() < 0.2:
        return rng.choice(edge)
    return rng.choice(edge) + "".join(rng.choice(inside) for _ in range(rng.randint(0, 8))) + rng.choice(edge)


def _rand_term(rng: random.Random) -> tuple[Term, list[str]]:
    name = _rand_name(rng)
    if rng.random() < 0.4:
        return Term(name), [name]
    args = tuple(_rand_arg(rng) for _ in range(rng.randint(1, 3)))
    tokens = [name, "("]
    for i, a in enumerate(args):
        tokens += ([","] if i else []) + [a]
    return Term(name, args), [*tokens, ")"]


def _rand_number(rng: random.Random) -> str:
    kind = rng.randrange(5)
    if kind == 0:
        x = rng.uniform(-1000, 1000)
    elif kind == 1:
        x = rng.choice([-1, 1]) * 10 ** rng.uniform(-9, 9)
    elif kind == 2:
        x = float(rng.randint(-500, 500))
    elif kind == 3:
        x = round(rng.uniform(-1, 1), rng.randint(0, 4))
    else:
        x = rng.choice([-1, 1]) * 10 ** rng.uniform(14, 20)
    style = rng.randrange(4)
    text = [repr(x), f"{x:.17g}", f"{x:e}", f"{x:.3f}"][style]
    return text


def _rand_gate(rng: random.Random) -> tuple[Gate, list[str]]:
    left, tokens = _rand_term(rng)
    right = None
    if rng.random() < 0.4:
        right, rtokens = _rand_term(rng)
        tokens += ["-", *rtokens]
    bound = rng.choice(["point", "lower", "upper"])
    if bound != "point":
        tokens = [bound, "(", *tokens, ")"]
    op = rng.choice(["<=", ">=", "<", ">", "=="])
    number = _rand_number(rng)
    tokens += [op]
    tokens += ["-", number[1:]] if number.startswith("-") and rng.random() < 0.5 else [number]
    min_n = rng.choice([None, 0, 1, 7, 50, 12345])
    allow = rng.random() < 0.5
    unpriced = rng.random() < 0.3
    options: list[list[str]] = []
    if min_n is not None:
        options.append([";", "min_n", "=", str(min_n)])
    if allow:
        options.append([";", "allow_inconclusive"])
    if unpriced:
        options.append([";", "allow_unpriced"])
    rng.shuffle(options)
    for opt in options:
        tokens += opt
    gate = Gate("", bound, left, right, op, float(number), min_n, allow, unpriced)  # type: ignore[arg-type]
    return gate, tokens


def test_random_gates_parse_from_any_spacing_and_round_trip() -> None:
    rng = random.Random(20261129)
    for _ in range(600):
        gate, tokens = _rand_gate(rng)
        text = "".join(t + rng.choice(["", "", " ", "  ", "\t"]) for t in tokens)
        parsed = parse_gate(text)
        assert parsed == gate, text
        canonical = parsed.canonical()
        again = parse_gate(canonical)
        assert again == parsed, canonical
        assert again.canonical() == canonical
        assert again.threshold == gate.threshold  # the number text reads back exactly
        assert "  " not in canonical and "\t" not in canonical


def test_canonical_numbers_are_short_and_exact() -> None:
    assert parse_gate("m >= -20.0").canonical() == "m >= -20"
    assert parse_gate("m >= 1e-3").canonical() == "m >= 0.001"
    assert parse_gate("m >= 1e-7").canonical() == "m >= 1e-07"
    assert parse_gate("m >= 1e20").canonical() == "m >= 1e+20"
    assert parse_gate("m >= -0").canonical() == "m >= 0"
    assert parse_gate("m >= 0.1").canonical() == "m >= 0.1"


# --------------------------------------------------------------------------------------------------
# ini lines and the CLI type


def test_parse_gates_skips_blank_and_comment_lines() -> None:
    ini = """
        # gates for the nightly run
        flip_rate <= 0.15

        upper(lrs_close) <= 0.5   # the headline finding
          # indented comment
        cost_per_success <= 0.02; min_n=50
    """
    gates = parse_gates(ini)
    assert [g.canonical() for g in gates] == [
        "flip_rate <= 0.15",
        "upper(lrs_close) <= 0.5",
        "cost_per_success <= 0.02; min_n=50",
    ]
    # pytest's "linelist" ini type hands over a list of lines
    assert parse_gates(["flip_rate <= 0.15", "", "# x", "upper(lrs_close) <= 0.5"]) == gates[:2]
    assert parse_gates("") == [] and parse_gates([]) == []


def test_parse_gates_reports_the_line() -> None:
    with pytest.raises(GateSyntaxError) as info:
        parse_gates(["flip_rate <= 0.15", "# fine", "  lrs(close) <= 0.6; min_n=ten  # comment"])
    err = info.value
    assert err.line == 3
    assert err.column == 28
    assert "line 3, column 28" in str(err)
    assert "min_n needs a whole number" in str(err)


def test_gate_arg_returns_gate_or_argument_type_error() -> None:
    assert gate_arg("flip_rate <= 0.15") == parse_gate("flip_rate <= 0.15")
    with pytest.raises(argparse.ArgumentTypeError) as info:
        gate_arg("flip_rate 0.15")
    assert "column 11" in str(info.value)
    assert "comparison operator" in str(info.value)


def test_gate_arg_as_argparse_type() -> None:
    parser = argparse.ArgumentParser(exit_on_error=False)
    parser.add_argument("--gauge-gate", type=gate_arg, action="append")
    ns = parser.parse_args(["--gauge-gate", "flip_rate <= 0.15", "--gauge-gate", "upper(lrs_close)<=0.5"])
    assert [g.canonical() for g in ns.gauge_gate] == ["flip_rate <= 0.15", "upper(lrs_close) <= 0.5"]
    with pytest.raises(argparse.ArgumentError) as info:
        parser.parse_args(["--gauge-gate", "lower flip_rate >= 0.1"])
    assert "expected '(' after 'lower'" in str(info.value)
    assert "column 7" in str(info.value)


# --------------------------------------------------------------------------------------------------
# evaluation against a fake metric source


@dataclass
class FakeSource:
    """Metrics by (name, args); differences by (left, right); records every call."""

    metrics: dict[tuple[str, tuple[str, ...]], Quantity] = field(default_factory=dict)
    differences: dict[tuple[Term, Term], Quantity] = field(default_factory=dict)
    calls: list[tuple[str, object, object]] = field(default_factory=list)

    def lookup(self, name: str, args: tuple[str, ...]) -> Quantity:
        self.calls.append(("lookup", name, args))
        if (name, args) not in self.metrics:
            known = ", ".join(sorted({n for n, _ in self.metrics}))
            raise KeyError(f"unknown metric {name!r} (known: {known})")
        return self.metrics[(name, args)]

    def difference(self, left: Term, right: Term) -> Quantity:
        self.calls.append(("difference", left, right))
        if (left, right) not in self.differences:
            raise KeyError(f"unknown metric in {left} - {right}")
        return self.differences[(left, right)]


class ExplodingSource:
    def lookup(self, name: str, args: tuple[str, ...]) -> Quantity:
        raise AssertionError("a skipped gate must not read metrics")

    def difference(self, left: Term, right: Term) -> Quantity:
        raise AssertionError("a skipped gate must not read metrics")


def _source(**metrics: Quantity) -> FakeSource:
    return FakeSource(metrics={(name, ()): q for name, q in metrics.items()})


FLIP = Quantity(value=0.2333, n=30, low=0.1333, high=0.35)


def test_spec_example_failure_message() -> None:
    result = evaluate_gate(parse_gate("flip_rate <= 0.15"), _source(flip_rate=FLIP))
    assert result.status == "fail"
    assert result.message == "FAIL flip_rate <= 0.15: value 0.233 (95% CI 0.133–0.350, n=30) > 0.15"
    assert (result.value, result.low, result.high, result.n) == (0.2333, 0.1333, 0.35, 30)
    assert result.drivers == ()
    assert fails_run(result)


# value 0.40, interval 0.20–0.62: the three bounds compare three different numbers
Q = Quantity(value=0.40, n=30, low=0.20, high=0.62)


@pytest.mark.parametrize(
    ("expr", "status"),
    [
        ("m <= 0.5", "pass"),  # 0.40 <= 0.5
        ("m <= 0.3", "fail"),  # 0.40 > 0.3
        ("upper(m) <= 0.7", "pass"),  # 0.62 <= 0.7
        ("upper(m) <= 0.5", "fail"),  # 0.62 > 0.5, though the point value would pass
        ("lower(m) >= 0.1", "pass"),  # 0.20 >= 0.1
        ("lower(m) >= 0.3", "fail"),  # 0.20 < 0.3, though the point value would pass
        ("lower(m) <= 0.2", "pass"),  # boundary: equal passes <=
        ("lower(m) < 0.2", "fail"),  # boundary: equal fails <
        ("upper(m) >= 0.62", "pass"),
        ("upper(m) > 0.62", "fail"),
        ("m == 0.4", "pass"),
        ("m == 0.41", "fail"),
        ("m > 0.39", "pass"),
        ("m < 0.39", "fail"),
    ],
)
def test_point_and_bounds_compare_the_right_number(expr: str, status: str) -> None:
    result = evaluate_gate(parse_gate(expr), _source(m=Q))
    assert result.status == status
    assert result.message.startswith(f"{status.upper()} {expr}: ")
    assert fails_run(result) is (status == "fail")


def test_bound_message_names_the_bound_and_the_relation() -> None:
    fail = evaluate_gate(parse_gate("upper(m) <= 0.5"), _source(m=Q))
    assert (
        fail.message
        == "FAIL upper(m) <= 0.5: upper 95% bound 0.620 (value 0.400, 95% CI 0.200–0.620, n=30) > 0.5"
    )
    ok = evaluate_gate(parse_gate("lower(m) >= 0.1"), _source(m=Q))
    assert (
        ok.message
        == "PASS lower(m) >= 0.1: lower 95% bound 0.200 (value 0.400, 95% CI 0.200–0.620, n=30) >= 0.1"
    )
    strict = evaluate_gate(parse_gate("lower(m) < 0.2"), _source(m=Q))
    assert strict.message.endswith(") >= 0.2")  # the negation of '<'


def test_value_gets_digits_until_it_differs_from_the_threshold() -> None:
    result = evaluate_gate(parse_gate("cost <= 0.02"), _source(cost=Quantity(0.02014, 12, 0.015, 0.03)))
    assert result.status == "fail"
    assert "value 0.0201 (" in result.message  # "0.020 > 0.02" would be unreadable
    big = evaluate_gate(parse_gate("elo > 1500"), _source(elo=Quantity(1500.0004, 40, 1480.0, 1520.0)))
    assert big.status == "pass"
    assert "value 1500.0004 (" in big.message


def test_difference_uses_the_joint_interval() -> None:
    gate = parse_gate("lower(elo(agent_y) - elo(agent_x)) >= -20")
    left, right = Term("elo", ("agent_y",)), Term("elo", ("agent_x",))
    # separately each Elo has a wide interval; the difference has its own, from the same bootstrap
    source = FakeSource(
        metrics={
            ("elo", ("agent_y",)): Quantity(1510, 40, 1400, 1600),
            ("elo", ("agent_x",)): Quantity(1500, 40, 1400, 1600),
        },
        differences={(left, right): Quantity(10.0, 40, -12.5, 31.0)},
    )
    result = evaluate_gate(gate, source)
    assert source.calls == [("difference", left, right)]
    assert result.status == "pass"
    assert (result.value, result.low, result.high, result.n) == (10.0, -12.5, 31.0, 40)
    assert "lower 95% bound -12.500 (value 10.000, 95% CI -12.500 to 31.000, n=40) >= -20" in result.message

    failing = FakeSource(differences={(left, right): Quantity(-5.0, 40, -35.2, 20.1)})
    result = evaluate_gate(gate, failing)
    assert result.status == "fail"
    assert "-35.200 (" in result.message and ") < -20" in result.message


def test_point_difference_and_lookup_args() -> None:
    source = FakeSource(
        metrics={("flip_rate", ("agent_x", "agent_y")): Quantity(0.1, 20, 0.0, 0.25)},
        differences={(Term("lrs", ("close",)), Term("lrs", ("distant",))): Quantity(0.3, 50, 0.1, 0.5)},
    )
    r1 = evaluate_gate(parse_gate("flip_rate(agent_x, agent_y) <= 0.3"), source)
    r2 = evaluate_gate(parse_gate("lrs(close) - lrs(distant) >= 0.2"), source)
    assert (r1.status, r2.status) == ("pass", "pass")
    assert source.calls == [
        ("lookup", "flip_rate", ("agent_x", "agent_y")),
        ("difference", Term("lrs", ("close",)), Term("lrs", ("distant",))),
    ]


def test_min_n() -> None:
    small = Quantity(0.05, 6, 0.0, 0.2)
    result = evaluate_gate(parse_gate("cost_per_success <= 0.02; min_n=50"), _source(cost_per_success=small))
    assert result.status == "inconclusive"
    assert "n=6 < min_n=50" in result.message
    assert result.message.startswith("INCONCLUSIVE cost_per_success <= 0.02: ")
    assert fails_run(result)
    # n equal to min_n is enough, and then the comparison decides
    at = evaluate_gate(parse_gate("m <= 0.1; min_n=6"), _source(m=small))
    assert at.status == "pass"
    assert evaluate_gate(parse_gate("m <= 0.01; min_n=6"), _source(m=small)).status == "fail"
    assert evaluate_gate(parse_gate("m <= 0.1; min_n=7"), _source(m=small)).status == "inconclusive"


@pytest.mark.parametrize(
    ("expr", "quantity", "reason"),
    [
        ("m <= 1", Quantity(None, 0, None, None), "no data (n=0)"),
        ("m <= 1", Quantity(None, 4, None, None), "value is undefined"),
        ("upper(m) <= 1", Quantity(0.5, 4, None, None), "no 95% interval"),
        ("lower(m) >= 0", Quantity(0.5, 4, None, 0.9), "no 95% interval"),
        ("m <= 1", Quantity(math.nan, 4, None, None), "value is undefined"),
        ("upper(m) <= 1", Quantity(0.5, 4, 0.1, math.nan), "no 95% interval"),
    ],
)
def test_nothing_to_compare_is_inconclusive(expr: str, quantity: Quantity, reason: str) -> None:
    result = evaluate_gate(parse_gate(expr), _source(m=quantity))
    assert result.status == "inconclusive"
    assert reason in result.message
    assert fails_run(result)
    assert result.value is None or not math.isnan(result.value)
    assert result.high is None or not math.isnan(result.high)
    json.dumps(result.to_json(), allow_nan=False)  # NaN never leaks into the report


def test_point_gate_needs_no_interval() -> None:
    result = evaluate_gate(parse_gate("m <= 1"), _source(m=Quantity(0.5, 4, None, None)))
    assert result.status == "pass"
    assert "(no CI, n=4)" in result.message


def test_infinite_value_compares() -> None:
    # e.g. cost per success with zero successes: a real number that must fail a cost ceiling
    result = evaluate_gate(
        parse_gate("cost_per_success <= 0.02"), _source(cost_per_success=Quantity(math.inf, 30))
    )
    assert result.status == "fail"


def test_allow_inconclusive_and_fails_run() -> None:
    q = Quantity(0.1, 3, 0.0, 0.4)
    strict = evaluate_gate(parse_gate("m <= 0.2; min_n=10"), _source(m=q))
    lenient = evaluate_gate(parse_gate("m <= 0.2; min_n=10; allow_inconclusive"), _source(m=q))
    assert strict.status == lenient.status == "inconclusive"
    assert fails_run(strict) is True
    assert fails_run(lenient) is False
    assert "allow_inconclusive" in lenient.message
    # allow_inconclusive never excuses a failure
    failed = evaluate_gate(parse_gate("m <= 0.05; allow_inconclusive"), _source(m=q))
    assert failed.status == "fail" and fails_run(failed) is True
    passed = evaluate_gate(parse_gate("m <= 0.2; allow_inconclusive"), _source(m=q))
    assert passed.status == "pass" and fails_run(passed) is False


@dataclass
class UsageSource(FakeSource):
    """A source whose run had calls without usage, per role."""

    missing: dict[str, int] = field(default_factory=dict)

    def without_usage(self, roles: tuple[str, ...]) -> int:
        return sum(n for r, n in self.missing.items() if not roles or r in roles)


@pytest.mark.parametrize(
    ("expr", "status"),
    [
        ("total_cost <= 0.01", "inconclusive"),  # the known part passes: never a PASS
        ("total_cost <= 0.01; allow_unpriced", "pass"),
        ("total_cost <= 0.001", "fail"),  # the known part alone is already over the limit
        ("total_cost >= 0.001", "inconclusive"),
        ("cost_per_success <= 0.01", "inconclusive"),
        ("judge_cost_share <= 0.9", "inconclusive"),
        ("delta(total_cost) <= 0.01", "inconclusive"),
        ("judge_cost <= 0.01", "pass"),  # the judge's calls all reported usage
        ("agent_cost <= 0.01", "inconclusive"),
        ("success_rate >= 0.001", "pass"),  # not a cost
    ],
)
def test_a_cost_gate_is_never_a_pass_while_calls_lack_usage(expr: str, status: str) -> None:
    q = Quantity(0.005, 10, 0.005, 0.005)
    names = ("total_cost", "cost_per_success", "judge_cost_share", "judge_cost", "agent_cost", "success_rate")
    metrics: dict[tuple[str, tuple[str, ...]], Quantity] = {(n, ()): q for n in names}
    metrics[("delta", ("total_cost",))] = q
    source = UsageSource(metrics=metrics, missing={"agent": 3, "judge": 0})
    result = evaluate_gate(parse_gate(expr), source)
    assert result.status == status, result.message
    if "cost" in expr and "judge_cost <=" not in expr:
        assert "3 calls without usage" in result.message
    if status == "inconclusive":
        assert "allow_unpriced" in result.message and fails_run(result)
    assert evaluate_gate(parse_gate(expr), _source(**{n: q for n in names})).status in ("pass", "fail")


def test_partial_run_is_skipped_without_reading_metrics() -> None:
    called: list[Gate] = []

    def drivers(gate: Gate) -> Sequence[str]:
        called.append(gate)
        return ["x"]

    result = evaluate_gate(
        parse_gate("flip_rate <= 0.15"), ExplodingSource(), partial_run=True, drivers=drivers
    )
    assert result.status == "skipped"
    assert result.message == "skipped: partial run (cases deselected), gates need the whole suite"
    assert (result.value, result.low, result.high, result.n, result.drivers) == (None, None, None, 0, ())
    assert fails_run(result) is False
    assert called == []


def test_unknown_metric_fails_with_the_key_error_message() -> None:
    source = _source(flip_rate=FLIP, lrs_close=Q)
    result = evaluate_gate(parse_gate("flip_rte <= 0.15; allow_inconclusive"), source)
    assert result.status == "fail"
    assert fails_run(result)
    assert "unknown metric 'flip_rte' (known: flip_rate, lrs_close)" in result.message
    assert result.message.startswith("FAIL flip_rte <= 0.15: ")
    diff = evaluate_gate(parse_gate("elo(a) - elo(b) >= 0"), source)
    assert diff.status == "fail"
    assert "unknown metric in elo(a) - elo(b)" in diff.message


def test_bare_key_error_still_says_unknown_metric() -> None:
    class Bare:
        def lookup(self, name: str, args: tuple[str, ...]) -> Quantity:
            raise KeyError(name)

        def difference(self, left: Term, right: Term) -> Quantity:
            raise KeyError(left.name)

    result = evaluate_gate(parse_gate("nope <= 1"), Bare())
    assert result.status == "fail"
    assert result.message == "FAIL nope <= 1: unknown metric: nope"


def test_missing_cases_are_mentioned() -> None:
    three = evaluate_gate(parse_gate("flip_rate <= 0.15"), _source(flip_rate=FLIP), missing_cases=3)
    assert three.message.endswith("; 3 cases missing (errored); computed on the rest")
    one = evaluate_gate(parse_gate("flip_rate <= 0.5"), _source(flip_rate=FLIP), missing_cases=1)
    assert one.status == "pass"
    assert "1 case missing (errored)" in one.message
    none = evaluate_gate(parse_gate("flip_rate <= 0.5"), _source(flip_rate=FLIP), missing_cases=0)
    assert "missing" not in none.message


def test_drivers_are_recorded_and_listed() -> None:
    flipped = ["task1/agent_x~agent_y", "task7/agent_x~agent_y"]
    seen: list[Gate] = []

    def drivers(gate: Gate) -> Sequence[str]:
        seen.append(gate)
        return flipped

    gate = parse_gate("flip_rate <= 0.15")
    result = evaluate_gate(gate, _source(flip_rate=FLIP), drivers=drivers)
    assert seen == [gate]
    assert result.drivers == tuple(flipped)
    assert result.message.endswith("; driven by: task1/agent_x~agent_y, task7/agent_x~agent_y")


def test_drivers_list_is_capped_at_ten() -> None:
    cases = [f"case{i:02d}" for i in range(13)]
    result = evaluate_gate(parse_gate("flip_rate <= 0.15"), _source(flip_rate=FLIP), drivers=lambda g: cases)
    assert result.drivers == tuple(cases)  # all kept in the result
    listed = ", ".join(cases[:10])
    assert result.message.endswith(f"driven by: {listed} … and 3 more")
    assert "case10" not in result.message
    exactly_ten = evaluate_gate(
        parse_gate("flip_rate <= 0.15"), _source(flip_rate=FLIP), drivers=lambda g: cases[:10]
    )
    assert "more" not in exactly_ten.message and "case09" in exactly_ten.message
    empty = evaluate_gate(parse_gate("flip_rate <= 0.15"), _source(flip_rate=FLIP), drivers=lambda g: [])
    assert "driven by" not in empty.message


def test_duck_typed_quantity() -> None:
    class Estimate:  # shaped like metrics.Estimate, not a Quantity
        def __init__(self) -> None:
            self.value, self.n, self.low, self.high = 0.12, 40, 0.05, 0.2
            self.method = "bootstrap"

    class Source:
        def lookup(self, name: str, args: tuple[str, ...]) -> Estimate:
            return Estimate()

        def difference(self, left: Term, right: Term) -> Estimate:
            return Estimate()

    assert evaluate_gate(parse_gate("upper(lrs_close) <= 0.25"), Source()).status == "pass"
    assert evaluate_gate(parse_gate("upper(lrs_close) <= 0.15"), Source()).status == "fail"


def test_to_json() -> None:
    gate = parse_gate("cost_per_success<=0.02;min_n=5")
    result = evaluate_gate(gate, _source(cost_per_success=Quantity(0.01, 9, 0.005, 0.02)))
    data = result.to_json()
    assert data == {
        "expr": "cost_per_success <= 0.02; min_n=5",
        "status": "pass",
        "value": 0.01,
        "low": 0.005,
        "high": 0.02,
        "n": 9,
        "message": result.message,
        "needed_n": None,
        "needed_samples": None,
    }
    assert json.loads(json.dumps(data)) == data


def test_evaluate_gates_keeps_order_and_passes_options() -> None:
    gates = parse_gates(["flip_rate <= 0.15", "upper(m) <= 0.7", "flip_rte <= 1"])
    source = _source(flip_rate=FLIP, m=Q)
    results = evaluate_gates(gates, source, missing_cases=2, drivers=lambda g: [g.left.name])
    assert [r.gate for r in results] == gates
    assert [r.status for r in results] == ["fail", "pass", "fail"]
    assert all(isinstance(r, GateResult) for r in results)
    assert results[0].drivers == ("flip_rate",) and "2 cases missing" in results[1].message
    skipped = evaluate_gates(gates, ExplodingSource(), partial_run=True)
    assert [r.status for r in skipped] == ["skipped"] * 3
    assert not any(fails_run(r) for r in skipped)


def test_missing_baseline_names_the_gates() -> None:
    assert missing_baseline(["flip_rate <= 0.2"], "here") is None
    text = missing_baseline(["regressions(x) <= 2", "lower(delta(success_rate(x))) >= -0.05"], "ini")
    assert text is not None and "'regressions(x) <= 2'" in text and "--gauge-baseline DIR" in text
