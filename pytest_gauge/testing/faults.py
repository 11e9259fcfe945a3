"""The loopback server's fault catalogue: the :class:`FaultPlan` a test sets, which fault the n-th model
request gets (a pure function of the plan and ``n``, so runs are reproducible), and a model route's
answer with those faults applied (auth, unknown models, refused response formats, 429/5xx/529, malformed
bodies, resets, truncation, missing usage), in the wire format the route speaks (:func:`model_response`:
the request read as a chat body, answered as chat, written back in the format, streamed when asked).
These are faults a well-formed HTTP server can serve; broken HTTP itself (bad chunk sizes, conflicting or
non-digit lengths, gzip bombs, stalls mid-answer, 1xx, garbage, HTTP/2 and TLS bytes) is written by
:class:`~.hostile.HostileServer`.
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any, Literal

from .._internal.gateway.wire import NEUTRAL_API, WireFormat
from .._internal.gateway.wire.anthropic import MESSAGES
from .._internal.gateway.wire.responses import RESPONSES
from .._internal.gateway.wire.sse import encode_events
from .._internal.records.json_types import JSONObject
from .exchange import Request, Response
from .responders import (
    Responder,
    ResponderError,
    biased_verdict,
    default_usage,
    error_body,
    full_usage,
    message_text,
)

__all__ = [
    "MALFORMED_BODIES",
    "MALFORMED_BY_API",
    "FaultPlan",
    "ScheduledFault",
    "auth_fault",
    "chat_response",
    "echo_auth",
    "every",
    "finish_completion",
    "in_format",
    "malformed_body",
    "model_response",
    "scheduled_fault",
]

ScheduledFault = Literal["burst_503", "429", "503", "500", "malformed", "reset", "529"]

MALFORMED_BODIES: dict[str, bytes] = {
    "html": b"<!DOCTYPE html><html><head><title>Sign in</title></head><body>Please log in</body></html>",
    "empty": b"",
    "array": b'[{"choices": []}]',
    "choices_not_list": b'{"id": "x", "object": "chat.completion", "choices": {"0": "hi"}}',
    "choices_empty": b'{"id": "x", "object": "chat.completion", "choices": []}',
    "content_null": (
        b'{"id": "x", "object": "chat.completion", "choices": [{"index": 0, "finish_reason": "stop",'
        b' "message": {"role": "assistant", "content": null}}]}'
    ),
    "usage_string": (
        b'{"id": "x", "object": "chat.completion", "choices": [{"index": 0, "finish_reason": "stop",'
        b' "message": {"role": "assistant", "content": "hi"}}], "usage": {"prompt_tokens": "many",'
        b' "completion_tokens": 1, "total_tokens": 1}}'
    ),
}
"""200 bodies that are not a well-formed chat completion, by kind (``FaultPlan.malformed``)."""

_SHARED_MALFORMED = ("html", "empty", "array")
MALFORMED_BY_API: dict[str, dict[str, bytes]] = {
    NEUTRAL_API: MALFORMED_BODIES,
    MESSAGES.api: {
        **{k: MALFORMED_BODIES[k] for k in _SHARED_MALFORMED},
        "content_not_list": b'{"id": "msg_x", "type": "message", "role": "assistant", "content": "hi"}',
        "content_empty": (
            b'{"id": "msg_x", "type": "message", "role": "assistant", "content": [],'
            b' "stop_reason": "end_turn", "usage": {"input_tokens": 1, "output_tokens": 1}}'
        ),
        "usage_string": (
            b'{"id": "msg_x", "type": "message", "role": "assistant", "content": [{"type": "text",'
            b' "text": "hi"}], "stop_reason": "end_turn", "usage": {"input_tokens": "many",'
            b' "output_tokens": 1}}'
        ),
    },
    RESPONSES.api: {
        **{k: MALFORMED_BODIES[k] for k in _SHARED_MALFORMED},
        "output_not_list": b'{"id": "resp_x", "object": "response", "status": "completed", "output": "hi"}',
        "output_empty": b'{"id": "resp_x", "object": "response", "status": "completed", "output": []}',
        "usage_string": (
            b'{"id": "resp_x", "object": "response", "status": "completed", "output": [{"type": "message",'
            b' "id": "msg_x", "role": "assistant", "status": "completed", "content": [{"type": "output_text",'
            b' "text": "hi", "annotations": []}]}], "usage": {"input_tokens": "many", "output_tokens": 1,'
            b' "total_tokens": 1}}'
        ),
    },
}
"""Each wire format's malformed 200 bodies by kind (a format without its own list gets the chat ones)."""


