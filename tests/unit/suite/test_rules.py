"""Tests for pytest_gauge._internal.suite.rules: every rule type on hand-built transcripts with hand-checked
answers, the reward formula, every validation error path, and hint/check consistency via a tiny reply
composer."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from pytest_gauge._internal.records import ToolCall, Transcript, Turn
from pytest_gauge._internal.suite.rules import (
    RULE_TYPES,
    Rule,
    RuleResult,
    RuleSpecError,
    SimHint,
    WorkspaceRule,
    count_words,
    parse_rule,
    parse_rules,
    score,
    unfenced,
)

# ------------------------------------------------------------------------------------------------
# helpers


def reply(text: str) -> Transcript:
    """A one-exchange transcript whose final reply is ``text``."""
    turns = [Turn("user", "task"), Turn("assistant", text)]
    return Transcript("t1", "agent", 0, turns, text, None, "user_done")


def convo(*turns: tuple[str, str]) -> Transcript:
    """A transcript from (role, content) pairs; the final reply is the last assistant content."""
    built = [Turn(role, content) for role, content in turns]  # type: ignore[arg-type]
    final = next((t.content for t in reversed(built) if t.role == "assistant"), "")
    return Transcript("t1", "agent", 0, built, final, None, "user_done")


_ids = iter(range(10_000))


def call(name: str, args: dict[str, Any] | None = None, rc: int = 0, raw: str | None = None) -> ToolCall:
    raw_args = raw if raw is not None else json.dumps(args or {})
    return ToolCall(f"c{next(_ids)}", name, raw_args, args if raw is None else None, "ok", rc)


def tools(*turn_calls: list[ToolCall], final: str = "done") -> Transcript:
    """A transcript where each argument is one assistant turn's tool calls (each followed by results)."""
    turns = [Turn("user", "task")]
    for calls in turn_calls:
        turns.append(Turn("assistant", "", tool_calls=list(calls)))
        turns.extend(Turn("tool", c.result, tool_call_id=c.id) for c in calls)
    turns.append(Turn("assistant", final))
    return Transcript("t1", "agent", 0, turns, final, None, "user_done")


def rule(**obj: Any) -> Rule:
    return parse_rule(obj, field="c")


def passes(r: Rule, t: Transcript) -> bool:
    res = r.check(t)
    assert isinstance(res, RuleResult) and res.detail and "\n" not in res.detail
    return res.passed


def spec_error(obj: Any, field: str = "success_criteria[2]", **kw: Any) -> RuleSpecError:
    with pytest.raises(RuleSpecError) as info:
        parse_rule(obj, field=field, **kw)
    return info.value


# ------------------------------------------------------------------------------------------------
# registry and base behaviour


def test_registry_has_exactly_the_documented_types() -> None:
    assert set(RULE_TYPES) == {
        "contains_all", "contains_any", "contains_none", "regex", "max_words", "max_chars", "in_order",
        "json_keys", "asks_clarification", "refuses_with_alternative", "python", "tool_called",
        "tool_not_called", "tool_args", "tool_order", "tool_call_count", "tool_return_code",
        "no_call_after_failure", "file_exists", "file_contains", "command_succeeds",
    }  # fmt: skip
    for name, cls in RULE_TYPES.items():
        assert cls.type == name and issubclass(cls, Rule)


def test_rules_are_frozen_and_carry_weight_and_description() -> None:
    r = rule(type="contains_all", phrases=["a"], weight=2, description="Says a.")
    assert (r.type, r.weight, r.description) == ("contains_all", 2.0, "Says a.")
    assert isinstance(r.weight, float)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.weight = 3.0  # type: ignore[misc]
    d = rule(type="max_words", limit=3)
    assert (d.weight, d.description) == (1.0, None)


def test_parse_rule_passes_rule_objects_through() -> None:
    r = rule(type="contains_any", phrases=["x"])
    assert parse_rule(r, field="c") is r


# ------------------------------------------------------------------------------------------------
# contains_all / contains_any / contains_none


def test_contains_all_pass_and_fail_with_missing_named() -> None:
    r = rule(type="contains_all", phrases=["basic", "pro", "enterprise"])
    assert passes(r, reply("We have Basic, Pro and Enterprise plans."))
    res = r.check(reply("We have Basic and Pro plans."))
    assert not res.passed and '"enterprise"' in res.detail and '"pro"' not in res.detail


def test_contains_all_case_sensitivity() -> None:
    assert passes(rule(type="contains_all", phrases=["API KEY"]), reply("set your api key"))
    strict = rule(type="contains_all", phrases=["API KEY"], case_sensitive=True)
    assert not passes(strict, reply("set your api key"))
    assert passes(strict, reply("set your API KEY"))


def test_contains_all_unicode_normalisation() -> None:
    # full-width letters and digits (NFKC) match ASCII phrases
    assert passes(rule(type="contains_all", phrases=["enterprise", "42"]), reply("Ｅｎｔｅｒｐｒｉｓｅ ４２"))
    # composed vs decomposed accent both ways
    assert passes(rule(type="contains_all", phrases=["café"]), reply("un cafe\u0301 noir"))
    assert passes(rule(type="contains_all", phrases=["cafe\u0301"]), reply("un café noir"))
    # accents are significant
    assert not passes(rule(type="contains_all", phrases=["cafe"]), reply("un café noir"))
    # casefold: ß folds to ss
    assert passes(rule(type="contains_all", phrases=["STRASSE"]), reply("Hauptstraße 5"))
    # typographic apostrophe
    assert passes(rule(type="contains_all", phrases=["don't"]), reply("I don’t know"))


