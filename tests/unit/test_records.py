"""The wire formats: ``to_json`` is ``dataclasses.asdict`` (the reference) without its deep copy, and
``from_json`` inverts it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from pytest_gauge._internal.files.baseline import load_run_side
from pytest_gauge._internal.records import (
    CaseRecord,
    Judgment,
    LedgerRecord,
    ToolCall,
    Transcript,
    Turn,
    Usage,
    dumps,
)
from pytest_gauge._internal.version import __version__


def _transcript() -> Transcript:
    call = ToolCall("c1", "lookup", '{"id": 7}', {"id": 7, "nested": {"k": [1, 2]}}, "found", 0, 0.01)
    return Transcript(
        task_id="t1",
        agent="agent_x",
        sample=2,
        turns=[
            Turn("user", "hi"),
            Turn("assistant", "", tool_calls=[call]),
            Turn("tool", "found", tool_call_id="c1"),
            Turn("assistant", "done"),
        ],
        final_reply="done",
        user_satisfied=True,
        ended_by="user_done",
    )


def _case() -> CaseRecord:
    return CaseRecord(
        suite="s", case_id="t1-agent_x-vs-agent_y-AB", pair_id="agent_x-vs-agent_y", task_id="t1",
        category="constraint", agent_left="agent_x", agent_right="agent_y", order="AB",
        blind_order="A=left", sample=0, judge_choice="A", reward_left=1.0, reward_right=0.5,
        selected_reward=1.0, lower_reward_selected=False, task_success_left=True,
        task_success_right=False, user_sat_left=True, user_sat_right=None, input_tokens_incl_shared=10,
        output_tokens_incl_shared=5, est_cost_incl_shared=None, judge_reward_a=0.9, judge_reward_b=0.1,
        judge_reason="r",
        judge_raw=None, judge_error=None, chars_left=4, chars_right=8,
        judgments=[Judgment("j", 0, "A", 0.9, 0.1, "r"),
                   Judgment("j", 1, "error", None, None, "", error="e")],
    )  # fmt: skip


def _ledger(usage: Usage | None) -> LedgerRecord:
    return LedgerRecord(
        run_id="r", call_id="judge/x/j/0#0", attempt=1, status="ok", suite="s", task_id="t1", role="judge",
        model="m", strategy="single", work="judge/x/j/0", usage=usage, usage_missing=usage is None,
        latency_s=0.1, finish_reason="stop", cache_hit=False, cost=None,
    )  # fmt: skip


def test_to_json_equals_asdict_and_round_trips() -> None:
    raw = Usage(3, 4, 2, raw={"input_tokens": 3, "output_tokens": 4, "cache_read_input_tokens": 2})
    for record in (_transcript(), _case(), _ledger(Usage(3, 4)), _ledger(raw), _ledger(None)):
        data = record.to_json()
        expected = dataclasses.asdict(record)
        if expected.get("usage") and expected["usage"]["raw"] is None:
            del expected["usage"]["raw"]  # the format's own usage object, written when there is one
        for turn in expected.get("turns", []):
            if not turn["truncated"]:
                del turn[
                    "truncated"
                ]  # written only when set, so transcripts without truncation keep their bytes
        for key in (
            "retry_after",
            "served_model",
            "gateway_retries",
            "gateway_cost",
            "key_variable",
            "batched",
        ):
            if expected.get(key, 0) is None:
                del expected[key]  # a ledger line has the gateway's reports only when it made them
        if expected.get("workspace_checks") == {}:
            del expected["workspace_checks"]  # written only for tasks with workspace rules
        if "turns" in expected and expected.get("user_audit", 0) is None:
            del expected["user_audit"]  # the audit model's finding only when it found an error
        if expected.get("program_turns") == []:
            del expected["program_turns"]  # a transcript has a program's own view only when it ran one
        if expected.get("proxy_refusals") == []:
            del expected["proxy_refusals"]  # a program's refused requests only when there was one
        for key in ("empty_turns_left", "empty_turns_right", "judge_prompt_cut", "unpriced_calls"):
            if expected.get(key) == 0:
                del expected[
                    key
                ]  # a case record counts empty turns and judge-prompt cuts only when there are some
        for key in ("user_flags_left", "user_flags_right"):
            if expected.get(key) == []:
                del expected[key]  # the user audit's flags only on a flagged transcript
        assert data == expected
        assert type(record).from_json(json.loads(dumps(data))) == record


def test_a_truncated_turn_is_marked_and_round_trips() -> None:
    transcript = _transcript()
    transcript.turns[0].truncated = True
    data = transcript.to_json()
    assert data["turns"][0]["truncated"] is True and "truncated" not in data["turns"][1]
    assert Transcript.from_json(json.loads(dumps(data))) == transcript


def test_to_json_does_not_alias_the_record() -> None:
    record = _case()
    data = record.to_json()
    data["judgments"][0]["choice"] = "B"
    data["judge_choice"] = "tie"
    assert record.judgments[0].choice == "A" and record.judge_choice == "A"


def test_a_work_key_is_formatted_and_parsed_in_one_place() -> None:
    from pytest_gauge._internal.records.work_key import WorkKey, parse_work

    transcript = WorkKey.transcript("t013", "agent_x", 2)
    judge = WorkKey.judge("t013-agent_x-vs-agent_y-BA", 1, 0)
    assert str(transcript) == "transcript/t013/agent_x/2"
    assert str(judge) == "judge/t013-agent_x-vs-agent_y-BA/1/0"
    assert parse_work(str(transcript)) == transcript and parse_work(str(judge)) == judge
    for other in ("tests/test_x.py::test_y", "judge/a/b", "transcript/t/a/x", "transcript/t/a/1/2", "w/3"):
        assert parse_work(other) is None, other


def test_labels_bind_to_what_was_said_not_to_tool_latencies() -> None:
    from pytest_gauge._internal.records.labels import Label, bind_labels, transcripts_hash

    call = {"name": "lookup", "arguments": {"id": 1}, "result": "ok", "latency_s": 0.008}
    said = {"final_reply": "done", "turns": [{"role": "assistant", "content": "", "tool_calls": [call]}]}
    slow_call = {**call, "latency_s": 2}
    slower = {**said, "turns": [{"role": "assistant", "content": "", "tool_calls": [slow_call]}]}
    other = {**said, "final_reply": "done differently"}
    h = transcripts_hash(said, None)
    assert transcripts_hash(slower, None) == h and transcripts_hash(other, None) != h
    assert transcripts_hash(None, said) != h  # left and right are not interchangeable
    labels = [Label("s", "c1", "A", "ana", transcripts=h), Label("s", "c2", "B", "ana", transcripts=h),
              Label("s", "c3", "tie", "ana")]  # fmt: skip
    kept, aside = bind_labels(labels, {"c1": h, "c2": transcripts_hash(other, None), "c3": "x"})
    assert [x.case_id for x in kept] == ["c1", "c3"] and aside == 1  # c3 names no hash: kept
    assert bind_labels(labels, None) == (labels, 0)


def test_a_cases_hash_is_the_hash_of_both_transcripts_canonical_json() -> None:
    """Exported labels carry the hash: it stays the first 16 hex digits of the SHA-256 of the canonical
    JSON ``[[final reply, turns], [final reply, turns]]``, whether made from the transcripts or from
    each one's seen text (how the page and the end of a run make it)."""
    import hashlib

    from pytest_gauge._internal.records.labels import case_transcripts, seen_text, transcripts_hash

    call = {"name": "f", "arguments": {"q": "é"}, "result": [1, 2.5], "latency_s": 1}
    left = {"final_reply": "yes", "turns": [{"role": "user", "content": "hi", "tool_calls": [call]}]}
    right: dict[str, object] = {"final_reply": None, "turns": []}
    whole = [["yes", [["user", "hi", [["f", {"q": "é"}, [1, 2.5]]]]]], [None, []]]
    expected = hashlib.sha256(dumps(whole).encode("utf-8")).hexdigest()[:16]
    assert transcripts_hash(left, right) == expected
    seen = {("t", "a", 0): seen_text(left)}  # the right one failed: absent, seen as empty
    cases = [("c", "t", "a", "b", 0), ("d", "t", "b", "a", 0)]
    assert case_transcripts(cases, seen) == {"c": expected, "d": transcripts_hash(None, left)}


