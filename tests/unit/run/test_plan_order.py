"""The look-ahead's order (:func:`pytest_gauge._internal.run.plan.long_chains_first`): long chains (the
transcripts) are pulled up to a window's worth of places ahead, never later; short ones (verdicts) keep
their order and only yield; nothing is lost or doubled, so a transcript still comes before every verdict
that needs it."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from pytest_gauge._internal.run.plan import long_chains_first


def _suite_order(rng: random.Random, tasks: int) -> list[str]:
    """Collection order of a suite: per task, each agent's transcript (``T``) before its first case's
    verdicts (``J``), with a random number of agents, pairs and verdicts per case."""
    order: list[str] = []
    for t in range(tasks):
        agents = rng.randint(2, 4)
        for a in range(agents):
            order.append(f"T{t}.{a}")
            order.extend(f"J{t}.{a}.{k}" for k in range(rng.randint(0, 5)))
    return order


def _is_long(unit: str) -> bool:
    return unit.startswith("T")


@pytest.mark.parametrize("seed", range(8))
def test_long_chains_move_ahead_by_at_most_the_window_and_never_later(seed: int) -> None:
    rng = random.Random(seed)
    units = _suite_order(rng, rng.randint(1, 30))
    window = rng.randint(0, 40)
    out = long_chains_first(units, _is_long, window)
    assert sorted(out) == sorted(units)  # a permutation: nothing lost, nothing doubled
    assert [u for u in out if _is_long(u)] == [u for u in units if _is_long(u)]
    assert [u for u in out if not _is_long(u)] == [u for u in units if not _is_long(u)]
    before, after = {u: i for i, u in enumerate(units)}, {u: i for i, u in enumerate(out)}
    for u in units:
        if _is_long(u):
            assert before[u] - window <= after[u] <= before[u]
        else:
            assert after[u] >= before[u]  # a verdict only yields
    for u in units:  # a verdict still comes after its transcript
        if not _is_long(u):
            t, a = u[1:].split(".")[:2]
            assert after[f"T{t}.{a}"] < after[u]


def test_the_last_transcripts_start_a_window_early() -> None:
    units = ["T0", "J0", "J0", "J0", "T1", "J1", "J1", "J1", "T2", "J2", "J2", "J2"]
    assert long_chains_first(units, _is_long, 4) == [
        "T0", "T1", "J0", "J0", "J0", "T2", "J1", "J1", "J1", "J2", "J2", "J2",
    ]  # fmt: skip


def test_a_window_of_zero_keeps_collection_order_and_a_wide_one_puts_every_chain_first() -> None:
    rng = random.Random(3)
    units = _suite_order(rng, 10)
    assert long_chains_first(units, _is_long, 0) == units
    wide = long_chains_first(units, _is_long, len(units))
    longs = sum(1 for u in units if _is_long(u))
    assert all(_is_long(u) for u in wide[:longs])


def test_a_dialogue_ranks_by_its_turns_and_a_verdict_last(tmp_path: Path) -> None:
    """The chain the engine gives a unit's calls at the slots: two calls a turn plus its verdict (the
    task's own turn limit first, else the user simulator's), one for a verdict."""
    from types import SimpleNamespace

    from pytest_gauge._internal.files.work_store import WorkStore
    from pytest_gauge._internal.run.engine import Engine, _JudgeUnit, _TranscriptUnit

    runtime = SimpleNamespace(
        tasks={"short": SimpleNamespace(max_turns=None), "long": SimpleNamespace(max_turns=5)},
        suite=SimpleNamespace(user=SimpleNamespace(max_turns=2)),
    )
    engine = Engine({"s": runtime}, [], WorkStore(tmp_path, "gw0"), lookahead=4)  # type: ignore[dict-item]
    try:
        assert engine._chain(_TranscriptUnit("k1", "s", "short", "a", 0)) == 5
        assert engine._chain(_TranscriptUnit("k2", "s", "long", "a", 0)) == 11
        assert engine._chain(_JudgeUnit("k3", "s", None, 0, 0)) == 1  # type: ignore[arg-type]
    finally:
        engine.loop.close()