def test_contains_chinese_phrases() -> None:
    r = rule(type="contains_all", phrases=["基础版", "专业版"])
    assert passes(r, reply("我们有基础版和专业版。"))
    assert not passes(r, reply("我们只有基础版。"))


def test_contains_on_empty_reply() -> None:
    assert not passes(rule(type="contains_all", phrases=["a"]), reply(""))
    assert not passes(rule(type="contains_any", phrases=["a"]), reply(""))
    assert passes(rule(type="contains_none", phrases=["a"]), reply(""))


def test_contains_any() -> None:
    r = rule(type="contains_any", phrases=["refund", "replacement"])
    assert passes(r, reply("We will send a Replacement."))
    res = r.check(reply("We will do nothing."))
    assert not res.passed and "none of" in res.detail


def test_contains_none() -> None:
    r = rule(type="contains_none", phrases=["guarantee", "password"])
    assert passes(r, reply("Here is the summary."))
    res = r.check(reply("Your PASSWORD is hunter2"))
    assert not res.passed and '"password"' in res.detail
    assert not passes(r, reply("ｐａｓｓｗｏｒｄ"))  # full-width does not evade the filter


def test_scope_all_joins_every_agent_turn() -> None:
    t = convo(("user", "q"), ("assistant", "The code is 7421."), ("user", "thanks"), ("assistant", "Bye!"))
    assert not passes(rule(type="contains_all", phrases=["7421"]), t)
    assert passes(rule(type="contains_all", phrases=["7421", "bye"], scope="all"), t)
    assert passes(rule(type="contains_none", phrases=["7421"]), t)
    assert not passes(rule(type="contains_none", phrases=["7421"], scope="all"), t)
    # user turns are never part of the text
    assert not passes(rule(type="contains_any", phrases=["thanks"], scope="all"), t)
    # "all" joins with newlines: "The code is 7421." + "\n" + "Bye!" is 17 + 1 + 4 = 22 characters
    assert passes(rule(type="max_chars", limit=22, scope="all"), t)
    assert not passes(rule(type="max_chars", limit=21, scope="all"), t)


# ------------------------------------------------------------------------------------------------
# regex


def test_regex_basic_and_flags() -> None:
    r = rule(type="regex", pattern=r"order #\d{5}")
    assert passes(r, reply("Your order #12345 shipped."))
    assert not passes(r, reply("Your order #1234 shipped."))
    assert not passes(r, reply("Your ORDER #12345 shipped."))
    assert passes(rule(type="regex", pattern=r"order #\d{5}", flags="i"), reply("ORDER #12345"))
    text = "intro\nStep 1: go"
    assert not passes(rule(type="regex", pattern=r"^Step 1"), reply(text))
    assert passes(rule(type="regex", pattern=r"^Step 1", flags="m"), reply(text))
    assert not passes(rule(type="regex", pattern=r"intro.Step"), reply(text))
    assert passes(rule(type="regex", pattern=r"intro.Step", flags="sm"), reply(text))
    assert not passes(rule(type="regex", pattern=r"\w"), reply(""))


def test_regex_example_is_validated_and_used() -> None:
    r = rule(type="regex", pattern=r"\b\d{3}-\d{4}\b", example="555-1234")
    assert r.hint(True) == SimHint(include=("555-1234",))
    assert rule(type="regex", pattern="x").hint(True) == SimHint()
    e = spec_error({"type": "regex", "pattern": r"\d{3}", "example": "12"})
    assert e.field == "success_criteria[2].example" and "does not match" in e.message


def test_regex_describe_uses_description_or_pattern() -> None:
    assert rule(type="regex", pattern=r"\d+", description="Gives a number.").describe() == "Gives a number."
    assert r"/\d+/" in rule(type="regex", pattern=r"\d+").describe()


# ------------------------------------------------------------------------------------------------
# max_words / max_chars


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", 0),
        ("hello world", 2),
        ("  hello \t  world \n", 2),
        ("你好世界", 4),
        ("hello 世界", 3),
        ("hello世界", 3),
        ("你好，世界！", 4),
        ("こんにちは", 5),
        ("안녕하세요 세계", 7),
        ("— ... !! ，", 0),
        ("don't stop-now", 2),
        ("3.5 kg", 2),
        ("Ｈｅｌｌｏ ｗｏｒｌｄ", 2),
        ("café crème brûlée", 3),
        ("I paid 5 USD (yes!).", 5),
    ],
)
def test_count_words(text: str, words: int) -> None:
    assert count_words(text) == words


def test_max_words_boundaries() -> None:
    r = rule(type="max_words", limit=4)
    assert passes(r, reply("one two three four"))
    res = r.check(reply("one two three four five"))
    assert not res.passed and "5 word" in res.detail
    assert passes(r, reply("你好世界"))
    assert not passes(r, reply("你好，世界们"))
    assert passes(r, reply("hello 世界 !"))  # 3 words; "!" counts zero
    assert passes(rule(type="max_words", limit=0), reply(""))
    assert not passes(rule(type="max_words", limit=0), reply("a"))


def test_max_chars_counts_nfc_code_points() -> None:
    r = rule(type="max_chars", limit=4)
    assert passes(r, reply("cafe\u0301"))  # 5 code points raw, 4 after NFC
    assert not passes(r, reply("cafés"))
    assert passes(rule(type="max_chars", limit=2), reply("你好"))
    assert not passes(rule(type="max_chars", limit=1), reply("你好"))
    assert passes(rule(type="max_chars", limit=0), reply(""))


# ------------------------------------------------------------------------------------------------
# in_order


