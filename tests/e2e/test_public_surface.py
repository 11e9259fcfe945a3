"""The fixtures and markers the plugin gives every pytest run are frozen (the rest of the public surface:
tests/unit/test_public_api.py): read from pytest's own ``--fixtures`` and ``--markers`` listings."""

from __future__ import annotations

import re

import pytest

FIXTURES = ["gauge_client", "gauge_judge", "gauge_ledger", "gauge_options", "gauge_proxy"]
MARKERS = ["gauge_budget", "gauge_case", "gauge_gate"]


def test_the_fixtures_and_markers_are_frozen(pytester: pytest.Pytester) -> None:
    fixtures = pytester.runpytest_inprocess("--fixtures", "-p", "no:randomly")
    assert fixtures.ret == 0, fixtures.stdout.str()[-2000:]
    found = re.findall(r"^(gauge_\w+)(?: \[\w+ scope\])? -- ", fixtures.stdout.str(), re.M)
    assert sorted(set(found)) == FIXTURES
    markers = pytester.runpytest_inprocess("--markers", "-p", "no:randomly")
    assert markers.ret == 0, markers.stdout.str()[-2000:]
    assert sorted(set(re.findall(r"^@pytest\.mark\.(gauge_\w+)", markers.stdout.str(), re.M))) == MARKERS
