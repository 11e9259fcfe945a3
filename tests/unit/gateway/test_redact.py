"""The known secrets are read afresh on every response: a change of the environment is seen at once,
although an unchanged environment is not scanned again."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from pytest_gauge._internal.gateway.redact import known_secrets, register_secret


def test_known_secrets_follow_every_change_of_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOME_API_KEY", "sk-first-value-0001")
    assert "sk-first-value-0001" in known_secrets()
    assert known_secrets() == known_secrets()  # unchanged: the same answer
    monkeypatch.setenv("SOME_API_KEY", "sk-second-value-0002")
    found = known_secrets()
    assert "sk-second-value-0002" in found and "sk-first-value-0001" not in found
    monkeypatch.delenv("SOME_API_KEY")
    monkeypatch.setenv("OTHER_AUTH_TOKEN", "tok-third-value-0003")  # same number of variables
    found = known_secrets()
    assert "tok-third-value-0003" in found and "sk-second-value-0002" not in found
    register_secret("registered-value-0004")
    assert "registered-value-0004" in known_secrets()
    assert "given-mapping-0005" in known_secrets({"X_API_KEY": "given-mapping-0005"})


def test_pytests_current_test_variable_alone_does_not_rescan(monkeypatch: pytest.MonkeyPatch) -> None:
    """pytest sets PYTEST_CURRENT_TEST at every phase of every test (while the engine thread redacts
    responses): a change of it alone reuses the last scan; any other change is still seen."""
    from pytest_gauge._internal.gateway import redact

    scans: list[int] = []
    real_scan = redact._scan

    def counted(env: Mapping[str, str]) -> tuple[str, ...]:
        scans.append(1)
        return real_scan(env)

    monkeypatch.setattr(redact, "_scan", counted)
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "t.py::a (setup)")
    monkeypatch.setenv("SOME_API_KEY", "sk-first-value-0001")
    assert "sk-first-value-0001" in known_secrets()
    before = len(scans)
    for phase in ("call", "teardown"):
        monkeypatch.setenv("PYTEST_CURRENT_TEST", f"t.py::a ({phase})")
        assert "sk-first-value-0001" in known_secrets()
    assert len(scans) == before
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "t.py::b (setup)")
    monkeypatch.setenv("SOME_API_KEY", "sk-second-value-0002")
    assert "sk-second-value-0002" in known_secrets() and len(scans) == before + 1
