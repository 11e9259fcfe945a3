"""The work the engine schedules: one transcript of (task, agent, sample), one verdict of (case, judge,
repeat), and the case record assembled from them (docs/protocol.md#case-record).

Each unit is a coroutine over the suite's gateway that returns a typed result
(:class:`~pytest_gauge._internal.records.TranscriptResult` or
:class:`~pytest_gauge._internal.records.JudgmentResult`); when and where it runs, and how its result is shared
between processes, is :mod:`pytest_gauge._internal.run.engine`'s business, not this module's.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..files.workspace import workspace_for
from ..gateway.gateway import CallContext, Gateway, WireReply
from ..gateway.proxy import ProxyRoute, RecordingProxy, WireRequest, gateway_call
from ..gateway.route_policy import route_policy
from ..gateway.wire import WireFormat
from ..gateway.wire.noise import register_suite
from ..records import (
    NEUTRAL_API,
    Api,
    CaseRecord,
    JudgmentResult,
    Transcript,
    TranscriptResult,
    Turn,
    UnitSpend,
    Usage,
)
from ..records.json_types import JSONObject
from ..records.work_key import WorkKey
from ..suite.cases import Case
from ..suite.declare import Agent, CallableAgent, CommandAgent, HttpAgent, ModelAgent, Suite
from ..suite.file_checks import CommandRunner
from ..suite.rules import Score, observe_workspace_async, score, workspace_rules
from ..suite.strategy import BestOf, Reflection, Strategy
from ..suite.tasks import Task
from ..suite.tools import ToolExecutor
from .dialogue import REFLECTION_PROMPT, BodyCaller, ChatResult, DialogueConfig, revise, run_dialogue
from .http_agent import HttpSession
from .judge import Redactor, build_judge_messages, judge_prompt, parse_verdict, slots
from .judge_format import JudgeFormats, ask_judge
from .mcp_tools import McpTools
from .programs import ProgramError, ProgramHost, ProgramMissing, ProgramSession, program_setup
from .user_audit import audit_user, parse_user_audit, user_audit_messages

__all__ = ["SuiteRuntime", "WorkCaller", "build_record", "call_seed"]


def call_seed(run_seed: int, *unit: str | int) -> int:
    """The ``seed`` sent with a model call: sha256 of the run seed (``--gauge-seed``) and the unit of
    work, as a non-negative 31-bit integer (every OpenAI-compatible gateway takes it).

    Units: ``("transcript", suite, task, sample, candidate)`` for both sides of a dialogue (and the
    reflection rounds of candidate 0); ``("select", suite, task, sample, challenger)`` for a best-of judge
    knockout; ``("judge", suite, case_id, judge_index, repeat)`` for a verdict. So seeds never depend on
    the worker or the order of work (identical with any ``-n``), differ per sample, per best-of candidate
    and per judge repeat, and change with the run seed. The agent's name is deliberately not part of a
    transcript's unit: every agent of a comparison is sent the same seed for the same task, sample and
    candidate (paired sampling).
    """
    material = "|".join(str(part) for part in (run_seed, *unit))
    return int.from_bytes(hashlib.sha256(material.encode("utf-8")).digest()[:4], "big") & 0x7FFFFFFF


class WorkCaller(BodyCaller):
    """The :class:`~.dialogue.ChatCaller` of one unit of work: numbers its calls, sums their spend. It is
    also the unit's way into the process's recording proxy (:meth:`proxy_route`): a program's calls
    through the route are this unit's calls, numbered with its own and in its spend."""

    def __init__(self, gateway: Gateway, ctx: CallContext, proxy: RecordingProxy | None = None) -> None:
        self.gateway = gateway
        self.ctx = ctx
        self.seq = 0
        self.spend = UnitSpend()
        self.proxy = proxy
        self.refusals: list[str] = []  # the requests a program's route refused (noted in its transcript)

    def next_seq(self) -> int:
        """The number of the unit's next call (its own calls and its proxied ones share it)."""
        self.seq += 1
        return self.seq

    async def send(self, role: str, model: str, body: JSONObject, api: Api = NEUTRAL_API) -> ChatResult:
        result = await self.gateway.chat(self.ctx, self.next_seq(), role, model, body, api)
        self.spend += _spend_of(result.usage, result.cost)
        return result

    async def call(self, request: WireRequest) -> WireReply:
        """One proxied call of this unit (:class:`~pytest_gauge._internal.gateway.proxy.WorkCalls`)."""
        reply = await gateway_call(self.gateway, self.ctx, request)
        self.spend += _spend_of(reply.result.usage, reply.result.cost)
        return reply

    def refused(self, seq: int, role: str, model: str, fmt: WireFormat, reason: str) -> None:
        """A proxied request the route's policy refused: its ledger line, and a note for the transcript."""
        self.gateway.refused(self.ctx, seq, role, model, fmt.api, reason)
        self.refusals.append(f"call #{seq} ({model}) refused: {reason}")

    def proxy_route(self, role: str = "agent", seed: int | None = None) -> ProxyRoute:
        """A route of the process's recording proxy for this unit of work (close it when the program is
        done); ``seed`` is added to Chat Completions requests that send none. For program agents: give the
        program :func:`~pytest_gauge._internal.gateway.proxy.client_environment` of it."""
        if self.proxy is None:
            raise RuntimeError("no recording proxy in this process (the unit is not run by an engine)")
        return self.proxy.register(self.ctx, role, calls=self, seed=seed)