@dataclass
class FaultPlan:
    """Which faults to inject; each probabilistic choice comes from an RNG seeded by (seed, request index).

    Auth faults (``status_401``, ``expected_key``) apply to every route of a model (its wire formats'
    routes and ``/models``); all other faults to the wire formats' routes (chat completions, messages,
    responses), one schedule for all of them.
    """

    status_401: bool = False
    expected_key: str | None = None
    rate_429: float = 0.0
    retry_after: str | None = "1"
    retry_after_ms: int | None = None
    rate_503: float = 0.0
    rate_500: float = 0.0
    burst_5xx: int = 0
    slow_every: int = 0
    slow_seconds: float = 0.0
    reset_every: int = 0
    no_usage: bool = False
    truncate: bool = False
    should_retry_false: bool = False
    status_400_models: frozenset[str] = frozenset()
    reject_response_formats: frozenset[str] = frozenset()
    reject_format_status: int = 400  # 500: a llama.cpp-style server refusing the format with a server error
    retry_after_header: str = "retry-after"  # the 429's wait header, e.g. LiteLLM's llm_provider-retry-after
    zero_usage: bool = False  # usage with zero counts (a proxy passing on usage its upstream never sent)
    served_model: str | None = None  # the response's model field (a proxy's fallback model answered)
    attempted_retries: int = 0  # x-litellm-attempted-retries on every 200
    error_attempted_retries: int = 0
    """``x-litellm-attempted-retries`` on every scheduled 5xx (``burst_503``, ``503``, ``500``): a proxy that
    says the upstream retries behind an attempt it failed."""
    response_cost: float | None = None  # x-litellm-response-cost on every 200
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    """Cache writes, in ``prompt_tokens_details.cache_write_tokens`` (``cache_creation_input_tokens``)."""
    cache_write_1h_tokens: int = 0
    """Of the cache writes, those to the one-hour cache (``cache_write_1h_tokens``)."""
    reasoning_tokens: int = 0
    unknown_models: frozenset[str] = frozenset()
    rate_malformed: float = 0.0
    malformed: str = "mixed"
    rate_reset: float = 0.0
    rate_529: float = 0.0
    """Share of 529 ``overloaded`` answers (Anthropic's overloaded status), drawn after the resets."""
    drip_seconds: float = 0.0
    drip_models: frozenset[str] = frozenset()
    """With ``drip_seconds``: only these models' answers drip (empty: every model's)."""
    hold_after: int = 0
    judge_prefers: Literal["A", "B"] | None = None
    echo_auth: tuple[str, ...] = ()
    """``"STATUS:SHAPE"`` answers taken in turn by the chat requests (shape ``json``, ``text`` or
    ``html``): an error body quoting the request's Authorization header back, as some proxies do."""
    seed: int = 0
    fault_apis: frozenset[str] = frozenset()
    """Only requests of these wire formats (``chat``, ``anthropic``, ``responses``) draw the rate faults
    (429, 5xx, malformed, reset, 529), and their fault index ``n`` counts only them, so the schedule they
    meet is the same whatever the other formats' requests do; empty: every format's, indexed together."""

    def to_dict(self) -> JSONObject:
        """Plain-JSON form (the model sets as sorted lists), as served by the admin stats route."""
        d = asdict(self)
        d["status_400_models"] = sorted(self.status_400_models)
        d["reject_response_formats"] = sorted(self.reject_response_formats)
        d["unknown_models"] = sorted(self.unknown_models)
        d["drip_models"] = sorted(self.drip_models)
        d["fault_apis"] = sorted(self.fault_apis)
        return d

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FaultPlan:
        """Inverse of :meth:`to_dict`; unknown keys are an error so a typo cannot silently disable a fault."""
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown FaultPlan fields: {sorted(unknown)}")
        kwargs = dict(data)
        sets = ("status_400_models", "reject_response_formats", "unknown_models", "drip_models", "fault_apis")
        for name in sets:
            if name in kwargs:
                kwargs[name] = frozenset(kwargs[name])
        return cls(**kwargs)


