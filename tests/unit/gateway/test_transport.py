"""The model calls' HTTP client (gateway/transport.py) over an in-process transport: the request it
sends (URL, query, headers, key, body bytes), what it gives back, and its typed failures with the SDK's
class names and messages (the ledger's ``error`` field and the diagnoses read them)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx2
import pytest

from pytest_gauge.gateway.response import BadResponse
from pytest_gauge.gateway.transport import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    BadRequestError,
    InternalServerError,
    ModelClient,
    NotFoundError,
    RateLimitError,
    encode_body,
    status_error,
)

URL = "http://gauge.invalid/v1"
SEEN: list[httpx2.Request] = []


def client(answer: Any, **kw: Any) -> ModelClient:
    """A client whose every request is kept in SEEN and answered by ``answer(request)``."""
    SEEN.clear()

    async def handler(request: httpx2.Request) -> httpx2.Response:
        SEEN.append(request)
        await request.aread()
        return answer(request)  # type: ignore[no-any-return]

    return ModelClient(URL, kw.pop("key", "sk-main"), transport=httpx2.MockTransport(handler), **kw)


def post(c: ModelClient, **kw: Any) -> tuple[bytes, Any]:
    return asyncio.run(c.post("/chat/completions", b'{"a":1}', kw.pop("headers", None), **kw))


def ok(_: httpx2.Request) -> httpx2.Response:
    return httpx2.Response(200, content=b'{"ok":true}', headers={"x-litellm-response-cost": "0.5"})


def test_the_request_is_the_base_url_the_path_the_kept_query_and_the_bytes_given() -> None:
    c = client(ok, query={"api-version": "2024-06-01"})
    body, headers = post(c, headers={"anthropic-version": "2023-06-01"})
    assert (body, headers["x-litellm-response-cost"]) == (b'{"ok":true}', "0.5")
    request = SEEN[0]
    assert (request.method, str(request.url)) == ("POST", URL + "/chat/completions?api-version=2024-06-01")
    assert request.content == b'{"a":1}'  # sent as given: encoded once by the caller
    assert request.headers["authorization"] == "Bearer sk-main"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert "x-api-key" not in request.headers


def test_a_role_key_and_x_api_key_auth_replace_the_bearer_token() -> None:
    c = client(ok)
    post(c, key="sk-role")
    assert SEEN[0].headers["authorization"] == "Bearer sk-role"
    c = client(ok)
    post(c, auth="x-api-key")
    assert SEEN[0].headers["x-api-key"] == "sk-main" and "authorization" not in SEEN[0].headers
    c = client(ok, key="")
    post(c)
    assert "authorization" not in SEEN[0].headers  # no key, no header


def test_a_changed_base_url_applies_to_the_next_request() -> None:
    c = client(ok)
    post(c)
    c.base_url = "http://other.invalid/api/"
    post(c)
    assert str(SEEN[1].url) == "http://other.invalid/api/chat/completions"


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
    c = client(lambda _: httpx2.Response(status, json=body, headers={"retry-after": "2"}))
    with pytest.raises(APIStatusError) as caught:
        post(c)
    exc = caught.value
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


def test_a_long_error_body_is_cut_and_a_long_answer_refused() -> None:
    c = client(lambda _: httpx2.Response(500, content=b"x" * 100))
    with pytest.raises(InternalServerError):
        asyncio.run(c.post("/chat/completions", b"{}"))
    c = client(lambda _: httpx2.Response(200, content=b"x" * (9 << 20)))
    with pytest.raises(BadResponse, match="more than the 8388608"):
        post(c)


def test_no_answer_is_a_connection_error_or_a_timeout_with_the_transports_cause() -> None:
    def refuse(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError("refused", request=request)

    def stall(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ReadTimeout("slow", request=request)

    with pytest.raises(APIConnectionError) as caught:
        post(client(refuse))
    assert not isinstance(caught.value, APITimeoutError)
    assert (
        type(caught.value.__cause__).__name__ == "ConnectError" and str(caught.value) == "Connection error."
    )
    with pytest.raises(APITimeoutError) as timed:
        post(client(stall))
    assert str(timed.value) == "Request timed out."


def test_the_whole_request_is_bounded_by_the_timeout() -> None:
    async def hang(request: httpx2.Request) -> httpx2.Response:
        await asyncio.sleep(5)
        return httpx2.Response(200)

    c = ModelClient(URL, "k", transport=httpx2.MockTransport(hang))
    with pytest.raises(TimeoutError):
        asyncio.run(c.post("/chat/completions", b"{}", timeout=0.05))


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
