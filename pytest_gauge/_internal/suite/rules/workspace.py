"""Workspace rules (tasks that act on files): observed once after the dialogue and recorded in the
transcript, then checked from the record."""

from __future__ import annotations

import asyncio
import math
import shlex
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ...records import Transcript, dumps
from ...records.json_types import JSONObject
from ..file_checks import (
    MAX_FILE_BYTES,
    CommandOutcome,
    CommandRunner,
    check_relative,
    inside,
    read_text,
    run_command,
    run_command_async,
)
from ..regex_bound import PatternTimeout, bounded_search
from .base import (
    FLAG_CHARS,
    Rule,
    RuleArgs,
    RuleCommon,
    RuleResult,
    RuleSpecError,
    compile_pattern,
    is_number,
    norm_text,
    quote,
    quote_list,
)
from .text import Regex

__all__ = [
    "CommandSucceeds",
    "FileContains",
    "FileExists",
    "WorkspaceRule",
    "dumps_key",
    "observe_workspace",
    "observe_workspace_async",
    "workspace_rules",
]


@dataclass(frozen=True, kw_only=True)
class WorkspaceRule(Rule):
    """A rule on the transcript's workspace: the engine calls :meth:`observe` once, after the dialogue,
    and records the result in ``Transcript.workspace_checks`` under :attr:`key`; :meth:`check` reads it
    back, so a transcript from the work store, another worker or a baseline scores the same."""

    path: str = ""

    @property
    def key(self) -> str:
        """The rule's identity in ``workspace_checks``: its type and arguments (not weight/description)."""
        args = {f: getattr(self, f) for f in self._ARGS if hasattr(self, f)}
        return dumps_key(self.type, args)

    def observe(self, workspace: Path) -> RuleResult:
        """Decide the rule on the workspace as the dialogue left it."""
        raise NotImplementedError

    async def aobserve(self, workspace: Path, runner: CommandRunner | None = None) -> RuleResult:
        """:meth:`observe` without blocking the engine's loop (in a thread; a command on the loop, run
        by ``runner``: the engine's sandbox)."""
        return await asyncio.to_thread(self.observe, workspace)

    def check(self, transcript: Transcript) -> RuleResult:
        seen = transcript.workspace_checks.get(self.key)
        if seen is None:
            return RuleResult(False, "no workspace was checked for this transcript (the suite names none)")
        return RuleResult(bool(seen.get("passed")), str(seen.get("detail", "")))

    @staticmethod
    def _relative(a: RuleArgs, key: str) -> str:
        value = a.name(key)
        problem = check_relative(value)
        if problem:
            raise RuleSpecError(a.at(key), problem)
        return value


def dumps_key(kind: str, args: Mapping[str, Any]) -> str:
    """Canonical JSON of a workspace rule's type and arguments (tuples as lists)."""
    return dumps({"type": kind, **args})


@dataclass(frozen=True, kw_only=True)
class FileExists(WorkspaceRule):
    """The file (or folder) ``path`` exists in the workspace after the dialogue (``exists: false``: it
    does not, e.g. a file the task asks to delete)."""

    type: ClassVar[str] = "file_exists"
    _ARGS: ClassVar[tuple[str, ...]] = ("path", "exists")
    _REQUIRED: ClassVar[tuple[str, ...]] = ("path",)

    exists: bool = True

    @classmethod
    def _build(cls, a: RuleArgs, common: RuleCommon) -> Rule:
        return cls(path=cls._relative(a, "path"), exists=a.flag("exists", True), **common)

    def observe(self, workspace: Path) -> RuleResult:
        target = inside(workspace, self.path)
        found = target is not None and target.exists()
        if found == self.exists:
            return RuleResult(True, f"{quote(self.path)} {'exists' if found else 'does not exist'}")
        return RuleResult(
            False, f"{quote(self.path)} {'exists' if found else 'does not exist'} in the workspace"
        )

    def _describe(self) -> str:
        verb = "exists" if self.exists else "does not exist"
        return f"After the conversation, the file {quote(self.path)} {verb} in the workspace."


@dataclass(frozen=True, kw_only=True)
class FileContains(WorkspaceRule):
    """The workspace file ``path`` contains every one of ``phrases`` (matched as the text rules match),
    or a match of ``pattern`` (flags "i", "m", "s"; bounded like the ``regex`` rule)."""

    type: ClassVar[str] = "file_contains"
    _ARGS: ClassVar[tuple[str, ...]] = ("path", "phrases", "pattern", "flags", "case_sensitive")
    _REQUIRED: ClassVar[tuple[str, ...]] = ("path",)

    phrases: tuple[str, ...] = ()
    pattern: str | None = None
    flags: str = ""
    case_sensitive: bool = False

    @classmethod
    def _build(cls, a: RuleArgs, common: RuleCommon) -> Rule:
        path = cls._relative(a, "path")
        if a.has("phrases") == a.has("pattern"):
            raise RuleSpecError(a.path, "file_contains needs exactly one of phrases, pattern")
        flags = a.obj.get("flags", "")
        if not isinstance(flags, str) or any(c not in FLAG_CHARS for c in flags):
            raise RuleSpecError(
                a.at("flags"), f'must be a string of the letters "i", "m", "s", got {quote(flags)}'
            )
        pattern = None
        if a.has("pattern"):
            pattern = compile_pattern(a.obj["pattern"], a.at("pattern"), Regex._flag_bits(flags)).pattern
        phrases = a.strings("phrases") if a.has("phrases") else ()
        case = a.flag("case_sensitive", False)
        return cls(path=path, phrases=phrases, pattern=pattern, flags=flags, case_sensitive=case, **common)

    def observe(self, workspace: Path) -> RuleResult:
        target = inside(workspace, self.path)
        if target is None or not target.is_file():
            return RuleResult(False, f"{quote(self.path)} is not a file in the workspace")
        text, cut = read_text(target)
        note = f" (first {MAX_FILE_BYTES:,} bytes read)" if cut else ""
        if self.pattern is not None:
            try:
                match = bounded_search(
                    self.pattern, unicodedata.normalize("NFC", text), Regex._flag_bits(self.flags)
                )
            except PatternTimeout as exc:
                return RuleResult(False, str(exc))
            if match is None:
                return RuleResult(
                    False, f"{quote(self.path)} does not match the pattern {self.pattern!r}{note}"
                )
            return RuleResult(True, f"{quote(self.path)} matches the pattern at {quote(match, 40)}")
        norm = norm_text(text, self.case_sensitive)
        missing = [p for p in self.phrases if norm_text(p, self.case_sensitive) not in norm]
        if missing:
            return RuleResult(False, f"{quote(self.path)} lacks {quote_list(missing)}{note}")
        return RuleResult(True, f"{quote(self.path)} contains all {len(self.phrases)} phrase(s)")

    def _describe(self) -> str:
        where = f"After the conversation, the file {quote(self.path)}"
        if self.pattern is not None:
            return f"{where} contains text matching /{self.pattern}/."
        return f"{where} contains all of: {quote_list(self.phrases)}."


