"""One set of limits across hosts (``--gauge-limits redis://HOST:PORT/DB``): the same three limits as
:mod:`pytest_gauge._internal.gateway.limits` (requests in flight, requests and tokens per minute, budgets),
kept on a Redis server that every shard and worker of a run shares, keyed by the run id
(``--gauge-run-id`` / ``GAUGE_RUN_ID``).

Every decision is one Lua script, atomic on the server and timed by the server's clock (``TIME``), so
hosts with skewed clocks agree. Slots are leases that expire: a holder renews its lease while its
request is out, so a dead host frees its slots within the lease time. Budgets are reservations: a call
reserves its worst case before it is sent and settles after. Redis lost mid-run: the call is not sent
and the run stops with a :class:`LimitsUnavailable` error (never unlimited spending).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from .errors import ConfigurationError
from .limits import (
    BudgetLimits,
    FileLimits,
    ModelRates,
    Reservation,
    RunLimits,
    model_key,
    model_wait,
)

__all__ = [
    "LEASE_SECONDS",
    "LimitsUnavailable",
    "RedisBudget",
    "RedisLimits",
    "RedisRate",
    "RedisSlots",
    "connect",
    "run_limits",
]

LEASE_SECONDS = 10.0

# KEYS[1] leases (zset member -> expiry); ARGV: n, lease seconds, member
_ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
  redis.call('EXPIRE', KEYS[1], 86400)
  return 1
end
return 0
"""
# KEYS[1] leases; ARGV: lease seconds, member -> 1 when renewed, 0 when the lease was lost
_RENEW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
return redis.call('ZADD', KEYS[1], 'XX', 'CH', now + tonumber(ARGV[1]), ARGV[2])
"""
# KEYS[1] bucket hash; ARGV: rpm (0 = none), tpm (0 = none), tokens -> seconds to wait (0: taken)
_TAKE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local wait = 0
local specs = {{'req', tonumber(ARGV[1]), 1}, {'tok', tonumber(ARGV[2]), tonumber(ARGV[3])}}
local levels = {}
for i, s in ipairs(specs) do
  if s[2] > 0 then
    local rate = s[2] / 60.0
    local capacity = math.max(rate, s[3], 1.0)
    local level = tonumber(redis.call('HGET', KEYS[1], s[1] .. '_level') or capacity)
    local last = tonumber(redis.call('HGET', KEYS[1], s[1] .. '_ts') or now)
    level = math.min(capacity, level + (now - last) * rate)
    if level < s[3] then wait = math.max(wait, (s[3] - level) / rate) end
    levels[i] = level
  end
end
for i, s in ipairs(specs) do
  if s[2] > 0 then
    local level = levels[i]
    if wait == 0 then level = level - s[3] end
    redis.call('HSET', KEYS[1], s[1] .. '_level', level, s[1] .. '_ts', now)
  end
end
redis.call('EXPIRE', KEYS[1], 86400)
return tostring(wait)
"""
# KEYS[1] budget hash; ARGV: usd limit, token limit, task limit ('' = none), task, usd, tokens
_RESERVE = """
local function num(f) return tonumber(redis.call('HGET', KEYS[1], f) or '0') end
local usd, tok = tonumber(ARGV[5]), tonumber(ARGV[6])
if ARGV[1] ~= '' and num('spent_usd') + num('reserved_usd') + usd > tonumber(ARGV[1]) then
  return 'run budget $' .. ARGV[1] .. ': spent $' .. string.format('%.4f', num('spent_usd')) .. ' so far'
end
if ARGV[2] ~= '' and num('spent_tokens') + num('reserved_tokens') + tok > tonumber(ARGV[2]) then
  return 'run budget ' .. ARGV[2] .. ' tokens: spent ' .. num('spent_tokens') .. ' tokens so far'
end
if ARGV[3] ~= '' and num('task:' .. ARGV[4]) + usd > tonumber(ARGV[3]) then
  local spent = string.format('%.4f', num('task:' .. ARGV[4]))
  return 'task ' .. ARGV[4] .. ' budget $' .. ARGV[3] .. ': spent $' .. spent .. ' so far'
end
redis.call('HINCRBYFLOAT', KEYS[1], 'reserved_usd', usd)
redis.call('HINCRBYFLOAT', KEYS[1], 'reserved_tokens', tok)
redis.call('EXPIRE', KEYS[1], 86400)
return ''
"""
# KEYS[1] budget hash; ARGV: task, reserved usd, reserved tokens, spent usd, spent tokens
_SETTLE = """
redis.call('HINCRBYFLOAT', KEYS[1], 'reserved_usd', -tonumber(ARGV[2]))
redis.call('HINCRBYFLOAT', KEYS[1], 'reserved_tokens', -tonumber(ARGV[3]))
redis.call('HINCRBYFLOAT', KEYS[1], 'spent_usd', tonumber(ARGV[4]))
redis.call('HINCRBYFLOAT', KEYS[1], 'spent_tokens', tonumber(ARGV[5]))
redis.call('HINCRBYFLOAT', KEYS[1], 'task:' .. ARGV[1], tonumber(ARGV[4]))
return 1
"""


