"""Inputs refused before anything is paid (issue 30, point 6): every bad numeric flag or ini key, and an
output folder that cannot be one, stops the run with one line naming the flag and no traceback, before
the loopback server sees any request."""

from __future__ import annotations

from collections.abc import Iterator
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
