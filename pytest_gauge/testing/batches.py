"""The loopback server's batch APIs: OpenAI's ``/files`` + ``/batches`` and Anthropic's Message Batches
(``/messages/batches``), each request of a batch answered as the model routes answer it (the server's
responder, in the request's wire format), with the batch faults tests need: no batch endpoint at all,
polls before a batch ends, an expired batch (half answered), a partly failed one (every n-th request an
error), a batch cancelled by the server, and one that never ends until it is cancelled."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from ..gateway.wire import NEUTRAL_API, format_for_path, wire_format
from ..gateway.wire.batches import MESSAGE_BATCHES_API
from ..records.json_types import JSONObject
from .exchange import Request, Response
from .faults import FaultPlan, model_response
from .responders import Responder, error_body

__all__ = ["BatchFaults", "BatchStore"]


@dataclass(frozen=True)
class BatchFaults:
    """What the batch routes do: ``available`` (else every batch route is a 404), ``polls`` (polls a
    batch stays in progress), ``ending`` (``completed``, ``expired`` or ``cancelled``: the last two
    answer the first half of each batch's requests, rounded down), ``fail_every`` (every n-th request the
    batches reach, counted over all of them so the count does not depend on how calls were gathered, fails
    with a 500 in the error file), ``hold`` (the batch never ends until it is cancelled; nothing of it
    is answered)."""

    available: bool = True
    polls: int = 1
    ending: str = "completed"
    fail_every: int = 0
    hold: bool = False


@dataclass
class _Batch:
    """One batch as the server keeps it: its family, requests (custom id, format, body), answers once
    ended, and how many polls are left."""

    batch_id: str
    anthropic: bool
    requests: list[tuple[str, str, JSONObject]]
    polls_left: int
    status: str = "in_progress"
    endpoint: str = "/v1/chat/completions"
    input_file: str = ""
    lines: list[JSONObject] = field(default_factory=list)
    errors: list[JSONObject] = field(default_factory=list)


class BatchStore:
    """The batches and uploaded files of one loopback server (thread-safe counters for tests)."""

    def __init__(self, prefix: str, responder: Callable[[], Responder]) -> None:
        self.prefix = prefix
        self.responder = responder
        self.faults = BatchFaults()
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, _Batch] = {}
        self.created = 0  # batches created
        self.requests = 0  # requests answered in batches
        self.reached = 0  # requests a batch ran (answered or failed), for fail_every
        self._lock = threading.Lock()

    def answer(self, req: Request) -> Response | None:
        """The answer to a batch route, or None when ``req`` is not one."""
        path = req.path.rstrip("/")
        if not path.startswith(self.prefix + "/"):
            return None
        parts = path[len(self.prefix) + 1 :].split("/")
        anthropic = parts[:2] == ["messages", "batches"]
        rest = parts[2:] if anthropic else parts[1:]
        if not (anthropic or parts[0] in ("files", "batches")):
            return None
        if not self.faults.available:
            return Response(
                404, error_body(f"Invalid URL ({req.method} {req.path})", "invalid_request_error")
            )
        with self._lock:
            if parts[0] == "files" and not anthropic:
                return self._files(req, rest)
            return self._batches(req, rest, anthropic)

    def _files(self, req: Request, rest: list[str]) -> Response:
        if req.method == "POST" and not rest:
            content = _multipart_file(req)
            if content is None:
                return Response(
                    400, error_body("expected a multipart upload with a file", "invalid_request_error")
                )
            file_id = f"file-gauge-{len(self.files) + 1}"
            self.files[file_id] = content
            return Response(200, _file_object(file_id, len(content), "batch"))
        if req.method == "GET" and len(rest) == 1 and rest[0] in self.files:
            return Response(200, _file_object(rest[0], len(self.files[rest[0]]), "batch"))
        if req.method == "GET" and len(rest) == 2 and rest[1] == "content" and rest[0] in self.files:
            return Response(200, None, {"content-type": "application/jsonl"}, raw=self.files[rest[0]])
        return Response(404, error_body(f"No such file: {'/'.join(rest)}", "invalid_request_error"))

    def _batches(self, req: Request, rest: list[str], anthropic: bool) -> Response:
        if req.method == "POST" and not rest:
            batch = self._create(req, anthropic)
            if batch is None:
                return Response(400, error_body("not a batch request", "invalid_request_error"))
            return Response(200, self._view(batch))
        if req.method == "GET" and not rest:  # the listing (the doctor's probe)
            found = [self._view(b) for b in self.batches.values() if b.anthropic == anthropic]
            return Response(200, {"object": "list", "data": found[-1:], "has_more": len(found) > 1})
        batch = self.batches.get(rest[0]) if rest else None
        if batch is None or batch.anthropic != anthropic:
            return Response(404, error_body("No such batch", "invalid_request_error"))
        if req.method == "GET" and len(rest) == 1:
            if batch.status == "in_progress" and not self.faults.hold:
                batch.polls_left -= 1
                if batch.polls_left < 0:
                    self._end(batch, self.faults.ending)
            return Response(200, self._view(batch))
        if req.method == "POST" and rest[1:] == ["cancel"]:
            if batch.status == "in_progress":
                self._end(batch, "cancelled", answered=0 if self.faults.hold else None)
            return Response(200, self._view(batch))
        if anthropic and req.method == "GET" and rest[1:] == ["results"] and batch.status == "ended":
            text = "".join(json.dumps(line) + "\n" for line in batch.lines)
            return Response(200, None, {"content-type": "application/binary"}, raw=text.encode())
        return Response(404, error_body("No such route", "invalid_request_error"))

    def _create(self, req: Request, anthropic: bool) -> _Batch | None:
        """A batch from Message Batches' ``requests`` or OpenAI's uploaded input file."""
        try:
            body = json.loads(req.body)
        except ValueError:
            return None
        requests: list[tuple[str, str, JSONObject]] = []
        if anthropic:
            for item in body.get("requests") or []:
                requests.append((str(item["custom_id"]), MESSAGE_BATCHES_API, dict(item["params"])))
        else:
            content = self.files.get(str(body.get("input_file_id")))
            if content is None:
                return None
            for raw in content.decode().splitlines():
                if raw.strip():
                    line = json.loads(raw)
                    fmt = format_for_path(str(line["url"]))
                    requests.append(
                        (str(line["custom_id"]), fmt.api if fmt else NEUTRAL_API, dict(line["body"]))
                    )
        self.created += 1
        prefix = "msgbatch_gauge_" if anthropic else "batch_gauge_"
        batch = _Batch(f"{prefix}{self.created}", anthropic, requests, self.faults.polls)
        if not anthropic:
            batch.endpoint, batch.input_file = str(body.get("endpoint")), str(body.get("input_file_id"))
        self.batches[batch.batch_id] = batch
        return batch

    def _end(self, batch: _Batch, ending: str, answered: int | None = None) -> None:
        """End a batch: answer its requests (all for ``completed``, the first half otherwise, or
        ``answered``), the rest expired or cancelled; every ``fail_every``-th request reached (over all
        batches) an error."""
        if answered is None:
            answered = len(batch.requests) if ending == "completed" else len(batch.requests) // 2
        for i, (cid, api, body) in enumerate(batch.requests):
            if i >= answered:
                self._unanswered(batch, cid, ending)
            elif self._fails():
                self._failed(batch, cid)
            else:
                self._answered(batch, cid, api, body)
        batch.status = "ended" if batch.anthropic else ending

    def _fails(self) -> bool:
        """Whether the next request a batch runs fails: every ``fail_every``-th over all batches."""
        self.reached += 1
        return bool(self.faults.fail_every) and self.reached % self.faults.fail_every == 0

    def _answered(self, batch: _Batch, cid: str, api: str, body: JSONObject) -> None:
        fmt = wire_format(api)
        self.requests += 1
        req = Request("POST", fmt.path, fmt.path, "", {}, json.dumps(body).encode())
        resp = model_response(
            fmt, req, body, False, FaultPlan(), self.requests, self.requests, self.responder()
        )
        if batch.anthropic:
            if resp.status == 200:
                batch.lines.append(
                    {"custom_id": cid, "result": {"type": "succeeded", "message": resp.payload}}
                )
            else:
                error = {"type": "error", "error": {"type": "api_error", "message": f"status {resp.status}"}}
                batch.lines.append({"custom_id": cid, "result": {"type": "errored", "error": error}})
            return
        line = {
            "id": f"batch_req_{self.requests}",
            "custom_id": cid,
            "response": {
                "status_code": resp.status,
                "request_id": f"req_{self.requests}",
                "body": resp.payload,
            },
            "error": None,
        }
        (batch.lines if resp.status == 200 else batch.errors).append(line)

    def _failed(self, batch: _Batch, cid: str) -> None:
        if batch.anthropic:
            error = {"type": "error", "error": {"type": "api_error", "message": "Internal server error"}}
            batch.lines.append({"custom_id": cid, "result": {"type": "errored", "error": error}})
            return
        body = error_body("The server had an error processing your request.", "server_error")
        response = {"status_code": 500, "request_id": "req_failed", "body": body}
        batch.errors.append({"id": "batch_req_failed", "custom_id": cid, "response": response, "error": None})

    def _unanswered(self, batch: _Batch, cid: str, ending: str) -> None:
        if batch.anthropic:
            kind = "canceled" if ending == "cancelled" else "expired"
            batch.lines.append({"custom_id": cid, "result": {"type": kind}})
            return
        code = "batch_cancelled" if ending == "cancelled" else "batch_expired"
        error = {"code": code, "message": f"This request was not executed ({code})."}
        batch.errors.append({"id": "batch_req_none", "custom_id": cid, "response": None, "error": error})

    def _view(self, batch: _Batch) -> JSONObject:
        """The batch object of its family."""
        total = len(batch.requests)
        if batch.anthropic:
            ended = batch.status == "ended"
            return {
                "id": batch.batch_id,
                "type": "message_batch",
                "processing_status": batch.status,
                "request_counts": {"processing": 0 if ended else total, "succeeded": len(batch.lines)},
                "results_url": f"{self.prefix}/messages/batches/{batch.batch_id}/results" if ended else None,
            }
        out = err = None
        if batch.status != "in_progress":
            out, err = (
                self._file(batch.batch_id, "out", batch.lines),
                self._file(batch.batch_id, "err", batch.errors),
            )
        return {
            "id": batch.batch_id,
            "object": "batch",
            "endpoint": batch.endpoint,
            "errors": None,
            "input_file_id": batch.input_file,
            "completion_window": "24h",
            "status": batch.status,
            "output_file_id": out,
            "error_file_id": err,
            "created_at": 1_700_000_000,
            "request_counts": {"total": total, "completed": len(batch.lines), "failed": len(batch.errors)},
            "metadata": None,
        }

    def _file(self, batch_id: str, kind: str, lines: list[JSONObject]) -> str | None:
        """A results file of the batch (None when it would be empty, as OpenAI leaves it unset)."""
        if not lines:
            return None
        file_id = f"file-{batch_id}-{kind}"
        self.files[file_id] = "".join(json.dumps(line) + "\n" for line in lines).encode()
        return file_id


def _file_object(file_id: str, size: int, purpose: str) -> JSONObject:
    """An OpenAI file object (what ``/files`` answers)."""
    return {
        "id": file_id,
        "object": "file",
        "bytes": size,
        "created_at": 1_700_000_000,
        "filename": f"{file_id}.jsonl",
        "purpose": purpose,
        "status": "processed",
    }


def _multipart_file(req: Request) -> bytes | None:
    """The ``file`` part of a ``multipart/form-data`` upload."""
    kind = req.headers.get("content-type", "")
    if "boundary=" not in kind:
        return None
    boundary = ("--" + kind.split("boundary=", 1)[1].strip().strip('"')).encode()
    for part in req.body.split(boundary):
        head, sep, content = part.partition(b"\r\n\r\n")
        if sep and b'name="file"' in head:
            return content.removesuffix(b"\r\n")
    return None