class LimitsUnavailable(ConfigurationError):
    """The Redis limits server cannot be reached: no call is sent without its limits."""


def _unavailable(url: str, exc: BaseException) -> LimitsUnavailable:
    return LimitsUnavailable(
        f"the limits server {url} cannot be reached ({type(exc).__name__}: {exc}); no call is sent without"
        " its limits",
        "restore the Redis server (or run without --gauge-limits); the run stopped, rerun it with the cache",
    )


def connect(url: str) -> Any:
    """A Redis client for ``url``, checked with a PING; raises :class:`LimitsUnavailable` (with the fix)
    when the package is missing or the server does not answer."""
    try:
        import redis  # deferred: keeps redis off the import of gateway.redis_limits
    except ImportError:
        raise LimitsUnavailable(
            f"--gauge-limits {url} needs the redis package", "pip install 'pytest-gauge[redis]'"
        ) from None
    try:
        client = redis.Redis.from_url(url, socket_timeout=5.0, socket_connect_timeout=5.0)
        client.ping()
    except (redis.RedisError, ValueError) as exc:
        raise _unavailable(url, exc) from None
    return client


class _Scripts:
    """The client and its registered scripts; any Redis failure becomes :class:`LimitsUnavailable`."""

    def __init__(self, client: Any, url: str, prefix: str) -> None:
        self.client = client
        self.url = url
        self.prefix = prefix
        self.scripts = {
            name: client.register_script(src)
            for name, src in (
                ("acquire", _ACQUIRE),
                ("renew", _RENEW),
                ("take", _TAKE),
                ("reserve", _RESERVE),
                ("settle", _SETTLE),
            )
        }

    def run(self, name: str, key: str, *args: object) -> Any:
        import redis  # deferred: keeps redis off the import of gateway.redis_limits

        try:
            return self.scripts[name](keys=[f"{self.prefix}:{key}"], args=list(args))
        except redis.RedisError as exc:
            raise _unavailable(self.url, exc) from None


class RedisSlots:
    """At most ``n`` requests in flight across every host of the run: leases in a sorted set."""

    def __init__(self, scripts: _Scripts, n: int, lease: float = LEASE_SECONDS) -> None:
        self.scripts = scripts
        self.n = n
        self.lease = lease
        self.waits = 0

    async def _renew(self, member: str) -> None:
        """Keep the lease while the request is out; a lost server ends the renewal (the lease then
        expires, and the next call stops with :class:`LimitsUnavailable`)."""
        with contextlib.suppress(LimitsUnavailable):
            while True:
                await asyncio.sleep(self.lease / 3)
                self.scripts.run("renew", "slots", self.lease, member)

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        member = uuid.uuid4().hex
        delay = 0.005
        while not self.scripts.run("acquire", "slots", self.n, self.lease, member):
            self.waits += 1
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.1)
        renewer = asyncio.ensure_future(self._renew(member))
        try:
            yield
        finally:
            renewer.cancel()
            with contextlib.suppress(Exception):
                self.scripts.client.zrem(f"{self.scripts.prefix}:slots", member)

    def close(self) -> None:
        """Nothing held between requests (leases are released per request)."""


