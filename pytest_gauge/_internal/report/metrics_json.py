"""``metrics.json``: every number of the reports as canonical, machine-readable JSON."""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Sequence
from typing import Any

from ..analysis.human import HumanFindings
from ..analysis.judge_rules import PRIMARY
from ..analysis.metrics import COST_INCLUDES_RETRIES, PAIR_METRICS, Estimate, FlippedGroup, SuiteMetrics
from ..records import CaseRecord, roles_in
from ..records.json_types import JSONObject
from ..run.user_audit import USER_AUDIT_KINDS
from .adaptive import adaptive_json
from .baseline import repeats_json
from .common import ReportContext, case_counts, category_counts, prices_of, suite_name, task_count
from .costs import key_variable_costs, latency_figures, model_costs, spent_this_run, watch_figures
from .format import VOLATILE_KEY, usd_at_least
from .recommend import recommendations
from .self_preference import self_preference_json

__all__ = ["METRICS_FORMAT_VERSION", "driver_cases", "human_metrics", "render_metrics_json"]

METRICS_FORMAT_VERSION = 2


def _canon(x: Any) -> Any:
    """Floats rounded to 6 decimals (no -0.0, NaN/inf as null), recursively; tuples as lists."""
    if isinstance(x, bool) or x is None or isinstance(x, int | str):
        return x
    if isinstance(x, float):
        if not math.isfinite(x):
            return None
        r = round(x, 6)
        return 0.0 if r == 0 else r
    if isinstance(x, dict):
        return {str(k): _canon(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_canon(v) for v in x]
    if isinstance(x, numbers.Integral):
        return int(x)
    if isinstance(x, numbers.Real):
        return _canon(float(x))
    return str(x)


def _est_json(e: Estimate) -> JSONObject:
    return {"value": e.value, "n": e.n, "low": e.low, "high": e.high, "method": e.method}


def _metrics_block(ctx: ReportContext) -> JSONObject:
    m = ctx.metrics
    out: JSONObject = {name: _est_json(e) for name, e in m.metrics.items()}
    for agent, per in m.per_agent.items():
        for name, e in per.items():
            out[f"{name}({agent})"] = _est_json(e)
    for info in m.pairs.values():
        args = (info.agent_left, info.agent_right)
        for name in PAIR_METRICS:
            try:
                out[f"{name}({', '.join(args)})"] = _est_json(m.lookup(name, args))
            except KeyError:
                continue
    for kind in ("repeats", "judges"):
        if kind in m.agreement.agreement:
            out[f"judge_agreement({kind})"] = _est_json(m.agreement.agreement[kind])
        if kind in m.agreement.kappa:
            out[f"judge_kappa({kind})"] = _est_json(m.agreement.kappa[kind])
    for judge, by_cls in m.judge_rules.accuracy.items():
        for cls, e in by_cls.items():
            named = [a for a in (judge, cls) if a not in (PRIMARY, "all")]
            if not cls.startswith("category:"):
                out[f"judge_accuracy({', '.join(named)})" if named else "judge_accuracy"] = _est_json(e)
    for judge, rho in m.judge_rules.rank_corr.items():
        out[f"judge_rank_corr({judge})"] = _est_json(rho)
    for kind in USER_AUDIT_KINDS:
        out[f"user_sim_error_rate({kind})"] = _est_json(m.lookup("user_sim_error_rate", (kind,)))
    if m.human is not None:
        out |= human_metrics(m.human)
    return out


def human_metrics(h: HumanFindings) -> dict[str, JSONObject]:
    """The human-label metrics by gate name (``--gauge-labels``)."""
    out: dict[str, JSONObject] = {}
    for who in h.agreement:
        arg = "" if who == PRIMARY else f"({who})"
        out[f"human_judge_agreement{arg}"] = _est_json(h.agreement[who])
        out[f"human_judge_kappa{arg}"] = _est_json(h.kappa[who])
    out["human_rules_agreement"] = _est_json(h.rules)
    out["labeller_agreement"] = _est_json(h.labeller_agreement)
    out["labeller_kappa"] = _est_json(h.labeller_kappa)
    return out


def _gates_json(ctx: ReportContext) -> list[JSONObject]:
    """Each gate's expression, status, value with interval and count, message, threshold and drivers."""
    return [
        {
            "expr": g.gate.canonical(),
            "status": g.status,
            "value": g.value,
            "low": g.low,
            "high": g.high,
            "n": g.n,
            "message": g.message,
            "needed_n": g.needed_n,
            "needed_samples": g.needed_samples,
            "threshold": g.gate.threshold,
            "drivers": list(g.drivers),
            "driver_cases": driver_cases(g.drivers, ctx.records, ctx.metrics.flipped),
        }
        | ({} if g.holm_level is None else {"holm_level": g.holm_level})  # --gauge-familywise holm
        | ({} if g.needed_n is None else {"needed_n_range": list(g.needed_range)})  # 50% effect ends
        | ({} if g.reproducibility is None else {"reproducibility": g.reproducibility.to_json()})
        for g in ctx.gates
    ]


def driver_cases(
    drivers: Sequence[str], records: Sequence[CaseRecord], flipped: Sequence[FlippedGroup]
) -> list[str]:
    """The ids, in case order, of the cases a gate's drivers name: a case id, a flipped group (each case
    of its task, pair and sample) or a satisfied-but-failed transcript ``task/agent#sample`` (each case
    that judged it); the HTML report marks them. Other drivers (tasks, baseline units) name no case."""
    by_id = {r.case_id: i for i, r in enumerate(records)}
    groups = {f.label(): (f.task_id, f.pair_id, f.sample) for f in flipped}
    transcripts: dict[str, list[int]] = {}
    for i, r in enumerate(records):
        for agent in (r.agent_left, r.agent_right):
            transcripts.setdefault(f"{r.task_id}/{agent}#{r.sample}", []).append(i)
    hits: set[int] = set()
    for driver in drivers:
        if driver in by_id:
            hits.add(by_id[driver])
        elif driver in groups:
            group = groups[driver]
            hits.update(i for i, r in enumerate(records) if (r.task_id, r.pair_id, r.sample) == group)
        else:
            hits.update(transcripts.get(driver, ()))
    return [records[i].case_id for i in sorted(hits)]


def _costs_json(ctx: ReportContext) -> JSONObject:
    """Nominal costs per role and per model, totals and the prices used."""
    costs = ctx.metrics.costs
    missing = ctx.metrics.without_usage()
    return {
        # nominal only: the live/cached split is under spent_this_run (a cached re-run changes nothing)
        "per_role": {
            r: {k: v for k, v in c.to_json().items() if k != "cached_attempts"}
            for r, c in costs.per_role.items()
        },
        "per_model": [
            {
                "role": c.role,
                "model": c.model,
                "calls": c.calls,
                "attempts": c.attempts,
                "failed": c.failed,
                "input_tokens": c.input_tokens,
                "output_tokens": c.output_tokens,
                "cost": c.cost,
                "usage_missing": c.usage_missing,
                "tokens_per_task": round(w.tokens_per_task, 3),
                "retry_rate": round(w.retry_rate, 6),
                "rate_limited": w.rate_limited,
                "asked_wait_s": w.asked_wait_s,
            }
            for c, w in zip(model_costs(ctx.ledger), watch_figures(ctx.ledger), strict=True)
        ],
        "total_cost": costs.total_cost,
        # calls without usage make every cost they touch a lower bound (docs/protocol.md#costs)
        "usage_missing": missing,
        "lower_bound": bool(missing) and costs.total_cost is not None,
        "total_cost_text": usd_at_least(costs.total_cost, missing),
        "successes": costs.successes,
        "cost_per_success": costs.cost_per_success,
        "judge_share": costs.judge_share,
        "prices": {
            mod: {
                "input_per_m": p.input,
                "output_per_m": p.output,
                "cached_input_per_m": p.cached_input,
                "source": p.source,
            }
            for mod, p in sorted(prices_of(ctx).items())
        },
    }


def _recommendations_json(m: SuiteMetrics) -> list[JSONObject]:
    """Every recommendation rule with its threshold, the value it saw and whether it fired."""
    return [
        {
            "rule": r.rule.key,
            "text": r.rule.text(),
            "threshold": r.rule.threshold,
            "value": r.value,
            "fired": r.fired,
        }
        for r in recommendations(m)
    ]


def render_metrics_json(ctx: ReportContext) -> str:
    """Every number of the reports as canonical JSON (sorted keys, 2-space indent, 6-decimal floats)."""
    m = ctx.metrics
    expected, recorded, missing = case_counts(ctx)
    spend = spent_this_run(ctx.ledger)
    doc: JSONObject = {
        "format_version": METRICS_FORMAT_VERSION,
        "number_format": "floats rounded to 6 decimals; null for no number (NaN, no data, unknown cost)",
        "suite": suite_name(ctx),
        "metrics": _metrics_block(ctx),
        "gates": _gates_json(ctx),
        **({"adaptive": adaptive_json(ctx.adaptive)} if ctx.adaptive is not None else {}),
        "baseline": ctx.baseline.to_json() if ctx.baseline is not None else None,
        "repeats": repeats_json(ctx.repeats, m.rounds, m.seed),
        "spent_this_run": {
            **spend.to_json(),
            "per_role": {role: spent_this_run(ctx.ledger, role).to_json() for role in roles_in(ctx.ledger)},
            "per_key_variable": {k.key_variable: k.to_json() for k in key_variable_costs(ctx.ledger)},
        },
        "cost_includes_retries": COST_INCLUDES_RETRIES,
        "costs": _costs_json(ctx),
        "judge_rules": m.judge_rules.to_json(),
        **({"human": m.human.to_json()} if m.human is not None else {}),
        **self_preference_json(ctx),
        "usage_missing_calls": sorted({x.call_id for x in ctx.ledger if x.usage_missing}),
        "cases": {"expected": expected, "recorded": recorded, "missing": expected - recorded},
        "missing_case_ids": missing,
        "tasks": {"total": task_count(ctx), "judged": m.n_tasks, "categories": category_counts(ctx)},
        "pairs": {pid: info.to_json() for pid, info in m.pairs.items()},
        "lrs_close_minus_distant_p_value": m.p_value,
        "flipped": [f.to_json() for f in m.flipped],
        "sat_but_failed_examples": [
            {"task_id": t, "agent": a, "sample": s} for t, a, s in m.sat_but_failed_examples
        ],
        "verbosity": m.verbosity.to_json(),
        "recommendations": _recommendations_json(m),
        "close_threshold": m.close_threshold,
        "seed": m.seed,
        "bootstrap_rounds": m.rounds,
        VOLATILE_KEY: {
            "note": "varies run to run; comparisons of runs ignore it (docs/protocol.md#volatile-fields)",
            "latency_s": [x.to_json() for x in latency_figures(ctx.ledger)],
        },
    }
    return json.dumps(_canon(doc), sort_keys=True, indent=2, ensure_ascii=False) + "\n"
