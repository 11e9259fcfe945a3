"""The HTML report at 5,000 cases: file size, Python render time and first render in Chromium.

Run: ``python benchmarks/bench_html_report.py`` (about a minute). Runs ``eval_suites/example`` on the
simulator (264 cases), scales its outputs to at least ``--cases`` (5,000) by repeating every task under a
new id (``<task>-rNN``: its transcripts, cases, ledger lines, flip groups and gate drivers, renamed
together), renders ``reports/index.html`` from them, and opens it from disk in headless Chromium
(``pytest_gauge.testing.browser``). Prints the file size, the render time in Python, the first render
in the browser (navigation start to the end of the page's first render: overview and the first 500 case
rows, its ``gauge-ready`` mark; and the first contentful paint, which is the static header), and how
long a filter, a sort and opening a case take at that size; then the same at ``--big-cases`` (30,000),
where the page carries its transcripts and ledger gzipped. Exits 1 when the file is over 30 MB (over
15 MB at 30,000 cases), the render in Python at 5,000 cases over 0.5 s (the first render of the process,
as a run renders once) or the first render in the browser over 2 s (best of 3) at either size.
"""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_gauge.files.html import load_suite
from pytest_gauge.report.html import SuiteOutputs, redaction_names, render_suite_html
from pytest_gauge.run.judge import Redactor
from pytest_gauge.testing.browser import chromium

ROOT = Path(__file__).resolve().parents[1]
MAX_BYTES = 30_000_000
MAX_BIG_BYTES = 15_000_000  # the page at 30,000 cases (--big-cases)
MAX_FIRST_RENDER_MS = 2000.0
MAX_RENDER_MS = 500.0  # the page at 5,000 cases rendered in Python in at most 0.5 s
REPEATS = 3


def _renamed(text: str, task: str, new: str) -> str:
    return text.replace(task, new, 1)


def _replica(out: SuiteOutputs, k: int) -> dict[str, list[Any]]:
    """Every task-bound part of ``out`` with each task id ``t`` renamed ``t-rKK``."""
    new = {t.task_id: f"{t.task_id}-r{k:02d}" for t in out.tasks}

    def ren(text: str, task: str) -> str:
        return _renamed(text, task, new[task])

    return {
        "tasks": [dataclasses.replace(t, task_id=new[t.task_id]) for t in out.tasks],
        "records": [
            dataclasses.replace(r, task_id=new[r.task_id], case_id=ren(r.case_id, r.task_id))
            for r in out.records
        ],
        "transcripts": [
            dataclasses.replace(
                t,
                task_id=new[t.task_id],
                transcript=dataclasses.replace(t.transcript, task_id=new[t.task_id])
                if t.transcript
                else None,
            )
            for t in out.transcripts
        ],
        "ledger": [
            dataclasses.replace(
                x, task_id=new[x.task_id], work=ren(x.work, x.task_id), call_id=ren(x.call_id, x.task_id)
            )
            for x in out.ledger
            if x.task_id in new
        ],
        "flipped": [(new[task], pair, sample) for task, pair, sample in out.flipped],
    }


def _rename_driver(driver: str, new: dict[str, str]) -> str:
    for task in sorted(new, key=len, reverse=True):
        if driver.startswith(task):
            return new[task] + driver[len(task) :]
    return driver