class RedisRate:
    """Requests- and tokens-per-minute token buckets on the server."""

    def __init__(self, scripts: _Scripts, rpm: float | None, tpm: float | None, key: str = "rate") -> None:
        self.scripts = scripts
        self.rpm = rpm
        self.tpm = tpm
        self.key = key  # "rate" (the run's bucket) or "rate:<model key>" (one model's)
        self.waited_s = 0.0

    async def acquire(self, tokens: int) -> None:
        if not self.rpm and not self.tpm:
            return
        wait = self._take(tokens)
        if wait > 0:
            async with model_wait() if self.key != "rate" else contextlib.nullcontext():  # a model's own
                while wait > 0:
                    self.waited_s += wait
                    await asyncio.sleep(min(wait, 1.0))
                    wait = self._take(tokens)

    def _take(self, tokens: int) -> float:
        """One token-bucket decision on the server: 0 when taken, else the seconds to wait."""
        return float(self.scripts.run("take", self.key, self.rpm or 0, self.tpm or 0, tokens))

    def correct(self, estimated: int, actual: int) -> None:
        """Charge the difference between the estimated and the real token count."""
        if not self.tpm or actual == estimated:
            return
        import redis  # deferred: keeps redis off the import of gateway.redis_limits

        try:
            self.scripts.client.hincrbyfloat(
                f"{self.scripts.prefix}:{self.key}", "tok_level", estimated - actual
            )
        except redis.RedisError as exc:
            raise _unavailable(self.scripts.url, exc) from None


class RedisBudget(BudgetLimits):
    """The run's and each task's budget as reservations on the server."""

    def __init__(
        self, scripts: _Scripts, usd: float | None, tokens: int | None, task_usd: float | None
    ) -> None:
        super().__init__(usd, tokens, task_usd)
        self.scripts = scripts

    def reserve(self, task_id: str, usd: float, tokens: int) -> Reservation:
        limits = ["" if x is None else repr(x) for x in (self.usd, self.tokens, self.task_usd)]
        refusal = self.scripts.run("reserve", "budget", *limits, task_id, repr(usd), tokens)
        text = refusal.decode() if isinstance(refusal, bytes) else str(refusal or "")
        if text:
            raise self.refuse(text)
        return Reservation(usd, tokens, task_id)

    def settle(self, r: Reservation, usd: float, tokens: int) -> None:
        self.scripts.run("settle", "budget", r.task_id, repr(r.usd), r.tokens, repr(usd), tokens)


class RedisLimits:
    """The three limits of one run on one Redis server, keyed ``gauge:<run id>:...``."""

    def __init__(self, url: str, run_id: str, lease: float = LEASE_SECONDS) -> None:
        self.url = url
        self.client = connect(url)
        self.scripts = _Scripts(self.client, url, f"gauge:{run_id}")
        self.lease = lease

    def slots(self, n: int) -> RedisSlots:
        return RedisSlots(self.scripts, n, self.lease)

    def rate(self, rpm: float | None, tpm: float | None) -> RedisRate:
        return RedisRate(self.scripts, rpm, tpm)

    def budget(self, usd: float | None, tokens: int | None, task_usd: float | None) -> RedisBudget:
        return RedisBudget(self.scripts, usd, tokens, task_usd)

    def model_rates(self, rpm: Mapping[str, float], tpm: Mapping[str, float]) -> ModelRates:
        """Each model's own buckets on the server (keys ``gauge:<run id>:rate:<model key>``), so every
        host of the run shares them like the run-wide one."""
        return ModelRates(
            {
                model: RedisRate(self.scripts, rpm.get(model), tpm.get(model), f"rate:{model_key(model)}")
                for model in sorted(set(rpm) | set(tpm))
            }
        )


def run_limits(url: str | None, run_id: str, run_dir: Path, processes: int = 1) -> RunLimits:
    """The run's limits: on the Redis server at ``url`` (``--gauge-limits``), keyed by ``run_id``, or
    in the run folder ``run_dir`` on local disk, shared by ``processes`` processes."""
    if url:
        return RedisLimits(url, run_id)
    return FileLimits(run_dir, processes)