def _spend_of(usage: Usage | None, cost: float | None) -> UnitSpend:
    """One call's spend; a call without usage adds no tokens and no cost, only its count (the unit's cost
    is then a lower bound, "at least")."""
    if usage is None:
        return UnitSpend(unpriced_calls=1)
    return UnitSpend(usage.prompt_tokens, usage.completion_tokens, cost)


@dataclass
class SuiteRuntime:
    """One suite as this process runs it: declaration, tasks, gateway and judge view."""

    name: str
    suite: Suite
    tasks: dict[str, Task]
    gateway: Gateway
    formats: JudgeFormats = field(default_factory=JudgeFormats)
    seed: int = 0  # the run seed (--gauge-seed): every call's seed derives from it (see call_seed)
    out_dir: Path = Path("gauge-out")  # --gauge-out: where the transcripts' workspaces live
    workspace_source: Path | None = None  # Suite(workspace=...) resolved: copied into each workspace
    programs: ProgramHost | None = None  # program agents' folders and proxy routes (set by the plugin)
    module_path: Path | None = None  # the suite's test module (its folder and name, for reports)
    proxy: RecordingProxy | None = None  # the process's recording proxy (set with the engine)
    commands: CommandRunner | None = None  # how workspace commands run: the sandbox (set by the plugin)
    redactor: Redactor = field(init=False)
    _scored: OrderedDict[tuple[str, str, int], Score] = field(init=False, default_factory=OrderedDict)

    def __post_init__(self) -> None:
        names = [a.name for a in self.suite.agents]
        names += [a.model for a in self.suite.agents if a.model]
        self.redactor = Redactor(names)

    def scored(self, transcript: Transcript, keep: int = 256) -> Score:
        """A finished transcript scored by the task's rules, remembered for the next few cases: every
        transcript is judged in ``2 x (agents - 1)`` cases, mostly one after another."""
        key = (transcript.task_id, transcript.agent, transcript.sample)
        hit = self._scored.get(key)
        if hit is not None:
            self._scored.move_to_end(key)
            return hit
        task = self.tasks[transcript.task_id]
        hit = score(task.success_criteria, task.hard_constraints, transcript)
        self._scored[key] = hit
        if len(self._scored) > keep:
            self._scored.popitem(last=False)
        return hit

    def user_flags(self, transcript: Transcript) -> list[str]:
        """The user simulator's errors in ``transcript`` (docs/protocol.md#user-audit)."""
        task = self.tasks[transcript.task_id]
        limit = task.max_turns or self.suite.user.max_turns
        return list(audit_user(task, transcript, self.scored(transcript).task_success, limit))

    def _dialogue_config(self, agent_name: str, sample: int, seed: int | None) -> DialogueConfig:
        agent = self.suite.agent(agent_name)
        user = self.suite.user
        return DialogueConfig(
            agent_name=agent.name,
            agent_model=agent.model if isinstance(agent, ModelAgent) else None,
            agent_system_prompt=agent.system_prompt if isinstance(agent, ModelAgent) else "",
            agent_temperature=agent.temperature if isinstance(agent, ModelAgent) else 0.0,
            agent_max_tokens=agent.max_tokens if isinstance(agent, ModelAgent) else 0,
            agent_fn=agent.fn if isinstance(agent, CallableAgent) else None,
            user_model=user.model,
            user_temperature=user.temperature,
            user_max_tokens=user.max_tokens,
            user_extra_prompt=user.extra_prompt,
            max_turns=user.max_turns,
            tool_step_limit=self.suite.tool_step_limit,
            max_reply_chars=self.suite.max_reply_chars,
            agent_seed=seed,
            user_seed=seed,
            agent_api=agent.api if isinstance(agent, ModelAgent) else NEUTRAL_API,
            user_api=user.api,
        )

    def _executor(self, task: Task, workspace: Path | None = None) -> ToolExecutor | None:
        if not task.tools:
            return None
        tools = [t for t in self.suite.tools if t.name in task.tools]
        return ToolExecutor(tools, self.suite.tool_timeout, workspace)

    def workspace(self, task_id: str, agent_name: str, sample: int, candidate: int = 0) -> Path | None:
        """A fresh workspace for (task, agent, sample)
        (:func:`~pytest_gauge._internal.files.workspace.workspace_for`), or None when the suite names no
        workspace folder and the task has no workspace rule; a best-of tier's ``candidate`` k > 0 has its own
        copy."""
        task = self.tasks[task_id]
        wanted = workspace_rules((*task.success_criteria, *task.hard_constraints))
        if self.workspace_source is None and not wanted:
            return None
        return workspace_for(
            self.out_dir, self.name, task_id, agent_name, sample, self.workspace_source, candidate
        )

    def mcp_tools(
        self, task_id: str, agent_name: str, sample: int, tools: ToolExecutor | None, candidate: int = 0
    ) -> McpTools | None:
        """The task's tools offered to a program agent over MCP for (task, agent, sample)
        (:class:`~.mcp_tools.McpTools`: served by this process, its relay's configuration for Claude
        Code and Codex, the calls it ran), or None when the task names no tool."""
        if tools is None:
            return None
        return McpTools.create(
            self.out_dir, self.name, task_id, agent_name, sample, executor=tools, candidate=candidate
        )

    async def _observed(self, task: Task, transcript: Transcript, workspace: Path | None) -> Transcript:
        """The transcript with what its task's workspace rules saw in the workspace after the dialogue
        (without blocking the engine's loop: the other units go on while a command runs)."""
        rules = (*task.success_criteria, *task.hard_constraints)
        if workspace is None or not workspace_rules(rules):
            return transcript
        checks = await observe_workspace_async(rules, workspace, self.commands)
        return replace(transcript, workspace_checks=checks)

    async def transcript(self, task_id: str, agent_name: str, sample: int) -> TranscriptResult:
        """The transcript of (task, agent, sample); compute tiers spend their extra calls in this work."""
        task = self.tasks[task_id]
        agent = self.suite.agent(agent_name)
        strategy = agent.strategy
        label = strategy.label if strategy is not None else "single"
        work = str(WorkKey.transcript(task_id, agent_name, sample))
        caller = WorkCaller(self.gateway, CallContext(self.name, task_id, work, label), self.proxy)
        base_seed = call_seed(self.seed, "transcript", self.name, task_id, sample, 0)
        if isinstance(strategy, BestOf):
            candidates = [await self._candidate(task, agent, caller, sample, i) for i in range(strategy.n)]
            transcript = await self._select(task, candidates, strategy, caller, sample)
        else:
            transcript = await self._candidate(task, agent, caller, sample, 0, strategy)
        transcript = await self._audit_user(task, transcript, caller, base_seed)
        verdict = score(task.success_criteria, task.hard_constraints, transcript)
        rules = verdict.to_json(task.success_criteria, task.hard_constraints)
        return TranscriptResult(transcript, caller.spend, rules)

    async def _candidate(
        self,
        task: Task,
        agent: Agent,
        caller: WorkCaller,
        sample: int,
        candidate: int,
        strategy: Strategy | None = None,
    ) -> Transcript:
        """One sample of the agent on the task, its own session: its own workspace copy, program folder,
        MCP folder and proxy route, seeded per candidate (so on the simulator each draws differently);
        then the reflection rounds of ``strategy``, and what the workspace rules see."""
        seed = call_seed(self.seed, "transcript", self.name, task.task_id, sample, candidate)
        label = caller.ctx.strategy
        workspace = self.workspace(task.task_id, agent.name, sample, candidate)
        if workspace is None and isinstance(agent, CommandAgent):  # a program always has a folder
            workspace = workspace_for(
                self.out_dir, self.name, task.task_id, agent.name, sample, None, candidate
            )
        cfg = replace(self._dialogue_config(agent.name, sample, seed), workdir=workspace)
        tools = self._executor(task, workspace)
        noted = len(caller.refusals)
        async with contextlib.AsyncExitStack() as serving:
            if isinstance(agent, CommandAgent) and workspace is not None:
                mcp = self.mcp_tools(task.task_id, agent.name, sample, tools, candidate)
                if mcp is not None:  # served here for the transcript's turns (run/mcp_tools.py)
                    await serving.enter_async_context(mcp)
                program = await self._program(agent, caller, workspace, mcp, seed, candidate)
                cfg = replace(cfg, program=program, mcp=mcp)
            if isinstance(agent, HttpAgent):
                cfg = replace(cfg, http=HttpSession(agent))
            done = await run_dialogue(task, sample, cfg, caller, tools, strategy=label)
            if isinstance(strategy, Reflection):
                if isinstance(agent, ModelAgent):
                    done = await self._reflect(agent, done, strategy.rounds, caller, seed)
                else:  # a program, a service or a callable: more turns of its own session
                    for _ in range(strategy.rounds):
                        done = await revise(cfg, caller, done, tools)
        if len(caller.refusals) > noted:  # what the program's route refused (docs/protocol.md#route-policy)
            done = replace(done, proxy_refusals=caller.refusals[noted:])
        if done.error is not None and isinstance(agent, (CommandAgent, HttpAgent)):
            raise ProgramError(  # a failing program is never a result: its case fails
                done.error.replace("\n", " "), f"fix agent {agent.name!r}: its transcript is not scored"
            )
        return await self._observed(task, done, workspace)

    async def _audit_user(
        self, task: Task, transcript: Transcript, caller: WorkCaller, seed: int | None
    ) -> Transcript:
        """The judge-model audit of the user's turns, with ``UserSimulator(audit_model=...)``: one call
        (role ``user_audit``, in the transcript's spend) whose finding flags ``judged``."""
        user = self.suite.user
        if not user.audit_model or transcript.error is not None:
            return transcript
        result = await caller(
            "user_audit",
            user.audit_model,
            user_audit_messages(task, transcript),
            temperature=0.0,
            max_tokens=user.max_tokens,
            seed=seed,
            api=user.api,
        )
        return replace(transcript, user_audit=parse_user_audit(result.content))

    async def _program(
        self,
        agent: CommandAgent,
        caller: WorkCaller,
        workdir: Path,
        mcp_tools: McpTools | None = None,
        seed: int | None = None,
        candidate: int = 0,
    ) -> ProgramSession:
        """A program agent's session for one transcript: its working directory (the workspace), private
        folder, proxy route (its calls numbered with the transcript's own, in its spend) and MCP servers
        (:mod:`.programs`); ``seed`` is the route's (added to requests that carry none), ``candidate`` a
        best-of sample's number (its own session id)."""
        ctx = caller.ctx
        host = self.programs
        if host is None:
            raise ProgramMissing(
                f"agent {agent.name!r} is a program, and this run has no recording proxy for it",
                "run it through the pytest plugin (program agents call their models through its proxy)",
            )
        mcp = dict(host.mcp_servers(ctx, mcp_tools)) if mcp_tools is not None else {}
        if mcp_tools is not None:  # the suite's tools: served here, reached through the relay
            mcp.update(mcp_tools.claude_config()["mcpServers"])
        # the output folder in a program's requests (its MCP server's files, its workspace) reads the same
        # from any checkout in the cache material (gateway/wire/noise.py)
        register_suite(self.name)
        work = ctx.work if candidate == 0 else f"{ctx.work}~c{candidate}"
        policy = route_policy((agent.model, *agent.helper_models), agent.max_tokens, agent.max_n)
        endpoint = host.endpoint(ctx, caller, seed, policy)
        # in the sandbox the relay the program starts reaches the tool server's socket in the MCP folder
        # (seen at its host path); the tools themselves run here, on the host's copy of the workspace
        writable = (mcp_tools.folder,) if mcp_tools is not None else ()
        setup = program_setup(workdir, endpoint, work, mcp, (), writable)
        return await asyncio.to_thread(ProgramSession.open, agent, setup)

    async def _select(
        self, task: Task, candidates: list[Transcript], strategy: BestOf, caller: WorkCaller, sample: int
    ) -> Transcript:
        """Best-of-n selection: the rule verifier's highest reward (first on ties), or a judge knockout."""
        if strategy.selector == "verifier":
            rewards = [score(task.success_criteria, task.hard_constraints, t).reward for t in candidates]
            return candidates[rewards.index(max(rewards))]
        best = candidates[0]
        for i, challenger in enumerate(candidates[1:], start=1):
            messages = build_judge_messages(task, best, challenger, self.redactor)
            seed = call_seed(self.seed, "select", self.name, task.task_id, sample, i)
            result, _ = await self.ask_judge(caller, self.suite.judge.model, messages, seed)
            if parse_verdict(result.content, result.finish_reason).choice == "B":
                best = challenger
        return best

    async def _reflect(
        self, agent: ModelAgent, transcript: Transcript, rounds: int, caller: WorkCaller, seed: int | None
    ) -> Transcript:
        """Reflection rounds: the agent revises its final reply; the revision replaces it."""
        history: list[JSONObject] = [{"role": "system", "content": agent.system_prompt}]
        for turn in transcript.turns:
            if turn.role in ("user", "assistant") and turn.content and not turn.tool_calls:
                history.append({"role": turn.role, "content": turn.content})
        reply = transcript.final_reply
        for _ in range(rounds):
            result = await caller(
                "agent",
                agent.model,
                [*history, {"role": "user", "content": REFLECTION_PROMPT}],
                temperature=agent.temperature,
                max_tokens=agent.max_tokens,
                seed=seed,
                api=agent.api,
            )
            history += [
                {"role": "user", "content": REFLECTION_PROMPT},
                {"role": "assistant", "content": result.content},
            ]
            reply = result.content
        turns = list(transcript.turns)
        if turns and turns[-1].role == "assistant":
            turns[-1] = Turn("assistant", reply)
        else:
            turns.append(Turn("assistant", reply))
        return replace(transcript, turns=turns, final_reply=reply)

    async def ask_judge(
        self, caller: WorkCaller, model: str, messages: list[dict[str, str]], seed: int | None = None
    ) -> tuple[ChatResult, str]:
        """One judge call in JSON mode with the run's format fallback (:func:`.judge_format.ask_judge`)."""
        return await ask_judge(self.formats, self.suite.judge, caller, model, messages, seed)

    def judge_cut(self, task: Task, left: Transcript, right: Transcript) -> int:
        """Characters of the two transcripts left out of the judge's prompt to fit its context (the
        same in both orders: each side has half the room)."""
        judge = self.suite.judge
        return judge_prompt(task, left, right, self.redactor, self.judge_context(), judge.max_tokens)[1]

    def judge_context(self) -> int | None:
        """The judge's context window: ``Judge(context_tokens=...)``, else the smallest window the price
        table knows for the judge's models (a ``context_tokens`` column, or genai-prices' data), else
        None (transcripts capped at the default length). One window for every judge model, so the
        panel's models read the same prompt."""
        judge = self.suite.judge
        if judge.context_tokens is not None:
            return judge.context_tokens
        prices = self.gateway.resources.prices
        known = [w for m in judge.models() if (w := prices.context_tokens(m)) is not None]
        return min(known) if known else None

    async def judgment(
        self, case: Case, judge_index: int, repeat: int, left: Transcript, right: Transcript
    ) -> JudgmentResult:
        """The verdict of one judge call on the case's two transcripts (in the case's blind order)."""
        task = self.tasks[case.task_id]
        model = self.suite.judge.models()[judge_index]
        work = str(WorkKey.judge(case.case_id, judge_index, repeat))
        caller = WorkCaller(self.gateway, CallContext(self.name, case.task_id, work))
        slot_a, slot_b = slots(case.order, left, right)
        judge = self.suite.judge
        messages = build_judge_messages(
            task, slot_a, slot_b, self.redactor, self.judge_context(), judge.max_tokens
        )
        seed = call_seed(self.seed, "judge", self.name, case.case_id, judge_index, repeat)
        result, fmt = await self.ask_judge(caller, model, messages, seed)
        verdict = parse_verdict(result.content, result.finish_reason)
        return JudgmentResult(verdict.as_judgment(model, repeat, fmt), caller.spend)


