"""The embedded offline backend: simulated agents, user and judge behind an OpenAI-compatible endpoint.

:class:`SimBackend` answers chat-completion request bodies with realistic ``chat.completion`` JSON
(usage, finish_reason, tool_calls, ``length`` truncation, OpenAI-style errors). It is served in-process
to the gateway's model client through :meth:`SimBackend.serve` (``ModelClient(serve=...)``: the same
request and answer bytes as over a socket, handed over without one), to the real ``openai`` client through
:meth:`SimBackend.transport` (an ``httpx2.MockTransport``), or by a loopback HTTP server using
:meth:`SimBackend.handle`. Every answer is a pure function of the world
and the request body: same world + same body gives byte-identical JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..gateway.transport import serve_transport
from ..gateway.wire import NEUTRAL_API, WireFormat, format_for_path
from ..gateway.wire.sse import encode_events
from ..records import dumps
from ..records.json_types import JSONObject
from ..suite.sim_profiles import SimAgent, SimJudge, SimUser
from ..suite.tasks import Task
from .agent import agent_reply
from .common import SIM_VERSION, count_tokens, message_text, stable_hash, truncate_to_tokens
from .judge import is_judge_request, judge_reply
from .user import is_user_audit_request, is_user_sim_request, user_audit_reply, user_reply

if TYPE_CHECKING:
    import httpx2

__all__ = ["SimBackend", "SimWorld", "dump_response", "error_body"]

_CREATED = 0


def _user_parts(profile: SimUser) -> JSONObject:
    """A user profile in the fingerprint; its mistake knobs only when set, so worlds without them keep
    their fingerprints (and their cached answers)."""
    return {k: v for k, v in asdict(profile).items() if not (k.endswith("_tasks") and not v)}


@dataclass(frozen=True)
class SimWorld:
    """Everything the simulator's answers depend on: the run seed, the tasks and each model's profile.

    ``agents`` maps an agent model name to (agent name, profile); ``users`` and ``judges`` map model
    names to profiles (a missing model gets the default profile). An agent model missing from
    ``agents`` is unknown (404), unless ``any_agent`` is set: then every other model answers as an
    agent with that profile (the world of users' own tests, which may name any model).
    """

    seed: int
    tasks: tuple[Task, ...]
    agents: Mapping[str, tuple[str, SimAgent]] = field(default_factory=dict)
    users: Mapping[str, SimUser] = field(default_factory=dict)
    judges: Mapping[str, SimJudge] = field(default_factory=dict)
    any_agent: SimAgent | None = None

    def fingerprint(self) -> str:
        """sha256 over the simulator version, seed, all profiles and the tasks (ids, prompts, rules):
        the part of a cache key that makes cached sim answers depend on the sim's configuration."""
        tasks = [
            [
                t.task_id,
                t.task_prompt,
                [r.describe() for r in t.success_criteria],
                [r.describe() for r in t.hard_constraints],
                list(t.hidden_facts),
            ]
            for t in self.tasks
        ]
        parts: list[Any] = [
            SIM_VERSION,
            self.seed,
            {m: [name, asdict(p)] for m, (name, p) in sorted(self.agents.items())},
            {m: _user_parts(p) for m, p in sorted(self.users.items())},
            {m: asdict(p) for m, p in sorted(self.judges.items())},
            tasks,
        ]
        if self.any_agent is not None:  # only then: suites' worlds keep their fingerprints (cache keys)
            parts.append(asdict(self.any_agent))
        return stable_hash(*parts)


def error_body(message: str, type_: str, code: str | None, param: str | None = None) -> JSONObject:
    """An OpenAI-style error payload."""
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def dump_response(payload: Mapping[str, Any]) -> bytes:
    """The exact bytes served for a payload (sorted keys, UTF-8): identical payloads, identical bytes."""
    return json.dumps(payload, sort_keys=True, ensure_ascii=False).encode("utf-8")


def _prompt_tokens(body: Mapping[str, Any]) -> int:
    parts: list[str] = []
    for m in body.get("messages") or []:
        if isinstance(m, dict):
            parts.append(message_text(m))
            if m.get("tool_calls"):
                parts.append(json.dumps(m["tool_calls"], ensure_ascii=False, sort_keys=True))
    if body.get("tools"):
        parts.append(json.dumps(body["tools"], ensure_ascii=False, sort_keys=True))
    return count_tokens("".join(parts))


def _max_tokens(body: Mapping[str, Any]) -> int | None:
    for key in ("max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


class SimBackend:
    """Answers chat-completion bodies as the simulated agent, user simulator or judge of ``world``.

    The role is detected from the content (judge system prompt / ``<response_a>``, role-play user
    prompt), not the model name; anything else is an agent request for ``world.agents[model]``.
    """

    def __init__(self, world: SimWorld) -> None:
        self.world = world
        self._fingerprint = world.fingerprint()
        self._learned: set[str] = set()  # tests' own comparisons: their rules are read exactly

    def learn(self, task: Task) -> None:
        """Let the simulated roles know one more task from now on (a test's own judged task, so the
        simulated judge reads its rules). The fingerprint stays: the task is part of every request
        that uses it, hence of its cache key."""
        if all(t.task_id != task.task_id for t in self.world.tasks):
            self.world = replace(self.world, tasks=(*self.world.tasks, task))
        self._learned.add(task.task_id)

    def respond(self, body: JSONObject) -> tuple[int, JSONObject]:
        """(HTTP status, JSON payload) for one request body: a pure function of (world, body)."""
        if not isinstance(body, dict):
            return 400, error_body("The request body must be a JSON object.", "invalid_request_error", None)
        model = body.get("model")
        messages = body.get("messages")
        if not isinstance(model, str) or not model:
            return 400, error_body(
                "You must provide a model parameter.", "invalid_request_error", None, "model"
            )
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            return 400, error_body(
                "'messages' must be a non-empty array of message objects.",
                "invalid_request_error",
                None,
                "messages",
            )
        tool_calls: tuple[JSONObject, ...] = ()
        if is_user_audit_request(messages):
            content: str | None = user_audit_reply(self.world.tasks, body)
        elif is_judge_request(messages):
            profile_j = self.world.judges.get(model, SimJudge())
            content = judge_reply(self.world.seed, self.world.tasks, profile_j, body, exact=self._learned)
        elif is_user_sim_request(messages):
            content = user_reply(
                self.world.seed, self.world.users.get(model, SimUser()), body, self.world.tasks
            )
        else:
            known = self.world.agents.get(model)
            if known is None and self.world.any_agent is None:
                return 404, error_body(
                    f"The model `{model}` does not exist", "invalid_request_error", "model_not_found", "model"
                )
            name, profile = known or (model, self.world.any_agent or SimAgent())
            out = agent_reply(self.world.seed, self.world.tasks, name, profile, body)
            content, tool_calls = out.content, out.tool_calls
        return 200, self._completion(body, content, tool_calls)

    def _completion(
        self, body: Mapping[str, Any], content: str | None, tool_calls: tuple[JSONObject, ...]
    ) -> JSONObject:
        limit = _max_tokens(body)
        finish = "tool_calls" if tool_calls else "stop"
        calls = [json.loads(json.dumps(c)) for c in tool_calls]
        if calls:
            completion = sum(count_tokens(c["function"]["name"] + c["function"]["arguments"]) for c in calls)
            if limit is not None and completion > limit:  # the arguments are cut mid-JSON, as a real API does
                fn = calls[0]["function"]
                fn["arguments"] = truncate_to_tokens(
                    fn["arguments"], max(0, limit - count_tokens(fn["name"]))
                )
                calls = calls[:1]
                completion, finish = limit, "length"
        else:
            text = content or ""
            completion = count_tokens(text)
            if limit is not None and completion > limit:
                text = truncate_to_tokens(text, max(0, limit))
                completion, finish = count_tokens(text), "length"
            content = text
        completion = max(completion, 1) if limit is None or limit > 0 else completion
        prompt = _prompt_tokens(body)
        message: JSONObject = {"role": "assistant", "content": None if calls else content}
        if calls:
            message["tool_calls"] = calls
        return {
            "id": "chatcmpl-" + stable_hash(self._fingerprint, dumps(body))[:29],
            "object": "chat.completion",
            "created": _CREATED,
            "model": body["model"],
            "system_fingerprint": "fp_sim_" + self._fingerprint[:10],
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }

    def handle(self, method: str, path: str, raw: bytes) -> tuple[int, JSONObject]:
        """One HTTP request (method, URL path, raw body) to (status, payload) in the wire format the path
        names (``.../chat/completions``, ``.../messages``, ``.../responses``): the routing shared by the mock
        transport and a loopback server. A format's request is read as a chat body, answered by
        :meth:`respond`, and the answer (or the error) written back in the same format."""
        fmt = format_for_path(path)
        clean = path.split("?", 1)[0].rstrip("/")
        if method.upper() != "POST" or fmt is None:
            return 404, error_body(
                f"Invalid URL ({method.upper()} {clean})", "invalid_request_error", "not_found"
            )
        try:
            body = json.loads(raw.decode("utf-8") or "null")
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            message = f"The request body is not valid JSON: {exc}"
            return 400, _in_format(fmt, 400, error_body(message, "invalid_request_error", None))
        if not isinstance(body, dict):
            message = "The request body must be a JSON object."
            return 400, _in_format(fmt, 400, error_body(message, "invalid_request_error", None))
        try:  # a stream is the same answer sent as events (:meth:`serve`)
            chat_body = fmt.chat_request(
                {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
            )
        except ValueError as exc:
            return 400, _in_format(fmt, 400, error_body(str(exc), "invalid_request_error", None))
        status, payload = self.respond(chat_body)
        if fmt.api == NEUTRAL_API:
            return status, payload
        if status != 200:
            return status, _in_format(fmt, status, payload)
        return 200, fmt.from_completion(payload, body)

    def serve(self, method: str, path: str, raw: bytes) -> tuple[int, str, bytes]:
        """:meth:`handle` as HTTP: (status, content type, body bytes); a request that asks for a stream
        (``"stream": true``) gets the whole answer as the format's server-sent events."""
        status, payload = self.handle(method, path, raw)
        fmt = format_for_path(path)
        if status == 200 and fmt is not None and _asks_stream(raw):
            events = fmt.stream_events(payload)
            return 200, "text/event-stream", encode_events(events, done_marker=fmt.done_marker)
        return status, "application/json", dump_response(payload)

    def transport(self) -> httpx2.AsyncBaseTransport:
        """An async mock transport for ``httpx2.AsyncClient`` (hence for ``openai.AsyncOpenAI``); httpx2 is
        imported here, so a run that never asks for it never imports it."""
        return serve_transport(self.serve)


_ERROR_KINDS = {401: "authentication", 404: "not_found", 429: "rate_limit", 529: "overloaded"}


def _in_format(fmt: WireFormat, status: int, payload: Mapping[str, Any]) -> JSONObject:
    """An OpenAI-style error payload in ``fmt``'s own error shape."""
    err = payload.get("error")
    message = str(err.get("message", "error")) if isinstance(err, dict) else "error"
    kind = _ERROR_KINDS.get(status, "server" if status >= 500 else "invalid_request")
    return fmt.error_body(status, message, kind)


def _asks_stream(raw: bytes) -> bool:
    """Whether a request body asks for a streamed answer (``"stream": true``)."""
    try:
        body = json.loads(raw.decode("utf-8") or "null")
    except (UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(body, dict) and body.get("stream") is True
