"""Typed gateway failures, each with its cause and the fix (docs/protocol.md#gateway-failures).
Messages never carry the key: cause and fix pass :func:`.redact.redact` when the error is made, the one
choke point every text from a gateway goes through on its way to a person or a file."""

from __future__ import annotations

from .redact import redact

__all__ = [
    "BudgetExhausted",
    "ConfigurationError",
    "GatewayError",
    "ModelNotFound",
    "ModelStopped",
    "ReplayMiss",
    "RunStopped",
    "rejects_format",
]

_FORMAT_MARKERS = ("response_format", "json_schema", "json_object", "response format")


class GatewayError(Exception):
    """A call that could not be completed. ``fatal`` errors (bad key, bad URL) stop the whole run."""

    fatal = False

    def __init__(
        self,
        cause: str,
        fix: str,
        *,
        status: int | None = None,
        role: str | None = None,
        model: str | None = None,
        url: str | None = None,
    ) -> None:
        self.cause = redact(cause)
        self.fix = redact(fix)
        self.status = status
        self.role = role
        self.model = model
        self.url = url
        super().__init__(self.message())

    def message(self) -> str:
        where = []
        if self.role:
            where.append(f"role {self.role}")
        if self.model:
            where.append(f"model {self.model}")
        if self.url:
            where.append(f"URL {self.url}")
        ctx = f" ({', '.join(where)})" if where else ""
        return f"{self.cause}{ctx}. Fix: {self.fix}"

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild, (type(self), self.cause, self.fix, self.status, self.role, self.model, self.url))


def _rebuild(
    cls: type[GatewayError],
    cause: str,
    fix: str,
    status: int | None,
    role: str | None,
    model: str | None,
    url: str | None,
) -> GatewayError:
    return cls(cause, fix, status=status, role=role, model=model, url=url)


class ConfigurationError(GatewayError):
    """401/403/404 and bad settings: every further call would fail the same way, so the run stops once."""

    fatal = True


class BudgetExhausted(GatewayError):
    """A call would pass the run's or the task's budget; it was not sent."""


class ReplayMiss(GatewayError):
    """``--gauge-backend=replay`` found no recorded response for a request."""


class ModelNotFound(GatewayError):
    """The gateway does not know the model (404/400 ``model_not_found``): every later call for that
    (role, model) stops with this error instead of being sent."""


class ModelStopped(GatewayError):
    """A call for a (role, model) that was stopped earlier in the run (unknown, timing out, key
    rejected; see :mod:`.model_stops`): not sent, and its case is reported as not run."""


class RunStopped(GatewayError):
    """Ctrl-C or SIGTERM: no new attempt is started; the call is not a failure of the case."""


def rejects_format(exc: GatewayError) -> bool:
    """Whether a gateway error is the server refusing the ``response_format`` parameter: a 400 or 422
    whose message names it (the judge then falls back, see :mod:`pytest_gauge.run.judge_format`). Any
    other failure is not a reason to ask differently."""
    if exc.status not in (400, 422):
        return False
    text = exc.cause.lower()
    return any(marker in text for marker in _FORMAT_MARKERS)
