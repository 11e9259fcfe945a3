"""Writing a run's HTML reports: ``<suite>/reports/index.html`` per suite and
``OUT_DIR/index.html`` linking them, for the end of a run, ``python -m pytest_gauge report OUT_DIR`` and
``merge``; the suites' outputs are read back from the folder by :mod:`pytest_gauge._internal.files.html`."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ..files.folders import OutFolder, SuiteFolder
from ..files.html import load_suite, suite_folders
from ..files.readwrite import write_atomic, write_lines_atomic
from ..records.html import SuiteOutputs
from ..report.html import SuiteLink, redaction_names, render_index_html, suite_html_pieces, suite_link
from ..run.judge import Redactor

__all__ = ["write_html_pages", "write_html_reports"]


def write_html_reports(out_dir: Path, suites: Iterable[str] | None = None) -> list[Path]:
    """Render ``<suite>/reports/index.html`` for ``suites`` (default: every suite folder in ``out_dir``)
    read back from the folder, and ``out_dir/index.html`` linking them (``report``, ``merge``)."""
    folders = [out_dir / s for s in suites] if suites is not None else suite_folders(out_dir)
    return write_html_pages(out_dir, ((folder, load_suite(folder)) for folder in folders))


def write_html_pages(out_dir: Path, pages: Iterable[tuple[Path, SuiteOutputs]]) -> list[Path]:
    """Render each suite's page from its values (the suite's output folder, its outputs) and
    ``out_dir/index.html`` linking them; returns the files written, the index last."""
    written: list[Path] = []
    links: list[SuiteLink] = []
    for folder, outputs in pages:
        path = SuiteFolder(folder).page
        write_lines_atomic(path, suite_html_pieces(outputs, Redactor(redaction_names(outputs))))
        written.append(path)
        links.append(suite_link(outputs, SuiteFolder(Path(folder.name)).page.as_posix()))
    index = OutFolder(out_dir).page
    write_atomic(index, render_index_html(links))
    written.append(index)
    return written
