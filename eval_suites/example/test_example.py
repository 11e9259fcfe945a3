"""The example suite: three agents of a customer-support / productivity assistant, judged blind in pairs.

On the offline simulator (the default backend) agent_x and agent_y are equally skilled (a close pair)
and agent_z is clearly weaker (distant pairs). agent_y is verbose, always polite, and names itself and
its model, which the judge must never see. The simulated judge reads the rules well but is swayed by
tone and length, as LLM judges are: on the close pair that bias decides many verdicts, on the distant
pairs the quality gap dominates, which is the study's headline (LRS close >> LRS distant).
Live runs take model names from the environment (see ``env_model``).
"""

from __future__ import annotations

from pytest_gauge import Judge, ModelAgent, SimAgent, SimJudge, Suite, UserSimulator, env_model

from .tools import TOOLS  # this suite's own tools.py: the suite folder is a package (__init__.py)

suite = Suite(
    agents=[
        ModelAgent(
            "agent_x",
            env_model("GAUGE_AGENT_X_MODEL", "sim-agent-x"),
            sim=SimAgent(skill=0.8, politeness=0.05),
        ),
        ModelAgent(
            "agent_y",
            env_model("GAUGE_AGENT_Y_MODEL", "sim-agent-y"),
            sim=SimAgent(skill=0.8, verbosity=1.6, self_name=True, politeness=1.0),
        ),
        ModelAgent(
            "agent_z",
            env_model("GAUGE_AGENT_Z_MODEL", "sim-agent-z"),
            sim=SimAgent(skill=0.3, verbosity=0.8, politeness=0.05),
        ),
    ],
    pairs=[("agent_x", "agent_y"), ("agent_x", "agent_z"), ("agent_y", "agent_z")],
    judge=Judge(
        env_model("TAOTOKEN_JUDGE_MODEL", "sim-judge"),
        sim=SimJudge(noise=0.25, length_bias=0.1, tone_bias=1.2, misread=0.05),
    ),
    user=UserSimulator(env_model("GAUGE_USER_MODEL", "sim-user")),
    tools=TOOLS,
    # What CI gates on: the judge is usable (few errors, not position-biased, rarely wrong on pairs that
    # really differ), the best agent has not regressed, and the bill stays bounded. Thresholds keep a
    # margin from today's values, so that --gauge-adaptive can decide them before the last task, and
    # hold for (nearly) any --gauge-seed: benchmarks/bench_seeds.py counts the seeds each gate passes on
    # (44 tasks: the upper side of a 95% interval of a rate near 0.06 reaches 0.3 on some seeds).
    gates=[
        "upper(judge_error_rate) <= 0.2",
        "upper(position_bias) <= 0.65",
        "upper(lrs_distant) <= 0.35; min_n=30",
        "success_rate(agent_x) >= 0.3; min_n=30",
        "lower(elo(agent_x) - elo(agent_z)) >= 0",
        "cost_per_success <= 0.05; min_n=20",
    ],
)
