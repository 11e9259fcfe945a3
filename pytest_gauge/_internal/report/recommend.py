"""Recommendations: stated rules over the suite's numbers (:data:`RULES`), each checked against one run."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..analysis.metrics import SuiteMetrics
from .format import fmt_num

__all__ = ["RULES", "Recommendation", "Rule", "recommendations"]


@dataclass(frozen=True)
class Rule:
    """A recommendation rule: fires when ``value(metrics) > threshold``; unmeasured (None) never fires."""

    key: str
    label: str
    threshold: float
    action: str
    value: Callable[[SuiteMetrics], float | None]
    integer: bool = False

    def text(self) -> str:
        """The rule as printed, e.g. ``flip rate upper bound > 0.2 → judge both orders and report ties``."""
        return f"{self.label} > {self.threshold:g} → {self.action}"


@dataclass(frozen=True)
class Recommendation:
    """One rule checked against this run: the number it saw and whether it fired."""

    rule: Rule
    value: float | None

    @property
    def fired(self) -> bool:
        """True when the number is known and above the threshold."""
        return self.value is not None and self.value > self.rule.threshold

    def value_text(self) -> str:
        """The number as printed (``not measured`` when None)."""
        if self.value is None:
            return "not measured"
        return str(round(self.value)) if self.rule.integer else fmt_num(self.value)

    def line(self) -> str:
        """The printed recommendation with the number that triggered it."""
        r = self.rule
        return f"{r.label} = {self.value_text()} > {r.threshold:g} → {r.action}"


def _high(name: str) -> Callable[[SuiteMetrics], float | None]:
    def get(m: SuiteMetrics) -> float | None:
        e = m.metrics.get(name)
        return None if e is None else e.high

    return get


def _point(name: str) -> Callable[[SuiteMetrics], float | None]:
    def get(m: SuiteMetrics) -> float | None:
        e = m.metrics.get(name)
        return None if e is None else e.value

    return get


RULES: tuple[Rule, ...] = (
    Rule("flip_rate", "flip rate upper bound", 0.2, "judge both orders and report ties", _high("flip_rate")),
    Rule(
        "lrs_close",
        "LRS close upper bound",
        0.3,
        "do not gate close pairs on a single judge run; add repeats or a second judge",
        _high("lrs_close"),
    ),
    Rule(
        "judge_cost_share",
        "judge share of cost",
        0.5,
        "consider a cheaper judge or caching",
        lambda m: m.costs.judge_share,
    ),
    Rule(
        "sat_but_failed_rate",
        "sat-but-failed rate",
        0.1,
        "do not use user satisfaction as the success signal",
        _point("sat_but_failed_rate"),
    ),
    Rule(
        "judge_error_rate",
        "judge error rate",
        0.02,
        "raise judge max_tokens / check the verdict format",
        _point("judge_error_rate"),
    ),
    Rule(
        "cheaper_judge",
        "judge cost per call saved by an as-accurate cheaper panel model",
        0,
        "make that model the main judge (see 'The judge against the rules')",
        lambda m: None if m.judge_rules.cheaper is None else 1.0 - m.judge_rules.cheaper.cost_ratio,
    ),
    Rule(
        "missing_cases",
        "missing cases",
        0,
        "rerun the errored cases before trusting the metrics and gates",
        lambda m: None if m.missing_cases is None else float(m.missing_cases),
        integer=True,
    ),
)
"""The recommendation rules, checked in this order."""


def recommendations(metrics: SuiteMetrics, rules: Sequence[Rule] = RULES) -> list[Recommendation]:
    """Every rule checked against the metrics (fired or not), in rule order."""
    return [Recommendation(rule, rule.value(metrics)) for rule in rules]
