"""A hostile ``tasks.jsonl`` is refused with one line naming the file and the line:
invalid UTF-8, a lone surrogate, deep nesting and a huge line, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_gauge._internal.suite.declare import TaskFileError
from pytest_gauge._internal.suite.tasks import MAX_LINE_CHARS, load_tasks

HEADER = b'{"format_version": 1}\n'
GOOD = (
    b'{"task_id": "t1", "category": "refusal", "task_prompt": "Say hi.",'
    b' "success_criteria": [{"type": "contains_all", "phrases": ["hi"]}]}\n'
)


@pytest.mark.parametrize(
    ("line", "says"),
    [
        (b'{"task_id": "t2", "task_prompt": "caf\xe9"}', "not UTF-8 text at byte 38"),
        (b'{"task_id": "t2", "task_prompt": "\\ud800"}', "lone surrogate (\\ud800)"),
        (b"[" * 100_000 + b"]" * 100_000, "nested more than 64 levels"),
        (b'{"task_id": "t2", "x": ' + b"[" * 70 + b"]" * 70 + b"}", "nested more than 64 levels"),
        (
            b'{"task_id": "t2", "task_prompt": "' + b"a" * (MAX_LINE_CHARS + 1) + b'"}',
            "more than the 1,000,000",
        ),
        (b'{"task_id": "t2", "category": "refusal", "task_id": "t3"}', "the key 'task_id' appears twice"),
    ],
)
def test_a_hostile_line_is_refused_at_its_line(tmp_path: Path, line: bytes, says: str) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_bytes(HEADER + GOOD + line + b"\n")
    with pytest.raises(TaskFileError) as info:
        load_tasks(path)
    message = str(info.value)
    assert says in message and ":3" in message and "tasks.jsonl" in message, message
    assert "\n" not in message.strip()


def test_the_good_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_bytes(HEADER + GOOD)
    assert [t.task_id for t in load_tasks(path)] == ["t1"]
