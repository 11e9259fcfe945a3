"""The end of a run is atomic: a Ctrl-C while the outputs are written leaves a suite folder whose
manifest says the run was interrupted (its records and ledger kept), never one that looks finished
without its reports; ``python -m pytest_gauge report`` then writes the missing reports, the same as an
uninterrupted run's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_gauge._internal.cli import main
from pytest_gauge._internal.finish import ending as finish_ending
from pytest_gauge._internal.finish import html as finish_html
from pytest_gauge._internal.finish import outputs as finish_outputs
from pytest_gauge._internal.report.format import without_volatile
from tests.helpers import run_inprocess


def _stop(*_args: object, **_kwargs: object) -> None:
    raise KeyboardInterrupt


def _manifest(out: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads((out / "mini" / "manifest.json").read_text(encoding="utf-8"))
    return data


@pytest.mark.parametrize("where", ["reports", "html"])
def test_a_ctrl_c_while_the_outputs_are_written_leaves_a_folder_marked_interrupted_that_report_completes(
    pytester: pytest.Pytester, mini_suite: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    clean = run_inprocess(pytester, "suites", "--gauge-out", "clean", "--gauge-cache", "off")
    assert clean.ret == 0
    with monkeypatch.context() as mp:
        if where == "reports":  # the Ctrl-C before any report of the suite is written
            mp.setattr(finish_outputs, "report_suite", _stop)
        else:  # after the suite's reports, while the HTML pages are written
            mp.setattr(finish_html, "write_html_pages", _stop)
        with pytest.raises(KeyboardInterrupt):  # pytester raises the run's Ctrl-C again
            run_inprocess(pytester, "suites", "--gauge-out", "cut", "--gauge-cache", "off")
    cut = pytester.path / "cut"
    manifest = _manifest(cut)
    assert "interrupted while the outputs were written" in str(manifest["interrupted"])
    assert manifest["cases_recorded"] == _manifest(pytester.path / "clean")["cases_recorded"]
    for kept in ("pairs/pair_results.jsonl", "agent_runs.jsonl"):
        assert (cut / "mini" / kept).stat().st_size > 0
    assert not (cut / "mini" / "reports" / "index.html").exists()

    assert main(["report", str(cut)]) == 0
    done = _manifest(cut)
    assert "interrupted" not in done and not (cut / "mini" / "reports-pending.json").exists()
    assert {k: v for k, v in done.items() if k not in ("finished_at", "run_id")} == {
        k: v for k, v in _manifest(pytester.path / "clean").items() if k not in ("finished_at", "run_id")
    }
    reports, expected = cut / "mini" / "reports", pytester.path / "clean" / "mini" / "reports"
    assert sorted(p.name for p in reports.iterdir()) == sorted(p.name for p in expected.iterdir())
    for path in expected.iterdir():
        if path.suffix in (".md", ".json", ".svg"):
            json_doc = path.suffix == ".json"  # latencies are volatile
            made, meant = ((reports / path.name).read_text("utf-8"), path.read_text("utf-8"))
            assert without_volatile(made, json_doc) == without_volatile(meant, json_doc), path.name


def test_an_uninterrupted_run_leaves_nothing_pending(pytester: pytest.Pytester, mini_suite: Path) -> None:
    assert run_inprocess(pytester, "suites", "--gauge-out", "out").ret == 0
    assert "interrupted" not in _manifest(pytester.path / "out")
    assert not (pytester.path / "out" / "mini" / "reports-pending.json").exists()


def test_the_next_run_writes_the_missing_reports_first_and_says_so(
    pytester: pytest.Pytester, mini_suite: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run into a ``--gauge-out`` folder holding a run stopped before its reports writes that run's
    reports before anything else (here the new run's own end is switched off, so every report found came
    from the earlier run's kept outputs) and says so in one line."""
    with monkeypatch.context() as mp:
        mp.setattr(finish_outputs, "report_suite", _stop)
        with pytest.raises(KeyboardInterrupt):
            run_inprocess(pytester, "suites", "--gauge-out", "cut", "--gauge-cache", "off")
    cut = pytester.path / "cut"
    stopped_run = _manifest(cut)["run_id"]
    assert (cut / "mini" / "reports-pending.json").exists()

    monkeypatch.setattr(finish_ending, "finish_run", lambda *_a, **_k: [])
    result = run_inprocess(pytester, "suites", "--gauge-out", "cut", "--gauge-cache", "off")
    said = [line for line in result.outlines if "stopped before its reports" in line]
    assert said == [
        f"pytest-gauge: an earlier run in {cut} stopped before its reports: wrote them first (mini)"
    ]
    done = _manifest(cut)
    assert done["run_id"] == stopped_run and "interrupted" not in done
    assert not (cut / "mini" / "reports-pending.json").exists()
    assert (cut / "mini" / "reports" / "pairwise_table.md").is_file()

    again = run_inprocess(pytester, "suites", "--gauge-out", "other", "--gauge-cache", "off")
    assert not [line for line in again.outlines if "stopped before its reports" in line]


def test_a_pending_file_that_cannot_be_read_does_not_stop_the_next_run(
    pytester: pytest.Pytester, mini_suite: Path
) -> None:
    (pytester.path / "out" / "mini").mkdir(parents=True)
    (pytester.path / "out" / "mini" / "reports-pending.json").write_text("{not json", encoding="utf-8")
    result = run_inprocess(pytester, "suites", "--gauge-out", "out", "--gauge-cache", "off")
    said = [line for line in result.outlines if "stopped before its reports" in line]
    assert len(said) == 1 and said[0].startswith("pytest-gauge warning:") and "tries again" in said[0], said
    assert result.ret == 0 and "interrupted" not in _manifest(pytester.path / "out")
