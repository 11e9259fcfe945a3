"""The per-model pacer's reading of 429s (gateway/limits.py ``ModelPacer``): a rate limit (a wait hint, or
429s that are no longer stray) halves a model's concurrency; stray 429s without a hint leave it busy;
successes grow it back."""

from __future__ import annotations

import random

import pytest

from pytest_gauge._internal.gateway.limits import NOISE_WINDOW, ModelPacer


def occupancy(
    seed: int, share_429: float, hinted: bool, capacity: int | None = None, ceiling: int = 64
) -> float:
    """The model's mean limit over 3,000 answers, as a share of the ceiling, when the model always has
    its limit's worth in flight and each answer is a 429 with probability ``share_429``, or (with a
    ``capacity``: a real rate limit) with the share of the in-flight requests past that capacity."""
    rng, pacer, total = random.Random(seed), ModelPacer(ceiling), 0
    for _ in range(3000):
        limit = pacer.active["m"] = pacer.limit.get("m", ceiling)
        p = share_429 if capacity is None else max(0.0, (limit - capacity) / limit)
        if rng.random() < p:
            pacer.slowed("m", hinted=hinted)
        else:
            pacer.succeeded("m")
        total += pacer.limit.get("m", ceiling)
    return total / 3000 / ceiling


@pytest.mark.parametrize("seed", range(8))
def test_stray_429s_without_a_hint_keep_the_model_busy(seed: int) -> None:
    assert occupancy(seed, 0.05, hinted=False) >= 0.95


@pytest.mark.parametrize(
    ("seed", "hinted"), [(seed, hinted) for seed in range(4) for hinted in (True, False)]
)
def test_a_model_that_is_really_limited_still_backs_off_to_near_its_capacity(seed: int, hinted: bool) -> None:
    """16 requests in flight is what the model serves; past it, the excess is answered 429."""
    assert 8 / 64 <= occupancy(seed, 0.0, hinted=hinted, capacity=16) <= 24 / 64


def test_429s_without_a_hint_count_from_a_quarter_of_the_window_and_successes_recover() -> None:
    pacer = ModelPacer(8)
    for _ in range(NOISE_WINDOW // 4 - 1):
        pacer.slowed("m", hinted=False)
    assert pacer.limit.get("m", 8) == 8  # still stray
    pacer.slowed("m", hinted=False)
    assert pacer.limit["m"] == 4
    for _ in range(4):
        pacer.succeeded("m")
    assert pacer.limit["m"] == 8
