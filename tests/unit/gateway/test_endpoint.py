"""The key and base URL checks: the variable named, the key never echoed, a query or fragment refused."""

from __future__ import annotations

import pytest

from pytest_gauge._internal.gateway.endpoint import check_base_url, check_key


def test_key_checks_name_the_variable_and_never_echo_the_key() -> None:
    assert check_key({}) is not None and "TAOTOKEN_API_KEY" in (check_key({}) or "")
    assert "empty" in (check_key({"TAOTOKEN_API_KEY": "  \n"}) or "")
    problem = check_key({"TAOTOKEN_API_KEY": "sk-abc\ndef"}) or ""
    assert "whitespace" in problem and "sk-abc" not in problem
    assert check_key({"TAOTOKEN_API_KEY": "  sk-abc \n"}) is None  # surrounding whitespace is stripped


@pytest.mark.parametrize(
    ("url", "error", "warning"),
    [
        ("https://taotoken.net/api", False, None),
        ("https://x.test/v1?utm_source=x", True, None),
        ("https://x.test/v1#frag", True, None),
        ("https://x.test/v1/v1", False, "https://x.test/v1"),
        ("https://x.test//v1", False, "https://x.test/v1"),
        ("https://x.test/v1/chat/completions", False, "https://x.test/v1"),
        ("ftp://x.test", True, None),
    ],
)
def test_base_url_hygiene(url: str, error: bool, warning: str | None) -> None:
    check = check_base_url(url)
    assert bool(check.errors) == error
    if warning:
        assert any(warning + "?" in w for w in check.warnings)
    else:
        assert not check.warnings
    if not url.startswith("ftp"):
        assert "?" not in check.url and "#" not in check.url  # the URL used never keeps a query or fragment
