"""The run's limits built from its options, where the wiring is: requests in flight, requests and tokens
per minute and budgets (run-wide and per model), on the ``--gauge-limits`` Redis server or in the run
folder (:func:`pytest_gauge._internal.gateway.redis_limits.run_limits`, which takes plain values)."""

from __future__ import annotations

from pathlib import Path

from ..gateway.limits import InFlightLimit, ModelRates, RateLimit, SpendLimit
from ..gateway.redis_limits import run_limits
from ..options import GaugeOptions

__all__ = ["build_limits", "build_model_rates"]


def build_limits(
    opts: GaugeOptions, run_dir: Path, run_id: str, processes: int = 1
) -> tuple[InFlightLimit, RateLimit, SpendLimit]:
    """This process's (slots, rate, budget): on the ``--gauge-limits`` Redis server, keyed by
    ``--gauge-run-id`` (else this run's id), or in the run folder on local disk, shared by
    ``processes`` processes (each keeps its fair share of the slots while another waits)."""
    where = run_limits(opts.limits, opts.run_id or run_id, run_dir, processes)
    return (
        where.slots(opts.max_concurrency),
        where.rate(opts.rpm, opts.tpm),
        where.budget(opts.budget_usd, opts.budget_tokens, opts.budget_task_usd),
    )


def build_model_rates(opts: GaugeOptions, run_dir: Path, run_id: str) -> ModelRates | None:
    """This process's per-model buckets (``--gauge-rpm/--gauge-tpm MODEL=N``), None without any: on the
    ``--gauge-limits`` Redis server when given (shared by every host), else in the run folder."""
    rpm, tpm = dict(opts.rpm_models), dict(opts.tpm_models)
    if not rpm and not tpm:
        return None
    return run_limits(opts.limits, opts.run_id or run_id, run_dir).model_rates(rpm, tpm)
