"""Anthropic's Message Batches as values (docs/protocol.md#batched-judging): the create request
(``requests: [{custom_id, params}]``), the batch object (``processing_status``) and the results file
read back into one answer or one problem per ``custom_id``. Pure functions, no I/O:
:mod:`pytest_gauge.gateway.batch` sends them."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .batch_openai import BatchView, ItemResult

__all__ = ["batch_view", "batches_path", "create_body", "read_results"]


def batches_path(messages_path: str) -> str:
    """The Message Batches path below the same base as the Messages path (``.../messages/batches``)."""
    return messages_path.rstrip("/") + "/batches"


def create_body(items: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """The create request: each Messages request body as one ``params`` with its ``custom_id``."""
    return {"requests": [{"custom_id": cid, "params": dict(body)} for cid, body in items]}


def batch_view(obj: object) -> BatchView:
    """A message batch object; ended once ``processing_status`` is ``ended`` (its results are then read
    from ``<batches>/<id>/results``). ValueError when it is not one."""
    if not isinstance(obj, dict) or not isinstance(obj.get("id"), str):
        raise ValueError("not a message batch object (no id)")
    status = obj.get("processing_status")
    if not isinstance(status, str):
        raise ValueError("not a message batch object (no processing_status)")
    ended = status == "ended"
    return BatchView(obj["id"], status, ended, obj["id"] if ended else None)


def read_results(text: bytes) -> dict[str, ItemResult]:
    """The results file: each ``custom_id``'s message when ``succeeded``, else its result type
    (``errored`` with the error's message, ``canceled``, ``expired``)."""
    found: dict[str, ItemResult] = {}
    for raw in text.decode("utf-8", "replace").splitlines():
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(line, dict) or not isinstance(line.get("custom_id"), str):
            continue
        result = line.get("result")
        kind = result.get("type") if isinstance(result, dict) else None
        if kind == "succeeded" and isinstance(result, dict) and isinstance(result.get("message"), dict):
            found[line["custom_id"]] = ItemResult(result["message"])
            continue
        problem = str(kind or "no result")
        error = result.get("error") if isinstance(result, dict) else None
        inner = error.get("error", error) if isinstance(error, dict) else None
        if isinstance(inner, dict) and inner.get("message"):
            problem += f": {inner['message']}"
        found[line["custom_id"]] = ItemResult(None, problem)
    return found
