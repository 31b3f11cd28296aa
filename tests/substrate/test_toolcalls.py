"""Parsing model text into OpenAI tool_calls, and the canonical text format."""

import json

import pytest

from macaronic.substrate.episode import Episode
from macaronic.substrate.state import StateSpec
from macaronic.substrate.toolcalls import (
    format_tool_call, format_tool_calls, format_tool_prompt, format_tool_result, parse_tool_calls,
)
from macaronic.substrate.tools import TOOLS, openai_tools

GET = {"name": "get_order", "arguments": {"order_id": 3}}


def calls(text, tools=TOOLS):
    r = parse_tool_calls(text, tools)
    assert r.error is None, r.error
    return [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in r.tool_calls]


@pytest.mark.parametrize("text", [
    '<tool_call>{"name": "get_order", "arguments": {"order_id": 3}}</tool_call>',
    '<tool_call>\n{"name": "get_order", "arguments": {"order_id": 3}}\n</tool_call>',
    '{"name": "get_order", "arguments": {"order_id": 3}}',
    '  {"name": "get_order", "arguments": {"order_id": 3},}  ',
    '{"name": "get_order", "arguments": {"order_id": 3,},}',
    '{"name": "get_order", "arguments": {"order_id": 3}}}',
    '{"name": "get_order", "arguments": {"order_id": 3}}</s>',
    '<tool_call>{"name": "get_order", "arguments": {"order_id": 3}}',  # stopped before the close tag
    '<tool_call>```json\n{"name": "get_order", "arguments": {"order_id": 3}}\n```</tool_call>',
    'I will look it up.\n```json\n{"name": "get_order", "arguments": {"order_id": 3}}\n```',
    '```\n{"name": "get_order", "arguments": {"order_id": 3}}\n```',
    '{"name": "get_order", "parameters": {"order_id": 3}}',
    '{"name": "get_order", "arguments": "{\\"order_id\\": 3}"}',
    '{"type": "function", "function": {"name": "get_order", "arguments": "{\\"order_id\\": 3}"}}',
    '[{"name": "get_order", "arguments": {"order_id": 3}}]',
])
def test_accepted_forms(text):
    assert calls(text) == [("get_order", {"order_id": 3})]


def test_several_calls_and_prose():
    text = ('Checking both.\n<tool_call>{"name": "get_today", "arguments": {}}</tool_call>\n'
            '<tool_call>{"name": "list_events", "arguments": {"date": "2025-01-07",}}</tool_call>')
    r = parse_tool_calls(text)
    assert r.ok and r.content == "Checking both."
    assert [c["function"]["name"] for c in r.tool_calls] == ["get_today", "list_events"]
    assert len({c["id"] for c in r.tool_calls}) == 2
    assert all(c["type"] == "function" and isinstance(c["function"]["arguments"], str) for c in r.tool_calls)


def test_no_call_is_plain_content():
    for text in ("Your dentist appointment is at 10:00.", '{"answer": 42}', "Use {braces} freely.", ""):
        r = parse_tool_calls(text)
        assert r.ok and r.tool_calls == () and r.content == text.strip()


def test_commas_and_braces_inside_strings_are_kept():
    text = '<tool_call>{"name": "create_note", "arguments": {"title": "a, }", "body": "x,]\\",}",}}</tool_call>'
    assert calls(text) == [("create_note", {"title": "a, }", "body": 'x,]",}'})]


@pytest.mark.parametrize("text,needle", [
    ('<tool_call>{"name": "fly_to_moon", "arguments": {}}</tool_call>', "unknown tool 'fly_to_moon'"),
    ('<tool_call>{"name": "get_order", "arguments": {}}</tool_call>', "'order_id' is a required property"),
    ('<tool_call>{"name": "get_order", "arguments": {"order_id": "3"}}</tool_call>', "is not of type 'integer'"),
    ('<tool_call>{"name": "get_order", "arguments": {"order_id": 3, "x": 1}}</tool_call>', "Additional properties"),
    ('<tool_call>{"name": get_order}</tool_call>', "invalid JSON"),
    ('<tool_call>{"name": "get_order", "arguments": {"order_id": 3}', "invalid JSON"),
    ('<tool_call></tool_call>', "empty"),
    ('<tool_call>{"arguments": {}}</tool_call>', '"name"'),
    ('<tool_call>"get_order"</tool_call>', "JSON object"),
    ('<tool_call>{"name": "get_order", "arguments": [3]}</tool_call>', "must be a JSON object"),
    ('{"name": "get_order", "arguments": {"order_id": 3}} and then I will also tell you a story',
     "unexpected text"),
    ('{"name": "get_order", "arguments": {"order_id": 3', "invalid JSON"),
])
def test_strict_errors(text, needle):
    r = parse_tool_calls(text)
    assert not r.ok and r.tool_calls == ()
    assert needle in r.error, r.error


def test_one_bad_call_cancels_all():
    text = ('<tool_call>{"name": "get_today", "arguments": {}}</tool_call>'
            '<tool_call>{"name": "get_order", "arguments": {"order_id": "x"}}</tool_call>')
    r = parse_tool_calls(text)
    assert r.tool_calls == () and "get_order" in r.error


def test_huge_call_is_refused_quickly():
    r = parse_tool_calls('<tool_call>{"name": "create_note", "arguments": {"title": "t", "body": "'
                         + "x" * 2_000_000 + '"}}</tool_call>')
    assert not r.ok and "limited" in r.error


def test_deep_nesting_is_refused():
    assert "nests too deeply" in parse_tool_calls("<tool_call>" + "[" * 10_000 + "</tool_call>").error
    deep = '{"name": "get_today", "arguments": ' + '{"a": ' * 200 + "1" + "}" * 201
    assert "nest deeper" in parse_tool_calls(deep).error


def test_tools_given_as_openai_dicts():
    subset = [t for t in openai_tools() if t["function"]["name"] == "get_order"]
    assert calls('{"name": "get_order", "arguments": {"order_id": 3}}', subset) == [("get_order", {"order_id": 3})]
    assert "unknown tool" in parse_tool_calls('{"name": "get_today", "arguments": {}}', subset).error


def test_canonical_format_round_trips():
    text = format_tool_call("create_event", {"title": "Sync", "start": "2025-01-07T10:00", "end": "2025-01-07T11:00"})
    assert text == ('<tool_call>{"name": "create_event", "arguments": {"end": "2025-01-07T11:00", '
                    '"start": "2025-01-07T10:00", "title": "Sync"}}</tool_call>')
    both = format_tool_calls([("get_today", {}), ("get_order", {"order_id": 3})])
    assert calls(both) == [("get_today", {}), ("get_order", {"order_id": 3})]


def test_parsed_calls_run_on_an_episode():
    ep = Episode(StateSpec(seed=2))
    r = parse_tool_calls(format_tool_call("add_reminder", {"title": "Parsed", "due": "2025-05-05"}))
    result = ep.call_openai(r.tool_calls[0])
    assert result["created"]["title"] == "Parsed"
    assert format_tool_result(result).startswith("<tool_response>{")


def test_tool_prompt_lists_every_tool_and_the_format():
    prompt = format_tool_prompt()
    for t in TOOLS:
        assert f'"name": "{t.name}"' in prompt
    assert "<tool_call>" in prompt and "</tool_call>" in prompt and "pending_confirmation" in prompt
    lines = prompt.split("<tools>\n")[1].split("\n</tools>")[0].splitlines()
    assert [json.loads(line)["function"]["name"] for line in lines] == [t.name for t in TOOLS]
