"""The run's work store: entries appended to one log per process and read back by every store of the
folder (complete lines only, a damaged one unreadable), claims as locks on one file per claimed key
that exclude other processes and this one, and vanish with the process that held them."""

from __future__ import annotations

import gc
import os
import select
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_gauge.files.work_store import CLAIMS, WorkStore
from pytest_gauge.gateway.store import content_key
from tests.helpers import ROOT

KEY = content_key(["transcript", "s", "t1", "a", 0])
OTHER = content_key(["transcript", "s", "t1", "b", 0])

# A second process holding a claim over the folder: it takes the claim, says "held" (or "busy"),
# then obeys one line at a time: "put" writes an entry, "unlock" gives the claim back, "exit" ends.
HOLDER = textwrap.dedent(
    """
    import sys
    from pytest_gauge.files.work_store import WorkStore
    store = WorkStore(sys.argv[1], "gw9")
    token = store.try_lock(sys.argv[2])
    print("busy" if token is None else "held", flush=True)
    for line in sys.stdin:
        if line.strip() == "put":
            store.put(sys.argv[2], {"by": "holder"})
        elif line.strip() == "unlock" and token is not None:
            store.unlock(token)
        elif line.strip() == "exit":
            break
        print("ok", flush=True)
    """
)


class Holder:
    """The second process, driven line by line; every wait for its answer is bounded."""

    def __init__(self, folder: Path, key: str) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(folder), key],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.first = self.answer()

    def answer(self, timeout: float = 30.0) -> str:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        assert ready, "the holder process did not answer"
        return self.proc.stdout.readline().strip()

    def say(self, line: str) -> str:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self.answer()

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(30)


@pytest.fixture
def holder_of(tmp_path: Path) -> Iterator[type[Holder]]:
    started: list[Holder] = []

    class Started(Holder):
        def __init__(self, folder: Path, key: str) -> None:
            super().__init__(folder, key)
            started.append(self)

    yield Started
    for h in started:
        if h.proc.poll() is None:
            h.kill()
        for pipe in (h.proc.stdin, h.proc.stdout):
            if pipe is not None:
                pipe.close()


def _log(folder: Path, name: str = "gw5-99.log") -> Path:
    """A log as another process would have written it."""
    folder.mkdir(parents=True, exist_ok=True)
    return folder / name


def test_two_stores_over_one_folder_see_each_others_entries_and_create_no_file_per_entry(
    tmp_path: Path,
) -> None:
    one, two = WorkStore(tmp_path / "work", "gw0"), WorkStore(tmp_path / "work", "gw0")
    assert one.get(KEY) is None
    one.put(KEY, {"n": 1, "text": "é\n"})
    two.put(OTHER, {"n": 2})
    assert two.get(KEY) == {"n": 1, "text": "é\n"} and one.get(OTHER) == {"n": 2}
    assert WorkStore(tmp_path / "work").get(KEY) == {"n": 1, "text": "é\n"}
    for i in range(50):
        one.put(content_key(i), {"i": i})
    assert [p.name for p in (tmp_path / "work").iterdir()] == [f"gw0-{os.getpid()}.log"]
    assert WorkStore(tmp_path / "work").get(content_key(49)) == {"i": 49}


def test_entries_of_a_log_that_appears_later_are_found(tmp_path: Path) -> None:
    store = WorkStore(tmp_path / "work")
    store.put(OTHER, {"n": 2})
    assert store.get(KEY) is None
    _log(tmp_path / "work").write_bytes(f'{KEY} {{"n":1}}\n'.encode())
    assert store.get(KEY) == {"n": 1}


def test_a_partial_last_line_is_ignored_until_it_is_complete(tmp_path: Path) -> None:
    log = _log(tmp_path / "work")
    log.write_bytes(f'{OTHER} {{"n":2}}\n{KEY} {{"n":'.encode())
    store = WorkStore(tmp_path / "work")
    assert store.get(OTHER) == {"n": 2}
    assert store.get(KEY) is None and KEY not in store.unreadable
    with log.open("ab") as fh:
        fh.write(b"1}")
    assert store.get(KEY) is None
    with log.open("ab") as fh:
        fh.write(b"\n")
    assert store.get(KEY) == {"n": 1}


def test_a_line_longer_than_a_read_is_read_whole(tmp_path: Path) -> None:
    big = {"text": "x" * (3 << 20)}
    WorkStore(tmp_path / "work").put(KEY, big)
    gc.collect()  # a fresh process-wide reader of the folder
    assert WorkStore(tmp_path / "work").get(KEY) == big