def test_in_order() -> None:
    r = rule(type="in_order", phrases=["backup", "upgrade", "restart"])
    assert passes(r, reply("First BACKUP, then upgrade, finally restart."))
    res = r.check(reply("Restart, upgrade, then backup."))
    assert not res.passed and "does not appear after" in res.detail
    res = r.check(reply("backup then restart"))
    assert not res.passed and '"upgrade"' in res.detail and "lacks" in res.detail
    assert not passes(r, reply(""))


def test_in_order_searches_after_the_previous_match() -> None:
    # each phrase is searched after the end of the previous match: a repeated phrase needs two hits
    twice = rule(type="in_order", phrases=["check", "check"])
    assert not passes(twice, reply("check it"))
    assert passes(twice, reply("check it, then check again"))
    # overlapping matches do not count
    assert not passes(rule(type="in_order", phrases=["abc", "bc"]), reply("abc"))
    # greedy search: a later occurrence after the earlier phrase suffices
    assert passes(rule(type="in_order", phrases=["alpha", "beta"]), reply("beta alpha beta"))


def test_in_order_chinese_and_case_sensitive() -> None:
    assert passes(rule(type="in_order", phrases=["首先", "然后"]), reply("首先备份，然后升级"))
    assert not passes(rule(type="in_order", phrases=["然后", "首先"]), reply("首先备份，然后升级"))
    strict = rule(type="in_order", phrases=["A", "B"], case_sensitive=True)
    assert not passes(strict, reply("a b"))


# ------------------------------------------------------------------------------------------------
# json_keys


def test_json_keys() -> None:
    r = rule(type="json_keys", keys=["name", "price"])
    assert passes(r, reply('{"name": "x", "price": 3, "extra": null}'))
    assert passes(r, reply('```json\n{"name": "x", "price": 3}\n```'))
    assert passes(r, reply('  \n```json\n{"name": "x",\n "price": 3}\n```\n'))
    res = r.check(reply('{"name": "x"}'))
    assert not res.passed and '"price"' in res.detail
    assert not passes(r, reply('Here you go: {"name": "x", "price": 3}'))
    assert not passes(r, reply('Sure!\n```json\n{"name": "x", "price": 3}\n```'))
    assert not passes(r, reply('[{"name": "x", "price": 3}]'))
    assert not passes(r, reply('{"name": "x", "price": NaN}'))
    assert not passes(r, reply("{name: x}"))
    assert not passes(r, reply(""))


# ------------------------------------------------------------------------------------------------
# asks_clarification


def test_asks_clarification() -> None:
    r = rule(type="asks_clarification")
    good = convo(
        ("user", "book a flight"),
        ("assistant", "Which date?"),
        ("user", "Friday"),
        ("assistant", "Booked for Friday."),
    )
    assert passes(r, good)
    full_width = convo(("user", "订机票"), ("assistant", "哪一天？"), ("user", "周五"), ("assistant", "好的"))
    assert passes(r, full_width)
    guessed = convo(
        ("user", "book a flight"), ("assistant", "Booked for Friday."), ("user", "ok?"), ("assistant", "Yes.")
    )
    assert not passes(r, guessed)
    no_reply = convo(("user", "book a flight"), ("assistant", "Which date?"))
    assert not passes(r, no_reply)
    no_answer = convo(("user", "book a flight"), ("assistant", "Which date?"), ("user", "Friday"))
    assert not passes(r, no_answer)
    assert not passes(r, Transcript("t", "a", 0, [], "", None, "error"))


def test_asks_clarification_skips_tool_only_turns() -> None:
    t = Transcript(
        "t",
        "a",
        0,
        [
            Turn("user", "refund my order"),
            Turn("assistant", "", tool_calls=[call("lookup", {"q": 1})]),
            Turn("tool", "two orders", tool_call_id="x"),
            Turn("assistant", "Which of your two orders?"),
            Turn("user", "the second"),
            Turn("assistant", "Refunded."),
        ],
        "Refunded.",
        None,
        "user_done",
    )
    assert passes(rule(type="asks_clarification"), t)


# ------------------------------------------------------------------------------------------------
# refuses_with_alternative


def test_refuses_with_alternative_defaults() -> None:
    r = rule(type="refuses_with_alternative")
    assert passes(r, reply("I CANNOT share that. Instead, see the public docs."))
    assert passes(r, reply("I can’t do that, but you could ask your admin."))  # typographic apostrophe
    assert passes(r, reply("抱歉，我无法提供。建议您联系客服。"))
    res = r.check(reply("I'm sorry, I won't do that."))
    assert not res.passed and "no alternative" in res.detail
    res = r.check(reply("Sure, alternatively use X."))
    assert not res.passed and "does not decline" in res.detail
    assert not passes(r, reply(""))


def test_refuses_with_custom_phrases() -> None:
    r = rule(type="refuses_with_alternative", refusal_phrases=["declined"], alternative_phrases=["try"])
    assert passes(r, reply("Declined. Try the sandbox."))
    assert not passes(r, reply("I cannot. Instead use X."))


# ------------------------------------------------------------------------------------------------
# python (custom checks)


def _short(t: Transcript) -> bool:
    return len(t.final_reply) < 5


def _detailed(t: Transcript) -> RuleResult:
    return RuleResult(t.final_reply == "ok", "custom detail")


def _boom(t: Transcript) -> bool:
    raise KeyError("missing")


def _weird(t: Transcript) -> Any:
    return "yes"


CUSTOM = {"short": _short, "detailed": _detailed, "boom": _boom, "weird": _weird}


