"""The record logs workers append to and the controller reads as a stream (files/record_log.py)."""

from __future__ import annotations

import json
from pathlib import Path

from pytest_gauge.files.record_log import RecordLog, read_new_lines


def test_lines_are_read_once_each_and_a_cut_off_last_line_waits_for_its_end(tmp_path: Path) -> None:
    path = tmp_path / "run" / "records-gw0.jsonl"
    log = RecordLog(path)
    assert not path.exists()  # no record, no file
    log.append(json.dumps({"case_id": "a"}))
    log.append(json.dumps({"case_id": "b"}))
    with path.open("a", encoding="utf-8") as fh:
        fh.write('{"case_id": "c"')  # a line still being written (or cut off by a killed worker)
    lines, end = read_new_lines(path, 0)
    assert [d["case_id"] for d in lines] == ["a", "b"]
    assert end[0] == len(path.read_bytes()) - len('{"case_id": "c"')
    with path.open("a", encoding="utf-8") as fh:
        fh.write("}\n")
    log.append(json.dumps({"case_id": "é"}))
    lines, again = read_new_lines(path, end[0])
    assert [d["case_id"] for d in lines] == ["c", "é"] and again[0] == path.stat().st_size
    log.close()
    lines, missing = read_new_lines(tmp_path / "none.jsonl", 0)
    assert list(lines) == [] and missing == [0]
