"""``recording.json`` beside cassettes is validated on load: damaged or of the wrong
types, it is refused naming the file and the field; absent, replay goes on without it."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_gauge._internal.files.replay import RecordingError, load_recording


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('{"suites": {"mini": {"models": "x"}}}', "suites.mini.models is str"),
        ('{"suites": {"mini": {"gateway": 3}}}', "suites.mini.gateway is int"),
        ('{"suites": {"mini": ', "damaged"),
        ("\xff garbage", "damaged"),
    ],
)
def test_a_damaged_recording_is_refused_naming_the_file(tmp_path: Path, text: str, says: str) -> None:
    (tmp_path / "recording.json").write_text(text, encoding="latin-1")
    with pytest.raises(RecordingError) as info:
        load_recording(tmp_path, "mini")
    assert "recording.json" in str(info.value) and says in str(info.value)


def test_an_absent_recording_or_suite_is_none(tmp_path: Path) -> None:
    assert load_recording(tmp_path, "mini") is None
    (tmp_path / "recording.json").write_text('{"suites": {"other": {}}}', encoding="utf-8")
    assert load_recording(tmp_path, "mini") is None


def test_a_missing_recording_is_named_when_replay_misses(tmp_path: Path) -> None:
    from pytest_gauge._internal.process.replay import miss_reasons

    (missing,) = miss_reasons(None, {}, 7, {}, str(tmp_path))
    assert f"{tmp_path / 'recording.json'} is missing" in missing and "cassettes export" in missing
    (tmp_path / "recording.json").write_text('{"suites": {"other": {}}}', encoding="utf-8")
    (no_entry,) = miss_reasons(None, {}, 7, {}, str(tmp_path))
    assert "no recording.json entry for this suite" in no_entry