def test_a_damaged_line_is_unreadable_until_a_whole_entry_follows(tmp_path: Path) -> None:
    log = _log(tmp_path / "work")
    log.write_bytes(f"{KEY} {{not json\n{OTHER} [1]\nno-separator\n".encode())
    store = WorkStore(tmp_path / "work")
    assert store.get(KEY) is None and store.get(OTHER) is None
    assert store.unreadable == {KEY, OTHER}
    with log.open("ab") as fh:
        fh.write(f'{KEY} {{"n":1}}\n'.encode())
    assert store.get(KEY) == {"n": 1}
    assert store.unreadable == {OTHER}


def test_a_process_cannot_claim_a_key_it_holds(tmp_path: Path) -> None:
    one, two = WorkStore(tmp_path / "work"), WorkStore(tmp_path / "work")
    token = one.try_lock(KEY)
    assert token is not None
    assert one.try_lock(KEY) is None and two.try_lock(KEY) is None
    other = two.try_lock(OTHER)
    assert other is not None
    one.unlock(token)
    again = two.try_lock(KEY)
    assert again is not None
    two.unlock(again)
    two.unlock(other)
    assert [p.name for p in (tmp_path / "work").iterdir()] == [CLAIMS]
    assert sorted(p.name for p in (tmp_path / "work" / CLAIMS).iterdir()) == sorted(
        [KEY + ".lock", OTHER + ".lock"]
    )


def test_any_key_claims_a_file_of_a_safe_name(tmp_path: Path) -> None:
    """A key that is no hex digest (a path's separators, dots) claims a file named by its hash, inside
    the claims folder; two such keys claim apart."""
    store = WorkStore(tmp_path / "work")
    odd, other = store.try_lock("../../x y/\\z"), store.try_lock("..")
    assert odd is not None and other is not None
    assert store.try_lock("../../x y/\\z") is None
    names = [p.name for p in (tmp_path / "work" / CLAIMS).iterdir()]
    assert len(names) == 2 and all(len(n) == len("0" * 64 + ".lock") for n in names)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["work"]
    store.unlock(odd)
    store.unlock(other)
    store.unlock(other)  # a token given back twice: the second time nothing happens


def test_claims_exclude_other_processes_and_a_release_frees_them(
    tmp_path: Path, holder_of: type[Holder]
) -> None:
    folder = tmp_path / "work"
    mine = WorkStore(folder)
    token = mine.try_lock(KEY)
    assert token is not None
    assert holder_of(folder, KEY).first == "busy"
    mine.unlock(token)
    holder = holder_of(folder, KEY)
    assert holder.first == "held"
    assert mine.try_lock(KEY) is None
    other = mine.try_lock(OTHER)  # another key's claim is free
    assert other is not None
    assert holder.say("put") == "ok" and holder.say("unlock") == "ok"
    assert mine.get(KEY) == {"by": "holder"}  # written before the release: seen after it
    token = mine.try_lock(KEY)
    assert token is not None
    mine.unlock(token)
    mine.unlock(other)


def test_a_claim_vanishes_with_the_process_that_held_it(tmp_path: Path, holder_of: type[Holder]) -> None:
    folder = tmp_path / "work"
    holder = holder_of(folder, KEY)
    assert holder.first == "held"
    assert WorkStore(folder).try_lock(KEY) is None
    holder.kill()
    token = WorkStore(folder).try_lock(KEY)
    assert token is not None


def test_a_claim_outlives_the_other_stores_of_its_folder(tmp_path: Path, holder_of: type[Holder]) -> None:
    """A store that goes away must not close the descriptor a claim of another store is on."""
    folder = tmp_path / "work"
    keeper = WorkStore(folder)
    token = keeper.try_lock(KEY)
    assert token is not None
    passing = WorkStore(folder)
    assert passing.try_lock(OTHER) is not None
    del passing
    gc.collect()
    assert holder_of(folder, KEY).first == "busy"
    keeper.unlock(token)


def test_refresh_says_whether_the_logs_gained_an_entry(tmp_path: Path) -> None:
    store = WorkStore(tmp_path / "work", "gw0")
    assert not store.refresh()
    _log(tmp_path / "work").write_bytes(f'{KEY} {{"by": "gw5"}}\n'.encode())
    assert store.refresh()
    assert not store.refresh()  # nothing new since
    assert store.get(KEY) == {"by": "gw5"}
