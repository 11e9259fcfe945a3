"""One set of options per run: the controller resolves GaugeOptions once and hands them
to every xdist worker; a ``--gauge-*`` path written with a space that made pytest miss the project's ini
stops the run before any request, with ``-n 0`` and ``-n 2`` alike."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_gauge._internal.options import GaugeOptions, nearest_config_file
from pytest_gauge._internal.process.workers import OPTIONS_KEY, controller_paths, worker_options
from tests.helpers import read_jsonl, run_inprocess

ARGS = ("--gauge-cache", "off")  # run_inprocess adds -p no:cacheprovider -p no:randomly


def test_options_travel_to_workers_whole() -> None:
    opts = GaugeOptions(
        seed=11,
        gates=("flip_rate <= 0.3",),
        prices=(("m", 1.0, 2.0, None, "ini gauge_prices"),),
        budget_usd=3.0,
    )
    wire = json.loads(json.dumps(controller_paths(opts)))  # what execnet carries: plain values
    own = GaugeOptions(seed=11, gates=opts.gates, prices=opts.prices, budget_usd=3.0, out_dir="elsewhere")
    assert worker_options(own, wire) == opts  # the controller's folders too
    with pytest.raises(pytest.UsageError, match=r"worker gw1 reads other settings.*seed 0 \(controller 11\)"):
        other = GaugeOptions(gates=opts.gates, prices=opts.prices, budget_usd=3.0)
        worker_options(other, {**wire, "workerid": "gw1"})
    assert OPTIONS_KEY in wire


def test_the_nearest_config_file_is_pytests(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (tmp_path / "sub").mkdir()
    assert nearest_config_file(tmp_path / "sub") is None  # a pyproject.toml without pytest settings
    (tmp_path / "setup.cfg").write_text("[tool:pytest]\naddopts = -q\n")
    assert nearest_config_file(tmp_path / "sub") == tmp_path / "setup.cfg"
    (tmp_path / "sub" / "pytest.ini").write_text("[pytest]\n")
    assert nearest_config_file(tmp_path / "sub") == tmp_path / "sub" / "pytest.ini"


@pytest.mark.slow
@pytest.mark.parametrize("flag", ["--gauge-out", "--gauge-baseline"])
@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_space_form_path_that_hides_the_ini_stops_before_any_request(
    pytester: pytest.Pytester,
    mini_suite: Path,
    tmp_path_factory: pytest.TempPathFactory,
    flag: str,
    workers: str,
) -> None:
    outside = tmp_path_factory.mktemp("outside")
    result = run_inprocess(pytester, *ARGS, "-n", workers, flag, str(outside))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"*{flag} {outside}: pytest took * for a test path*found no ini file instead of *tox.ini*"
         f"write {flag}={outside}, or give -c *"]
    )  # fmt: skip
    assert list(outside.iterdir()) == []
    assert not (pytester.path / "gauge-out").exists()


@pytest.mark.slow
def test_the_equals_form_reads_the_ini_in_every_process(
    pytester: pytest.Pytester,
    mini_suite: Path,
    tmp_path_factory: pytest.TempPathFactory,
    read_outputs: Callable[[Path], dict[str, list[str]]],
) -> None:
    outside = tmp_path_factory.mktemp("outside")
    for workers in ("0", "2"):
        result = run_inprocess(pytester, *ARGS, "-n", workers, f"--gauge-out={outside}/n{workers}")
        result.assert_outcomes(passed=30)
    one, two = (outside / f"n{n}" / "mini" for n in ("0", "2"))
    assert read_outputs(one) == read_outputs(two)
    assert json.loads((two / "manifest.json").read_text())["seed"] == 7  # the ini's seed, not 0
    assert read_jsonl(one / "agent_runs.jsonl")


WORKER_READS_ANOTHER_SEED = """
import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    if hasattr(config, "workerinput"):  # a worker whose own reading of the settings differs
        config.option.gauge_seed = 99
"""


@pytest.mark.slow
def test_a_worker_that_resolves_other_results_refuses_to_start(
    pytester: pytest.Pytester, mini_suite: Path
) -> None:
    pytester.makeconftest(WORKER_READS_ANOTHER_SEED)
    # no replacement workers: xdist would start 8 more, each refusing the same way
    result = run_inprocess(pytester, *ARGS, "-n", "2", "--max-worker-restart", "0")
    assert result.ret != 0
    assert "reads other settings than the controller: seed 99 (controller 7)" in result.stdout.str() + (
        result.stderr.str()
    )
    assert not (pytester.path / "gauge-out" / "mini" / "pairs" / "pair_results.jsonl").exists()