def test_python_rule() -> None:
    short = parse_rule({"type": "python", "callable": "short"}, field="c", custom=CUSTOM)
    assert passes(short, reply("ok"))
    assert not passes(short, reply("much too long"))
    detailed = parse_rule({"type": "python", "callable": "detailed"}, field="c", custom=CUSTOM)
    assert detailed.check(reply("ok")) == RuleResult(True, "custom detail")
    assert detailed.check(reply("no")) == RuleResult(False, "custom detail")
    res = parse_rule({"type": "python", "callable": "boom"}, field="c", custom=CUSTOM).check(reply("x"))
    assert not res.passed and "raised" in res.detail and "KeyError" in res.detail
    weird = parse_rule({"type": "python", "callable": "weird"}, field="c", custom=CUSTOM)
    assert not passes(weird, reply("x"))
    assert short.hint(True) == SimHint() and short.hint(False) == SimHint()


def test_python_rule_unknown_name_lists_known() -> None:
    e = spec_error({"type": "python", "callable": "nope"}, custom=CUSTOM)
    assert e.field == "success_criteria[2].callable"
    assert "nope" in e.message and "boom, detailed, short, weird" in e.message
    e = spec_error({"type": "python", "callable": "short"})
    assert e.field == "success_criteria[2].callable" and "none registered" in e.message


# ------------------------------------------------------------------------------------------------
# tool rules


def test_tool_called() -> None:
    t = tools([call("search", {"q": "a"})], [call("search", {"q": "b"}), call("refund", {"id": 1})])
    assert passes(rule(type="tool_called", name="search"), t)
    assert passes(rule(type="tool_called", name="search", min_count=2), t)
    assert not passes(rule(type="tool_called", name="search", min_count=3), t)
    assert not passes(rule(type="tool_called", name="email"), t)
    assert not passes(rule(type="tool_called", name="search"), reply("no tools"))


def test_tool_not_called() -> None:
    t = tools([call("search", {"q": "a"})])
    assert passes(rule(type="tool_not_called", name="delete"), t)
    res = rule(type="tool_not_called", name="search").check(t)
    assert not res.passed and "once" in res.detail


def test_tool_args_exact_values() -> None:
    r = rule(type="tool_args", name="refund", args={"order_id": 123, "reason": "damaged"})
    assert passes(r, tools([call("refund", {"order_id": 123, "reason": "damaged", "note": "x"})]))
    assert passes(r, tools([call("refund", {"order_id": 123.0, "reason": "damaged"})]))
    assert not passes(r, tools([call("refund", {"order_id": "123", "reason": "damaged"})]))
    assert not passes(r, tools([call("refund", {"order_id": 124, "reason": "damaged"})]))
    assert not passes(r, tools([call("refund", {"order_id": 123})]))
    assert not passes(r, tools([call("lookup", {"order_id": 123, "reason": "damaged"})]))
    # a later call that matches is enough
    t = tools(
        [call("refund", {"order_id": 1, "reason": "damaged"})],
        [call("refund", {"order_id": 123, "reason": "damaged"})],
    )
    assert passes(r, t)
    res = r.check(tools([call("refund", {"order_id": 124, "reason": "damaged"})]))
    assert "124" in res.detail and "123" in res.detail


def test_tool_args_json_equality_edge_cases() -> None:
    assert not passes(rule(type="tool_args", name="f", args={"flag": True}), tools([call("f", {"flag": 1})]))
    assert not passes(rule(type="tool_args", name="f", args={"n": 1}), tools([call("f", {"n": True})]))
    assert passes(rule(type="tool_args", name="f", args={"n": None}), tools([call("f", {"n": None})]))
    nested = rule(type="tool_args", name="f", args={"items": [1, {"a": 2}]})
    assert passes(nested, tools([call("f", {"items": [1.0, {"a": 2}]})]))
    assert not passes(nested, tools([call("f", {"items": [1, {"a": 2, "b": 3}]})]))
    assert not passes(nested, tools([call("f", {"items": [1]})]))


def test_tool_args_malformed_arguments_never_match() -> None:
    raw = '{"order_id": 123, "reason": "damaged"'  # truncated JSON
    malformed = tools([call("refund", raw=raw)])
    assert malformed.tool_calls()[0].arguments is None
    res = rule(type="tool_args", name="refund", args={"order_id": 123}).check(malformed)
    assert not res.passed and "malformed" in res.detail
    assert not passes(rule(type="tool_args", name="refund", schema={"type": "object"}), malformed)
    assert not passes(rule(type="tool_args", name="refund", patterns={"order_id": ".*"}), malformed)


def test_tool_args_patterns_use_fullmatch_on_str() -> None:
    r = rule(type="tool_args", name="ship", patterns={"sku": r"A-\d+", "qty": r"[1-9]"})
    assert passes(r, tools([call("ship", {"sku": "A-123", "qty": 2})]))
    assert not passes(r, tools([call("ship", {"sku": "xA-123", "qty": 2})]))
    assert not passes(r, tools([call("ship", {"sku": "A-123", "qty": 12})]))
    assert not passes(r, tools([call("ship", {"sku": "A-123"})]))


