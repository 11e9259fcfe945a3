"""The OpenAI-compatible gateway: the response cache, shared limits, retries owned by the plugin
(every attempt a ledger record), and typed, actionable errors (docs/protocol.md#gateway-failures).

Every gateway call of every role goes through :meth:`Gateway.chat`. Each attempt is one POST of the
package's own HTTP client (:mod:`.transport`: no SDK, no retries of its own), so each attempt is visible.
The sim backend is the same path with an in-process HTTP transport, so offline runs exercise this module
for real.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..records import NEUTRAL_API, ChatResult, LedgerRecord
from ..records.json_types import JSONObject
from .call_priority import UNRANKED, reset_call_chain, set_call_chain
from .diagnosis import final_error, is_timeout, server_message
from .endpoint import KEY_VARIABLE, URL_VARIABLE
from .errors import (
    FORMAT_REFUSAL_STATUSES,
    GatewayError,
    KeyRejected,
    ModelKeyRejected,
    ModelNotFound,
    ReplayMiss,
    names_format,
)
from .ledger import INTERRUPTED, SENT
from .limits import model_wait, output_tokens_cap, prompt_tokens_estimate
from .replay_diff import explain_miss
from .response import BadResponse
from .server_hints import backoff, gateway_said, retry_delay, served_model
from .shared import (
    REUSING_MODES,
    CallContext,
    GatewayResources,
    GatewaySettings,
    GatewayShared,
    GatewayState,
    WireReply,
    live_keys,
)
from .store import Store, content_key
from .transport import APIStatusError, attempt_failures, encode_body
from .wire import Api, WireFormat, wire_format

if TYPE_CHECKING:
    from .transport import ModelClient

__all__ = [
    "CallContext",
    "Gateway",
    "GatewayResources",
    "GatewaySettings",
    "GatewayShared",
    "GatewayState",
    "WireReply",
    "gateway_said",
    "live_keys",
    "retry_delay",
    "served_model",
]

CACHE_FORMAT_VERSION = 1
RETRYABLE = frozenset({408, 409, 429})
_NO_JITTER = random.Random(0)  # retry_delay reads the headers' hint only: no draw is made from it


class Gateway:
    """Sends chat completions for one suite through the shared limits, cache and ledger."""

    def __init__(
        self,
        *,
        suite: str,
        client_factory: Callable[[], ModelClient],
        backend_id: str,
        shared: GatewayShared,
    ) -> None:
        self.suite = suite
        self.backend_id = backend_id
        self.shared = shared
        self._client_factory = client_factory
        self._client: ModelClient | None = None
        self._client_lock = threading.Lock()

    @property
    def settings(self) -> GatewaySettings:
        """The run's settings (:class:`GatewaySettings`)."""
        return self.shared.settings

    @property
    def resources(self) -> GatewayResources:
        """The process's ledger, limits, prices, cache and stops (:class:`GatewayResources`)."""
        return self.shared.resources

    @property
    def state(self) -> GatewayState:
        """The process's gates, stop and counters (:class:`GatewayState`)."""
        return self.shared.state

    @property
    def client(self) -> ModelClient:
        """The suite's :class:`~.transport.ModelClient`, built on first use (the engine's thread or a
        fixture): a run answered entirely from the cache never builds one."""
        if self._client is None:
            with self._client_lock:
                if self._client is None:
                    self._client = self._client_factory()
        return self._client

    async def aclose(self) -> None:
        """Close the client's kept connections, if it was built (the end of the run)."""
        if self._client is not None:
            await self._client.aclose()

    def cache_key(
        self, body: JSONObject, ctx: CallContext, api: Api = NEUTRAL_API, headers: PassedHeaders = ()
    ) -> str:
        """The canonical request (its format's :meth:`~.wire.WireFormat.cache_material`) plus the sample
        index: never the key, headers, timeouts or retry settings, nor which case or agent asked (identical
        requests share one entry and one gateway call). A format other than chat is part of the key; chat
        keys are those of every earlier version."""
        material = {
            "format_version": CACHE_FORMAT_VERSION,
            "backend": self.backend_id,
            "scope": ctx.cache_scope(),
            **wire_format(api).cache_material(body),
        }
        if api != NEUTRAL_API:
            material["api"] = api
        if headers:  # only then: keys of calls without passed headers stay those of earlier versions
            material["headers"] = dict(headers)
        return content_key(material)

    def _usable(self, entry: JSONObject | None) -> bool:
        if entry is None:
            return False
        if entry.get("run_id") == self.settings.run_id:
            return True
        return (self.settings.cache_mode in REUSING_MODES and bool(entry.get("persist"))) or (
            self.settings.replay and bool(entry.get("persist"))
        )

    def _record(
        self,
        ctx: CallContext,
        seq: int,
        attempt: int,
        role: str,
        model: str,
        *,
        status: str,
        response: JSONObject | None = None,
        latency: float = 0.0,
        cache_hit: bool = False,
        http_status: int | None = None,
        error: str | None = None,
        possibly_billed: bool = False,
        request: str | None = None,
        said: Mapping[str, Any] | None = None,
        api: Api = NEUTRAL_API,
        batched: bool = False,
    ) -> LedgerRecord:
        """The ledger line of one attempt or cache hit; ``response`` is the format's own (checked) one;
        ``batched``: sent in a batch, marked so and priced at the batch price."""
        keys = self.settings.key_variables
        usage = None
        finish = None
        served = None
        if response is not None:
            fmt = wire_format(api)
            usage = fmt.usage(response)
            completion = fmt.completion(response)
            choices = completion.get("choices") or [{}]
            finish = choices[0].get("finish_reason")
            served = served_model(model, completion.get("model"))  # warned once per pair at the end
        priced = served or model
        prices = self.resources.prices
        cost = (prices.batch_cost if batched else prices.usage_cost)(priced, usage) if usage else None
        record = LedgerRecord(
            run_id=self.settings.run_id,
            call_id=f"{ctx.work}#{seq}",
            attempt=attempt,
            status=status,
            suite=ctx.suite,
            task_id=ctx.task_id,
            role=role,  # type: ignore[arg-type]
            model=model,
            strategy=ctx.strategy,
            work=ctx.work,
            usage=usage,
            usage_missing=response is not None and usage is None,
            latency_s=round(latency, 6),
            finish_reason=finish,
            cache_hit=cache_hit,
            cost=cost,
            http_status=http_status,
            error=error,
            possibly_billed=possibly_billed,
            ts=time.time(),
            request=request,
            served_model=served,
            key_variable=keys.get(role, KEY_VARIABLE) if keys is not None else None,
            api=api,
            batched=True if batched else None,
            **(said or {}),
        )
        self.resources.ledger.append(record)
        return record

    def _cache_hit(self, cache: Store, key: str, call: _Call) -> WireReply | None:
        """The cached answer as this call's reply (recorded with ``cache_hit``), or None if unusable."""
        entry = cache.get(key)
        if entry is None and key in cache.unreadable:
            self.state.damaged_entry(key, "the file is not a JSON object")
        if not self._usable(entry):
            return None
        assert entry is not None
        problem = self._entry_problem(entry, key, call.ctx, call.api)
        if problem is not None:
            self.state.damaged_entry(key, problem)
            return None
        response = entry["response"]
        record = self._record(
            call.ctx, call.seq, 1, call.role, call.model, status="ok", response=response, cache_hit=True,
            request=key, api=call.api,
        )  # fmt: skip
        return _reply(response, record)

    def _entry_problem(self, entry: JSONObject, key: str, ctx: CallContext, api: Api) -> str | None:
        """Why a cache entry (or cassette) cannot be served, or None: it is of the call's wire format (an
        entry without ``api`` is a chat one), its stored request must hash to the key it is filed under (an
        entry copied over another, or edited, does not), and its response must be one the format's reader
        accepts, and match its ``response_digest`` (an entry without one, an edited or an older version's,
        is not served). The cache is trusted only as far as its folder."""
        request = entry.get("request")
        if not isinstance(request, dict):
            return "it stores no request"
        stored = entry.get("api", NEUTRAL_API)
        if stored != api:
            return f"it stores a {stored!r} response, not a {api!r} one"
        fmt = wire_format(api)
        passed = entry.get("passed_header_values") or {}
        if not isinstance(passed, dict) or not all(isinstance(v, str) for v in passed.values()):
            return "its stored headers are not an object of strings"
        try:
            if self.cache_key(request, ctx, api, tuple(sorted(passed.items()))) != key:
                return "its stored request does not hash to the key it is filed under"
            response = entry.get("response")
            digest = entry.get("response_digest")
            if digest is None:  # every entry of this version has one: older ones cannot be verified
                return "it carries no response_digest (an older version's entry, or an edited one)"
            if digest != content_key(response):
                return "its response was changed after it was stored"
            fmt.parse_response(json.dumps(response).encode())
        except BadResponse as exc:
            what = "a chat completion" if api == NEUTRAL_API else f"an {api} response"
            return f"its response is not {what} ({exc.problem})"
        except (TypeError, ValueError):
            return "its stored request is not JSON data"
        return None

    async def chat(
        self, ctx: CallContext, seq: int, role: str, model: str, body: JSONObject, api: Api = NEUTRAL_API
    ) -> ChatResult:
        """One logical call from a chat request body (the package's neutral shape), sent in the wire
        format ``api`` (its :meth:`~.wire.WireFormat.request_body`), answered as a chat completion.
        Raises GatewayError."""
        if self.state.fatal is not None or self.state.stopping:
            self.shared.check_open(role, model)
        body = {k: v for k, v in body.items() if v is not None}
        body["model"] = model
        reply = await self.call(ctx, seq, role, model, api, wire_format(api).request_body(body))
        return reply.result

    async def call(
        self,
        ctx: CallContext,
        seq: int,
        role: str,
        model: str,
        api: Api,
        body: JSONObject,
        headers: Mapping[str, str] | None = None,
    ) -> WireReply:
        """One logical call with ``body`` already in the wire format ``api``'s request shape (no
        ``stream``): from the cache when allowed, else sent with retries; the cache, limits, retries,
        diagnoses and ledger (the format on each line) are the same for every format. ``headers``: a
        client's own request headers of the format's ``passed_headers`` (the recording proxy's), sent
        beside the gateway's and part of the cache key. Raises GatewayError."""
        shared = self.shared
        settings, res, state = self.settings, self.resources, self.state
        if state.fatal is not None or state.stopping:
            shared.check_open(role, model)
        if body.get("model") != model:
            body = {**body, "model": model}
        passed = _passed_headers(wire_format(api), headers)  # an unknown api: ValueError, nothing sent
        cache = res.cache
        if (cache is None or settings.cache_mode == "off") and not settings.replay:
            # no key needed: skip hashing it
            response, record = await self._deliver(_Call(ctx, seq, role, model, body, None, api, passed))
            return _reply(response, record)
        key = self.cache_key(body, ctx, api, passed)
        call = _Call(ctx, seq, role, model, body, key, api, passed)
        if cache is not None and settings.cache_mode != "off":
            hit = self._cache_hit(cache, key, call)
            if hit is not None:
                return hit
        if res.recorded is not None:  # replay-then-live: the cassettes answer what the cache does not
            hit = self._cache_hit(res.recorded, key, call)
            if hit is not None:
                return hit
        if settings.replay:
            nearest = explain_miss(cache, ctx.work, model, api, body) if cache is not None else None
            raise ReplayMiss(
                f"no recorded response for {role} call #{seq} of {ctx.work} (suite {ctx.suite},"
                f" task {ctx.task_id}, model {model}, gateway {self.backend_id})"
                + (f"; {nearest}" if nearest else ""),
                "record it: run once with --gauge-backend=live (or sim) and the cache on, then "
                "`python -m pytest_gauge cassettes export` into the cassettes folder; recordings are"
                f" keyed by the gateway too, so replay with the {URL_VARIABLE} they were recorded with",
                role=role,
                model=model,
            )
        assert cache is not None  # without a cache (or with it off) only replay gets here, and it raised
        async with cache.lock(key):
            hit = self._cache_hit(cache, key, call)
            if hit is not None:
                return hit
            response, record = await self._deliver(call)
            cache.put(key, self._entry(call, response))
        return _reply(response, record)

    def refused(self, ctx: CallContext, seq: int, role: str, model: str, api: Api, reason: str) -> None:
        """The ledger line of a request the recording proxy's route policy refused (status ``refused``,
        HTTP 403): nothing was sent, nothing is billed (gateway/route_policy.py)."""
        self._record(ctx, seq, 1, role, model, status="refused", http_status=403, error=reason, api=api)

    def _entry(self, call: _Call, response: JSONObject) -> JSONObject:
        """The cache entry of a call's answer: the request and the format's own response (``api`` says
        which format; every 200 the rules score is kept, truncated ones too, so a re-run sends nothing)."""
        return {
            "format_version": CACHE_FORMAT_VERSION,
            "api": call.api,
            "meta": {
                "suite": call.ctx.suite,
                "task_id": call.ctx.task_id,
                "work": call.ctx.work,
                "role": call.role,
                "model": call.model,
                "gateway": self.backend_id,
            },
            "request": call.body,
            # the passed headers, part of the key (not named "headers": a cassette drops such fields)
            **({"passed_header_values": dict(call.headers)} if call.headers else {}),
            "response": response,
            "response_digest": content_key(response),
            "persist": True,
            "run_id": self.settings.run_id,
            "created": time.time(),
        }

    async def _deliver(self, call: _Call) -> tuple[JSONObject, LedgerRecord]:
        """A call that missed the cache: through a batch when its role batches (``--gauge-batch``),
        sent the ordinary way when the batch does not answer it."""
        batcher = self.resources.batcher
        if batcher is not None and not self.settings.replay and batcher.takes(call.role, call.api):
            answer = await batcher.send(self, call)
            if answer is not None:
                return answer
        return await self._send(call)

    async def _send(self, call: _Call) -> tuple[JSONObject, LedgerRecord]:
        """Send with retries behind two first-call gates: until one call of this process has worked
        (a bad key or URL), and until one call to this (role, model) has worked (a wrong model name),
        calls go one at a time, so such a mistake reaches the server once per worker, not once per call.
        The call through a gate gets the next free slot (the others wait on it), and a call waiting at
        its model's gate lends its look-ahead place, so other models' work keeps the slots busy."""
        state = self.state
        gates = [(state.first_ok, state.first_lock), state.model_gate(call.role, call.model)]
        for k, (ok, lock) in enumerate(gates):
            # Behind the model's own gate, the call lends its look-ahead place to other models' work.
            waiting = model_wait() if k == 1 and not ok.is_set() else None
            async with waiting or contextlib.nullcontext():
                turn = await _gate_turn(ok, lock)
            if turn:
                chain = set_call_chain(UNRANKED)  # the gate's other calls wait on this one: it goes first
                try:
                    result = await self._send_with_retries(call)
                    for done, _ in gates:
                        done.set()
                    return result
                finally:
                    reset_call_chain(chain)
                    lock.release()
        return await self._send_with_retries(call)

    async def _send_with_retries(self, call: _Call) -> tuple[JSONObject, LedgerRecord]:
        """Attempts until one gives a usable completion; :meth:`_retry_wait` decides after each failure."""
        shared = self.shared
        settings, res, state = self.settings, self.resources, self.state
        rng = random.Random(f"{call.ctx.work}#{call.seq}")
        attempts = settings.max_retries + 1
        for attempt in range(1, attempts + 1):
            shared.check_open(call.role, call.model)
            outcome = await self._attempt(_Attempt.of(call, attempt))
            if outcome.response is not None:
                res.stops.answered(call.role, call.model)
                return outcome.response, outcome.record
            assert outcome.failure is not None
            if _rate_limited(outcome.failure):  # the server took the key and URL: open the run's gate
                state.first_ok.set()
            self._count_timeout(call, outcome.failure)
            shared.check_open(call.role, call.model)  # stopped meanwhile: not a failure of this case
            asked = "response_format" in call.body
            wait = self._retry_wait(outcome.failure, attempt, attempts, rng, call.role, call.model, asked)
            async with model_wait() if _rate_limited(outcome.failure) else contextlib.nullcontext():
                await asyncio.sleep(wait)  # a 429's wait is the model's own: its place goes to others
        raise AssertionError("unreachable")  # pragma: no cover

    def _count_timeout(self, call: _Call, failure: Exception) -> None:
        """A timed-out attempt counts toward ``--gauge-max-timeouts`` in a row for its (role, model);
        at the limit the model is stopped for the run, and this call fails with the one full message."""
        settings, res = self.settings, self.resources
        if not is_timeout(failure):
            return
        stop = res.stops.timed_out(call.role, call.model, settings.timeout)
        if stop is None:
            return
        error = GatewayError(
            f"the {call.role} model {call.model!r} timed out {stop.reason.split()[0]} times in a row"
            f" (--gauge-timeout {settings.timeout:g}s, connect to last byte): its remaining work is not run",
            "raise --gauge-timeout (or --gauge-max-timeouts), lower max_tokens, or check that the gateway"
            " serves this model",
            role=call.role,
            model=call.model,
        )
        raise res.stops.stop(call.role, call.model, stop.reason, error)

    async def _attempt(self, a: _Attempt) -> _Outcome:
        """One attempt: budget, rate, a concurrency slot, the write-ahead ledger line, the POST (bounded
        by ``--gauge-timeout`` from connect to last byte), the body's check, and the outcome's line."""
        shared = self.shared
        res, state = self.resources, self.state
        estimate = prompt_tokens_estimate(a.body) + output_tokens_cap(a.body)
        reservation = None
        if res.budget.active:
            worst = res.prices.cost(a.model, estimate, output_tokens_cap(a.body)) or 0.0
            reservation = res.budget.reserve(a.ctx.task_id, worst, estimate)
        spent, tokens = 0.0, 0
        try:
            if res.model_rates is not None:
                await res.model_rates.acquire(a.model, estimate)
            await res.rate.acquire(estimate)
            async with self._paced(a.model), res.slots.slot():
                shared.check_open(a.role, a.model)  # a stop may have come while waiting for the slot
                res.ledger.begin(self._ledger_record(a, SENT))
                start = time.perf_counter()
                outcomes = attempt_failures()
                state.in_flight += 1
                state.peak_in_flight = max(state.peak_in_flight, state.in_flight)
                try:
                    response, headers = await self._post(a, a.content())
                except asyncio.CancelledError:
                    self._record_failure(a, None, time.perf_counter() - start)
                    raise
                except outcomes as exc:
                    self._paced_outcome(a.model, exc)
                    return _Outcome(None, self._record_failure(a, exc, time.perf_counter() - start), exc)
                except Exception as exc:  # a bug: the attempt still gets its one outcome line, then it raises
                    self._record_failure(a, None, time.perf_counter() - start, broken=exc)
                    raise
                finally:
                    state.in_flight -= 1
            record = self._record(
                a.ctx, a.seq, a.attempt, a.role, a.model, status="ok", response=response,
                latency=time.perf_counter() - start, http_status=200, request=a.request,
                said=gateway_said(headers), api=a.api,
            )  # fmt: skip
            tokens = record.usage.total_tokens if record.usage else 0
            spent = record.cost or 0.0
            res.rate.correct(estimate, tokens or estimate)
            if res.model_rates is not None:
                res.model_rates.correct(a.model, estimate, tokens or estimate)
            self._paced_outcome(a.model, None)
            return _Outcome(response, record, None)
        finally:
            if reservation is not None:
                # a failed attempt may still have been billed upstream; count nothing we cannot see
                res.budget.settle(reservation, spent, tokens)

    def _paced(self, model: str) -> contextlib.AbstractAsyncContextManager[None]:
        """The model's adaptive-concurrency slot (nothing without a pacer)."""
        pacer = self.resources.pacer
        return pacer.slot(model) if pacer is not None else contextlib.nullcontext()

    def _paced_outcome(self, model: str, failure: Exception | None) -> None:
        """Tell the pacer: a 429 may halve the model's concurrency (with a wait hint, or when 429s are no
        longer stray ones), a success grows it by one."""
        pacer = self.resources.pacer
        if pacer is None:
            return
        if failure is None:
            pacer.succeeded(model)
        elif isinstance(failure, APIStatusError) and failure.status_code == 429:
            pacer.slowed(model, hinted=retry_delay(failure.headers, 1, _NO_JITTER) is not None)

    async def _post(self, a: _Attempt, content: bytes) -> tuple[JSONObject, Mapping[str, str]]:
        """The POST of ``content`` (the call's body, encoded once) to the format's path and the whole
        body, within ``--gauge-timeout`` in all, refused past the body bound (:mod:`.transport`); the
        format's parsed, checked response and the response's headers."""
        client, fmt = self.client, wire_format(a.api)
        auth = self.settings.anthropic_auth if fmt.own_auth else "bearer"
        headers = {**dict(a.headers), **fmt.request_headers}
        own = self.settings.role_keys.get(a.role)  # the role's own key, else the client's
        path = fmt.request_path(client.base_url)  # Messages: the Anthropic SDK's URL for the same base
        body, answered = await client.post(
            path, content, headers, key=own, auth=auth, timeout=self.settings.timeout
        )
        return fmt.parse_response(body, (client.api_key, *self.settings.role_keys.values())), answered

    def _ledger_record(self, a: _Attempt, status: str) -> LedgerRecord:
        return LedgerRecord(
            run_id=self.settings.run_id,
            call_id=f"{a.ctx.work}#{a.seq}",
            attempt=a.attempt,
            status=status,
            suite=a.ctx.suite,
            task_id=a.ctx.task_id,
            role=a.role,  # type: ignore[arg-type]
            model=a.model,
            strategy=a.ctx.strategy,
            work=a.ctx.work,
            usage=None,
            usage_missing=False,
            latency_s=0.0,
            finish_reason=None,
            cache_hit=False,
            cost=None,
            possibly_billed=True,
            ts=time.time(),
            request=a.request,
            api=a.api,
        )

    def _record_failure(
        self, a: _Attempt, failure: Exception | None, latency: float, broken: Exception | None = None
    ) -> LedgerRecord:
        """The ledger line of a failed attempt (None: cancelled in flight by a stop, or ``broken`` by an
        error inside pytest-gauge), with its status and whether the server may have billed it."""
        status_code = failure.status_code if isinstance(failure, APIStatusError) else None
        if broken is not None:
            status, error = INTERRUPTED, f"ended by an error inside pytest-gauge ({type(broken).__name__})"
        elif failure is None:
            status, error = INTERRUPTED, "cancelled while in flight (the run was stopped)"
        elif isinstance(failure, BadResponse):
            status, error, status_code = "bad_response", failure.problem, 200
        elif status_code is not None:
            status, error = f"http_{status_code}", type(failure).__name__
        elif is_timeout(failure):
            status, error = "timeout", type(failure).__name__
        else:
            status, error = "connection_error", type(failure).__name__
        said: JSONObject = {}
        if isinstance(failure, APIStatusError):
            said = gateway_said(failure.headers, failure.body)
            wait = retry_delay(failure.headers, a.attempt, random.Random(0))
            if wait is not None:
                said["retry_after"] = round(wait, 3)
        return self._record(
            a.ctx, a.seq, a.attempt, a.role, a.model, status=status, latency=latency,
            http_status=status_code, error=error, request=a.request,
            possibly_billed=status in ("timeout", "bad_response", INTERRUPTED), said=said, api=a.api,
        )  # fmt: skip

    def _retry_wait(
        self,
        failure: Exception,
        attempt: int,
        attempts: int,
        rng: random.Random,
        role: str,
        model: str,
        asked_format: bool = False,
    ) -> float:
        """Seconds to wait before the next attempt, or the GatewayError that ends the call (a 5xx refusing
        the request's ``response_format`` is not retried: the same request gets the same answer)."""
        settings, res, state = self.settings, self.resources, self.state
        status_code = failure.status_code if isinstance(failure, APIStatusError) else None
        headers: Mapping[str, str] = failure.headers if isinstance(failure, APIStatusError) else {}
        should = headers.get("x-should-retry")
        retryable = status_code is None or status_code in RETRYABLE or status_code >= 500
        if should in ("true", "false"):
            retryable = should == "true"
        if isinstance(failure, APIStatusError) and asked_format:
            message = server_message(failure)
            retryable = retryable and not (status_code in FORMAT_REFUSAL_STATUSES and names_format(message))
        if not retryable or attempt == attempts:
            error = final_error(
                failure, role, model, attempt, gateway=self.backend_id, timeout=settings.timeout,
                answered=state.first_ok.is_set(), origin=settings.model_variables.get(model),
            )  # fmt: skip
            if isinstance(error, KeyRejected) and state.first_ok.is_set():
                error = error.for_model(role, model)  # other calls with this key worked: stop this model
            if error.fatal:
                state.fatal = error
            if isinstance(error, ModelNotFound):
                why = (
                    "key rejected for this model" if isinstance(error, ModelKeyRejected) else "unknown model"
                )
                raise res.stops.stop(role, model, why, error)
            raise error
        wait = retry_delay(headers, attempt, rng)
        if wait is not None and wait > settings.retry_after_cap:
            raise GatewayError(
                f"{status_code} the server asks to wait {wait:.0f}s before retrying, more than the cap of"
                f" {settings.retry_after_cap:.0f}s",
                "lower --gauge-rpm/--gauge-max-concurrency, or raise --gauge-retry-after-cap",
                status=status_code,
                role=role,
                model=model,
            )
        if status_code == 429:
            state.rate_limit_waits += 1
        return wait if wait is not None else backoff(attempt, rng, base=settings.backoff_base)


