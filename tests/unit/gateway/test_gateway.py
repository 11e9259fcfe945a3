"""The gateway's pure rules: retry delays from the server's headers and the capped, jittered backoff."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from pytest_gauge._internal.gateway.server_hints import backoff, retry_delay


def test_retry_delay_reads_ms_seconds_and_http_dates() -> None:
    rng = random.Random(0)
    assert retry_delay({"retry-after-ms": "250"}, 1, rng) == 0.25
    assert retry_delay({"retry-after": "3"}, 1, rng) == 3.0
    now = datetime(2026, 1, 1, tzinfo=UTC)
    later = format_datetime(now + timedelta(seconds=7), usegmt=True)
    assert retry_delay({"retry-after": later}, 1, rng, now=now.timestamp()) == pytest.approx(7.0)
    assert retry_delay({}, 1, rng) is None


def test_backoff_is_exponential_capped_and_jittered() -> None:
    rng = random.Random(1)
    values = [backoff(a, rng, base=1.0, cap=8.0) for a in range(1, 7)]
    assert 0.75 <= values[0] <= 1.25 and 1.5 <= values[1] <= 2.5
    assert all(v <= 8.0 * 1.25 for v in values) and values[5] >= 8.0 * 0.75
