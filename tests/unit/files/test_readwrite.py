"""The one atomic writer and the one JSON / JSONL reader every on-disk format goes through."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_gauge.files.readwrite import (
    FileFormatError,
    read_json_object,
    read_jsonl,
    temp_name,
    write_atomic,
)


def test_write_atomic_replaces_the_file_whole_and_leaves_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "out.json"
    write_atomic(path, "first\n")
    write_atomic(path, "second\n")
    assert path.read_text(encoding="utf-8") == "second\n"
    assert sorted(p.name for p in path.parent.iterdir()) == ["out.json"]
    assert str(os.getpid()) in temp_name(path).name and temp_name(path).name.endswith(".tmp")


def test_write_atomic_without_mkdir_refuses_a_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        write_atomic(tmp_path / "missing" / "x.json", "{}", mkdir=False)


def test_read_jsonl_names_the_file_and_line_of_a_bad_row(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text('{"a": 1}\n\n{"b": 2}\n', encoding="utf-8")
    assert read_jsonl(path) == [{"a": 1}, {"b": 2}]
    path.write_text('{"a": 1}\n{"b": \n', encoding="utf-8")
    with pytest.raises(FileFormatError, match=r"rows\.jsonl:2: not valid JSON"):
        read_jsonl(path)
    path.write_text('{"a": 1}\n[1]\n', encoding="utf-8")
    with pytest.raises(FileFormatError, match=r"rows\.jsonl:2: not a JSON object"):
        read_jsonl(path)
    assert read_jsonl(tmp_path / "none.jsonl", missing_ok=True) == []
    with pytest.raises(KeyError, match=r"none\.jsonl: missing"):
        read_jsonl(tmp_path / "none.jsonl", error=KeyError)


def test_read_json_object_says_what_is_wrong_with_the_file(tmp_path: Path) -> None:
    path = tmp_path / "doc.json"
    path.write_text('{"x": [1, 2]}', encoding="utf-8")
    assert read_json_object(path) == {"x": [1, 2]}
    path.write_text("{\n  oops", encoding="utf-8")
    with pytest.raises(FileFormatError, match=r"doc\.json: not valid JSON \(.* at line 2\)"):
        read_json_object(path)
    path.write_text("[1]", encoding="utf-8")
    with pytest.raises(FileFormatError, match=r"doc\.json: not a JSON object"):
        read_json_object(path)
    assert read_json_object(tmp_path / "none.json", missing_ok=True) == {}
    with pytest.raises(FileFormatError, match=r"none\.json: missing"):
        read_json_object(tmp_path / "none.json")
