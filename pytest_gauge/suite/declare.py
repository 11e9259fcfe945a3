"""Declaring a suite: agents, pairs, judge, user simulator, tools and gates (tasks load in :mod:`.tasks`).

A suite is a folder under ``eval_suites/`` with a ``tasks.jsonl`` and a test module holding one
module-level :class:`Suite`; pytest-gauge collects it into one test per (task, pair, order, sample).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from ..records import APIS, NEUTRAL_API, Api
from .http_agent import HttpAgent
from .programs import CommandAgent
from .response_format import format_chain
from .rules import RuleResult
from .sim_profiles import SimAgent, SimJudge, SimUser
from .strategy import BestOf, Reflection, Strategy, family
from .tasks import Task, TaskFileError, load_tasks
from .tools import Tool

__all__ = [
    "BestOf",
    "CallableAgent",
    "CommandAgent",
    "HttpAgent",
    "Judge",
    "ModelAgent",
    "Reflection",
    "Suite",
    "SuiteError",
    "TaskFileError",
    "UserSimulator",
    "best_of",
    "env_model",
    "load_tasks",
    "reflection",
]


MODEL_VARIABLES: dict[str, str] = {}
"""Model name -> the environment variable it was read from by :func:`env_model` (for error messages)."""


def env_model(variable: str, default: str) -> str:
    """A model name from the environment (for live runs), else ``default`` (the simulator's name)."""
    value = os.environ.get(variable, "").strip()
    if value:
        MODEL_VARIABLES[value] = variable
    return value or default


def _check_api(role: str, api: object) -> None:
    """``api=`` names a wire format (docs/protocol.md#wire-formats), else a :class:`SuiteError`."""
    if api not in APIS:
        raise SuiteError(f"{role}(api={api!r}): use one of {', '.join(repr(a) for a in APIS)}")


@dataclass(frozen=True)
class ModelAgent:
    """An agent served by a model through the gateway; ``strategy`` spends more compute per task.
    ``api``: the wire format its model is called in (``"chat"``, the default: Chat Completions;
    ``"anthropic"``: Messages; ``"responses"``: OpenAI Responses), at the same base URL and key."""

    name: str
    model: str
    system_prompt: str = "You are a helpful assistant. Complete the user's request accurately."
    temperature: float = 0.7
    max_tokens: int = 800
    sim: SimAgent = field(default_factory=SimAgent)
    strategy: Strategy | None = None
    api: Api = NEUTRAL_API

    def __post_init__(self) -> None:
        _check_api("ModelAgent", self.api)

    @property
    def family(self) -> str:
        return family(self.name)


@dataclass(frozen=True)
class CallableAgent:
    """An agent implemented in Python: ``fn(messages, tools)`` returns the reply (sync or async).

    ``messages`` are OpenAI-style dicts of the conversation so far; ``tools`` is the task's executor
    (``await tools.run(call_id, name, json_arguments)``) or None, so its tool calls are recorded too.
    """

    name: str
    fn: Callable[..., Any]
    model: str | None = None
    strategy: Strategy | None = None


Agent = ModelAgent | CallableAgent | CommandAgent | HttpAgent
AgentT = TypeVar("AgentT", ModelAgent, CallableAgent, CommandAgent, HttpAgent)


def best_of(agent: AgentT, n: int, selector: str = "verifier") -> AgentT:
    """``agent`` (of any kind: a model, a callable, a program, a service) as a best-of-``n`` tier named
    ``<agent>@bo<n>``: ``n`` independent samples, each its own session (docs/protocol.md#elo)."""
    if n < 1:
        raise SuiteError(f"best_of needs n >= 1, got {n}")
    if selector not in ("verifier", "judge"):
        raise SuiteError(f"best_of selector must be 'verifier' or 'judge', got {selector!r}")
    return replace(agent, name=f"{agent.name}@bo{n}", strategy=BestOf(n, selector))


def reflection(agent: AgentT, rounds: int = 1) -> AgentT:
    """``agent`` (of any kind) with ``rounds`` revision turns after the conversation, named
    ``<agent>@reflect<rounds>``: a model is called again, a program or a service is given one more turn
    of its own session, a callable is called with the revision request appended."""
    if rounds < 1:
        raise SuiteError(f"reflection needs rounds >= 1, got {rounds}")
    return replace(agent, name=f"{agent.name}@reflect{rounds}", strategy=Reflection(rounds))


@dataclass(frozen=True)
class UserSimulator:
    """The simulated user: its own model, prompt extension and temperature; never the judge. ``api``:
    the wire format its model is called in (as :class:`ModelAgent`'s). ``audit_model``: a model that
    audits the user's turns of every transcript (role ``user_audit``, flag ``judged``; off by default,
    docs/protocol.md#user-audit), called in ``api`` too."""

    model: str = "gauge-sim-user"
    temperature: float = 0.7
    max_tokens: int = 400
    max_turns: int = 3
    extra_prompt: str = ""
    sim: SimUser = field(default_factory=SimUser)
    api: Api = NEUTRAL_API
    audit_model: str | None = None

    def __post_init__(self) -> None:
        _check_api("UserSimulator", self.api)


@dataclass(frozen=True)
class Judge:
    """The pairwise judge: temperature 0; ``repeats`` and ``extra_models`` measure its reliability.

    ``response_format``: ``"auto"`` (default) asks for a strict ``json_schema`` verdict, falling back to
    ``json_object`` and then to the prompt alone when a gateway rejects the parameter (once per judge
    model per run, reported); ``"json_object"`` starts there; a mapping is sent as given; ``None`` sends
    none. ``context_tokens``: the judge model's context window (else the price table's, when it knows
    one: a ``context_tokens`` column or genai-prices' data); each transcript is then shortened to fit
    it (task, rules and final replies kept whole, middle turns elided with a marker), else to 12,000
    characters. ``sim``: the offline simulator's judge profile (:class:`SimJudge`). ``api``: the wire
    format its models are called in (as :class:`ModelAgent`'s; with ``"anthropic"`` the JSON verdict is
    a forced tool call with the verdict's schema, falling back the same way).
    """

    model: str = "gauge-sim-judge"
    temperature: float = 0.0
    max_tokens: int = 300
    repeats: int = 1
    extra_models: tuple[str, ...] = ()
    response_format: str | Mapping[str, Any] | None = "auto"
    sim: SimJudge = field(default_factory=SimJudge)
    extra_sims: Mapping[str, SimJudge] = field(default_factory=dict)
    context_tokens: int | None = None  # the judge model's context window: transcripts shortened to fit
    api: Api = NEUTRAL_API

    def __post_init__(self) -> None:
        _check_api("Judge", self.api)

    def models(self) -> tuple[str, ...]:
        return (self.model, *self.extra_models)


class SuiteError(ValueError):
    """A suite declaration that cannot run (unknown agent in a pair, duplicate names, ...)."""


class Suite:
    """A suite declaration. Put one at module level in a test module beside ``tasks.jsonl``.

    ``pairs`` is ``"all"`` or a list of ``(left, right)`` agent names (the left agent is
    ``agent_left`` in both orders). ``orders`` is ``"both"`` (AB and BA) or ``"seeded"`` (one order per
    (task, pair), drawn from the run seed). ``samples`` transcripts per (task, agent).
    ``max_reply_chars`` (default 100,000): a longer reply of an agent or the user simulator is cut to it,
    with a marker saying how much was cut, before it is recorded or sent to the next model.
    ``workspace``: a folder (relative to the suite's folder) copied fresh for every transcript, for
    tasks that act on files (docs/protocol.md#workspaces); a task with workspace rules and no such
    folder gets an empty one.
    """

    def __init__(
        self,
        *,
        agents: Sequence[Agent],
        judge: Judge | None = None,
        user: UserSimulator | None = None,
        tasks: str = "tasks.jsonl",
        pairs: str | Sequence[tuple[str, str]] = "all",
        orders: str = "both",
        samples: int = 1,
        gates: Sequence[str] = (),
        tools: Sequence[Tool] = (),
        checks: Mapping[str, Callable[..., bool | RuleResult]] | None = None,
        tool_step_limit: int = 6,
        tool_timeout: float = 5.0,
        name: str | None = None,
        max_reply_chars: int = 100_000,
        workspace: str | None = None,
    ) -> None:
        self.agents = tuple(agents)
        self.judge = judge or Judge()
        self.user = user or UserSimulator()
        self.tasks_file = tasks
        self.orders = orders
        self.samples = samples
        self.gates = tuple(gates)
        self.tools = tuple(tools)
        self.checks = dict(checks or {})
        self.tool_step_limit = tool_step_limit
        self.tool_timeout = tool_timeout
        self.name = name
        self.workspace = workspace
        # an agent's or the user simulator's reply past this is cut, with a marker, before it is recorded
        # or sent on (a tool's result has its own limit, Tool(max_result_chars=...))
        self.max_reply_chars = max_reply_chars
        if isinstance(max_reply_chars, bool) or not isinstance(max_reply_chars, int) or max_reply_chars < 1:
            raise SuiteError(f"max_reply_chars must be a whole number >= 1, got {max_reply_chars!r}")
        names = [a.name for a in self.agents]
        if len(names) < 2:
            raise SuiteError("a suite needs at least two agents to compare")
        if len(set(names)) != len(names):
            raise SuiteError(f"duplicate agent names: {names}")
        for n in names:
            if not n or any(ch.isspace() or ch in "[]/" for ch in n) or "-vs-" in n or n.count("@") > 1:
                raise SuiteError(f"agent name {n!r}: use a name without spaces, '/', brackets or '-vs-'")
        if orders not in ("both", "seeded"):
            raise SuiteError(f"orders must be 'both' or 'seeded', got {orders!r}")
        if samples < 1:
            raise SuiteError("samples must be >= 1")
        if isinstance(pairs, str):
            if pairs != "all":
                raise SuiteError(f"pairs must be 'all' or a list of (left, right) agent names, got {pairs!r}")
            self.pairs = tuple((a, b) for i, a in enumerate(names) for b in names[i + 1 :])
        else:
            self.pairs = tuple((str(a), str(b)) for a, b in pairs)
            for a, b in self.pairs:
                for n in (a, b):
                    if n not in names:
                        raise SuiteError(
                            f"pair ({a}, {b}) names unknown agent {n!r} (agents: {', '.join(names)})"
                        )
                if a == b:
                    raise SuiteError(f"pair ({a}, {b}) compares an agent with itself")
        try:
            format_chain(self.judge.response_format)
        except ValueError as exc:
            raise SuiteError(str(exc)) from None
        # gates are checked at collection (syntax, metric names, agents, pairs, tiers): a usage error
        # naming the suite, see pytest_gauge.analysis.gate_precheck
        for t in self.tools:
            if not isinstance(t, Tool):
                raise SuiteError(f"Suite(tools=...): expected Tool objects, got {t!r}")
        tool_names = [t.name for t in self.tools]
        if len(set(tool_names)) != len(tool_names):
            raise SuiteError(f"duplicate tool names: {tool_names}")

    def agent(self, name: str) -> Agent:
        return next(a for a in self.agents if a.name == name)

    def workspace_source(self, folder: Path) -> Path | None:
        """The folder copied into each transcript's workspace, resolved against the suite's folder
        (None when the suite names none); a missing folder is a :class:`SuiteError`."""
        if self.workspace is None:
            return None
        source = (folder / self.workspace).resolve()
        if not source.is_dir():
            raise SuiteError(f"Suite(workspace={self.workspace!r}): {source} is not a folder")
        return source

    def load(self, folder: Path) -> tuple[Task, ...]:
        """Load and validate this suite's tasks (raises :class:`TaskFileError`)."""
        self.workspace_source(folder)
        return load_tasks(
            folder / self.tasks_file, checks=self.checks, tool_names=[t.name for t in self.tools]
        )

    def families(self) -> dict[str, list[tuple[str, str]]]:
        """Compute tiers per agent family, in increasing compute: {family: [(tier label, agent name)]}."""
        tiers: dict[str, list[tuple[float, str, str]]] = {}
        for a in self.agents:
            if a.strategy is not None:
                tiers.setdefault(family(a.name), []).append((a.strategy.compute, a.strategy.label, a.name))
        for a in self.agents:
            if a.strategy is None and a.name in tiers:
                tiers[a.name].append((1.0, "base", a.name))
        return {f: [(label, name) for _c, label, name in sorted(rows)] for f, rows in sorted(tiers.items())}

    def models(self) -> dict[str, str | None]:
        """Model per role and agent, for the manifest."""
        out: dict[str, str | None] = {f"agent:{a.name}": a.model for a in self.agents}
        out["user_sim"] = self.user.model
        if self.user.audit_model:
            out["user_audit"] = self.user.audit_model
        for i, m in enumerate(self.judge.models()):
            out[f"judge:{i}"] = m
        return out
