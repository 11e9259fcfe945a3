"""Inputs refused before anything is paid: every bad numeric flag or ini key, and an
output folder that cannot be one, and a damaged baseline stop the run with one line naming the flag (or
the file and line) and no traceback, before the loopback server sees any request."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pytest_gauge.testing import LoopbackServer
from tests.helpers import run_inprocess


@pytest.fixture
def server(mini_suite: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopbackServer]:
    with LoopbackServer() as srv:
        monkeypatch.setenv("TAOTOKEN_API_KEY", "sk-inputs-0123456789")
        monkeypatch.setenv("TAOTOKEN_BASE_URL", srv.base_url)
        yield srv


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--gauge-timeout", "nan"),
        ("--gauge-timeout", "inf"),
        ("--gauge-timeout", "0"),
        ("--gauge-budget-usd", "nan"),
        ("--gauge-budget-usd", "-1"),
        ("--gauge-rpm", "nan"),
        ("--gauge-tpm", "inf"),
        ("--gauge-seed", "-1"),
        ("--gauge-retry-after-cap", "nan"),
        ("--gauge-close-threshold", "nan"),
        ("--gauge-max-timeouts", "-2"),
        ("--gauge-max-concurrency", "0"),
    ],
)
def test_a_bad_number_is_refused_naming_the_flag(
    pytester: pytest.Pytester, server: LoopbackServer, flag: str, value: str
) -> None:
    result = run_inprocess(pytester, "suites", "--gauge-backend", "live", flag, value)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert flag in err and "Traceback" not in err + result.stdout.str()
    assert server.requests_total == 0


@pytest.mark.parametrize("value", ["nan", "inf", "-3"])
def test_a_bad_number_in_the_ini_is_refused_naming_the_key(
    pytester: pytest.Pytester, server: LoopbackServer, value: str
) -> None:
    pytester.makeini(f"[pytest]\ngauge_backend = live\ngauge_budget_usd = {value}\n")
    result = run_inprocess(pytester, "suites")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    text = result.stderr.str() + result.stdout.str()
    assert "gauge_budget_usd" in text and "Traceback" not in text
    assert server.requests_total == 0


@pytest.mark.parametrize("out", ["/dev/null", "a_file/below", "a_file"])
def test_an_output_folder_that_cannot_be_one_is_refused(
    pytester: pytest.Pytester, server: LoopbackServer, out: str
) -> None:
    (pytester.path / "a_file").write_text("x")
    result = run_inprocess(pytester, "suites", "--gauge-backend", "live", "--gauge-out", out)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    text = result.stderr.str() + result.stdout.str()
    assert "--gauge-out" in text and "INTERNALERROR" not in text and "Traceback" not in text
    assert server.requests_total == 0


def _damage_pairs_truncated(out: Path) -> str:
    path = out / "mini" / "pairs" / "pair_results.jsonl"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 40])  # the last line cut in the middle
    last = data.count(b"\n")
    return f"{path}:{last}: not valid JSON"


def _damage_ledger_garbage(out: Path) -> str:
    path = out / "mini" / "agent_runs.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    lines[2] = b"\xff\xfe\x00garbage\x9c\n"
    path.write_bytes(b"".join(lines))
    return f"{path}:3: not UTF-8 text"


def _damage_wrong_type(out: Path) -> str:
    path = out / "mini" / "pairs" / "pair_results.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    row = json.loads(lines[1])
    row["reward_left"] = "high"
    lines[1] = json.dumps(row)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return f"{path}:2: not a case record of this version: field 'reward_left' is str 'high', not float"


def _damage_compact(out: Path) -> str:
    from pytest_gauge._internal.cli import main

    compact = out.parent / "compact"
    assert main(["baseline", "save", "--from", str(out), "--to", str(compact)]) == 0
    path = compact / "mini" / "baseline.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["records"][3]["judgments"] = [{"judge": "j", "repeat": "0"}]
    path.write_text(json.dumps(data), encoding="utf-8")
    shutil.rmtree(out)
    compact.rename(out)
    return f"{out / 'mini' / 'baseline.json'}: records[3]: not a case record of this version: judgments[0]"


@pytest.fixture(scope="module")
def clean_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the undamaged baseline is kept: one sim run of the mini suite per module and process."""
    return tmp_path_factory.mktemp("hostile-baseline") / "base"


def _clean_base(pytester: pytest.Pytester, kept: Path) -> Path:
    """A fresh copy of the undamaged baseline in this test's folder (the run made by the first test that
    needs it, in process; the suite and seed are the same in every test, so is the run)."""
    if not kept.is_dir():
        made = run_inprocess(pytester, "suites", "--gauge-backend", "sim", "--gauge-out", str(kept))
        assert made.ret == 0 and (kept / "mini" / "manifest.json").is_file()
    base = pytester.path / "base"
    shutil.copytree(kept, base)
    return base


@pytest.mark.parametrize(
    "damage", [_damage_pairs_truncated, _damage_ledger_garbage, _damage_wrong_type, _damage_compact]
)
def test_a_damaged_baseline_is_refused_naming_the_file_and_line_before_any_request(
    pytester: pytest.Pytester, server: LoopbackServer, clean_base: Path, damage: Callable[[Path], str]
) -> None:
    """The baseline is read whole at startup (every file the comparison will use, and
    its types), so a damaged one is one line naming the file and line, and nothing is paid."""
    base = _clean_base(pytester, clean_base)
    expected = damage(base)
    result = run_inprocess(pytester, "suites", "--gauge-backend", "live", "--gauge-baseline", str(base))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert expected in err, err
    assert "Traceback" not in err + result.stdout.str() and "INTERNALERROR" not in err
    assert server.requests_total == 0