async def _gate_turn(ok: asyncio.Event, lock: asyncio.Lock) -> bool:
    """Wait at a first-call gate: True when this call now holds ``lock`` and goes alone (the caller
    releases it), False once the gate is open, even while another call still holds the lock (a call
    retrying a 429 opens the run's gate and must not hold every other model's calls back)."""
    if ok.is_set():
        return False
    acquire = asyncio.ensure_future(lock.acquire())
    opened = asyncio.ensure_future(ok.wait())
    try:
        await asyncio.wait({acquire, opened}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        opened.cancel()
        acquire.cancel()
        if acquire.done() and not acquire.cancelled():
            lock.release()
        raise
    opened.cancel()
    if not acquire.done():
        acquire.cancel()
        return False
    if ok.is_set():
        lock.release()
        return False
    return True


def _rate_limited(failure: Exception) -> bool:
    """A 429: the server accepted the key and the URL and asked to slow down."""
    return getattr(failure, "status_code", None) == 429


PassedHeaders = tuple[tuple[str, str], ...]
"""A proxied client's own request headers the format passes on (lower-case names, sorted)."""


def _passed_headers(fmt: WireFormat, headers: Mapping[str, str] | None) -> PassedHeaders:
    """The client headers of ``fmt.passed_headers`` found in ``headers`` (any case), sorted by name."""
    if not headers:
        return ()
    found = {str(k).lower(): str(v) for k, v in headers.items()}
    return tuple(sorted((name, found[name]) for name in fmt.passed_headers if name in found))


@dataclass(frozen=True)
class _Call:
    """One logical call as sent: which call, what is sent, and its cache key (None without a cache)."""

    ctx: CallContext
    seq: int
    role: str
    model: str
    body: JSONObject
    request: str | None
    api: Api = NEUTRAL_API
    headers: PassedHeaders = ()  # a proxied client's own headers of the format's passed_headers
    encoded: list[bytes] = field(default_factory=list, compare=False)  # the body's JSON, once made

    def content(self) -> bytes:
        """The body as JSON bytes, encoded on the first attempt and reused by the others."""
        if not self.encoded:
            self.encoded.append(encode_body(self.body))
        return self.encoded[0]


@dataclass(frozen=True)
class _Attempt(_Call):
    """One attempt of one call: the call and which try this is."""

    attempt: int = 1

    @classmethod
    def of(cls, call: _Call, attempt: int) -> _Attempt:
        """Try number ``attempt`` of ``call`` (sharing its encoded body)."""
        c = call
        return cls(c.ctx, c.seq, c.role, c.model, c.body, c.request, c.api, c.headers, c.encoded, attempt)


@dataclass(frozen=True)
class _Outcome:
    """An attempt's result: the completion and its ledger line, or the failure and its line."""

    response: JSONObject | None
    record: LedgerRecord
    failure: Exception | None


def _reply(response: JSONObject, record: LedgerRecord) -> WireReply:
    """A call's reply: the format's response, its chat-completion view as a ChatResult, and its line."""
    completion = wire_format(record.api).completion(response)
    choice = (completion.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    result = ChatResult(
        content=message.get("content") or "",
        tool_calls=tuple(message.get("tool_calls") or ()),
        finish_reason=choice.get("finish_reason"),
        usage=record.usage,
        cost=record.cost,
    )
    return WireReply(response, result, record)
