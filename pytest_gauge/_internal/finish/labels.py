"""``python -m pytest_gauge labels sample``: each suite's stratified sample of cases to label, written to
``<suite>/labels/sample.jsonl``, and the HTML pages rewritten so their labelling mode offers it first
(docs/protocol.md#human-labels)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ..analysis.label_sample import sample_cases
from ..files.folders import SuiteFolder
from ..files.html import ReportInputError, suite_folders
from ..files.labels import write_sample
from ..files.readwrite import read_json_object, read_jsonl
from ..records import CaseRecord
from .html import write_html_reports

__all__ = ["SuiteSample", "sample_labels"]


@dataclass(frozen=True)
class SuiteSample:
    """One suite's sample: where it was written, the cases drawn per stratum and the suite's cases."""

    suite: str
    path: Path
    drawn: dict[str, int]
    cases: int


def sample_labels(out_dir: Path, n: int, seed: int) -> tuple[list[SuiteSample], list[Path]]:
    """Write every suite's sample of ``n`` cases (seeded) and rewrite the HTML pages; returns the samples
    and the pages written. A folder without suites raises :class:`ReportInputError`."""
    folders = suite_folders(out_dir)
    if not folders:
        raise ReportInputError(f"{out_dir}: no suite outputs here; pass a --gauge-out folder")
    samples: list[SuiteSample] = []
    for folder in folders:
        files = SuiteFolder(folder)
        records = [CaseRecord.from_json(r) for r in read_jsonl(files.pairs, error=ReportInputError)]
        metrics = read_json_object(files.report("metrics.json"), missing_ok=True, error=ReportInputError)
        threshold = float(metrics.get("close_threshold", 0.1))
        sample = sample_cases(records, n, seed=seed, close_threshold=threshold)
        write_sample(files.label_sample, sample)
        drawn = Counter(c.stratum for c in sample)
        samples.append(
            SuiteSample(folder.name, files.label_sample, dict(sorted(drawn.items())), len(records))
        )
    return samples, write_html_reports(out_dir)