def scale(out: SuiteOutputs, cases: int) -> SuiteOutputs:
    """``out`` repeated until it has at least ``cases`` cases."""
    copies = -(-cases // len(out.records))
    parts = [_replica(out, k) for k in range(copies)]
    merged = {key: [x for p in parts for x in p[key]] for key in parts[0]}
    gates = tuple(
        dataclasses.replace(
            g,
            drivers=tuple(
                _rename_driver(d, {t.task_id: f"{t.task_id}-r{k:02d}" for t in out.tasks})
                for k in range(copies)
                for d in g.drivers
            ),
            driver_cases=tuple(
                _rename_driver(c, {t.task_id: f"{t.task_id}-r{k:02d}" for t in out.tasks})
                for k in range(copies)
                for c in g.driver_cases
            ),
        )
        for g in out.gates
    )
    return dataclasses.replace(
        out,
        tasks=tuple(merged["tasks"]),
        records=tuple(merged["records"]),
        transcripts=tuple(merged["transcripts"]),
        ledger=tuple(merged["ledger"]),
        flipped=tuple(merged["flipped"]),
        gates=gates,
    )


_TIMINGS = """
const ready = performance.getEntriesByName('gauge-ready')[0];
const paint = performance.getEntriesByName('first-contentful-paint')[0];
return [ready ? ready.startTime : null, paint ? paint.startTime : null,
        document.querySelectorAll('#case-rows tr').length];
"""
_ACTION = "const t0 = performance.now(); {} return performance.now() - t0;"


def _wait_ready(driver: Any, timeout: float = 20.0) -> None:
    """Until the page's first render is done: a large page inflates its bulk block first, after the load
    event the driver waits for."""
    end = time.perf_counter() + timeout
    while time.perf_counter() < end:
        if driver.execute_script("return document.documentElement.dataset.ready === '1';"):
            return
        time.sleep(0.05)


def browser_figures(page: Path) -> dict[str, float]:
    """Best-of-``REPEATS`` first render and paint, then filter, sort and case-open times (ms)."""
    best: dict[str, float] = {}
    with chromium() as driver:
        for _ in range(REPEATS):
            driver.get(page.as_uri())
            _wait_ready(driver)
            ready, paint, rows = driver.execute_script(_TIMINGS)
            if ready is None or rows == 0:
                raise SystemExit("the page did not render (no gauge-ready mark or no case rows)")
            best["first render (gauge-ready)"] = min(best.get("first render (gauge-ready)", 1e9), ready)
            if paint is not None:
                best["first paint (header)"] = min(best.get("first paint (header)", 1e9), paint)
        actions = {
            "filter (LRS marker)": "document.getElementById('f-lrs').click();",
            "sort by tokens": "document.querySelectorAll('#case-table thead button')[9].click();",
            "open a case": "document.querySelector('#case-rows tr').click();",
        }
        for name, js in actions.items():
            best[name] = float(driver.execute_script(_ACTION.format(js)))
        logs = driver.get_log("browser")  # type: ignore[no-untyped-call, unused-ignore]  # untyped in selenium 4.51
        errors = [e for e in logs if e["level"] == "SEVERE"]
        if errors:
            raise SystemExit(f"console errors: {errors}")
    return best


def _render(outputs: SuiteOutputs, page: Path) -> tuple[float, int]:
    """Render ``outputs`` to ``page``: seconds in Python and the file's bytes."""
    start = time.perf_counter()
    html = render_suite_html(outputs, Redactor(redaction_names(outputs)))
    render_s = time.perf_counter() - start
    page.write_text(html, encoding="utf-8")
    return render_s, page.stat().st_size


def _figures(
    label: str, outputs: SuiteOutputs, render_s: float, size: int, figures: dict[str, float]
) -> None:
    counts = (len(outputs.records), len(outputs.transcripts), len(outputs.ledger))
    print(f"{label}: cases {counts[0]}, transcripts {counts[1]}, ledger lines {counts[2]}")
    print(f"  file size              {size / 1e6:8.2f} MB")
    print(f"  render in Python       {render_s * 1000:8.0f} ms")
    for name, ms in figures.items():
        print(f"  {name:<22} {ms:8.0f} ms")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=5000, help="scale the example suite to this many cases")
    parser.add_argument(
        "--big-cases",
        type=int,
        default=30000,
        help="the large page's cases (file size and first render in the browser); 0: skip it",
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="gauge-bench-html-") as tmp:
        out_dir = Path(tmp) / "gauge-out"
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            "eval_suites/example",
            "-q",
            "-n",
            "0",
            "-p",
            "no:cacheprovider",
        ]
        subprocess.run([*cmd, "--gauge-out", str(out_dir)], cwd=ROOT, capture_output=True, check=False)
        example = load_suite(out_dir / "example")
        outputs = scale(example, args.cases)
        render_s, size = _render(outputs, Path(tmp) / "index.html")
        figures = browser_figures(Path(tmp) / "index.html")
        _figures("page", outputs, render_s, size, figures)
        ok = size < MAX_BYTES and render_s * 1000 < MAX_RENDER_MS
        ok = ok and figures["first render (gauge-ready)"] < MAX_FIRST_RENDER_MS
        print(f"  targets: < {MAX_BYTES / 1e6:.0f} MB, < {MAX_RENDER_MS:.0f} ms in Python, first render"
              f" < {MAX_FIRST_RENDER_MS:.0f} ms")  # fmt: skip
        if args.big_cases:
            del outputs
            big = scale(example, args.big_cases)
            big_s, big_size = _render(big, Path(tmp) / "big.html")
            big_figures = browser_figures(Path(tmp) / "big.html")
            _figures("large page", big, big_s, big_size, big_figures)
            ok = ok and big_size <= MAX_BIG_BYTES
            ok = ok and big_figures["first render (gauge-ready)"] < MAX_FIRST_RENDER_MS
            print(f"  targets: <= {MAX_BIG_BYTES / 1e6:.0f} MB, first render < {MAX_FIRST_RENDER_MS:.0f} ms")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
