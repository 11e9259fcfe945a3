"""OpenAI's Batch API as bytes and values (docs/protocol.md#batched-judging): the JSONL input file of
``/files`` (``purpose=batch``, a multipart upload), the ``/batches`` request and object, and the output
and error files read back into one answer or one problem per ``custom_id``. Pure functions, no I/O:
:mod:`pytest_gauge.gateway.batch` sends them. Chat Completions and Responses calls batch this way."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "BATCHES_PATH",
    "ENDED",
    "FILES_PATH",
    "BatchView",
    "ItemResult",
    "batch_view",
    "create_body",
    "endpoint_of",
    "input_file",
    "multipart",
    "read_results",
]

FILES_PATH = "/files"
BATCHES_PATH = "/batches"
ENDED = frozenset({"completed", "failed", "expired", "cancelled"})
"""Batch statuses after which nothing more comes (``validating``, ``in_progress``, ``finalizing`` and
``cancelling`` are still under way)."""
_ENDPOINTS = {"chat": "/v1/chat/completions", "responses": "/v1/responses"}


@dataclass(frozen=True)
class BatchView:
    """A batch as its poll shows it: its id, status, whether it has ended, and where its results are
    (the output and error files of OpenAI; Message Batches' own results path)."""

    batch_id: str
    status: str
    ended: bool
    output: str | None = None
    errors: str | None = None


@dataclass(frozen=True)
class ItemResult:
    """One request's outcome in a batch: the format's response body (status 200), or what went wrong."""

    response: dict[str, Any] | None
    problem: str | None = None


def endpoint_of(api: str) -> str:
    """The ``endpoint`` (and each line's ``url``) of a batch of ``api`` calls; ValueError for another."""
    if api not in _ENDPOINTS:
        raise ValueError(f"api={api!r} has no OpenAI batch endpoint")
    return _ENDPOINTS[api]


def input_file(api: str, items: Sequence[tuple[str, Mapping[str, Any]]]) -> bytes:
    """The batch's input file: one ``{"custom_id", "method", "url", "body"}`` line per request."""
    url = endpoint_of(api)
    lines = [
        json.dumps({"custom_id": cid, "method": "POST", "url": url, "body": body}, ensure_ascii=False)
        for cid, body in items
    ]
    return ("\n".join(lines) + "\n").encode()


def multipart(content: bytes, filename: str, boundary: str) -> tuple[bytes, str]:
    """The ``/files`` upload: ``purpose=batch`` and the file, as ``multipart/form-data`` bytes and the
    content type naming the boundary."""
    dash = f"--{boundary}".encode()
    parts = [
        dash,
        b'Content-Disposition: form-data; name="purpose"',
        b"",
        b"batch",
        dash,
        f'Content-Disposition: form-data; name="file"; filename="{filename}"'.encode(),
        b"Content-Type: application/jsonl",
        b"",
        content,
        dash + b"--",
        b"",
    ]
    return b"\r\n".join(parts), f"multipart/form-data; boundary={boundary}"


def create_body(file_id: str, api: str) -> dict[str, Any]:
    """The ``/batches`` request of an uploaded input file."""
    return {"input_file_id": file_id, "endpoint": endpoint_of(api), "completion_window": "24h"}


def batch_view(obj: object) -> BatchView:
    """A batch object (create, poll or cancel answer); ValueError when it is not one."""
    if (
        not isinstance(obj, dict)
        or not isinstance(obj.get("id"), str)
        or not isinstance(obj.get("status"), str)
    ):
        raise ValueError("not a batch object (no id or status)")
    out, err = obj.get("output_file_id"), obj.get("error_file_id")
    status = obj["status"]
    return BatchView(
        obj["id"],
        status,
        status in ENDED,
        out if isinstance(out, str) else None,
        err if isinstance(err, str) else None,
    )


def read_results(text: bytes) -> dict[str, ItemResult]:
    """An output or error file: each ``custom_id``'s response body when its status is 200, else the
    problem (the error's code and message, or the status); unreadable lines are skipped (their requests
    stay unanswered, and fall back)."""
    found: dict[str, ItemResult] = {}
    for raw in text.decode("utf-8", "replace").splitlines():
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(line, dict) or not isinstance(line.get("custom_id"), str):
            continue
        response, error = line.get("response"), line.get("error")
        if isinstance(response, dict) and response.get("status_code") == 200:
            body = response.get("body")
            if isinstance(body, dict):
                found[line["custom_id"]] = ItemResult(body)
                continue
        found[line["custom_id"]] = ItemResult(None, _problem(response, error))
    return found


def _problem(response: object, error: object) -> str:
    """What a failed line says: its error's code and message, else the response's status and error."""
    if isinstance(error, dict):
        return f"{error.get('code') or 'error'}: {error.get('message') or ''}".strip()
    if isinstance(response, dict):
        body = response.get("body")
        said = body.get("error") if isinstance(body, dict) else None
        message = said.get("message") if isinstance(said, dict) else None
        return f"status {response.get('status_code')}" + (f": {message}" if message else "")
    return "no response"
