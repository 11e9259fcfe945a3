"""Path options however they are written: ``--gauge-out``, ``--gauge-cache-dir``, ``--gauge-labels`` and
``--gauge-baseline`` with a space or with ``=``, to a folder that exists or not, inside or outside the
project, give the same outputs with ``-n 0`` and ``-n 2``, or one usage error at the controller before
any worker starts. The mini suite on the simulator (the cheapest run with every output file)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # subprocess runs with xdist workers

Outputs = dict[str, list[str]]


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", *args)


def _outside(pytester: pytest.Pytester, name: str) -> Path:
    """A path outside the project folder (pytester's), not made yet."""
    return pytester.path.parent / f"{pytester.path.name}-outside" / name


@pytest.mark.usefixtures("mini_suite")
def test_space_and_equals_forms_to_new_folders_give_the_same_outputs_with_and_without_workers(
    pytester: pytest.Pytester, read_outputs: Callable[[Path], Outputs]
) -> None:
    """The ordinary first run, written as the README writes options (no test path: the rootdir's suites):
    new folders outside the project with a space (and a labels file with ``=``); under ``-n 2`` the
    controller makes the output folder before its workers read the command line, which once took it for
    a test path ("no tests ran")."""
    labels = _outside(pytester, "labels.jsonl")
    labels.parent.mkdir(parents=True)
    labels.write_text("", encoding="utf-8")
    runs: dict[str, Path] = {}
    for name, workers in (("n0", "0"), ("n2", "2")):
        out, cache = _outside(pytester, f"out-{name}"), _outside(pytester, f"cache-{name}")
        args = ["-n", workers, "--gauge-out", str(out), "--gauge-cache-dir", str(cache)]
        result = _run(pytester, *args, f"--gauge-labels={labels}")
        assert result.ret == 0, result.stdout.str()[-3000:] + result.stderr.str()[-3000:]
        assert any(cache.rglob("*.json")), "the cache went elsewhere"
        runs[name] = out / "mini"
    inside = _run(pytester, "-n", "2", "--gauge-out", "new/inside", "--gauge-cache-dir=new/cache")
    assert inside.ret == 0, inside.stdout.str()[-3000:]
    runs["inside"] = pytester.path / "new" / "inside" / "mini"
    equals = _run(pytester, "-n", "2", f"--gauge-out={_outside(pytester, 'eq')}", "--gauge-cache-dir=eqc")
    assert equals.ret == 0, equals.stdout.str()[-3000:]
    runs["equals"] = _outside(pytester, "eq") / "mini"
    first = read_outputs(runs["n0"])
    for name, folder in runs.items():
        assert read_outputs(folder) == first, name


@pytest.mark.usefixtures("mini_suite")
@pytest.mark.parametrize("workers", ["0", "2"])
@pytest.mark.parametrize("flag", ["--gauge-out", "--gauge-labels", "--gauge-baseline"])
def test_an_existing_path_outside_the_project_with_a_space_is_one_usage_error_at_the_controller(
    pytester: pytest.Pytester, flag: str, workers: str
) -> None:
    """pytest reads such a value as a test path while it looks for its ini file (before any plugin's
    options are known) and loses the project's settings: one line saying to write ``=``, no worker
    started, no traceback."""
    path = _outside(pytester, "given.jsonl" if flag == "--gauge-labels" else "given")
    path.parent.mkdir(parents=True, exist_ok=True)
    if flag == "--gauge-labels":
        path.write_text("", encoding="utf-8")
    else:
        path.mkdir()
    result = _run(pytester, "-n", workers, flag, str(path))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    text = result.stdout.str() + result.stderr.str()
    assert f"write {flag}={path}" in text
    assert "Traceback" not in text and "INTERNALERROR" not in text and "[gw" not in text
