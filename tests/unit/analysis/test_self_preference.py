"""The self-preference of a judge sharing a contestant's model, by hand: its pick of its own model's
lower-reward transcript against the same rate for the other agents, with Wilson and Newcombe intervals."""

from __future__ import annotations

import pytest

from pytest_gauge._internal.analysis.estimates import wilson
from pytest_gauge._internal.analysis.self_preference import self_preference, shared_models
from tests.unit.analysis.test_metrics import case

MODELS = {"agent:x": "m-judge", "agent:y": "m-y", "agent:z": "m-z", "judge:0": "m-judge", "user_sim": "u"}


def test_shared_models_name_the_agents_of_the_judges_model() -> None:
    assert shared_models(MODELS) == {"m-judge": ("x",)}
    assert shared_models({**MODELS, "agent:x": "m-x"}) == {}


def test_self_preference_by_hand() -> None:
    records = [
        # x (the judge's model) has the lower reward: picked (slot A is left in AB) 3 of 4 times
        case("t1", "p", "x", "y", "AB", "A", rewards=(0.0, 1.0)),
        case("t2", "p", "x", "y", "AB", "A", rewards=(0.0, 1.0)),
        case("t3", "p", "x", "y", "BA", "B", rewards=(0.0, 1.0)),  # BA: slot B is the left agent x
        case("t4", "p", "x", "y", "AB", "B", rewards=(0.0, 1.0)),
        # y or z has the lower reward: picked 1 of 4 times
        case("t1", "q", "y", "z", "AB", "A", rewards=(0.0, 1.0)),
        case("t2", "q", "y", "z", "AB", "B", rewards=(0.0, 1.0)),
        case("t3", "p", "x", "y", "AB", "A", rewards=(1.0, 0.0)),
        case("t4", "q", "y", "z", "AB", "A", rewards=(1.0, 0.0)),
        case("t5", "q", "y", "z", "AB", "A", rewards=(1.0, 1.0)),  # equal rewards: not counted
    ]
    sp = self_preference(records, MODELS, "m-judge")
    assert sp is not None and sp.own_agents == ("x",)
    assert (sp.own.value, sp.own.n) == (0.75, 4) and (sp.others.value, sp.others.n) == (0.25, 4)
    assert (sp.own.low, sp.own.high) == pytest.approx(wilson(3, 4))
    assert sp.difference.value == pytest.approx(0.5)
    low_own, high_own = wilson(3, 4)
    low_oth, high_oth = wilson(1, 4)
    assert sp.difference.low == pytest.approx(0.5 - ((0.75 - low_own) ** 2 + (high_oth - 0.25) ** 2) ** 0.5)
    assert sp.difference.high == pytest.approx(0.5 + ((high_own - 0.75) ** 2 + (0.25 - low_oth) ** 2) ** 0.5)
    assert self_preference(records, {**MODELS, "agent:x": "m-x"}, "m-judge") is None