def build_record(
    runtime: SuiteRuntime,
    case: Case,
    left_result: TranscriptResult,
    right_result: TranscriptResult,
    verdicts: Sequence[JudgmentResult],
) -> CaseRecord:
    """Assemble the case record (docs/protocol.md#case-record) from the two transcripts, the rules and
    the verdicts."""
    task = runtime.tasks[case.task_id]
    left, right = left_result.transcript, right_result.transcript
    score_left, score_right = runtime.scored(left), runtime.scored(right)
    judgments = [v.judgment for v in verdicts]
    primary = judgments[0]
    left_in_a = case.order == "AB"
    selected: float | None = None
    lower: bool | None = None
    if primary.choice in ("A", "B"):
        picked_left = (primary.choice == "A") == left_in_a
        selected = score_left.reward if picked_left else score_right.reward
        other = score_right.reward if picked_left else score_left.reward
        lower = selected < other
    spend = sum((v.spend for v in verdicts), left_result.spend + right_result.spend)
    return CaseRecord(
        suite=case.suite,
        case_id=case.case_id,
        pair_id=case.pair_id,
        task_id=case.task_id,
        category=task.category,
        agent_left=case.left,
        agent_right=case.right,
        order=case.order,  # type: ignore[arg-type]
        blind_order=case.blind_order,  # type: ignore[arg-type]
        sample=case.sample,
        judge_choice=primary.choice,
        reward_left=score_left.reward,
        reward_right=score_right.reward,
        selected_reward=selected,
        lower_reward_selected=lower,
        task_success_left=score_left.task_success,
        task_success_right=score_right.task_success,
        user_sat_left=left.user_satisfied,
        user_sat_right=right.user_satisfied,
        input_tokens_incl_shared=spend.input_tokens,
        output_tokens_incl_shared=spend.output_tokens,
        est_cost_incl_shared=spend.cost,
        unpriced_calls=spend.unpriced_calls,
        judge_reward_a=primary.reward_a,
        judge_reward_b=primary.reward_b,
        judge_reason=primary.reason,
        judge_raw=primary.raw,
        judge_error=primary.error,
        chars_left=len(left.final_reply),
        chars_right=len(right.final_reply),
        judgments=judgments if len(judgments) > 1 else [],
        judge_response_format=primary.response_format,
        empty_turns_left=sum(1 for t in left.turns if t.empty),
        empty_turns_right=sum(1 for t in right.turns if t.empty),
        judge_prompt_cut=runtime.judge_cut(task, left, right),
        user_flags_left=runtime.user_flags(left),
        user_flags_right=runtime.user_flags(right),
    )
