"""An ``HttpAgent``'s transcript (docs/protocol.md#http-agents): one POST per turn with the body
template filled, retried like a gateway call (429, 5xx, timeouts, refused connections; the service's
``Retry-After`` honoured up to 30 s), its failures diagnosed by
:func:`~pytest_gauge._internal.gateway.diagnosis. diagnose_http_agent`, and each turn's status, latency,
attempts, session and reported usage kept for the transcript (``program_turns``). Header values come from the
environment at each request and are registered as secrets, so no error, record or report can quote them. As
strict as the gateway: a redirect is a failure naming its ``Location``, the body is bounded while it is read,
and a reply that is not usable JSON is one line naming what is wrong."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..gateway.diagnosis import diagnose_http_agent
from ..gateway.redact import redact, register_secret
from ..gateway.response import BadResponse
from ..records.json_types import JSONObject
from ..suite.http_agent import MISSING, HttpAgent, env_references, extract, fill_headers, render_body
from .programs import ProgramFailed

if TYPE_CHECKING:
    from ..gateway.client_session import LoopSession

__all__ = ["HttpAgentFailed", "HttpSession", "HttpTurn"]

_RETRY_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})
_MAX_WAIT = 30.0  # seconds: the longest Retry-After honoured
MAX_BODY = 8 * 1024 * 1024  # bytes of a response read


class HttpAgentFailed(ProgramFailed):
    """A turn of an HTTP agent failed after its retries: the transcript ends with this error."""


@dataclass(frozen=True)
class HttpTurn:
    """One turn's reply and what is recorded about it."""

    reply: str
    session: str | None
    status: int
    latency_s: float
    attempts: int
    usage: JSONObject | None

    def record(self) -> JSONObject:
        """The turn in ``Transcript.program_turns`` (cost: the service reports none the plugin trusts)."""
        return {
            "session": self.session,
            "usage": self.usage,
            "cost_usd": None,
            "status": self.status,
            "latency_s": self.latency_s,
            "attempts": self.attempts,
        }


