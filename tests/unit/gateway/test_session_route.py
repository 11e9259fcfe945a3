"""What the environment says about a request's route (:meth:`LoopSession.route`): the proxy of
``HTTP(S)_PROXY`` unless ``NO_PROXY`` names the host, ``~/.netrc`` credentials unless the request carries
its own Authorization, looked up once per origin for a session's life (aiohttp's ``trust_env`` looked
them up on every request), and a request really sent through the proxy named."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from yarl import URL

from pytest_gauge._internal.gateway import client_session
from pytest_gauge._internal.gateway.client_session import LoopSession
from pytest_gauge.testing import LoopbackServer

_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "NETRC")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in _VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))


def test_the_proxy_named_for_the_scheme_unless_no_proxy_names_the_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://user:pw@proxy.example:3128")
    route = LoopSession().route("https://api.example/v1/chat/completions", {})
    assert str(route["proxy"]) == "http://proxy.example:3128"
    proxy_auth = route["proxy_auth"]
    assert proxy_auth is not None and proxy_auth.login == "user"
    assert LoopSession().route("http://api.example/v1", {}) == {}  # no HTTP_PROXY: plain http goes direct
    monkeypatch.setenv("NO_PROXY", "api.example")
    assert LoopSession().route("https://api.example/v1", {}) == {}


def test_netrc_credentials_only_for_a_request_without_its_own_authorization(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    netrc = tmp_path / "netrc"
    netrc.write_text("machine svc.example login agent password s3cret\n", encoding="utf-8")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    session = LoopSession()
    assert session.route("https://svc.example/run", {})["auth"].login == "agent"
    assert "auth" not in session.route("https://svc.example/run", {"Authorization": "Bearer k"})
    assert "auth" not in session.route("https://other.example/run", {})


def test_the_environment_is_read_once_per_origin(monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[str] = []
    real = client_session._from_environment

    def counted(url: URL) -> client_session.Route:
        reads.append(str(url))
        return real(url)

    monkeypatch.setattr(client_session, "_from_environment", counted)
    session = LoopSession()
    for i in range(20):
        session.route(f"https://api.example/v1/call/{i}", {})
    session.route("https://other.example/v1", {})
    assert len(reads) == 2


def test_a_request_goes_through_the_proxy_the_environment_names(monkeypatch: pytest.MonkeyPatch) -> None:
    with LoopbackServer() as proxy:  # answers whatever reaches it: here, as the proxy
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
        session = LoopSession()

        async def send() -> int:
            url = "http://models.invalid/v1/models"  # resolvable only by the proxy
            try:
                async with session.get().get(url, **session.route(url, {})) as answer:
                    return answer.status
            finally:
                await session.aclose()

        assert asyncio.run(send()) == 200
        assert proxy.stats()["requests_total"] == 1
