"""Cassettes export, pure: filtered by suite and persisted entries in the store's layout, scrubbed of run
metadata, header and key fields, and refused when an entry holds the key's value."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from pytest_gauge._internal.cli import main
from pytest_gauge._internal.gateway.cassettes import export_cassettes, scrub_entry
from pytest_gauge._internal.gateway.store import Store, content_key

KEY = "sk-cli-test-8d1e77"


NOW = 1_800_000_000.0


def entry(
    suite: str,
    task: str,
    *,
    persist: bool = True,
    created: float = NOW,
    role: str = "agent",
    model: str = "m1",
    work: str | None = None,
    content: str = "hello",
) -> dict[str, Any]:
    """A cache entry in the format Gateway.chat writes."""
    return {
        "format_version": 1,
        "meta": {
            "suite": suite,
            "task_id": task,
            "work": work or f"transcript/{task}/a/0",
            "role": role,
            "model": model,
        },
        "request": {"model": model, "messages": [{"role": "user", "content": content}]},
        "response": {
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
        },
        "persist": persist,
        "run_id": "run-abc",
        "created": created,
    }


def put(cache_dir: Path, value: dict[str, Any]) -> str:
    key = content_key(value["meta"] | {"persist": value["persist"], "created": value["created"]})
    Store(cache_dir / "responses").put(key, value)
    return key


def test_export_filters_by_suite_and_persist_and_keeps_the_store_layout(tmp_path: Path) -> None:
    cache = tmp_path / ".gauge-cache"
    a1 = put(cache, entry("alpha", "t1", role="judge", model="judge-m", work="judgment/t1/x-y"))
    a2 = put(cache, entry("alpha", "t2"))
    put(cache, entry("alpha", "t3", persist=False))
    put(cache, entry("beta", "t1"))
    out_dir = tmp_path / "cassettes"
    result = export_cassettes(cache, "alpha", out_dir, environ={})
    assert sorted(result.exported) == sorted([a1, a2])
    assert result.suites_seen == ("alpha", "beta") and result.refused == ()
    files = sorted(p.relative_to(out_dir).as_posix() for p in out_dir.rglob("*.json"))
    assert files == sorted([*(f"{k[:2]}/{k}.json" for k in (a1, a2)), "recording.json"])
    replay = Store(out_dir)
    for key, task in ((a1, "t1"), (a2, "t2")):
        got = replay.get(key)
        assert got is not None
        expected = entry("alpha", task)
        if task == "t1":
            expected = entry("alpha", "t1", role="judge", model="judge-m", work="judgment/t1/x-y")
        del expected["run_id"], expected["created"]
        assert got == expected
        text = replay.path(key).read_text(encoding="utf-8")
        assert text == json.dumps(expected, sort_keys=True, indent=2, ensure_ascii=False) + "\n"
        assert '"run_id"' not in text and '"created"' not in text
    readme = (out_dir / "README.md").read_text(encoding="utf-8")
    rows = [line for line in readme.splitlines() if line.startswith("- ")]
    assert rows == [
        f"- role=agent model=m1 task=t2 work=transcript/t2/a/0 suite=alpha file={a2[:2]}/{a2}.json",
        f"- role=judge model=judge-m task=t1 work=judgment/t1/x-y suite=alpha file={a1[:2]}/{a1}.json",
    ]


def test_scrub_drops_run_metadata_and_any_header_or_key_field() -> None:
    raw = entry("s", "t") | {"headers": {"Authorization": "Bearer x"}, "api_key": "x"}
    raw["request"] = raw["request"] | {"extra_headers": {"X-Api-Key": "x"}, "Authorization": "x"}
    raw["response"] = raw["response"] | {"x-api-key": "x"}
    clean = scrub_entry(raw)
    assert set(clean) == {"format_version", "meta", "request", "response", "persist"}
    assert set(clean["request"]) == {"model", "messages"}
    assert set(clean["response"]) == {"choices", "usage"}
    # content is never rewritten: only field names decide
    nested = entry("s", "t", content="my headers and api_key talk")
    assert scrub_entry(nested)["request"]["messages"] == nested["request"]["messages"]


def test_export_refuses_an_entry_that_contains_the_key_value(tmp_path: Path) -> None:
    cache = tmp_path / "c"
    leaky = put(cache, entry("s", "t1", content=f"my key is {KEY}"))
    fine = put(cache, entry("s", "t2"))
    result = export_cassettes(cache, "s", tmp_path / "out", environ={"TAOTOKEN_API_KEY": KEY})
    assert result.exported == (fine,) and result.refused == (leaky,)
    assert not Store(tmp_path / "out").path(leaky).exists()
    err = io.StringIO()
    argv = ["cassettes", "export", "--suite", "s", "--to", str(tmp_path / "o2"), "--cache-dir", str(cache)]
    status = main(argv, environ={"TAOTOKEN_API_KEY": KEY}, out=io.StringIO(), err=err)
    assert status == 1 and f"refused {leaky}" in err.getvalue() and KEY not in err.getvalue()


def test_a_cache_of_two_gateways_exports_one_and_names_it_for_replay(tmp_path: Path) -> None:
    old = entry("s", "t1", created=NOW - 100, content="old") | {}
    new = entry("s", "t1", created=NOW, content="new")
    old["meta"] = old["meta"] | {"gateway": "http://old.example/v1"}
    new["meta"] = new["meta"] | {"gateway": "http://new.example/v1"}
    old_key, new_key = put(tmp_path / "cache", old), put(tmp_path / "cache", new)
    result = export_cassettes(
        tmp_path / "cache", "s", tmp_path / "cass", environ={}, out_dir=tmp_path / "none"
    )
    assert result.exported == (new_key,) and result.gateway == "http://new.example/v1"
    assert result.other_gateways == (("http://old.example/v1", 1),)
    recording = json.loads((tmp_path / "cass" / "recording.json").read_text())
    assert recording["suites"]["s"]["gateway"] == "http://new.example/v1"  # not null: replay finds its keys

    chosen = export_cassettes(
        tmp_path / "cache", "s", tmp_path / "cass-old", environ={}, out_dir=tmp_path / "none",
        gateway="http://old.example/v1",
    )  # fmt: skip
    assert chosen.exported == (old_key,)
    err = io.StringIO()
    args = [
        "cassettes",
        "export",
        "--suite",
        "s",
        "--to",
        str(tmp_path / "c3"),
        "--cache-dir",
        str(tmp_path / "cache"),
    ]
    assert main(args, environ={}, out=io.StringIO(), err=err) == 0
    assert (
        "1 entries of suite s were recorded through another gateway (http://old.example/v1)" in err.getvalue()
    )