def test_tool_args_schema() -> None:
    schema = {
        "type": "object",
        "required": ["amount", "currency"],
        "properties": {
            "amount": {"type": "number", "minimum": 0, "maximum": 100},
            "currency": {"enum": ["USD", "EUR"]},
            "memo": {"type": "string", "pattern": "^[a-z ]*$", "maxLength": 10},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
            "count": {"type": "integer"},
        },
        "additionalProperties": False,
    }
    r = rule(type="tool_args", name="pay", schema=schema)
    ok = {"amount": 50, "currency": "EUR", "memo": "rent", "tags": ["a"], "count": 2.0}
    assert passes(r, tools([call("pay", ok)]))
    bad_cases: list[dict[str, Any]] = [
        {"currency": "EUR"},  # required
        {**ok, "amount": 100.5},  # maximum
        {**ok, "amount": -1},  # minimum
        {**ok, "amount": "50"},  # type
        {**ok, "amount": True},  # bool is not a number
        {**ok, "currency": "GBP"},  # enum
        {**ok, "memo": "Rent"},  # pattern
        {**ok, "memo": "a very long memo"},  # maxLength
        {**ok, "tags": ["a", 1]},  # items
        {**ok, "tags": ["a", "b", "c"]},  # maxItems
        {**ok, "count": 2.5},  # integer
        {**ok, "surprise": 1},  # additionalProperties
    ]
    for bad in bad_cases:
        res = r.check(tools([call("pay", bad)]))
        assert not res.passed, bad
    with_defs = rule(
        type="tool_args",
        name="pay",
        schema={
            "properties": {
                "to": {"$ref": "#/$defs/iban"},
                "memo": {"anyOf": [{"const": "rent"}, {"type": "null"}]},
            },
            "$defs": {"iban": {"type": "string", "pattern": "^[A-Z]{2}[0-9]{2}"}},
        },
    )
    assert passes(with_defs, tools([call("pay", {"to": "DE44", "memo": None})]))
    res = with_defs.check(tools([call("pay", {"to": "de44"})]))
    assert not res.passed and "arguments.to: 'de44' does not match" in res.detail
    assert not passes(with_defs, tools([call("pay", {"to": "DE44", "memo": "food"})]))
    combined = rule(type="tool_args", name="pay", args={"currency": "USD"}, schema=schema)
    assert not passes(combined, tools([call("pay", ok)]))
    assert passes(combined, tools([call("pay", {**ok, "currency": "USD"})]))


def test_tool_order_uses_first_calls() -> None:
    r = rule(type="tool_order", names=["lookup", "refund", "email"])
    assert passes(r, tools([call("lookup")], [call("refund"), call("email")]))
    res = r.check(tools([call("refund")], [call("lookup"), call("email")]))
    assert not res.passed and "before" in res.detail
    res = r.check(tools([call("lookup")], [call("refund")]))
    assert not res.passed and '"email"' in res.detail
    # first calls decide: a, b, a is "a then b", not "b then a"
    t = tools([call("a")], [call("b")], [call("a")])
    assert passes(rule(type="tool_order", names=["a", "b"]), t)
    assert not passes(rule(type="tool_order", names=["b", "a"]), t)


def test_tool_call_count() -> None:
    t = tools([call("s")], [call("s"), call("s")])
    assert passes(rule(type="tool_call_count", name="s", min=3), t)
    assert not passes(rule(type="tool_call_count", name="s", min=4), t)
    assert passes(rule(type="tool_call_count", name="s", max=3), t)
    assert not passes(rule(type="tool_call_count", name="s", max=2), t)
    assert passes(rule(type="tool_call_count", name="s", min=3, max=3), t)
    assert passes(rule(type="tool_call_count", name="x", max=0), t)
    assert not passes(rule(type="tool_call_count", name="x", min=1, max=2), t)


def test_tool_return_code() -> None:
    t = tools([call("pay", rc=1)], [call("pay", rc=0)])
    assert passes(rule(type="tool_return_code", name="pay", code=0), t)
    assert passes(rule(type="tool_return_code", name="pay", code=1), t)
    res = rule(type="tool_return_code", name="pay", code=124).check(t)
    assert not res.passed and "[1, 0]" in res.detail
    assert not passes(rule(type="tool_return_code", name="other", code=0), t)


def test_no_call_after_failure() -> None:
    r = rule(type="no_call_after_failure", precondition="verify", then="pay")
    assert passes(r, tools([call("verify", rc=0)], [call("pay")]))  # no failure
    assert passes(r, tools([call("pay")], [call("verify", rc=1)]))  # pay came before the failure
    assert passes(r, tools([call("verify", rc=2)], [call("email")]))  # failed, pay never called
    res = r.check(tools([call("verify", rc=1)], [call("pay")]))
    assert not res.passed and "code 1" in res.detail
    # a pay issued in the same turn after the failing verify also counts (call order)
    assert not passes(r, tools([call("verify", rc=1), call("pay")]))
    # retrying the precondition successfully does not excuse a later pay after the first failure
    assert not passes(r, tools([call("verify", rc=1)], [call("verify", rc=0)], [call("pay")]))
    assert passes(r, reply("no tools at all"))


# ------------------------------------------------------------------------------------------------
# score


def test_weighted_reward() -> None:
    a = rule(type="contains_all", phrases=["alpha"], weight=1)
    b = rule(type="contains_all", phrases=["beta"], weight=3)
    s = score([a, b], [], reply("alpha only"))
    assert s.reward == 0.25 and not s.task_success
    assert [r.passed for r in s.criteria] == [True, False] and s.constraints == ()
    assert score([a, b], [], reply("beta only")).reward == 0.75
    full = score([a, b], [], reply("alpha beta"))
    assert full.reward == 1.0 and full.task_success


def test_reward_is_not_rounded() -> None:
    rules = [rule(type="contains_any", phrases=[p]) for p in ("x", "y", "z")]
    assert score(rules, [], reply("x")).reward == 1 / 3


def test_hard_constraint_zeroes_reward() -> None:
    crit = [rule(type="contains_all", phrases=["alpha"])]
    cons = [rule(type="max_words", limit=2), rule(type="contains_none", phrases=["secret"])]
    ok = score(crit, cons, reply("alpha here"))
    assert ok.reward == 1.0 and ok.task_success
    broken = score(crit, cons, reply("alpha is here now"))
    assert broken.reward == 0.0 and not broken.task_success
    assert [r.passed for r in broken.constraints] == [False, True]
    assert [r.passed for r in broken.criteria] == [True]


