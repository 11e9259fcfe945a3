"""Typed gateway failures, each with its cause and the fix (docs/protocol.md#gateway-failures).
Messages never carry the key: cause and fix pass :func:`.redact.redact` when the error is made, the one
choke point every text from a gateway goes through on its way to a person or a file."""

from __future__ import annotations

from .redact import redact

__all__ = [
    "FORMAT_REFUSAL_STATUSES",
    "BudgetExhausted",
    "ConfigurationError",
    "GatewayError",
    "KeyRejected",
    "ModelKeyRejected",
    "ModelNotFound",
    "ModelStopped",
    "ReplayMiss",
    "RunStopped",
    "names_format",
    "rejects_format",
]

_FORMAT_MARKERS = (
    "response_format",
    "json_schema",
    "json_object",
    "response format",
    "grammar",
    "text.format",
)
# statuses with which servers refuse a request's parameters (llama.cpp-style servers answer 500 or 501)
FORMAT_REFUSAL_STATUSES = (400, 415, 422, 500, 501)


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


class KeyRejected(ConfigurationError):
    """The gateway rejected the key (401/403, or a proxy's auth error in a 400/500 body): the run stops,
    unless calls with the key have already worked, when only that model's work stops
    (:meth:`for_model`)."""

    def for_model(self, role: str, model: str) -> ModelKeyRejected:
        """The same rejection confined to one (role, model): its remaining work stops, the others go on."""
        return ModelKeyRejected(
            f"{self.cause}, for the {role} model {model!r} only: other calls with this key succeeded",
            "the key lacks access to this model: grant it on the gateway, or change the model; every later"
            " call for this role and model stops here",
            status=self.status,
            role=role,
            model=model,
        )


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


class ModelKeyRejected(ModelNotFound):
    """The key was rejected for one model after other calls with it had worked: that (role, model)
    stops like an unknown model, the rest of the run goes on."""


class RunStopped(GatewayError):
    """Ctrl-C or SIGTERM: no new attempt is started; the call is not a failure of the case."""


def names_format(text: str) -> bool:
    """Whether an error text is about the ``response_format`` parameter (or the grammar it compiles to)."""
    lowered = text.lower()
    return any(marker in lowered for marker in _FORMAT_MARKERS)


def rejects_format(exc: GatewayError) -> bool:
    """Whether a gateway error is the server refusing the ``response_format`` parameter: an error status
    (400, 422, or a llama.cpp-style 500/501) whose body names it (the judge then falls back, see
    :mod:`pytest_gauge._internal.run.judge_format`). Any other failure is not a reason to ask differently."""
    if exc.status not in FORMAT_REFUSAL_STATUSES:
        return False
    return names_format(exc.cause)
