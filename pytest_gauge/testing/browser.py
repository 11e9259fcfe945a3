"""Headless Chromium for looking at the HTML report: the tests, the screenshots and the benchmark.

Debian's ``chromium`` and ``chromium-driver`` driven through selenium (the test extra), started with a
fresh profile and every background service off, so the only requests the browser makes are the page's
own (the tests check there are none but ``file:`` and ``data:``). Browser console and network (CDP
``Network.*``) logging are on, read with ``driver.get_log("browser")`` / ``get_log("performance")``.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from selenium.webdriver.chrome.webdriver import WebDriver

__all__ = ["CHROMIUM_FLAGS", "chromium", "find_chromium"]

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def find_chromium() -> tuple[str, str] | None:
    """``(browser, driver)`` executables on PATH, or None when either is missing."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


@contextmanager
def chromium(width: int = 1280, height: int = 900) -> Iterator[WebDriver]:
    """A headless Chromium with a new ``--user-data-dir`` (removed afterwards); raises RuntimeError when
    Chromium or its driver is not installed."""
    from selenium import webdriver  # deferred: keeps selenium off the import of testing.browser
    from selenium.webdriver.chrome.options import Options  # deferred: selenium
    from selenium.webdriver.chrome.service import Service  # deferred: selenium

    found = find_chromium()
    if found is None:
        raise RuntimeError("chromium and chromedriver not found: apt-get install chromium chromium-driver")
    profile = tempfile.mkdtemp(prefix="gauge-chromium-")
    options = Options()
    options.binary_location = found[0]
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(found[1]))
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
