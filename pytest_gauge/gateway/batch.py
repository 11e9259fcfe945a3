"""Batched calls (``--gauge-batch judge``, docs/protocol.md#batched-judging): the calls of the batched
roles that miss the cache are gathered across the cases running in this process for a short window (or
until a size), sent as one batch through the gateway's batch endpoint (OpenAI ``/files`` + ``/batches``
for ``api="chat"``/``"responses"``, Message Batches for ``api="anthropic"``), polled with backoff, and
each call is answered with its line of the results. What a batch does not answer (a request failed in
it, the batch expired, was cancelled, or passed ``--gauge-batch-deadline``), and every call of a gateway
without a batch endpoint, falls back to the ordinary call: nothing is lost.

Each answered call gets an ordinary ``ok`` ledger line marked ``batched`` and priced at the model's
batch price (:attr:`~pytest_gauge.records.prices.Price.batch_share`). A request the batch did not answer
gets no line (neither API bills it): its ordinary attempts are its history, as in an unbatched run, and
the counters here (the end of the run's line) say how many fell back. The budget reserves every call
of a batch before the batch is sent. Answers go through the gateway's cache as any other, so a replay
is the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..records import LedgerRecord
from ..records.json_types import JSONObject
from .limits import Reservation, model_wait, output_tokens_cap, prompt_tokens_estimate
from .response import BadResponse
from .transport import APIStatusError, CallError, attempt_failures
from .wire import Api, wire_format
from .wire import batch_anthropic as anthropic_batch
from .wire import batch_openai as openai_batch
from .wire.batch_openai import BatchView, ItemResult
from .wire.batches import BATCH_APIS, batch_family, message_batches

if TYPE_CHECKING:
    from .gateway import CallContext, Gateway

__all__ = ["BATCH_APIS", "Answer", "BatchCall", "BatchSettings", "Batcher"]

NO_ENDPOINT = frozenset({400, 404, 405, 501})
"""Statuses of a batch request that say the gateway has no batch endpoint: its calls are not batched again."""


@dataclass(frozen=True)
class BatchSettings:
    """Which roles batch, how long a batch gathers (``window`` seconds, or until ``size`` calls), how it
    is polled (``poll_first`` seconds, doubling up to ``poll_cap``) and when it is given up
    (``deadline`` seconds after it was sent)."""

    roles: frozenset[str]
    deadline: float
    window: float = 0.5
    size: int = 1000
    poll_first: float = 0.2
    poll_cap: float = 30.0


class BatchCall(Protocol):
    """What a batch reads of one gateway call (the gateway's own call value): which call, its request
    body in its wire format, and its cache key."""

    @property
    def ctx(self) -> CallContext: ...
    @property
    def seq(self) -> int: ...
    @property
    def role(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def body(self) -> JSONObject: ...
    @property
    def request(self) -> str | None: ...
    @property
    def api(self) -> Api: ...


Answer = tuple[JSONObject, LedgerRecord]
"""A batched call's checked response (its format's own) and its ``batched`` ledger line."""


@dataclass
class _Item:
    """One call waiting in a batch: its gateway, the call, the future its caller awaits, its budget."""

    gateway: Gateway
    call: BatchCall
    future: asyncio.Future[Answer | None]
    custom_id: str = ""
    reservation: Reservation | None = None


@dataclass
class Batcher:
    """This process's batches: the calls gathering per (gateway, format, model), the batches in flight,
    the gateways found without a batch endpoint, and counters for the end of the run."""

    settings: BatchSettings
    batches_sent: int = 0
    calls_batched: int = 0
    calls_fell_back: int = 0
    no_endpoint: dict[str, str] = field(default_factory=dict)  # base URL and api -> what the gateway said
    problems: dict[str, int] = field(default_factory=dict)  # why calls fell back, and how many
    _groups: dict[tuple[int, int, str, str], list[_Item]] = field(default_factory=dict)
    _timers: dict[tuple[int, int, str, str], asyncio.TimerHandle] = field(default_factory=dict)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    def takes(self, role: str, api: str) -> bool:
        """Whether a call of ``role`` in format ``api`` goes through a batch."""
        return role in self.settings.roles and api in BATCH_APIS

    async def send(self, gateway: Gateway, call: BatchCall) -> Answer | None:
        """The call's answer from a batch, or None: send it the ordinary way. Waiting for the batch
        lends the caller's look-ahead place to other work."""
        if _endpoint(gateway, call.api) in self.no_endpoint:
            return None
        loop = asyncio.get_running_loop()
        key = (id(loop), id(gateway), call.api, call.model)
        future: asyncio.Future[Answer | None] = loop.create_future()
        group = self._groups.setdefault(key, [])
        group.append(_Item(gateway, call, future))
        if len(group) >= self.settings.size:
            self._flush(key)
        elif len(group) == 1:
            self._timers[key] = loop.call_later(self.settings.window, self._flush, key)
        async with model_wait():
            return await future

    def _flush(self, key: tuple[int, int, str, str]) -> None:
        """Send the gathered calls of ``key`` as one batch (a task of the running loop)."""
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        items = self._groups.pop(key, [])
        if items:
            task = asyncio.get_running_loop().create_task(self._run(items))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _run(self, items: list[_Item]) -> None:
        """One batch from send to results; every call still waiting at the end falls back."""
        try:
            await self._batch(items)
        finally:
            _settle([item for item in items if item.reservation is not None], items[0].gateway)
            for item in items:
                if not item.future.done():
                    self.calls_fell_back += 1
                    item.future.set_result(None)

    async def _batch(self, items: list[_Item]) -> None:
        """Reserve, send, poll and read one batch of calls of one gateway, format and model (the calls
        whose callers are gone left out; a stopped run or model fails them as it would unbatched)."""
        gateway = items[0].gateway
        api, model = items[0].call.api, items[0].call.model
        waiting = [item for item in items if not item.future.done()]
        try:
            gateway.shared.check_open(items[0].call.role, model)
        except Exception as exc:
            for item in waiting:
                item.future.set_exception(exc)
            return
        live = [item for item in waiting if self._reserve(item)]
        if not live:
            return
        for i, item in enumerate(live):
            item.custom_id = f"gauge-{i}"
        http = _Http(gateway, api, items[0].call.role)
        try:
            view = await http.create([(item.custom_id, item.call.body) for item in live], model)
        except (CallError, BadResponse, TimeoutError, ValueError) as exc:
            self._refused(gateway, api, exc)
            _settle(live, gateway)
            return
        self.batches_sent += 1
        start = time.perf_counter()
        view = await self._polled(http, view, gateway)
        results = await http.results(view) if view.ended else {}
        latency = time.perf_counter() - start
        for item in live:
            self._answer(item, results.get(item.custom_id), view, latency)

    def _reserve(self, item: _Item) -> bool:
        """Reserve the call's worst case at the batch price before the batch is sent (budget
        exhausted: the call fails with that error, as it would unbatched)."""
        res, call = item.gateway.resources, item.call
        if not res.budget.active:
            return True
        cap = output_tokens_cap(call.body)
        estimate = prompt_tokens_estimate(call.body) + cap
        price = res.prices.price(call.model)
        worst = (res.prices.cost(call.model, estimate, cap) or 0.0) * (price.batch_share if price else 1.0)
        try:
            item.reservation = res.budget.reserve(call.ctx.task_id, worst, estimate)
        except Exception as exc:
            item.future.set_exception(exc)
            return False
        return True

    def _refused(self, gateway: Gateway, api: str, exc: Exception) -> None:
        """A batch the gateway did not take: with a status that says it has no batch endpoint, its calls
        are not batched again this run (the end of the run says so once)."""
        status = exc.status_code if isinstance(exc, APIStatusError) else None
        if status in NO_ENDPOINT:
            self.no_endpoint[_endpoint(gateway, api)] = f"HTTP {status}: {getattr(exc, 'message', exc)}"

    async def _polled(self, http: _Http, view: BatchView, gateway: Gateway) -> BatchView:
        """Poll until the batch ends, with backoff; past the deadline (or when the run stops) cancel it
        and give its last view (its finished part is still read)."""
        deadline = time.monotonic() + self.settings.deadline
        delay = self.settings.poll_first
        while not view.ended:
            left = deadline - time.monotonic()
            if left <= 0 or gateway.state.stopping or gateway.state.fatal is not None:
                with contextlib.suppress(*attempt_failures(), ValueError):
                    view = await http.cancel(view)
                return view
            await asyncio.sleep(min(delay, left))
            delay = min(delay * 2, self.settings.poll_cap)
            with contextlib.suppress(*attempt_failures(), ValueError):  # a failed poll: poll again
                view = await http.poll(view)
        return view

    def _answer(self, item: _Item, result: ItemResult | None, view: BatchView, latency: float) -> None:
        """Resolve one call: its checked response and ``batched`` ledger line, or None (it falls back;
        the run's end line counts it)."""
        gateway, call = item.gateway, item.call
        if item.future.done():  # its caller was cancelled (the run stopped)
            _settle([item], gateway)
            return
        response, problem = None, None
        if result is not None and result.response is not None:
            try:
                response = wire_format(call.api).parse_response(
                    json.dumps(result.response).encode(), _secrets(gateway)
                )
            except BadResponse as exc:
                problem = f"bad response: {exc.problem}"
        else:
            problem = result.problem if result is not None else f"not answered (batch {view.status})"
        if response is not None:
            record = gateway._record(
                call.ctx, call.seq, 1, call.role, call.model, status="ok", response=response,
                latency=latency, http_status=200, request=call.request, api=call.api, batched=True,
            )  # fmt: skip
            _settle([item], gateway, record)
            gateway.resources.stops.answered(call.role, call.model)
            self.calls_batched += 1
            item.future.set_result((response, record))
            return
        _settle([item], gateway)
        self.calls_fell_back += 1
        self.problems.setdefault(problem or "no answer", 0)
        self.problems[problem or "no answer"] += 1
        item.future.set_result(None)

    def summary(self) -> str | None:
        """One line for the end of the run: batches sent, calls answered and fallen back, and gateways
        without a batch endpoint; None when nothing was batched or tried."""
        if not (self.batches_sent or self.calls_fell_back or self.no_endpoint):
            return None
        line = (
            f"batched calls: {self.calls_batched} answered in {self.batches_sent} batch(es),"
            f" {self.calls_fell_back} sent the ordinary way"
        )
        for where, said in sorted(self.no_endpoint.items()):
            line += f"; no batch endpoint at {where} ({said})"
        return line


