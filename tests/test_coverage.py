"""Intervals that cover (issue 20, point 1): a simulation with known truth and heterogeneous tasks.

Each run draws T tasks; each task's LRS on close pairs is drawn from Beta(c * 0.4, c * 0.6) and on
distant pairs from Beta(c * 0.1, c * 0.9) (concentration c = 4 or 1; or every task at the truth), and
each task has 4 judged cases of each class. Coverage is the share of runs whose 95% interval contains
the truth (0.4, 0.1 and their difference 0.3), for the percentile bootstrap over tasks (what the metrics
used before) and the cluster-adjusted intervals of :mod:`pytest_gauge.analysis.intervals` (what they
use now). The table in docs/protocol.md#coverage is this test's output (``GAUGE_WRITE_COVERAGE=1``
rewrites it); the test fails below 94% at 20 tasks or more, except the one known short cell
(:data:`KNOWN_SHORT`, held to 90%).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_gauge.analysis.intervals import cluster_difference, cluster_wilson

Array = np.ndarray[Any, np.dtype[Any]]

RUNS = 1000
BOOT = 400
SIZES = (10, 20, 40, 80)
SPREADS: tuple[tuple[str, float | None], ...] = (("homogeneous", None), ("Beta c=4", 4.0), ("Beta c=1", 1.0))
TRUTH = {"close": 0.4, "distant": 0.1}
CASES = 4
KNOWN_SHORT = {("distant", "Beta c=1"): 0.90}
"""Cells that miss the 94% target (stated in docs/protocol.md#coverage): a rare event (truth 0.1) on very
skewed tasks (c = 1: most tasks never mislead, a few almost always) covers about 91-94% at 20-80 tasks;
the test holds them to 90% so that they cannot get worse unnoticed."""
DOC = Path(__file__).resolve().parents[1] / "docs" / "protocol.md"
BEGIN, END = "<!-- coverage table: begin -->", "<!-- coverage table: end -->"


def _counts(rng: np.random.Generator, truth: float, spread: float | None, shape: tuple[int, int]) -> Array:
    rates = np.full(shape, truth) if spread is None else rng.beta(spread * truth, spread * (1 - truth), shape)
    return rng.binomial(CASES, rates).astype(np.float64)


def _percentile_covers(k: Array, n: Array, idx: Array, truth: float) -> Array:
    """Per run: whether the 2.5..97.5 percentiles of the resampled ratio contain the truth."""
    rows = np.arange(k.shape[0])[:, None, None]
    ks, ns = k[rows, idx].sum(-1), n[rows, idx].sum(-1)
    ratio = np.where(ns > 0, ks / np.maximum(ns, 1.0), np.nan)
    low, high = np.nanpercentile(ratio, [2.5, 97.5], axis=1)
    return np.asarray((low <= truth) & (truth <= high))


def _cell(rng: np.random.Generator, tasks: int, spread: float | None) -> dict[str, tuple[float, float]]:
    """(percentile bootstrap, cluster interval) coverage of close, distant and their difference."""
    shape = (RUNS, tasks)
    kc, kd = _counts(rng, TRUTH["close"], spread, shape), _counts(rng, TRUTH["distant"], spread, shape)
    n = np.full(shape, float(CASES))
    boot: dict[str, list[Array]] = {"close": [], "distant": [], "difference": []}
    for start in range(0, RUNS, 100):
        sl = slice(start, start + 100)
        idx = rng.integers(0, tasks, size=(kc[sl].shape[0], BOOT, tasks))
        boot["close"].append(_percentile_covers(kc[sl], n[sl], idx, TRUTH["close"]))
        boot["distant"].append(_percentile_covers(kd[sl], n[sl], idx, TRUTH["distant"]))
        rows = np.arange(kc[sl].shape[0])[:, None, None]
        diff = kc[sl][rows, idx].sum(-1) / (CASES * tasks) - kd[sl][rows, idx].sum(-1) / (CASES * tasks)
        low, high = np.percentile(diff, [2.5, 97.5], axis=1)
        boot["difference"].append((low <= 0.3) & (0.3 <= high))
    out: dict[str, tuple[float, float]] = {}
    for name, k in (("close", kc), ("distant", kd)):
        _, low, high = cluster_wilson(k, n)
        out[name] = (
            float(np.mean(np.concatenate(boot[name]))),
            float(np.mean((low <= TRUTH[name]) & (TRUTH[name] <= high))),
        )
    _, dlow, dhigh = cluster_difference(kc, n, kd, n)
    out["difference"] = (
        float(np.mean(np.concatenate(boot["difference"]))),
        float(np.mean((dlow <= 0.3) & (0.3 <= dhigh))),
    )
    return out


def coverage_table(seed: int = 20) -> tuple[list[str], dict[tuple[str, str, int], float]]:
    """The markdown table and the cluster intervals' coverage per (metric, spread, size)."""
    rng = np.random.default_rng(seed)
    lines = [
        "| metric | tasks | " + " | ".join(f"{name}: bootstrap / now" for name, _ in SPREADS) + " |",
        "| --- | ---: | " + " | ".join("---:" for _ in SPREADS) + " |",
    ]
    results: dict[tuple[str, str, int], tuple[float, float]] = {}
    for name, spread in SPREADS:
        for tasks in SIZES:
            for metric, cov in _cell(rng, tasks, spread).items():
                results[(metric, name, tasks)] = cov
    labels = {
        "close": "LRS(close) = 0.4",
        "distant": "LRS(distant) = 0.1",
        "difference": "close − distant = 0.3",
    }
    for metric, label in labels.items():
        for tasks in SIZES:
            cells = [results[(metric, name, tasks)] for name, _ in SPREADS]
            lines.append(
                f"| {label} | {tasks} | " + " | ".join(f"{b:.1%} / **{c:.1%}**" for b, c in cells) + " |"
            )
    return lines, {k: v[1] for k, v in results.items()}


@pytest.mark.slow
def test_cluster_intervals_cover_heterogeneous_tasks() -> None:
    lines, now = coverage_table()
    low = {k: v for k, v in now.items() if k[2] >= 20 and v < KNOWN_SHORT.get(k[:2], 0.94)}
    assert not low, f"coverage below 94% at >= 20 tasks: {low}\n" + "\n".join(lines)
    text = DOC.read_text(encoding="utf-8")
    block = "\n".join([BEGIN, *lines, END])
    if os.environ.get("GAUGE_WRITE_COVERAGE"):
        head, rest = text.split(BEGIN, 1)
        DOC.write_text(head + block + rest.split(END, 1)[1], encoding="utf-8")
    else:
        assert block in text, "docs/protocol.md's coverage table is stale; rerun with GAUGE_WRITE_COVERAGE=1"
