"""Every model call's ``seed`` derives from the run seed and the unit of work: the
requests the loopback server receives carry exactly :func:`call_seed` of their unit."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from pytest_gauge._internal.run.work import SuiteRuntime, call_seed
from pytest_gauge._internal.suite.cases import Case
from pytest_gauge._internal.suite.declare import Judge, ModelAgent, Suite, UserSimulator, best_of
from pytest_gauge._internal.suite.tasks import Task
from pytest_gauge.testing import LoopbackServer, completion, default_responder
from tests.e2e.test_gateway import make_gateway, run_closing


def test_call_seed_is_sha256_of_run_seed_and_unit() -> None:
    digest = hashlib.sha256(b"7|judge|s|t1-a-vs-b-AB|0|1").digest()
    assert call_seed(7, "judge", "s", "t1-a-vs-b-AB", 0, 1) == int.from_bytes(digest[:4], "big") & 0x7FFFFFFF
    seeds = {call_seed(7, "transcript", "s", "t1", sample, c) for sample in range(3) for c in range(4)}
    assert len(seeds) == 12  # distinct per sample and per candidate
    assert call_seed(8, "transcript", "s", "t1", 0, 0) != call_seed(7, "transcript", "s", "t1", 0, 0)
    assert all(0 <= s < 2**31 for s in seeds)


BEST = best_of(ModelAgent("b", "model-b"), 3, selector="judge")


def _runtime(tmp_path: Path, server: LoopbackServer, run_seed: int) -> SuiteRuntime:
    agents = [ModelAgent("a", "model-a"), BEST]
    suite = Suite(agents=agents, judge=Judge(model="judge-m", repeats=2), user=UserSimulator(max_turns=1))
    task = Task("t1", "c", "Help me please", ())
    return SuiteRuntime("s", suite, {"t1": task}, make_gateway(tmp_path, server), seed=run_seed)


def test_every_request_carries_its_units_seed(tmp_path: Path) -> None:
    sent: list[tuple[str, Any]] = []

    def responder(body: dict[str, Any]) -> dict[str, Any]:
        sent.append((str(body.get("model")), body.get("seed")))
        if body.get("model") == "judge-m":
            return completion('{"winner": "B", "reward_a": 0.2, "reward_b": 0.8, "reason": "fine"}')
        return default_responder(body)

    with LoopbackServer(responder=responder) as server:
        runtime = _runtime(tmp_path, server, run_seed=11)

        async def work() -> None:
            left = await runtime.transcript("t1", "a", 1)
            right = await runtime.transcript("t1", BEST.name, 1)
            case = Case("s", "t1", "a", BEST.name, "BA", 1, 2)
            for repeat in range(2):
                await runtime.judgment(case, 0, repeat, left.transcript, right.transcript)

        run_closing(runtime.gateway, work())
    unit = call_seed
    case_id = f"t1-a-vs-{BEST.name}-BA-s1"
    dialogue = [unit(11, "transcript", "s", "t1", 1, c) for c in range(3)]
    expected = {
        ("model-a", dialogue[0]),  # agent a: one candidate, the same seed as b's first (paired)
        *(("model-b", s) for s in dialogue),  # best-of 3: one seed per candidate
        *(("judge-m", unit(11, "select", "s", "t1", 1, i)) for i in (1, 2)),  # the knockout's challengers
        *(("judge-m", unit(11, "judge", "s", case_id, 0, r)) for r in (0, 1)),  # one per repeat
    }
    user_seeds = {seed for model, seed in sent if model not in ("model-a", "model-b", "judge-m")}
    assert {(m, s) for m, s in sent if m in ("model-a", "model-b", "judge-m")} == expected
    assert user_seeds <= set(dialogue) and user_seeds  # the simulated user shares its dialogue's seed
    assert all(seed is not None for _, seed in sent)  # sample 0 and single verdicts are seeded too