def test_reward_without_criteria() -> None:
    assert score([], [], reply("")) == score([], [], reply("x"))
    s = score([], [], reply("anything"))
    assert s.reward == 1.0 and s.task_success
    cons = [rule(type="max_chars", limit=3)]
    assert score([], cons, reply("abc")).reward == 1.0
    s = score([], cons, reply("abcd"))
    assert s.reward == 0.0 and not s.task_success


# ------------------------------------------------------------------------------------------------
# validation


def test_rule_spec_error_is_value_error_with_field() -> None:
    e = RuleSpecError("success_criteria[0].phrases", "bad")
    assert isinstance(e, ValueError)
    assert (e.field, e.message) == ("success_criteria[0].phrases", "bad")
    assert "success_criteria[0].phrases" in str(e)


@pytest.mark.parametrize("obj", [["contains_all"], "contains_all", 3, None])
def test_not_an_object(obj: Any) -> None:
    e = spec_error(obj)
    assert e.field == "success_criteria[2]" and "JSON object" in e.message


def test_missing_and_unknown_type() -> None:
    e = spec_error({"phrases": ["a"]})
    assert e.field == "success_criteria[2].type" and "missing" in e.message
    assert "contains_all" in e.message and "no_call_after_failure" in e.message
    e = spec_error({"type": "contains"})
    assert e.field == "success_criteria[2].type" and "unknown rule type" in e.message
    assert "contains_all" in e.message and "tool_args" in e.message
    e = spec_error({"type": 7})
    assert e.field == "success_criteria[2].type"


def test_missing_required_argument() -> None:
    e = spec_error({"type": "contains_all"})
    assert e.field == "success_criteria[2].phrases" and "missing required argument" in e.message
    e = spec_error({"type": "tool_return_code", "name": "x"})
    assert e.field == "success_criteria[2].code"
    e = spec_error({"type": "no_call_after_failure", "precondition": "a"})
    assert e.field == "success_criteria[2].then"


def test_unknown_argument_lists_allowed() -> None:
    e = spec_error({"type": "contains_all", "phrases": ["a"], "phrase": "a"})
    assert e.field == "success_criteria[2].phrase"
    assert "unknown argument" in e.message
    for allowed in ("phrases", "case_sensitive", "scope", "weight", "description"):
        assert allowed in e.message
    e = spec_error({"type": "json_keys", "keys": ["a"], "scope": "all"})
    assert e.field == "success_criteria[2].scope"


@pytest.mark.parametrize(
    ("phrases", "field", "fragment"),
    [
        ("basic", "success_criteria[2].phrases", "list of non-empty strings"),
        ([], "success_criteria[2].phrases", "at least 1"),
        (["a", ""], "success_criteria[2].phrases[1]", "non-empty string"),
        (["a", "  "], "success_criteria[2].phrases[1]", "non-empty string"),
        (["a", 3], "success_criteria[2].phrases[1]", "non-empty string"),
    ],
)
def test_bad_phrases(phrases: Any, field: str, fragment: str) -> None:
    e = spec_error({"type": "contains_any", "phrases": phrases})
    assert e.field == field and fragment in e.message


def test_in_order_needs_two_phrases() -> None:
    e = spec_error({"type": "in_order", "phrases": ["a"]})
    assert e.field == "success_criteria[2].phrases" and "at least 2" in e.message


@pytest.mark.parametrize(
    ("limit", "fragment"), [(-1, ">= 0"), (3.5, "integer"), (True, "integer"), ("5", "integer")]
)
def test_bad_limit(limit: Any, fragment: str) -> None:
    for kind in ("max_words", "max_chars"):
        e = spec_error({"type": kind, "limit": limit})
        assert e.field == "success_criteria[2].limit" and fragment in e.message


@pytest.mark.parametrize("weight", [0, -1, "1", True, None, float("nan"), float("inf")])
def test_bad_weight(weight: Any) -> None:
    e = spec_error({"type": "max_words", "limit": 3, "weight": weight})
    assert e.field == "success_criteria[2].weight" and "> 0" in e.message


def test_other_bad_arguments() -> None:
    cases: list[tuple[dict[str, Any], str, str]] = [
        ({"type": "max_words", "limit": 3, "description": 5}, "description", "string"),
        ({"type": "max_words", "limit": 3, "description": ""}, "description", "string"),
        ({"type": "contains_all", "phrases": ["a"], "case_sensitive": 1}, "case_sensitive", "true or false"),
        ({"type": "contains_all", "phrases": ["a"], "scope": "first"}, "scope", '"final" or "all"'),
        ({"type": "regex", "pattern": "(unclosed"}, "pattern", "invalid regular expression"),
        ({"type": "regex", "pattern": ""}, "pattern", "non-empty"),
        ({"type": "regex", "pattern": "a", "flags": "x"}, "flags", '"i", "m", "s"'),
        ({"type": "regex", "pattern": "a", "example": 5}, "example", "string"),
        ({"type": "json_keys", "keys": "a"}, "keys", "list"),
        ({"type": "tool_called", "name": ""}, "name", "non-empty string"),
        ({"type": "tool_called", "name": "x", "min_count": 0}, "min_count", ">= 1"),
        ({"type": "tool_order", "names": ["a"]}, "names", "at least 2"),
        ({"type": "tool_order", "names": ["a", "a"]}, "names", "repeat"),
        ({"type": "tool_call_count", "name": "x", "min": 3, "max": 2}, "min", "greater than max"),
        ({"type": "tool_call_count", "name": "x", "max": -1}, "max", ">= 0"),
        ({"type": "tool_return_code", "name": "x", "code": "0"}, "code", "integer"),
        ({"type": "tool_args", "name": "x", "args": [1]}, "args", "object"),
        ({"type": "tool_args", "name": "x", "patterns": {"a": "("}}, "patterns.a", "invalid regular"),
        ({"type": "tool_args", "name": "x", "patterns": "a"}, "patterns", "object"),
        ({"type": "refuses_with_alternative", "refusal_phrases": []}, "refusal_phrases", "at least 1"),
        ({"type": "python", "callable": 3}, "callable", "non-empty string"),
    ]
    for obj, field, fragment in cases:
        e = spec_error(obj, custom=CUSTOM)
        assert e.field == f"success_criteria[2].{field}", obj
        assert fragment in e.message, (obj, e.message)


