"""What the bootstrap will need, known before the first call: its memory from the rounds and the tasks
(``analysis/resampling.py`` holds a ``rounds x tasks`` count matrix, a byte a count, multiplies a block
of it as float64, and the statistics take ``rounds x columns`` float64 arrays from it), checked against
this machine's memory. numpy-free: the controller
checks it while it reads its options."""

from __future__ import annotations

import os

__all__ = ["BLOCK_ROUNDS", "bootstrap_bytes", "bootstrap_memory_problem", "memory_limit"]

_COLUMNS = 16
"""Statistic columns counted beside the tasks' (a metric's resamples, a paired difference, percentiles)."""


BLOCK_ROUNDS = 256
"""Rounds of the count matrix made float64 at once for a product (2 MB at 1,000 tasks): a multiple of 16,
so a product's sums are the whole matrix's (see ``analysis/resampling.py``)."""


def bootstrap_bytes(rounds: int, tasks: int) -> int:
    """Peak bytes of the resampling: the count matrix (three bytes a count while a count past 255 widens
    it to two), a block of it as float64, and the statistics' resampled columns (twice, for a product and
    its ratio)."""
    tasks = max(tasks, 1)
    return 3 * rounds * tasks + BLOCK_ROUNDS * tasks * 8 + 2 * rounds * _COLUMNS * 8


def memory_limit() -> int:
    """Half of this machine's memory: what one run's resampling may take (the rest for the run itself)."""
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):  # pragma: no cover - a system without these names
        total = 8 * 2**30
    return total // 2


def _gib(size: int) -> str:
    return f"{size / 2**30:,.1f} GiB"


def bootstrap_memory_problem(rounds: int, tasks: int, limit: int | None = None) -> str | None:
    """Why ``rounds`` resamples of ``tasks`` tasks cannot finish on this machine (one line naming the value,
    the memory it would need and the limit), or None."""
    limit = memory_limit() if limit is None else limit
    need = bootstrap_bytes(rounds, tasks)
    if need <= limit:
        return None
    most = max(limit // bootstrap_bytes(1, tasks), 0)
    return (
        f"--gauge-bootstrap-rounds (gauge_bootstrap_rounds) {rounds:,}: resampling {tasks:,} task(s) would"
        f" need about {_gib(need)}, more than the {_gib(limit)} allowed (half of this machine's memory):"
        f" give at most {most:,}"
    )
