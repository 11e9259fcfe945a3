"""The model client's request and failures without a socket (gateway/transport.py): the URL and headers
it sends (base URL, kept query, key as bearer or ``x-api-key``), the in-process server's answers read as a
network's, and the typed failures with the SDK's class names and messages (the ledger's ``error`` field
and the diagnoses read them). The socket path is tested on loopback: tests/e2e/test_http_client.py."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from pytest_gauge._internal.gateway.response import BadResponse
from pytest_gauge._internal.gateway.transport import (
    APIStatusError,
    BadRequestError,
    InternalServerError,
    ModelClient,
    NotFoundError,
    RateLimitError,
    encode_body,
    status_error,
)

URL = "http://gauge.invalid/v1"


def served(status: int, body: bytes, kind: str = "application/json", **kw: Any) -> ModelClient:
    """A client whose every request is answered in-process with ``status`` and ``body``."""
    return ModelClient(URL, "sk-main", serve=lambda method, path, raw: (status, kind, body), **kw)


def test_the_url_is_the_base_url_the_path_and_the_kept_query() -> None:
    c = ModelClient(URL, "sk-main", query={"api-version": "2024-06-01"})
    assert c.target("/chat/completions") == (
        "/v1/chat/completions?api-version=2024-06-01",
        URL + "/chat/completions?api-version=2024-06-01",
    )
    c.base_url = "http://other.invalid/api/"  # a changed base URL applies to the next request
    assert (
        c.target("chat/completions")[1] == "http://other.invalid/api/chat/completions?api-version=2024-06-01"
    )


def test_the_headers_carry_json_the_clients_name_the_passed_ones_and_the_key() -> None:
    c = ModelClient(URL, "sk-main")
    sent = c.headers({"anthropic-version": "2023-06-01"}, None, "bearer")
    assert sent["Authorization"] == "Bearer sk-main" and "x-api-key" not in sent
    assert (sent["Content-Type"], sent["anthropic-version"]) == ("application/json", "2023-06-01")
    assert sent["User-Agent"].startswith("pytest-gauge/")
    assert c.headers(None, "sk-role", "bearer")["Authorization"] == "Bearer sk-role"
    by_header = c.headers(None, None, "x-api-key")
    assert by_header["x-api-key"] == "sk-main" and "Authorization" not in by_header
    assert "Authorization" not in ModelClient(URL, "").headers(None, None, "bearer")  # no key, no header


def test_an_in_process_answer_is_read_as_a_networks() -> None:
    body, headers = asyncio.run(served(200, b'{"ok":true}').post("/chat/completions", b"{}"))
    assert (body, headers["content-type"]) == (b'{"ok":true}', "application/json")
    with pytest.raises(BadResponse, match="more than the 8388608"):
        asyncio.run(served(200, b"x" * (9 << 20)).post("/chat/completions", b"{}"))
    with pytest.raises(InternalServerError) as down:
        asyncio.run(served(500, b"x" * (9 << 20), "text/plain").post("/chat/completions", b"{}"))
    assert len(str(down.value.body)) == 8 << 20  # an error body is cut at the bound, not refused


@pytest.mark.parametrize(
    ("status", "kind", "name"),
    [
        (400, BadRequestError, "BadRequestError"),
        (404, NotFoundError, "NotFoundError"),
        (418, APIStatusError, "APIStatusError"),
        (429, RateLimitError, "RateLimitError"),
        (503, InternalServerError, "InternalServerError"),
        (529, InternalServerError, "InternalServerError"),
    ],
)
def test_a_status_error_has_the_sdks_class_name_and_message(status: int, kind: type, name: str) -> None:
    body = {"error": {"message": "slow down", "type": "rate_limit_error", "code": "x"}}
    exc = status_error(status, {"retry-after": "2"}, json.dumps(body), URL + "/chat/completions")
    assert type(exc) is kind and type(exc).__name__ == name
    assert str(exc) == exc.message == f"Error code: {status} - slow down"
    assert exc.status_code == status and exc.headers["retry-after"] == "2"
    assert exc.body == body["error"]  # the error object, unwrapped as the SDK did
    assert exc.url == URL + "/chat/completions"


def test_a_text_error_body_is_kept_stripped_and_the_message_names_only_the_status() -> None:
    exc = status_error(502, {}, "  <html>Bad gateway</html>\n", URL)
    assert (str(exc), exc.body) == ("Error code: 502", "<html>Bad gateway</html>")
    exc = status_error(400, {}, json.dumps([1, 2]), URL)  # JSON, but not an object
    assert (str(exc), exc.body) == ("Error code: 400", [1, 2])
    exc = status_error(401, {}, json.dumps({"error": {"message": ""}}), URL)
    assert str(exc) == "Error code: 401"


def test_bodies_are_encoded_as_the_sdk_encoded_them() -> None:
    assert encode_body({"a": "é", "b": [1, 2.5]}) == '{"a":"é","b":[1,2.5]}'.encode()
    with pytest.raises(ValueError):
        encode_body({"t": float("nan")})


def test_the_sdk_is_built_on_first_access_over_the_same_pool() -> None:
    c = ModelClient(URL, "sk-main", query={"api-version": "1"}, timeout=7.0)
    sdk = c.openai()
    assert sdk is c.openai()  # built once
    assert (str(sdk.base_url), sdk.api_key, sdk.max_retries) == (URL + "/", "sk-main", 0)
    assert sdk._client is c.http  # the same connection pool