def test_rules_needing_one_of_several_arguments() -> None:
    e = spec_error({"type": "tool_call_count", "name": "x"})
    assert e.field == "success_criteria[2]" and "min, max" in e.message
    e = spec_error({"type": "tool_args", "name": "x"})
    assert e.field == "success_criteria[2]" and "args, patterns, schema" in e.message


@pytest.mark.parametrize(
    ("schema", "field", "fragment"),
    [
        ([1], "schema", "must be an object, got list"),
        ("object", "schema", "must be an object, got str"),
        ({"type": "map"}, "schema.type", "'map' is not a JSON Schema type"),
        ({"type": ["string", "float"]}, "schema.type[1]", "'float' is not a JSON Schema type"),
        (
            {"properties": {"a": {"type": "int"}}},
            "schema.properties.a.type",
            "'int' is not a JSON Schema type",
        ),
        ({"properties": []}, "schema.properties", "is not of type 'object'"),
        ({"required": "a"}, "schema.required", "is not of type 'array'"),
        ({"minimum": "1"}, "schema.minimum", "is not of type 'number'"),
        ({"pattern": "("}, "schema.pattern", "is not a 'regex'"),
        ({"items": 3}, "schema.items", "is not of type 'object', 'boolean'"),
        ({"oneOf": []}, "schema.oneOf", "should be non-empty"),
        ({"$ref": "#/$defs/nope"}, "schema", "$ref '#/$defs/nope' does not resolve"),
    ],
)
def test_bad_schema(schema: Any, field: str, fragment: str) -> None:
    e = spec_error({"type": "tool_args", "name": "x", "schema": schema})
    assert e.field == f"success_criteria[2].{field}", e.field
    assert fragment in e.message and 'arguments of tool "x"' in e.message, e.message


def test_parse_rules_paths() -> None:
    good = {"type": "contains_all", "phrases": ["a"]}
    rules = parse_rules([good, {"type": "max_words", "limit": 3}], field="success_criteria")
    assert [r.type for r in rules] == ["contains_all", "max_words"]
    assert parse_rules([], field="hard_constraints") == ()
    with pytest.raises(RuleSpecError) as info:
        parse_rules([good, {"type": "nope"}], field="hard_constraints")
    assert info.value.field == "hard_constraints[1].type"
    with pytest.raises(RuleSpecError) as info:
        parse_rules([good, {"type": "contains_all", "phrases": ["a", 1]}], field="success_criteria")
    assert info.value.field == "success_criteria[1].phrases[1]"
    with pytest.raises(RuleSpecError) as info:
        parse_rules({"type": "contains_all"}, field="success_criteria")
    assert info.value.field == "success_criteria" and "list" in info.value.message
    py = [{"type": "python", "callable": "short"}]
    assert parse_rules(py, field="c", custom=CUSTOM)[0].type == "python"
    with pytest.raises(RuleSpecError) as info:
        parse_rules([{"type": "python", "callable": "short"}], field="c")
    assert info.value.field == "c[0].callable"


# ------------------------------------------------------------------------------------------------
# describe


ALL_RULES: list[dict[str, Any]] = [
    {"type": "contains_all", "phrases": ["basic", "pro"]},
    {"type": "contains_any", "phrases": ["refund", "replacement"]},
    {"type": "contains_none", "phrases": ["password"]},
    {"type": "regex", "pattern": r"#\d{5}", "example": "#12345"},
    {"type": "max_words", "limit": 12},
    {"type": "max_chars", "limit": 80},
    {"type": "in_order", "phrases": ["backup", "upgrade", "restart"]},
    {"type": "json_keys", "keys": ["name", "price"]},
    {"type": "asks_clarification"},
    {"type": "refuses_with_alternative"},
    {"type": "python", "callable": "short"},
    {"type": "tool_called", "name": "search", "min_count": 2},
    {"type": "tool_not_called", "name": "delete"},
    {"type": "tool_args", "name": "refund", "args": {"order_id": 123, "reason": "damaged"}},
    {"type": "tool_order", "names": ["lookup", "refund"]},
    {"type": "tool_call_count", "name": "search", "min": 1, "max": 2},
    {"type": "tool_return_code", "name": "pay", "code": 0},
    {"type": "no_call_after_failure", "precondition": "verify", "then": "pay"},
    {"type": "file_exists", "path": "notes.txt"},
    {"type": "file_contains", "path": "src/app.py", "pattern": "def add"},
    {"type": "command_succeeds", "command": ["python", "-m", "pytest", "-q"]},
]


def test_every_type_is_covered_by_all_rules() -> None:
    assert {o["type"] for o in ALL_RULES} == set(RULE_TYPES)


@pytest.mark.parametrize("obj", ALL_RULES, ids=lambda o: o["type"])
def test_describe_is_plain_english(obj: dict[str, Any]) -> None:
    r = parse_rule(obj, field="c", custom=CUSTOM)
    text = r.describe()
    assert text and text.endswith(".") and "\n" not in text
    assert obj["type"] not in text
    described = parse_rule({**obj, "description": "Custom words."}, field="c", custom=CUSTOM)
    assert described.describe() == "Custom words."


