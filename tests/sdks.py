"""Client SDKs the tests drive (``anthropic``): imported, or the module skipped locally and failed in CI
(``CI`` or ``GAUGE_REQUIRE_BROWSER`` set, as ``.ci/run`` does after installing the test extra), so a
missing SDK never hides a test from CI."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest

__all__ = ["require_sdk"]


def require_sdk(name: str, install: str) -> ModuleType:
    """The SDK module ``name``; without it a module-level skip, or in CI a failure naming ``install``."""
    try:
        return importlib.import_module(name)
    except ImportError:
        if os.environ.get("CI") or os.environ.get("GAUGE_REQUIRE_BROWSER"):
            pytest.fail(f"the {name} SDK is missing in CI: {install}", pytrace=False)
        pytest.skip(f"the {name} SDK is not installed ({install})", allow_module_level=True)
