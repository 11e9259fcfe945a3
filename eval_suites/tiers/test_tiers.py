"""Test-time compute tiers: one agent at best-of-1/2/4/8 (the rule verifier picks the sample), judged
blind against each other. Elo should rise with the tier while Elo per 1k tokens falls
(docs/protocol.md#elo)."""

from __future__ import annotations

from pytest_gauge import Judge, ModelAgent, SimAgent, SimJudge, Suite, UserSimulator, best_of, env_model

solver = ModelAgent("solver", env_model("GAUGE_SOLVER_MODEL", "sim-solver"), sim=SimAgent(skill=0.5))

suite = Suite(
    agents=[best_of(solver, n) for n in (1, 2, 4, 8)],
    pairs="all",
    samples=2,  # two samples per task: with 19 tasks, one sample left these gates red on 1 seed in 10
    judge=Judge(env_model("TAOTOKEN_JUDGE_MODEL", "sim-judge"), sim=SimJudge(noise=0.15, misread=0.05)),
    user=UserSimulator(env_model("GAUGE_USER_MODEL", "sim-user")),
    gates=[
        "lower(elo(solver@bo8) - elo(solver@bo1)) >= 0",
        "elo_per_1k_tokens(solver@bo2) >= 0",
    ],
)
