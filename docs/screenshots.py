"""Screenshots of the HTML report for the README: the overview and one case view of the example suite.

    python docs/screenshots.py            # writes docs/report-overview.png and docs/report-case.png

Runs ``eval_suites/example`` on the offline simulator (the repository's ini: seed and prices) into a
temporary output folder, opens its ``reports/index.html`` from disk in headless Chromium (Debian's
``chromium`` and ``chromium-driver``, selenium from the test extra) and saves two PNGs. Same seed, same
report; the pixels depend on the installed fonts.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from pytest_gauge.testing.browser import chromium

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def run_example(out: Path) -> Path:
    """Run the example suite into ``out``; the path of its HTML report."""
    cmd = [sys.executable, "-m", "pytest", "eval_suites/example", "-q", "-n", "0", "-p", "no:cacheprovider"]
    subprocess.run([*cmd, "--gauge-out", str(out)], cwd=ROOT, check=False, capture_output=True, timeout=600)
    page = out / "example" / "reports" / "index.html"
    if not page.is_file():
        raise SystemExit(f"the example run wrote no {page}")
    return page


def pick_case(out: Path) -> int:
    """A telling case: a tool-call task where the judge chose the lower reward (else the first case)."""
    rows = [json.loads(x) for x in (out / "example" / "pairs" / "pair_results.jsonl").open(encoding="utf-8")]
    for i, r in enumerate(rows):
        if r["category"] == "tool_call" and r["lower_reward_selected"]:
            return i
    return 0


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="gauge-shots-") as tmp:
        out = Path(tmp) / "gauge-out"
        page = run_example(out)
        with chromium(1280, 1000) as driver:
            driver.get(page.as_uri())
            driver.save_screenshot(str(DOCS / "report-overview.png"))
            driver.set_window_size(1280, 1500)  # the case view down to the rules and the verdict
            driver.get(page.as_uri() + f"#case={pick_case(out)}")
            driver.save_screenshot(str(DOCS / "report-case.png"))
    for name in ("report-overview.png", "report-case.png"):
        print(f"wrote {DOCS / name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