@dataclass
class HttpSession:
    """One transcript's conversation with an HTTP agent."""

    agent: HttpAgent
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)
    session: str | None = None
    turns: list[HttpTurn] = field(default_factory=list)

    async def turn(self, history: list[JSONObject]) -> HttpTurn:
        """POST the conversation so far (``history``: the agent's view, the user's message last) and
        read the reply; raises :class:`HttpAgentFailed` with the diagnosis."""
        messages = [{"role": m["role"], "content": m.get("content") or ""} for m in history]
        last = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
        values = {"messages": messages, "last_user_message": last, "session": self.session}
        body = json.dumps(render_body(dict(self.agent.body), values), ensure_ascii=False).encode("utf-8")
        headers, missing = fill_headers(self.agent.headers, self.environ)
        if missing:
            raise HttpAgentFailed(
                f"HttpAgent {self.agent.name!r}: its headers read {', '.join(missing)}, which is not set."
                f" Fix: export {missing[0]}=... before the run"
            )
        for value in headers.values():
            register_secret(value)
        status, data, response_headers, latency, attempts = await self._post(body, headers)
        done = self._read(data, response_headers, status, latency, attempts)
        self.session = done.session or self.session
        self.turns.append(done)
        return done

    async def _post(
        self, body: bytes, headers: dict[str, str]
    ) -> tuple[int, bytes, Mapping[str, str], float, int]:
        """The first answer that is not worth retrying (or the last one), with its latency and the
        number of attempts; a failure that never got an answer is diagnosed and raised."""
        from ..gateway.client_session import LoopSession  # deferred: aiohttp, only for an HTTP agent

        sent = {"content-type": "application/json", "accept": "application/json", **headers}
        attempts = 1 + self.agent.retries
        client = LoopSession()
        try:
            for attempt in range(1, attempts + 1):
                started = time.perf_counter()
                answer = await self._attempt(client, body, sent, attempt, attempts)
                if answer is None:
                    await asyncio.sleep(self._backoff(attempt))
                    continue
                status, data, response_headers = answer
                latency = round(time.perf_counter() - started, 3)
                if status < 300:
                    return status, data, response_headers, latency, attempt
                if status < 400:
                    raise self._failed(attempt, status=status, location=response_headers.get("location", ""))
                if status not in _RETRY_STATUSES or attempt == attempts:
                    raise self._failed(attempt, status=status, body=data)
                await asyncio.sleep(self._wait(response_headers.get("retry-after"), attempt))
        finally:
            await client.aclose()
        raise AssertionError("unreachable")  # pragma: no cover

    async def _attempt(
        self, client: LoopSession, body: bytes, headers: dict[str, str], attempt: int, attempts: int
    ) -> tuple[int, bytes, Mapping[str, str]] | None:
        """One POST within the agent's timeout (a service dripping its answer too), its body bounded while
        read: the answer, or None for a failure worth another attempt; the last attempt's failure is
        diagnosed and raised."""
        from ..gateway.client_session import fault_of, read_bounded  # deferred: aiohttp

        try:
            async with asyncio.timeout(self.agent.timeout):
                session, route = client.get(), client.route(self.agent.url, headers)
                async with session.post(
                    self.agent.url, data=body, headers=headers, allow_redirects=False, **route
                ) as response:
                    truncate = response.status >= 300  # an error body is only quoted: its start will do
                    data = await read_bounded(response, MAX_BODY, truncate=truncate)
                    return response.status, data, response.headers
        except BadResponse as exc:
            fix = f"keep the service's replies under {MAX_BODY >> 20} MiB"
            raise self._bad(exc.problem.replace("the body", "the reply"), fix) from None
        except Exception as exc:
            fault = fault_of(exc)
            if fault is None:
                raise
            if attempt == attempts:
                raise self._failed(attempt, failure=exc, cause=fault.cause) from None
            return None

    def _wait(self, retry_after: str | None, attempt: int) -> float:
        try:
            return min(_MAX_WAIT, max(0.0, float(retry_after))) if retry_after else self._backoff(attempt)
        except ValueError:  # an HTTP date: the backoff instead
            return self._backoff(attempt)

    def _backoff(self, attempt: int) -> float:
        return float(min(_MAX_WAIT, self.agent.retry_wait * 2 ** (attempt - 1)))

    def _failed(self, attempts: int, **what: Any) -> HttpAgentFailed:
        error = diagnose_http_agent(
            self.agent.name,
            self.agent.url,
            attempts,
            timeout=self.agent.timeout,
            variables=tuple(env_references(self.agent.headers)),
            **what,
        )
        return HttpAgentFailed(str(error))

    def _read(
        self, data: bytes, headers: Mapping[str, str], status: int, latency: float, attempts: int
    ) -> HttpTurn:
        """The reply, session id and usage from a successful response (a missing reply is a failure
        naming the path and the keys that were there)."""
        agent = self.agent
        try:
            parsed = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise self._bad(f"the response is not JSON ({len(data)} bytes)") from None
        except RecursionError:
            raise self._bad(f"the response's JSON is nested too deeply to read ({len(data)} bytes)") from None
        reply = extract(parsed, agent.reply_path)
        if reply is MISSING or not isinstance(reply, str | int | float):
            keys = ", ".join(sorted(parsed)) if isinstance(parsed, dict) else type(parsed).__name__
            raise self._bad(f"the response has no text at reply_path {agent.reply_path!r} (it has: {keys})")
        session: Any = None
        if agent.session_path:
            found = extract(parsed, agent.session_path)
            session = None if found is MISSING or found is None else str(found)
        if agent.session_header and headers.get(agent.session_header):
            session = headers[agent.session_header]
        usage = extract(parsed, agent.usage_path) if agent.usage_path else None
        return HttpTurn(
            str(reply), session, status, latency, attempts, usage if isinstance(usage, dict) else None
        )

    def _bad(self, problem: str, fix: str = "") -> HttpAgentFailed:
        where = f"HttpAgent {self.agent.name!r} at {self.agent.url}"
        fix = fix or (
            "set HttpAgent(reply_path=...) to where the service puts its reply (dotted, numbers index lists)"
        )
        return HttpAgentFailed(redact(f"{where}: {problem}. Fix: {fix}"))