@dataclass(frozen=True, kw_only=True)
class CommandSucceeds(WorkspaceRule):
    """``command`` (an argv list, or a string split like a shell would, without a shell) run in the
    workspace after the dialogue exits with ``code`` (0) within ``timeout`` seconds (60; past it the
    whole process group is killed and the rule fails): e.g. the project's own tests."""

    type: ClassVar[str] = "command_succeeds"
    _ARGS: ClassVar[tuple[str, ...]] = ("command", "timeout", "code")
    _REQUIRED: ClassVar[tuple[str, ...]] = ("command",)

    command: tuple[str, ...] = ()
    timeout: float = 60.0
    code: int = 0

    @classmethod
    def _build(cls, a: RuleArgs, common: RuleCommon) -> Rule:
        raw = a.obj["command"]
        if isinstance(raw, str):
            try:
                argv = tuple(shlex.split(raw))
            except ValueError as exc:
                raise RuleSpecError(a.at("command"), f"cannot split the command: {exc}") from None
            if not argv:
                raise RuleSpecError(a.at("command"), "must be a non-empty command")
        else:
            argv = a.strings("command")
        timeout = a.obj.get("timeout", 60.0)
        if not is_number(timeout) or not math.isfinite(timeout) or not 0 < timeout <= 3600:
            raise RuleSpecError(
                a.at("timeout"), f"must be a number of seconds in (0, 3600], got {quote(timeout)}"
            )
        code = a.integer("code", minimum=None, default=0)
        return cls(command=argv, timeout=float(timeout), code=code, **common)

    def observe(self, workspace: Path) -> RuleResult:
        return self._result(run_command(self.command, workspace, self.timeout))

    async def aobserve(self, workspace: Path, runner: CommandRunner | None = None) -> RuleResult:
        run = run_command_async if runner is None else runner
        return self._result(await run(self.command, workspace, self.timeout))

    def _result(self, outcome: CommandOutcome) -> RuleResult:
        shown = quote(shlex.join(self.command))
        if outcome.code is None:
            return RuleResult(
                False, f"{shown} did not finish within {self.timeout:g}s (process group killed)"
            )
        if outcome.code == self.code:
            return RuleResult(True, f"{shown} exited with {outcome.code}")
        tail = f": {outcome.output}" if outcome.output else ""
        return RuleResult(False, f"{shown} exited with {outcome.code}, expected {self.code}{tail}")

    def _describe(self) -> str:
        shown = quote(shlex.join(self.command))
        return f"After the conversation, the command {shown} succeeds in the workspace."


def workspace_rules(rules: Sequence[Rule]) -> tuple[WorkspaceRule, ...]:
    """The workspace rules among ``rules`` (what the engine observes after a dialogue)."""
    return tuple(r for r in rules if isinstance(r, WorkspaceRule))


async def observe_workspace_async(
    rules: Sequence[Rule], workspace: Path, runner: CommandRunner | None = None
) -> dict[str, JSONObject]:
    """:func:`observe_workspace` on the engine's loop (a cancelled unit kills a running command);
    commands run by ``runner`` (the engine's sandbox, ``run/commands.py``)."""
    seen: dict[str, JSONObject] = {}
    for rule in workspace_rules(rules):
        try:
            result = await rule.aobserve(workspace, runner)
        except OSError as exc:
            result = RuleResult(False, f"{rule.type}: cannot check the workspace: {exc.strerror or exc}")
        seen[rule.key] = {"passed": result.passed, "detail": result.detail}
    return seen


def observe_workspace(rules: Sequence[Rule], workspace: Path) -> dict[str, JSONObject]:
    """Every workspace rule of ``rules`` decided on ``workspace``: ``Transcript.workspace_checks``.
    A rule's own failure (a file it cannot read) is its detail, never an escape."""
    seen: dict[str, JSONObject] = {}
    for rule in workspace_rules(rules):
        try:
            result = rule.observe(workspace)
        except OSError as exc:
            result = RuleResult(False, f"{rule.type}: cannot check the workspace: {exc.strerror or exc}")
        seen[rule.key] = {"passed": result.passed, "detail": result.detail}
    return seen