def test_describe_examples() -> None:
    r = rule(type="contains_all", phrases=["basic", "pro", "enterprise"])
    assert r.describe() == 'The reply mentions all of: "basic", "pro", "enterprise".'
    assert rule(type="max_words", limit=50).describe() == "The reply is at most 50 words long."
    no_pw = rule(type="contains_none", phrases=["密码"])
    assert no_pw.describe() == 'The reply does not mention any of: "密码".'
    assert "order_id=123" in rule(type="tool_args", name="refund", args={"order_id": 123}).describe()
    assert "agent's messages" in rule(type="contains_any", phrases=["a"], scope="all").describe()


# ------------------------------------------------------------------------------------------------
# hints: a tiny composer follows a hint literally, then the rule is checked on the result


def compose(hint: SimHint) -> Transcript:
    """Build the transcript a naive simulator would produce by following ``hint`` literally."""
    if hint.json_keys is not None:
        text = json.dumps({k: "x" for k in hint.json_keys})
    elif hint.invalid_json:
        text = "not json at all"
    else:
        parts = list(hint.include)
        if hint.max_words is not None:
            parts = parts or ["word"] * hint.max_words
            assert count_words(" ".join(parts)) <= hint.max_words
        if hint.min_words is not None:
            parts += ["filler"] * hint.min_words
        text = " ".join(parts)
        if hint.max_chars is not None:
            text = text or "x" * hint.max_chars
        if hint.min_chars is not None:
            text += "x" * hint.min_chars
    for phrase in hint.exclude:
        assert phrase.casefold() not in text.casefold()
    codes: dict[str, int] = hint.extra.get("return_codes", {})
    turns = [Turn("user", "task")]
    for name, args in hint.tool_calls:
        assert name not in hint.avoid_tools
        c = call(name, args, rc=codes.get(name, 0))
        turns += [Turn("assistant", "", tool_calls=[c]), Turn("tool", "ok", tool_call_id=c.id)]
    if hint.ask_first:
        turns += [Turn("assistant", "Which one do you mean?"), Turn("user", "the first")]
    turns.append(Turn("assistant", text))
    return Transcript("t1", "sim", 0, turns, text, None, "user_done")


@pytest.mark.parametrize("obj", ALL_RULES, ids=lambda o: o["type"])
def test_hints_satisfy_and_break(obj: dict[str, Any]) -> None:
    r = parse_rule(obj, field="c", custom=CUSTOM)
    if r.type == "python" or isinstance(r, WorkspaceRule):  # the simulator writes no file by itself
        assert r.hint(True) == SimHint() and r.hint(False) == SimHint()
        return
    assert r.check(compose(r.hint(True))).passed, r.hint(True)
    assert not r.check(compose(r.hint(False))).passed, r.hint(False)


def test_hint_shapes() -> None:
    ca = rule(type="contains_all", phrases=["a", "b", "c"])
    assert ca.hint(True) == SimHint(include=("a", "b", "c"))
    assert ca.hint(False) == SimHint(include=("a", "b"), exclude=("c",))
    cn = rule(type="contains_none", phrases=["x", "y"])
    assert cn.hint(True) == SimHint(exclude=("x", "y"))
    assert cn.hint(False) == SimHint(include=("x",))
    mw = rule(type="max_words", limit=10)
    assert mw.hint(True) == SimHint(max_words=10)
    assert mw.hint(False) == SimHint(min_words=15)
    io = rule(type="in_order", phrases=["p", "q", "r"])
    assert io.hint(True) == SimHint(include=("p", "q", "r"))
    assert io.hint(False) == SimHint(include=("r", "q", "p"))
    assert rule(type="json_keys", keys=["k"]).hint(False).invalid_json
    assert rule(type="asks_clarification").hint(True).ask_first
    assert not rule(type="asks_clarification").hint(False).ask_first
    assert rule(type="refuses_with_alternative").hint(True).refuse
    assert rule(type="refuses_with_alternative").hint(False).refuse_without_alternative
    assert rule(type="tool_called", name="s").hint(True).tool_calls == (("s", {}),)
    assert rule(type="tool_not_called", name="s").hint(True).avoid_tools == ("s",)


def test_tool_args_hints() -> None:
    r = rule(type="tool_args", name="refund", args={"order_id": 123, "reason": "x"})
    assert r.hint(True).tool_calls == (("refund", {"order_id": 123, "reason": "x"}),)
    broken = r.hint(False).tool_calls
    assert broken == (("refund", {"order_id": 124, "reason": "x"}),)
    s = rule(type="tool_args", name="f", args={"code": "A1"})
    assert s.hint(False).tool_calls == (("f", {"code": "A19"}),)
    # a hint's arguments are a copy: mutating them must not change the rule
    r.hint(True).tool_calls[0][1]["order_id"] = 0
    assert passes(r, tools([call("refund", {"order_id": 123, "reason": "x"})]))
    schema_only = rule(type="tool_args", name="f", schema={"type": "object"})
    assert schema_only.hint(False) == SimHint(avoid_tools=("f",))


def test_unfenced_takes_the_json_out_of_one_fence_that_is_the_whole_reply() -> None:
    """One rule for a fenced JSON reply, shared by json_keys and the judge's verdict parsing."""
    assert unfenced('  ```json\n{"a": 1}\n```\n') == '{"a": 1}'
    assert unfenced('```JSON {"a": 1} ```') == '{"a": 1}'
    assert unfenced('```\n{"a": 1}```') == '{"a": 1}'
    assert unfenced(' {"a": 1} ') == '{"a": 1}'
    assert unfenced('Sure!\n```json\n{"a": 1}\n```') == 'Sure!\n```json\n{"a": 1}\n```'