def _settle(items: list[_Item], gateway: Gateway, record: LedgerRecord | None = None) -> None:
    """Replace the items' reservations with what they spent (a batched answer's cost, else nothing)."""
    for item in items:
        if item.reservation is not None:
            spent = (record.cost or 0.0) if record is not None else 0.0
            tokens = record.usage.total_tokens if record is not None and record.usage else 0
            gateway.resources.budget.settle(item.reservation, spent, tokens)
            item.reservation = None


def _secrets(gateway: Gateway) -> tuple[str, ...]:
    """The keys a response must not quote (removed from it when it does)."""
    return (gateway.client.api_key, *gateway.settings.role_keys.values())


def _endpoint(gateway: Gateway, api: str) -> str:
    """Which batch endpoint a gateway's calls of ``api`` use: its base URL and the family."""
    return f"{gateway.client.base_url} ({batch_family(api)})"


class _Http:
    """The batch requests of one gateway and format: create, poll, cancel, read the results."""

    def __init__(self, gateway: Gateway, api: str, role: str) -> None:
        self.gateway, self.api, self.role = gateway, api, role
        self.client = gateway.client
        self.fmt = wire_format(api)
        self.messages = message_batches(api)
        if self.messages:
            self.root = anthropic_batch.batches_path(self.fmt.request_path(self.client.base_url))

    async def _send(
        self, method: str, path: str, body: bytes = b"", kind: str | None = None, model: str | None = None
    ) -> bytes:
        settings = self.gateway.settings
        headers: dict[str, str] = {}
        if kind is not None:
            headers["Content-Type"] = kind
        if (
            model is not None
        ):  # LiteLLM's proxy routes an upload (and the batch on it) by this model's deployment
            headers["x-litellm-model"] = model
        headers.update(self.fmt.request_headers)  # Messages: its anthropic-version
        auth = settings.anthropic_auth if self.fmt.own_auth else "bearer"
        own = settings.role_keys.get(self.role)  # the role's own key, else the client's
        got, _ = await self.client.send(
            method, path, body, headers, key=own, auth=auth, timeout=settings.timeout
        )
        return got

    async def _json(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> object:
        content = json.dumps(body).encode() if body is not None else b""
        try:
            return json.loads(await self._send(method, path, content))
        except (UnicodeDecodeError, RecursionError) as exc:
            raise ValueError(f"the answer is not JSON: {exc}") from None

    def _view(self, obj: object) -> BatchView:
        return anthropic_batch.batch_view(obj) if self.messages else openai_batch.batch_view(obj)

    async def create(self, items: list[tuple[str, Mapping[str, Any]]], model: str) -> BatchView:
        """Send the batch: Message Batches' create, or the input file's upload and the batch's create."""
        if self.messages:
            return self._view(await self._json("POST", self.root, anthropic_batch.create_body(items)))
        data = openai_batch.input_file(self.api, items)
        content, kind = openai_batch.multipart(data, "gauge-batch.jsonl", uuid.uuid4().hex)
        uploaded = json.loads(await self._send("POST", openai_batch.FILES_PATH, content, kind, model))
        file_id = uploaded.get("id") if isinstance(uploaded, dict) else None
        if not isinstance(file_id, str):
            raise ValueError("the file upload gave no file id")
        body = openai_batch.create_body(file_id, self.api)
        return self._view(await self._json("POST", openai_batch.BATCHES_PATH, body))

    async def poll(self, view: BatchView) -> BatchView:
        root = self.root if self.messages else openai_batch.BATCHES_PATH
        return self._view(await self._json("GET", f"{root}/{view.batch_id}"))

    async def cancel(self, view: BatchView) -> BatchView:
        """Ask the gateway to cancel the batch, then look once more (an ended batch's part is read)."""
        root = self.root if self.messages else openai_batch.BATCHES_PATH
        await self._send("POST", f"{root}/{view.batch_id}/cancel")
        return await self.poll(view)

    async def results(self, view: BatchView) -> dict[str, ItemResult]:
        """Each request's result of an ended batch (its output and error files); what cannot be read
        is left out (those calls fall back)."""
        found: dict[str, ItemResult] = {}
        with contextlib.suppress(*attempt_failures(), ValueError):
            if self.messages:
                text = await self._send("GET", f"{self.root}/{view.batch_id}/results")
                return anthropic_batch.read_results(text)
            for file_id in (view.errors, view.output):  # the output file's answers win
                if file_id is not None:
                    text = await self._send("GET", f"{openai_batch.FILES_PATH}/{file_id}/content")
                    found.update(openai_batch.read_results(text))
        return found
