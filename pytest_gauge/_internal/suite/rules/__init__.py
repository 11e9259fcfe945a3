"""Declarative success criteria and hard constraints, evaluated by code (docs/protocol.md#tasks-and-rules).

A rule is a JSON object ``{"type": ..., <arguments>, "weight": 1.0, "description": "..."}`` from
``tasks.jsonl``. :func:`parse_rule` validates it (raising :class:`RuleSpecError` with a dotted field
path) and returns a frozen :class:`Rule`; ``Rule.check`` decides it on a finished transcript, and
:func:`score` turns the results into the verifier's reward: 0 if any hard constraint is broken, else
the weighted fraction of success criteria met.

Text matching normalises both sides with NFKC (full-width letters match ASCII ones, composed and
decomposed accents match), maps typographic apostrophes (’ ‘ ʼ) to ``'`` and, unless
``case_sensitive`` is set, compares casefolded text. Accents are significant: "cafe" does not match
"café". Text rules look at ``final_reply``; with ``"scope": "all"`` they look at every non-empty agent
message joined with newlines.

The rules live in modules by family: ``base`` (results, the score, text helpers, the :class:`Rule`
base), ``text`` (rules on the agent's text, and Python checks), ``tool_calls``, ``workspace`` and
``registry`` (the rule types, their parsing, the reward); this package re-exports their public names.
"""

from ..regex_bound import REGEX_TIMEOUT, PatternTimeout, bounded_search
from .base import (
    JSON_FENCE,
    CustomCheck,
    Rule,
    RuleResult,
    RuleSpecError,
    Score,
    SimHint,
    count_words,
    unfenced,
)
from .registry import RULE_TYPES, parse_rule, parse_rules, score, tools_named
from .text import (
    AsksClarification,
    ContainsAll,
    ContainsAny,
    ContainsNone,
    InOrder,
    JsonKeys,
    MaxChars,
    MaxWords,
    PythonCheck,
    RefusesWithAlternative,
    Regex,
)
from .tool_calls import (
    NoCallAfterFailure,
    ToolArgs,
    ToolCallCount,
    ToolCalled,
    ToolNotCalled,
    ToolOrder,
    ToolReturnCode,
)
from .workspace import (
    CommandSucceeds,
    FileContains,
    FileExists,
    WorkspaceRule,
    observe_workspace,
    observe_workspace_async,
    workspace_rules,
)

__all__ = [
    "JSON_FENCE",
    "REGEX_TIMEOUT",
    "RULE_TYPES",
    "AsksClarification",
    "CommandSucceeds",
    "ContainsAll",
    "ContainsAny",
    "ContainsNone",
    "CustomCheck",
    "FileContains",
    "FileExists",
    "InOrder",
    "JsonKeys",
    "MaxChars",
    "MaxWords",
    "NoCallAfterFailure",
    "PatternTimeout",
    "PythonCheck",
    "RefusesWithAlternative",
    "Regex",
    "Rule",
    "RuleResult",
    "RuleSpecError",
    "Score",
    "SimHint",
    "ToolArgs",
    "ToolCallCount",
    "ToolCalled",
    "ToolNotCalled",
    "ToolOrder",
    "ToolReturnCode",
    "WorkspaceRule",
    "bounded_search",
    "count_words",
    "observe_workspace",
    "observe_workspace_async",
    "parse_rule",
    "parse_rules",
    "score",
    "tools_named",
    "unfenced",
    "workspace_rules",
]
