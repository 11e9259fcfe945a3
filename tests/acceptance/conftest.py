"""Setup that in-process plugin runs need, for this folder's tests only (unit tests do not pay it)."""

from __future__ import annotations

import pytest

from tests.helpers import import_everything_runs_use


@pytest.fixture(scope="session", autouse=True)
def _everything_runs_use_imported() -> None:
    """Every module of pytest_gauge and the HTTP stack imported before any test of this folder, so that
    no ``pytester`` snapshot of ``sys.modules`` drops them (tests/helpers.py says why)."""
    import_everything_runs_use()
