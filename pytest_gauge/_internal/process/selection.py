"""The run's test order and selection around its gates: the gate items last, and a selected gate with
its suite's cases (a gate measures the suite: it cannot run on nothing)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

__all__ = ["order_checks"]


def _suite_of(item: pytest.Item) -> str | None:
    """The suite of a case or gate item (``case.suite`` / ``suite_name``), or None for any other test."""
    case = getattr(item, "case", None)
    if case is not None:
        return str(case.suite)
    name = getattr(item, "suite_name", None)
    return None if name is None else str(name)


def _marked(items: Sequence[pytest.Item], marker: str) -> list[pytest.Item]:
    return [i for i in items if i.get_closest_marker(marker) is not None]


def order_checks(
    items: Sequence[pytest.Item], deselected: Sequence[pytest.Item]
) -> tuple[list[pytest.Item], list[pytest.Item]]:
    """``items`` with the gate items moved after every other test, and the deselected items put back:
    a suite's gates wherever any of its cases is selected (``-k m01``: the gate says it was not checked,
    no silent green), and a selected gate's cases when none is (``--lf`` after a failed gate). Returns
    the new list and the items put back."""
    gates = _marked(items, "gauge_gate")
    rest = [i for i in items if i.get_closest_marker("gauge_gate") is None]
    with_cases = {_suite_of(i) for i in _marked(rest, "gauge_case")}
    gates += [g for g in _marked(deselected, "gauge_gate") if _suite_of(g) in with_cases and g not in gates]
    wanted = {_suite_of(g) for g in gates} - with_cases
    back = [i for i in _marked(deselected, "gauge_case") if _suite_of(i) in wanted and i not in rest]
    restored = [*back, *(g for g in gates if g not in items)]
    return [*rest, *back, *gates], restored
