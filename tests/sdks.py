"""Client SDKs the tests drive (``anthropic``): imported, or the test skipped locally and failed in CI
(``CI`` or ``GAUGE_REQUIRE_BROWSER`` set, as ``.ci/run`` does after installing the test extra), so a
missing SDK never hides a test from CI. ``LazySDK`` imports on first use, not at collection: importing
``anthropic`` costs about 3 s of CPU, which a worker that runs none of its tests should not pay."""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Any

import pytest

__all__ = ["ANTHROPIC_INSTALL", "LazySDK", "require_sdk", "sdk_http"]

ANTHROPIC_INSTALL = "pip install 'anthropic>=0.40' (in the test extra)"


def require_sdk(name: str, install: str) -> ModuleType:
    """The SDK module ``name``; without it a module-level skip, or in CI a failure naming ``install``."""
    try:
        return importlib.import_module(name)
    except ImportError:
        if os.environ.get("CI") or os.environ.get("GAUGE_REQUIRE_BROWSER"):
            pytest.fail(f"the {name} SDK is missing in CI: {install}", pytrace=False)
        pytest.skip(f"the {name} SDK is not installed ({install})", allow_module_level=True)


class LazySDK:
    """A test module's handle on an SDK, imported (or skipped, or failed in CI) at its first attribute use
    inside a test rather than when the module is collected."""

    def __init__(self, name: str, install: str) -> None:
        self._name = name
        self._install = install

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith("__"):  # pytest's collection probes module attributes (``__bases__``,
            raise AttributeError(attribute)  # ``__call__``...): answering would import the SDK there
        return getattr(require_sdk(self._name, self._install), attribute)


def sdk_http(sdk: Any) -> Any:
    """The SDK's own default HTTP client (``sdk.DefaultHttpxClient``: its timeouts, limits, redirects) on
    the process's one TLS context (``transport.tls_context``): each client an SDK builds loads the CA
    bundle again (20-60 ms), and the tests build a few hundred against loopback servers."""
    from pytest_gauge._internal.gateway.transport import tls_context

    return sdk.DefaultHttpxClient(verify=tls_context())
