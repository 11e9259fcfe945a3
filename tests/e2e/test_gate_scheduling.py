"""Gate items under xdist's scheduling by file or group (``--dist loadfile``, ``--dist loadgroup``): three
suites, each with a passing and a failing gate, run on two workers end (no worker waits on a gate with
another file queued behind it), every gate is evaluated once every case is in (the failing one fails,
the passing one passes, none skipped as not evaluated), and the outcomes are those of a run without
xdist."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT

FAILING = "success_rate(agent_x) >= 0.99"
PASSING = "flip_rate <= 1"
SUITES = ("mini", "minib", "minic")
CASES = 5 * 3 * 2


@pytest.fixture
def three_suites(mini_suite: Path) -> Path:
    """The mini suite with two gates, copied twice more (its own folder and module name each); under
    ``--dist loadgroup`` each suite module is one xdist group."""
    gates = f'gates=["{FAILING}", "{PASSING}"],'
    for name in SUITES[1:]:
        shutil.copytree(mini_suite, mini_suite.parent / name)
        (mini_suite.parent / name / "test_mini.py").rename(mini_suite.parent / name / f"test_{name}.py")
    for name in SUITES:
        module = mini_suite.parent / name / f"test_{name}.py"
        text = module.read_text().replace("suite = Suite(", f"suite = Suite({gates}", 1)
        module.write_text(f"{text}\nimport pytest\npytestmark = pytest.mark.xdist_group({name!r})\n")
    return mini_suite.parent.parent


def _pytest(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m pytest`` in ``folder``, in a session of its own: a run that hangs fails at the
    timeout, its workers killed with it, instead of hanging."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST_", "PYTEST_ADDOPTS"))}
    env.pop("PYTEST_CURRENT_TEST", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    argv = [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider", "-rA", *args]
    proc = subprocess.Popen(
        argv, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        out, err = proc.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"pytest {' '.join(args)} did not end in 240 s: {out[-2000:]}")
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _gate_outcomes(stdout: str) -> dict[str, str]:
    """Each gate item's outcome from the ``-rA`` summary (an xdist group's ``@name`` left out)."""
    found = re.findall(r"^(PASSED|FAILED|SKIPPED|ERROR) (\S+::gates\[[^\]]*\])", stdout, re.MULTILINE)
    return {nodeid: outcome for outcome, nodeid in found}


@pytest.mark.slow
@pytest.mark.parametrize("dist", ["loadfile", "loadgroup"])
def test_gates_under_loadfile_and_loadgroup_are_evaluated_with_every_case(
    three_suites: Path, dist: str
) -> None:
    done = _pytest(three_suites, "suites", "-n", "2", "--dist", dist)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out[-3000:]
    assert f"3 failed, {3 * CASES + 3} passed" in out, out[-3000:]
    assert "not evaluated" not in out
    expected = {}
    for name in SUITES:
        module = f"suites/{name}/test_{name}.py"
        expected[f"{module}::gates[{FAILING}]"] = "FAILED"
        expected[f"{module}::gates[{PASSING}]"] = "PASSED"
    assert _gate_outcomes(done.stdout) == expected
    workers = set(re.findall(r"\[(gw\d)\]", done.stdout))
    assert workers == {"gw0", "gw1"} or "2 workers" in done.stdout
