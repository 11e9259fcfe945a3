"""Whether a run exports OpenTelemetry spans, and with what: ``--gauge-otel`` (ini ``gauge_otel``) or
the standard ``OTEL_EXPORTER_OTLP_ENDPOINT`` with the ``otel`` extra installed; ``--gauge-otel-content``
adds message text. Cheap to import: the SDK is imported only by the export (``finish/otel.py``)."""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass

import pytest

__all__ = ["INSTALL", "OtelSettings", "add_otel_options", "check_otel", "otel_settings"]

INSTALL = "pip install 'pytest-gauge[otel]'"
_ENDPOINTS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
_MODULES = ("opentelemetry.sdk.trace", "opentelemetry.exporter.otlp.proto.http.trace_exporter")


@dataclass(frozen=True)
class OtelSettings:
    """An export the run makes: ``content`` adds message text (judge reasons, transcripts' turns)."""

    content: bool = False


def add_otel_options(parser: pytest.Parser) -> None:
    """``--gauge-otel`` / ``gauge_otel`` and ``--gauge-otel-content`` / ``gauge_otel_content``."""
    group = parser.getgroup("gauge", "pytest-gauge: LLM-agent evaluations")
    group.addoption(
        "--gauge-otel",
        action="store_true",
        default=None,
        help="export the run as OpenTelemetry spans over OTLP/HTTP (OTEL_EXPORTER_OTLP_ENDPOINT, default"
        " localhost:4318; on by itself when that variable is set and the otel extra is installed)",
    )
    parser.addini("gauge_otel", "like --gauge-otel", type="bool", default=False)
    group.addoption(
        "--gauge-otel-content",
        action="store_true",
        default=None,
        help="with the OpenTelemetry export, also send message text (transcripts' turns, judge reasons)",
    )
    parser.addini("gauge_otel_content", "like --gauge-otel-content", type="bool", default=False)


def _flag(config: pytest.Config, name: str) -> bool:
    return bool(config.getoption(name, None) or config.getini(name))


def _installed() -> bool:
    try:
        return all(importlib.util.find_spec(m) is not None for m in _MODULES)
    except ModuleNotFoundError:  # a parent package missing
        return False


def check_otel(config: pytest.Config) -> None:
    """At the start of the run: ``--gauge-otel`` without the extra is a usage error (not a surprise at
    the end of the run)."""
    if _flag(config, "gauge_otel") and not _installed():
        raise pytest.UsageError(f"--gauge-otel needs the OpenTelemetry SDK: {INSTALL}")


def otel_settings(config: pytest.Config, environ: Mapping[str, str]) -> OtelSettings | None:
    """The run's export, or None: asked for with the flag, or an OTLP endpoint in the environment with
    the extra installed (``OTEL_SDK_DISABLED=true`` turns the latter off, as for any OTel SDK)."""
    content = _flag(config, "gauge_otel_content")
    if _flag(config, "gauge_otel"):
        return OtelSettings(content=content)
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    if any(environ.get(name) for name in _ENDPOINTS) and _installed():
        return OtelSettings(content=content)
    return None
