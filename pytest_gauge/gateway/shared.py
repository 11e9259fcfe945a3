"""What a gateway call carries and what this process's gateways share: the call's context and reply,
the run's settings (with the live run's per-role keys), the process's resources and its changing state."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..records import ChatResult, LedgerRecord
from ..records.json_types import JSONObject
from ..records.prices import PriceTable
from ..records.work_key import parse_work
from .endpoint import ROLE_KEY_VARIABLES, key_variable, role_keys
from .errors import GatewayError, RunStopped
from .ledger import Ledger
from .limits import InFlightLimit, ModelPacer, ModelRates, RateLimit, SpendLimit
from .model_stops import ModelStops
from .store import Store

if TYPE_CHECKING:
    from .batch import Batcher

__all__ = [
    "AUTHS",
    "REPLAY_THEN_LIVE",
    "REUSING_MODES",
    "CallContext",
    "GatewayResources",
    "GatewaySettings",
    "GatewayShared",
    "GatewayState",
    "WireReply",
    "live_keys",
]

AUTHS = ("bearer", "x-api-key")
"""Where a call sends the key: ``Authorization: Bearer`` (the default, as Claude Code's
``ANTHROPIC_AUTH_TOKEN``) or an ``x-api-key`` header (Anthropic's own form, for a gateway that wants it)."""


@dataclass(frozen=True)
class WireReply:
    """One logical call's answer in its wire format: the format's own response (as the server sent it,
    checked), the same answer viewed as a chat completion, and the ledger line of the attempt that
    answered (or of the cache hit)."""

    response: JSONObject
    result: ChatResult
    record: LedgerRecord


REPLAY_THEN_LIVE = "replay-then-live"  # --gauge-cache: answer what is recorded, send only the misses
REUSING_MODES = ("use", REPLAY_THEN_LIVE)  # cache modes that answer from persisted entries


@dataclass(frozen=True)
class CallContext:
    """Which work a call belongs to (docs/protocol.md#ledger): suite, task, work key, strategy."""

    suite: str
    task_id: str
    work: str
    strategy: str = "single"

    def cache_scope(self) -> int | str:
        """What keys the cache beside the request. For the engine's work
        (``transcript/<task>/<agent>/<sample>``, ``judge/<case>/<judge>/<repeat>``) only the sample or repeat
        index, so best-of-N and repeats get distinct entries while identical requests of different cases
        share one; any other work (ad-hoc fixture calls) keeps entries of its own."""
        key = parse_work(self.work)
        return key.index if key is not None else self.work


@dataclass(frozen=True)
class GatewaySettings:
    """The run's plain settings every suite's gateway reads and none changes: the run id, the cache mode,
    retries, timeout and caps, and where the keys and model names came from."""

    run_id: str
    cache_mode: str
    replay: bool
    max_retries: int
    timeout: float
    retry_after_cap: float
    model_variables: Mapping[str, str] = field(default_factory=dict)  # model -> the variable it came from
    key_variables: Mapping[str, str] | None = None  # live: role -> the variable whose key it sends
    role_keys: Mapping[str, str] = field(default_factory=dict)  # role -> its own key (never written anywhere)
    anthropic_auth: str = "bearer"  # where Messages calls send the key (AUTHS): --gauge-anthropic-auth
    backoff_base: float = 0.25  # seconds before the first retry when the server names no wait (doubling)


@dataclass(frozen=True)
class GatewayResources:
    """What this process's gateways share and use: the ledger, the run's limits (slots, rate, budget,
    per-model buckets, the pacer), the prices, the response cache and the model stops."""

    ledger: Ledger
    slots: InFlightLimit
    rate: RateLimit
    budget: SpendLimit
    prices: PriceTable
    cache: Store | None
    stops: ModelStops = field(default_factory=lambda: ModelStops(None))
    model_rates: ModelRates | None = None  # --gauge-rpm/--gauge-tpm MODEL=N
    pacer: ModelPacer | None = None  # adaptive concurrency per model (halve on 429, +1 per success)
    recorded: Store | None = None  # replay-then-live: exported cassettes, read after the cache, never written
    batcher: Batcher | None = None  # --gauge-batch: the roles whose cache misses go through a batch


@dataclass
class GatewayState:
    """What changes while this process's gateways run: the first-call gates, the run's fatal error and
    stop, the attempts in flight and the counters the progress line and the end of the run read."""

    fatal: GatewayError | None = None
    first_ok: asyncio.Event = field(default_factory=asyncio.Event)
    first_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    model_gates: dict[tuple[str, str], tuple[asyncio.Event, asyncio.Lock]] = field(default_factory=dict)
    stopping: bool = False
    in_flight: int = 0  # attempts sent and not yet answered (a stop waits for them, briefly)
    peak_in_flight: int = 0  # the most attempts this process had in flight at once
    rate_limit_waits: int = 0
    damaged_entries: int = 0  # cache entries refused as misses (damaged, or not matching their key)
    first_damaged: str | None = None
    damaged_keys: set[str] = field(default_factory=set)

    def damaged_entry(self, key: str, problem: str) -> None:
        """A cache entry refused as a miss (see ``Gateway._entry_problem``): counted; the run's end says
        how many in one warning line (``first_damaged`` keeps the first one's key and problem)."""
        if key in self.damaged_keys:  # looked up again under its lock: one entry, counted once
            return
        self.damaged_keys.add(key)
        self.damaged_entries += 1
        if self.first_damaged is None:
            self.first_damaged = f"{key[:16]}...: {problem}"

    def model_gate(self, role: str, model: str) -> tuple[asyncio.Event, asyncio.Lock]:
        """The first-call gate of (role, model): set once a call to it has worked."""
        gate = self.model_gates.get((role, model))
        if gate is None:
            gate = self.model_gates[(role, model)] = (asyncio.Event(), asyncio.Lock())
        return gate


@dataclass(frozen=True)
class GatewayShared:
    """Per-process things every suite's gateway shares: its settings, its resources and its state."""

    settings: GatewaySettings
    resources: GatewayResources
    state: GatewayState = field(default_factory=GatewayState)

    def check_open(self, role: str, model: str) -> None:
        """Raise instead of sending: the run is stopping, a fatal error was seen, or this (role, model)
        was stopped (:mod:`.model_stops`: unknown, timing out, ...)."""
        if self.state.stopping:
            raise RunStopped(
                "the run is stopping (Ctrl-C or SIGTERM)", "re-run: finished calls come from the cache"
            )
        if self.state.fatal is not None:
            raise self.state.fatal
        self.resources.stops.check(role, model)


def live_keys(backend: str, environ: Mapping[str, str]) -> JSONObject:
    """The gateway's per-role keys for a live run (``GatewaySettings``' ``key_variables`` and
    ``role_keys``); nothing for the simulator or a replay, which send no key."""
    if backend != "live":
        return {}
    own = role_keys(environ)
    return {
        "key_variables": {role: key_variable(role, environ) for role in ROLE_KEY_VARIABLES},
        "role_keys": {role: key for role, (_, key) in own.items()},
    }