def every(k: int, n: int) -> bool:
    """Whether the n-th request is one of every k-th (k = 0: never)."""
    return k > 0 and n % k == 0


def scheduled_fault(plan: FaultPlan, n: int) -> ScheduledFault | None:
    """The status fault planned for the n-th (1-based) chat request, ignoring auth/model/reset faults.

    The first ``burst_5xx`` requests get 503; otherwise one uniform draw from ``Random("gauge:<seed>:<n>")``
    falls into [0, rate_429) -> 429, then [.., +rate_503) -> 503, then [.., +rate_500) -> 500, then
    [.., +rate_malformed) -> a malformed 200 body, then [.., +rate_reset) -> a connection reset, then
    [.., +rate_529) -> a 529 (appended last, so older plans keep their schedules).
    """
    if n <= plan.burst_5xx:
        return "burst_503"
    bands: tuple[tuple[ScheduledFault, float], ...] = (
        ("429", plan.rate_429),
        ("503", plan.rate_503),
        ("500", plan.rate_500),
        ("malformed", plan.rate_malformed),
        ("reset", plan.rate_reset),
        ("529", plan.rate_529),
    )
    if all(rate <= 0 for _, rate in bands):
        return None
    u = random.Random(f"gauge:{plan.seed}:{n}").random()
    edge = 0.0
    for fault, rate in bands:
        edge += rate
        if u < edge:
            return fault
    return None


def malformed_body(plan: FaultPlan, n: int, api: str = NEUTRAL_API) -> bytes:
    """The malformed body of the n-th request in wire format ``api``: ``plan.malformed``'s kind, or each
    of the format's kinds in turn (mixed, or a kind the format does not have)."""
    bodies = MALFORMED_BY_API.get(api, MALFORMED_BODIES)
    if plan.malformed in bodies:
        return bodies[plan.malformed]
    kinds = sorted(bodies)
    return bodies[kinds[n % len(kinds)]]


def auth_fault(req: Request, plan: FaultPlan) -> Response | None:
    """The 401 of a request whose key is refused (``status_401``, ``expected_key``), else None. The key
    is the bearer token, or the ``x-api-key`` header (Anthropic's form) when there is no bearer."""
    auth = req.headers.get("authorization", "")
    token = auth[7:].strip() if auth[:7].lower() == "bearer " else req.headers.get("x-api-key")
    if plan.status_401 or (plan.expected_key is not None and token != plan.expected_key):
        body = error_body("Incorrect API key provided", "invalid_request_error", "invalid_api_key")
        return Response(401, body)
    return None


def echo_auth(req: Request, spec: str) -> Response:
    """An error answer (``"STATUS:SHAPE"``) that quotes the request's key back: whole, as a header, and
    cut (a run of its characters), in a JSON message, plain text or an HTML page."""
    status, _, shape = spec.partition(":")
    auth = req.headers.get("authorization", "")
    token = auth.split(" ", 1)[-1]
    text = f"request refused; Authorization: {auth}; x-api-key: {token}; key starts {token[2:14]!r}"
    if shape == "json":
        return Response(int(status), error_body(text, "invalid_request_error"))
    if shape == "html":
        page = f"<html><head><title>Error</title></head><body><h1>{status}</h1><p>{text}</p></body></html>"
        return Response(int(status), None, {"content-type": "text/html"}, raw=page.encode())
    return Response(int(status), None, {"content-type": "text/plain"}, raw=text.encode())


