"""The one atomic writer and the one JSON / JSONL reader every on-disk format goes through."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_gauge._internal.files.readwrite import (
    MAX_LINE_BYTES,
    FileFormatError,
    JsonBoundError,
    loads_bounded,
    read_json_object,
    read_jsonl,
    temp_name,
    write_atomic,
    write_lines_atomic,
)
from pytest_gauge._internal.gateway.store import Store


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


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested more than 64 levels deep"),
        ('{"a": ' + "[" * 65 + "]" * 65 + "}", "nested more than 64 levels deep"),
        ('{"a": 1, "b": {"c": 2, "c": 3}}', "the key 'c' appears twice in one object"),
    ],
)
def test_every_reader_bounds_depth_and_refuses_a_key_twice(tmp_path: Path, text: str, says: str) -> None:
    lines, whole = tmp_path / "x.jsonl", tmp_path / "x.json"
    lines.write_text('{"ok": 1}\n' + text + "\n", encoding="utf-8")
    whole.write_text(text, encoding="utf-8")
    with pytest.raises(FileFormatError, match=rf"x.jsonl:2: {says}"):
        read_jsonl(lines)
    with pytest.raises(FileFormatError, match=rf"x.json: {says}"):
        read_json_object(whole)
    with pytest.raises(JsonBoundError, match=says):
        loads_bounded(text)
    assert loads_bounded('{"a": ' + "[" * 63 + "]" * 63 + "}")  # 64 levels: accepted


def test_sizes_are_bounded_before_the_file_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    path.write_text('{"a": "' + "x" * 2048 + '"}\n', encoding="utf-8")
    with pytest.raises(FileFormatError, match=r"big.jsonl: 0.0 MiB, more than the 0 MiB accepted"):
        read_jsonl(path, max_bytes=1024)
    with pytest.raises(FileFormatError, match="more than the 0 MiB accepted"):
        read_json_object(path, max_bytes=1024)
    long_line = tmp_path / "long.jsonl"
    with long_line.open("w", encoding="utf-8") as fh:
        fh.write('{"a": "' + "x" * (MAX_LINE_BYTES + 1) + '"}\n')
    with pytest.raises(FileFormatError, match=r"long.jsonl:1: the line is longer than the 16 MiB accepted"):
        read_jsonl(long_line)


def test_a_cache_entry_past_the_bounds_is_a_miss_noted_as_unreadable(tmp_path: Path) -> None:
    store = Store(tmp_path)
    for key, text in (
        ("aa" + "0" * 62, "[" * 100_000 + "]" * 100_000),
        ("bb" + "0" * 62, '{"a": 1, "a": 2}'),
    ):
        store.path(key).parent.mkdir(parents=True, exist_ok=True)
        store.path(key).write_text(text, encoding="utf-8")
        assert store.get(key) is None and key in store.unreadable


def test_lines_written_atomically_are_the_joined_text_or_nothing(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "rows.jsonl"
    write_lines_atomic(path, (f'{{"n":{i}}}\n' for i in range(3)))
    assert path.read_text(encoding="utf-8") == '{"n":0}\n{"n":1}\n{"n":2}\n'

    def broken() -> Iterator[str]:
        yield "half\n"
        raise RuntimeError("stopped")

    with pytest.raises(RuntimeError):
        write_lines_atomic(path, broken())
    assert path.read_text(encoding="utf-8") == '{"n":0}\n{"n":1}\n{"n":2}\n'  # the old file, whole
    assert [p.name for p in path.parent.iterdir()] == ["rows.jsonl"]  # no temporary left
