"""A check item's id (gate, report snapshot) as its outcome is kept: ``--dist loadgroup`` appends
``@<group>`` to a grouped item's id on the workers, and the outcome is found without it."""

from __future__ import annotations

import pytest

from pytest_gauge.records.checks import is_check_nodeid, without_group


@pytest.mark.parametrize(
    ("nodeid", "plain", "check"),
    [
        ("s/test_m.py::gates[flip_rate <= 1]@grp", "s/test_m.py::gates[flip_rate <= 1]", True),
        ("s/test_m.py::gates[flip_rate <= 1]", "s/test_m.py::gates[flip_rate <= 1]", True),
        ("s/test_m.py::snapshots[mini]@a-b", "s/test_m.py::snapshots[mini]", True),
        ("s/test_m.py::suite::m01-x-vs-y-AB@grp", "s/test_m.py::suite::m01-x-vs-y-AB@grp", False),
        ("s/test_m.py::test_a[x@y]", "s/test_m.py::test_a[x@y]", False),
        ("s/test_m.py::gates[a@b]", "s/test_m.py::gates[a@b]", True),
    ],
)
def test_a_check_id_is_kept_without_an_xdist_group(nodeid: str, plain: str, check: bool) -> None:
    """A ``@`` inside the gate's brackets is the gate's own, not a group."""
    assert without_group(nodeid) == plain
    assert is_check_nodeid(nodeid) is check