def chat_response(
    req: Request,
    body: JSONObject | None,
    body_error: bool,
    plan: FaultPlan,
    n: int,
    seq: int,
    responder: Responder,
    api: str = NEUTRAL_API,
) -> Response:
    """The answer to the n-th model request, read as the chat body ``body`` (``stream`` removed): its
    planned fault, an OpenAI-style 4xx for a bad request, else the responder's completion (finished by
    :func:`finish_completion`). ``api`` picks the malformed bodies; :func:`model_response` does the rest."""
    if every(plan.reset_every, n):
        return Response(0, None, reset=True)
    denied = auth_fault(req, plan)
    if denied is not None:
        return denied
    if plan.echo_auth:
        return echo_auth(req, plan.echo_auth[(n - 1) % len(plan.echo_auth)])
    if body is None:
        msg = (
            "We could not parse the JSON body of your request."
            if body_error or req.body
            else "The request body is empty; expected a JSON object."
        )
        return Response(400, error_body(msg, "invalid_request_error"))
    model = body.get("model")
    if not isinstance(model, str) or not model:
        return Response(
            400, error_body("you must provide a model parameter", "invalid_request_error", param="model")
        )
    if not isinstance(body.get("messages"), list):
        return Response(
            400,
            error_body("'messages' is a required property", "invalid_request_error", param="messages"),
        )
    if model in plan.unknown_models:
        return Response(
            404,
            error_body(
                f"The model `{model}` does not exist or you do not have access to it.",
                "invalid_request_error",
                "model_not_found",
            ),
        )
    if model in plan.status_400_models:
        return Response(
            400,
            error_body(
                f"The model `{model}` does not exist", "invalid_request_error", "model_not_found", "model"
            ),
        )
    fmt = body.get("response_format")
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if kind is not None and ("*" in plan.reject_response_formats or kind in plan.reject_response_formats):
        msg = f"Invalid parameter: 'response_format' of type '{kind}' is not supported with this model."
        status = plan.reject_format_status
        return Response(status, error_body(msg, "invalid_request_error", None, "response_format"))
    fault = scheduled_fault(plan, n) if not plan.fault_apis or api in plan.fault_apis else None
    if fault == "429":
        headers: dict[str, str] = {}
        if plan.retry_after is not None:
            headers[plan.retry_after_header] = plan.retry_after
        if plan.retry_after_ms is not None:
            headers["retry-after-ms"] = str(plan.retry_after_ms)
        msg = f"Rate limit reached for requests on {model}. Please try again later."
        return Response(429, error_body(msg, "requests", "rate_limit_exceeded"), headers)
    told = (
        {"x-litellm-attempted-retries": str(plan.error_attempted_retries)}
        if plan.error_attempted_retries
        else {}
    )
    if fault in ("burst_503", "503"):
        return Response(503, error_body("The server is overloaded or not ready yet.", "server_error"), told)
    if fault == "500":
        msg = "The server had an error while processing your request. Sorry about that!"
        return Response(500, error_body(msg, "server_error"), told)
    if fault == "malformed":
        return Response(200, None, raw=malformed_body(plan, n, api))
    if fault == "529":
        return Response(529, error_body("Overloaded", "server_error", "overloaded"))
    if fault == "reset":
        return Response(0, None, reset=True)
    try:
        out = biased_verdict(body, plan.judge_prefers) or responder(body)
    except ResponderError as exc:
        return Response(exc.status, error_body(exc.message, exc.type, exc.code, exc.param), exc.headers)
    except Exception as exc:
        msg = f"loopback responder failed: {type(exc).__name__}: {exc}"
        return Response(500, error_body(msg, "server_error"))
    if not isinstance(out, dict):
        return Response(500, error_body("loopback responder did not return a dict", "server_error"))
    said: dict[str, str] = {}
    if plan.attempted_retries:
        said["x-litellm-attempted-retries"] = str(plan.attempted_retries)
    if plan.response_cost is not None:
        said["x-litellm-response-cost"] = repr(plan.response_cost)
    return Response(200, finish_completion(body, dict(out), plan, seq), said)


_ERROR_KINDS = {
    401: "authentication",
    403: "authentication",
    404: "not_found",
    429: "rate_limit",
    529: "overloaded",
}