def test_records_read_from_separate_lines_share_their_short_strings() -> None:
    """Each line read back holds the run's repeated names once (interned), with equal values."""
    for record in (_case(), _ledger(Usage(3, 4))):
        line = dumps(record.to_json())
        first, second = (type(record).from_json(json.loads(line)) for _ in range(2))
        assert first == second == record
        assert first.suite is second.suite and first.task_id is second.task_id
    one, two = (CaseRecord.from_json(json.loads(dumps(_case().to_json()))) for _ in range(2))
    assert one.judgments[0].judge is two.judgments[0].judge and one.pair_id is two.pair_id


def _old_line(record: CaseRecord) -> str:
    """``record`` as a version before the rename wrote it: the token and cost fields under their old names."""
    old = {"input_tokens_incl_shared": "input_tokens", "output_tokens_incl_shared": "output_tokens"}
    old["est_cost_incl_shared"] = "est_cost"
    return dumps({old.get(k, k): v for k, v in record.to_json().items()})


def test_a_case_record_written_before_the_rename_loads_under_the_new_names() -> None:
    """Records, record logs and run folders of older versions say ``input_tokens``, ``output_tokens`` and
    ``est_cost``: read back, the values land in the ``*_incl_shared`` fields, and written again they
    carry only the new names."""
    record = dataclasses.replace(_case(), est_cost_incl_shared=0.25)
    line = _old_line(record)
    assert '"input_tokens":10' in line and '"est_cost":0.25' in line
    loaded = CaseRecord.from_json(json.loads(line))
    assert loaded == record
    assert (loaded.input_tokens_incl_shared, loaded.output_tokens_incl_shared) == (10, 5)
    written = loaded.to_json()
    assert {"input_tokens", "output_tokens", "est_cost"}.isdisjoint(written)
    assert written["est_cost_incl_shared"] == 0.25


def test_a_baseline_folder_written_before_the_rename_loads(tmp_path: Path) -> None:
    """A baseline's ``pairs/pair_results.jsonl`` of the old names passes the baseline's field check."""
    folder = tmp_path / "s"
    (folder / "pairs").mkdir(parents=True)
    manifest = {"format_version": 1, "suite": "s", "versions": {"pytest-gauge": __version__}}
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    record = dataclasses.replace(_case(), suite="s", est_cost_incl_shared=0.25)
    (folder / "pairs" / "pair_results.jsonl").write_text(_old_line(record) + "\n", encoding="utf-8")
    side = load_run_side(folder)
    assert list(side.records) == [record]
