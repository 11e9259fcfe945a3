"""Writing the HTML reports of an output folder: the I/O edge around :mod:`.load` and :mod:`.render`.

Called at the end of every run (for the suites of the run), by ``python -m pytest_gauge report OUT_DIR``
(for every suite found there) and meant for a future ``merge``: each writes ``<suite>/reports/index.html``
per suite and ``OUT_DIR/index.html`` linking them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from .load import ReportInputError, is_suite_folder, load_suite
from .render import SuiteLink, render_index_html, render_suite_html

__all__ = ["INDEX_FILE", "suite_folders", "write_html_reports"]

INDEX_FILE = "index.html"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def suite_folders(out_dir: Path) -> list[Path]:
    """The suite output folders directly under ``out_dir``, by name."""
    if not out_dir.is_dir():
        raise ReportInputError(f"{out_dir}: no such folder; pass the --gauge-out folder of a run")
    return sorted(p for p in out_dir.iterdir() if p.is_dir() and is_suite_folder(p))


def write_html_reports(out_dir: Path, suites: Iterable[str] | None = None) -> list[Path]:
    """Render ``<suite>/reports/index.html`` for ``suites`` (default: every suite folder in ``out_dir``)
    and ``out_dir/index.html`` linking them; returns the files written, the index last."""
    folders = [out_dir / s for s in suites] if suites is not None else suite_folders(out_dir)
    written: list[Path] = []
    links: list[SuiteLink] = []
    for folder in folders:
        outputs = load_suite(folder)
        path = folder / "reports" / INDEX_FILE
        _write(path, render_suite_html(outputs))
        written.append(path)
        links.append(
            SuiteLink(
                name=outputs.name,
                href=f"{folder.name}/reports/{INDEX_FILE}",
                cases=len(outputs.records),
                gates_failed=sum(g.status in ("fail", "inconclusive") for g in outputs.gates),
                gates_total=len(outputs.gates),
                total_cost=outputs.total_cost,
            )
        )
    index = out_dir / INDEX_FILE
    _write(index, render_index_html(links))
    written.append(index)
    return written
