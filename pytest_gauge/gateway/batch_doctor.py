"""The doctor's batch probe (``doctor --batch``, ``--gauge-doctor --gauge-batch judge``): does the gateway
have the batch endpoint ``--gauge-batch`` would use for each judge format? One ``GET`` listing at most one
batch per family (OpenAI ``/batches``, Anthropic ``/messages/batches``): it creates nothing and bills
nothing. A gateway without one is a warning, not a failure: the judge's calls then go the ordinary way."""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from .tls import tls_context
from .wire import NEUTRAL_API, wire_format
from .wire.batches import batch_family, message_batches

if TYPE_CHECKING:
    from .doctor import Target

__all__ = ["Finding", "batch_checks", "batch_families"]

Finding = tuple[Literal["ok", "warn"], str, str, str]
"""One doctor check as plain values: status (ok, warn), topic, message, fix (doctor.py makes its Check)."""

NO_ENDPOINT = (400, 404, 405, 501)


def batch_families(targets: Sequence[Target]) -> list[str]:
    """One format per batch API the judge targets would use (Message Batches, OpenAI batches), sorted;
    the neutral format alone when no target is a judge."""
    judges = [t for t in targets if t.roles.split(" ", 1)[0] == "judge"]
    found = {batch_family(t.api): t.api for t in judges}
    return [found[name] for name in sorted(found)] or [NEUTRAL_API]


def _url(base_url: str, api: str) -> str:
    """The listing URL of the batches ``api``'s calls use below ``base_url`` (its query kept, ``limit=1``
    added)."""
    base, _, query = base_url.partition("?")
    path = "/batches"
    if message_batches(api):
        path = wire_format(api).request_path(base) + "/batches"
    joined = base.rstrip("/") + path
    params = [*urllib.parse.parse_qsl(query), ("limit", "1")]
    return joined + "?" + urllib.parse.urlencode(params)


def _status(url: str, key: str, api: str, timeout: float) -> tuple[int | None, str]:
    """The listing's HTTP status (None when no answer came) and a short cause."""
    headers = {"Authorization": f"Bearer {key}", "User-Agent": "pytest-gauge doctor"}
    headers.update(wire_format(api).request_headers)
    request = urllib.request.Request(url, headers=headers, method="GET")
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=tls_context()) as answer:
            return int(answer.status), "ok"
    except urllib.error.HTTPError as exc:
        return exc.code, str(exc.reason)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return None, str(getattr(exc, "reason", exc))[:100]


def batch_checks(base_url: str, key: str, targets: Sequence[Target], timeout: float) -> list[Finding]:
    """One check per batch family the judge targets use: ok when the gateway lists batches, a warning
    naming the fallback when it has no batch endpoint or the probe failed."""
    checks: list[Finding] = []
    for api in batch_families(targets):
        name = batch_family(api)
        url = _url(base_url, api)
        status, cause = _status(url, key, api, timeout)
        shown = urllib.parse.urlsplit(url).path
        if status is not None and 200 <= status < 300:
            checks.append(("ok", "batch", f"{name}: the gateway answers GET {shown}", ""))
        elif status in NO_ENDPOINT:
            checks.append(
                (
                    "warn",
                    "batch",
                    f"{name}: no batch endpoint (GET {shown} answered {status}); --gauge-batch judge sends"
                    " the judge's calls the ordinary way (at the ordinary price)",
                    "use a gateway that passes batches on (LiteLLM's proxy does for OpenAI providers), or"
                    " run without --gauge-batch",
                )
            )
        else:
            said = f"answered {status}" if status is not None else f"no answer ({cause})"
            checks.append(
                (
                    "warn",
                    "batch",
                    f"{name}: GET {shown} {said}; batches that fail are sent the ordinary way",
                    "check the key's access to the batch API",
                )
            )
    return checks
