"""A program's proxy route holds it to what the suite gave it (docs/protocol.md#route-policy): through the
official SDKs another model, too many output tokens or choices get a 403 in the format's error shape and
never reach the gateway; and in a run on the simulator a program agent that asks for another model with
``n=3, max_tokens=5000`` is refused (a ``refused`` ledger line, a note in its transcript) while its own
model's calls still work."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from pytest_gauge._internal.gateway.proxy import RecordingProxy
from pytest_gauge._internal.gateway.route_policy import route_policy
from pytest_gauge._internal.gateway.wire import WireFormat
from tests.e2e.test_proxy import CTX, FakeCalls, _anthropic, _openai, proxy  # noqa: F401 (fixture)
from tests.helpers import read_jsonl, run_inprocess
from tests.sdks import sdk_http

POLICY = route_policy(("m",), max_tokens=1000)
ASK = [{"role": "user", "content": "How long for a refund?"}]


class RefusingCalls(FakeCalls):
    """:class:`FakeCalls` that also keeps what the route refused (the proxy's ``Refusals``)."""

    def __init__(self) -> None:
        super().__init__()
        self.refusals: list[tuple[int, str, str]] = []

    def refused(self, seq: int, role: str, model: str, fmt: WireFormat, reason: str) -> None:
        self.refusals.append((seq, model, fmt.api))


def test_the_sdks_get_a_403_for_what_the_route_was_not_given(proxy: RecordingProxy) -> None:  # noqa: F811
    calls = RefusingCalls()
    route = proxy.register(CTX, calls=calls, policy=POLICY)
    client = _openai(route)
    for ask in (
        {"model": "other"},
        {"model": "m", "n": 3},
        {"model": "m", "max_tokens": 5000},
    ):
        with pytest.raises(openai.PermissionDeniedError) as refused:
            client.chat.completions.create(messages=ASK, **ask)
        assert "pytest-gauge proxy" in str(refused.value)
    with pytest.raises(openai.PermissionDeniedError):
        client.responses.create(model="other", input="hi")
    anthropic = _anthropic()
    messages = anthropic.Anthropic(
        base_url=route.anthropic_base_url, auth_token=route.token, http_client=sdk_http(anthropic)
    )
    with pytest.raises(anthropic.PermissionDeniedError) as denied:
        messages.messages.create(model="other", max_tokens=64, messages=ASK)
    assert denied.value.body["error"]["type"] == "permission_error"
    assert calls.seen == [] and len(calls.refusals) == 5  # nothing reached the gateway
    assert [r[2] for r in calls.refusals] == ["chat", "chat", "chat", "responses", "anthropic"]
    assert client.chat.completions.create(model="m", messages=ASK, max_tokens=1000).choices
    assert messages.messages.create(model="m", max_tokens=64, messages=ASK).content
    assert len(calls.seen) == 2


PROBE = """
import json, os, sys, urllib.error, urllib.request

def ask(body):
    request = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"] + "/chat/completions",
        json.dumps(body).encode(),
        {"content-type": "application/json", "authorization": "Bearer " + os.environ["OPENAI_API_KEY"]},
    )
    try:
        return 200, json.load(urllib.request.urlopen(request, timeout=60))
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)

ASK = [{"role": "user", "content": sys.argv[1]}]
status, other = ask({"model": "sim-other", "n": 3, "max_tokens": 5000, "messages": ASK})
print(f"other model: {status}", file=sys.stderr)
assert status == 403, other
status, own = ask({"model": "sim-prog", "max_tokens": 200, "messages": ASK})
assert status == 200, own
print(own["choices"][0]["message"]["content"])
"""

SUITE = """
import sys
from pathlib import Path

from pytest_gauge import CommandAgent, Judge, ModelAgent, Suite, UserSimulator

ARGV = (sys.executable, str(Path(__file__).parent / "probe.py"), "{prompt}")
suite = Suite(
    agents=[CommandAgent("probe", ARGV, model="sim-prog", max_tokens=1000), ModelAgent("model", "sim-model")],
    judge=Judge("sim-judge"),
    user=UserSimulator("sim-user", max_turns=1),
    orders="seeded",
)
"""


def test_a_probe_program_is_refused_another_model_and_its_own_still_works(pytester: pytest.Pytester) -> None:
    folder = pytester.path / "suites" / "probe"
    folder.mkdir(parents=True)
    task: dict[str, Any] = {
        "task_id": "t1",
        "category": "information_retrieval",
        "task_prompt": "Name the plan tiers.",
        "success_criteria": [],
    }
    (folder / "tasks.jsonl").write_text(json.dumps({"format_version": 1}) + "\n" + json.dumps(task) + "\n")
    (folder / "probe.py").write_text(PROBE)
    (folder / "test_probe.py").write_text(SUITE)
    pytester.makeini("[pytest]\ngauge_backend = sim\n")
    result = run_inprocess(pytester, "suites", "-n", "0", "--gauge-no-progress")
    assert result.ret == 0, result.stdout.str()
    out = pytester.path / "gauge-out" / "probe"
    mine = [r for r in read_jsonl(out / "agent_runs.jsonl") if r["work"] == "transcript/t1/probe/0"]
    agent = [(r["model"], r["status"], r.get("http_status")) for r in mine if r["role"] == "agent"]
    assert agent == [("sim-other", "refused", 403), ("sim-prog", "ok", 200)], agent
    refused = next(r for r in mine if r["status"] == "refused")
    assert refused["usage"] is None and not refused["possibly_billed"] and "sim-other" in refused["error"]
    (transcript,) = read_jsonl(out / "agents" / "probe.jsonl")
    assert transcript["error"] is None and transcript["final_reply"]
    (note,) = transcript["proxy_refusals"]
    assert note.startswith("call #1 (sim-other) refused") and "allowed: sim-prog" in note