def model_response(
    fmt: WireFormat,
    req: Request,
    body: JSONObject | None,
    body_error: bool,
    plan: FaultPlan,
    n: int,
    seq: int,
    responder: Responder,
) -> Response:
    """The answer to the n-th model request on ``fmt``'s route: the request read as a chat body
    (``fmt.chat_request``), answered by :func:`chat_response` with the plan's faults, written back in
    the format (``from_completion``, ``error_body``) with the fault's headers, and sent as the format's
    server-sent events when the request asks for a stream (``"stream": true``)."""
    stream = isinstance(body, dict) and body.get("stream") is True
    chat_body = None
    if body is not None:
        try:
            chat_body = fmt.chat_request(
                {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
            )
        except ValueError as exc:
            return in_format(fmt, Response(400, error_body(str(exc), "invalid_request_error")))
    resp = chat_response(req, chat_body, body_error, plan, n, seq, responder, fmt.api)
    if resp.status != 200 or resp.raw is not None:
        return in_format(fmt, resp)
    out = resp.payload if fmt.api == NEUTRAL_API else fmt.from_completion(resp.payload, body or {})
    if not stream:
        return Response(200, out, resp.headers)
    events = encode_events(fmt.stream_events(out), done_marker=fmt.done_marker)
    return Response(200, None, {**resp.headers, "content-type": "text/event-stream"}, raw=events)


def in_format(fmt: WireFormat, resp: Response) -> Response:
    """An OpenAI-style error answer in ``fmt``'s own error shape (chat's is that shape; raw bodies, e.g.
    an echoed key or a malformed 200, are sent as they are)."""
    if fmt.api == NEUTRAL_API or resp.raw is not None or not isinstance(resp.payload, dict):
        return resp
    err = resp.payload.get("error")
    message = str(err.get("message", "error")) if isinstance(err, dict) else "error"
    kind = _ERROR_KINDS.get(resp.status, "server" if resp.status >= 500 else "invalid_request")
    return Response(resp.status, fmt.error_body(resp.status, message, kind), resp.headers, resp.reset)


def finish_completion(body: JSONObject, out: JSONObject, plan: FaultPlan, seq: int) -> JSONObject:
    """A responder's answer made a full chat.completion (ids, indexes, usage), with the plan's
    truncation, missing usage and cached/cache-write/reasoning token details applied (prompt tokens
    include the cache's reads and writes)."""
    out.setdefault("id", f"chatcmpl-loopback-{seq}")
    out.setdefault("object", "chat.completion")
    out.setdefault("created", int(time.time()))
    out.setdefault("model", body["model"])
    choices = [dict(c) for c in out.get("choices") or []]
    for i, choice in enumerate(choices):
        choice.setdefault("index", i)
        choice.setdefault("finish_reason", "stop")
        choice["message"] = dict(choice.get("message") or {"role": "assistant", "content": ""})
        choice["message"].setdefault("role", "assistant")
    if plan.truncate and choices:
        msg = choices[0]["message"]
        if isinstance(msg.get("content"), str):
            msg["content"] = msg["content"][: len(msg["content"]) // 2]
        choices[0]["finish_reason"] = "length"
    out["choices"] = choices
    if plan.served_model:
        out["model"] = plan.served_model
    if plan.no_usage:
        out.pop("usage", None)
    elif plan.zero_usage:
        out["usage"] = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    elif "usage" not in out:
        content = message_text(choices[0]["message"].get("content")) if choices else ""
        out["usage"] = default_usage(body, content)
    elif out["usage"] is None:
        del out["usage"]
    else:
        out["usage"] = full_usage(dict(out["usage"]))
    usage = out.get("usage")
    if isinstance(usage, dict) and plan.cached_tokens > 0:
        cached = min(plan.cached_tokens, usage["prompt_tokens"])
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    if isinstance(usage, dict) and plan.cache_write_tokens > 0:
        details = usage.setdefault("prompt_tokens_details", {})
        writes = min(plan.cache_write_tokens, usage["prompt_tokens"] - int(details.get("cached_tokens", 0)))
        details["cache_write_tokens"] = writes
        details["cache_write_1h_tokens"] = min(plan.cache_write_1h_tokens, writes)
    if isinstance(usage, dict) and plan.reasoning_tokens > 0:
        reasoning = min(plan.reasoning_tokens, usage["completion_tokens"])
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return out
