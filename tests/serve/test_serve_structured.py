"""Structure by construction through the official `openai` client against a real server on
loopback: tool_choice (auto / required / a named function / none), response_format (json_object,
json_schema, unsupported features), Responses `text.format`, logprobs, n, the loop cut, and a tool
call that the token cap cuts off. The tiny model is random; where a test scripts what it says,
the script is a preference the grammar can overrule, so what comes back is what the grammar
allows, not what the script wanted."""

from __future__ import annotations

import json

import jsonschema
import openai
import pytest

LEVEL = {"type": "function", "function": {
    "name": "set_level", "description": "Set the alarm level",
    "parameters": {"type": "object", "properties": {"level": {"type": "string", "enum": ["low", "high"]}},
                   "required": ["level"], "additionalProperties": False}}}
MUTE = {"type": "function", "function": {
    "name": "mute", "description": "Mute the alarm",
    "parameters": {"type": "object", "properties": {"on": {"type": "boolean"}}, "required": ["on"],
                   "additionalProperties": False}}}
SMALL = {"type": "object", "properties": {"ok": {"type": "boolean"}, "level": {"enum": ["low", "mid", "high"]}},
         "required": ["ok", "level"], "additionalProperties": False}
HI = [{"role": "user", "content": "set the alarm"}]


@pytest.fixture()
def client(inproc):
    url, mol, script = inproc
    return openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0), script


def test_required_tool_choice_calls_a_given_tool_even_when_the_model_writes_prose(client):
    c, script = client
    script.replies["agent"] = "I would rather chat about the weather."
    r = c.chat.completions.create(model="agent", messages=HI, tools=[LEVEL, MUTE], tool_choice="required",
                                  max_tokens=160, temperature=0)
    ch = r.choices[0]
    assert ch.finish_reason == "tool_calls" and ch.message.tool_calls, ch
    for call in ch.message.tool_calls:
        tool = {"set_level": LEVEL, "mute": MUTE}[call.function.name]
        jsonschema.validate(json.loads(call.function.arguments), tool["function"]["parameters"])
    assert r.model_extra["macaronic"]["constrained"] == "tools"


def test_named_tool_choice_calls_exactly_that_function(client):
    c, script = client
    script.replies["agent"] = '<tool_call>{"name": "set_level", "arguments": {"level": "high"}}</tool_call>'
    r = c.chat.completions.create(model="agent", messages=HI, tools=[LEVEL, MUTE], max_tokens=160, temperature=0,
                                  tool_choice={"type": "function", "function": {"name": "mute"}})
    calls = r.choices[0].message.tool_calls
    assert [x.function.name for x in calls] == ["mute"]
    assert isinstance(json.loads(calls[0].function.arguments)["on"], bool)


def test_auto_keeps_a_valid_scripted_call_and_prose(client):
    c, script = client
    script.replies["agent"] = 'Sure. <tool_call>{"name": "set_level", "arguments": {"level": "high"}}</tool_call>'
    r = c.chat.completions.create(model="agent", messages=HI, tools=[LEVEL, MUTE], max_tokens=160, temperature=0)
    msg = r.choices[0].message
    assert msg.content == "Sure." and msg.tool_calls[0].function.name == "set_level"
    assert json.loads(msg.tool_calls[0].function.arguments) == {"level": "high"}


def test_tool_choice_none_shows_no_tools_and_returns_no_calls(client):
    c, script = client
    script.replies["agent"] = "No tools needed."
    r = c.chat.completions.create(model="agent", messages=HI, tools=[LEVEL], tool_choice="none", max_tokens=16,
                                  temperature=0)
    assert r.choices[0].message.tool_calls is None and r.choices[0].message.content == "No tools needed."
    assert "set_level" not in json.dumps(script.seen[-1][1])


def test_a_call_cut_by_the_token_cap_is_an_error_not_a_call(client):
    c, script = client
    r = c.chat.completions.create(model="agent", messages=HI, tools=[LEVEL], tool_choice="required", max_tokens=3,
                                  temperature=0)
    ch = r.choices[0]
    assert ch.finish_reason == "length" and not ch.message.tool_calls
    assert "did not complete" in r.model_extra["macaronic"]["tool_error"]


def test_tool_choice_naming_an_unknown_function_is_a_400(client):
    c, _ = client
    with pytest.raises(openai.BadRequestError, match="launch"):
        c.chat.completions.create(model="agent", messages=HI, tools=[LEVEL], max_tokens=8,
                                  tool_choice={"type": "function", "function": {"name": "launch"}})
    with pytest.raises(openai.BadRequestError, match="required"):
        c.chat.completions.create(model="agent", messages=HI, tool_choice="required", max_tokens=8)


def test_json_schema_reply_validates_on_a_free_running_adapter(client):
    c, _ = client  # chat is unscripted: the random model writes whatever the grammar allows
    for seed in range(3):
        r = c.chat.completions.create(model="chat", messages=HI, max_tokens=48, temperature=1.0, seed=seed,
                                      response_format={"type": "json_schema",
                                                       "json_schema": {"name": "small", "schema": SMALL, "strict": True}})
        assert r.choices[0].finish_reason == "stop"
        jsonschema.validate(json.loads(r.choices[0].message.content), SMALL)


def test_json_object_turns_prose_into_json(client):
    c, script = client
    script.replies["coding"] = '{"answer": "Paris"}'
    r = c.chat.completions.create(model="coding", messages=HI, max_tokens=32, temperature=0,
                                  response_format={"type": "json_object"})
    assert json.loads(r.choices[0].message.content) == {"answer": "Paris"}
    script.replies["coding"] = "Paris is the capital."
    r = c.chat.completions.create(model="coding", messages=HI, max_tokens=32, temperature=0,
                                  response_format={"type": "json_object"})
    assert r.choices[0].message.content.startswith("{")


def test_unsupported_schema_features_are_named_in_a_400(client):
    c, _ = client
    with pytest.raises(openai.BadRequestError, match="'not'"):
        c.chat.completions.create(model="chat", messages=HI, max_tokens=8, response_format={
            "type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "not": {"required": ["a"]}}}})
    with pytest.raises(openai.BadRequestError, match="response_format"):
        c.chat.completions.create(model="chat", messages=HI, max_tokens=8, response_format={"type": "yaml"})


def test_responses_text_format_json_schema(client):
    c, _ = client
    r = c.responses.create(model="chat", input="set the alarm", max_output_tokens=48, temperature=1.0,
                           text={"format": {"type": "json_schema", "name": "small", "schema": SMALL, "strict": True}})
    jsonschema.validate(json.loads(r.output_text), SMALL)
    assert r.text.format.type == "json_schema"


def test_logprobs_and_top_logprobs(client):
    c, script = client
    script.replies["chat"] = "Hello there, friend."
    r = c.chat.completions.create(model="chat", messages=HI, max_tokens=6, temperature=0, logprobs=True,
                                  top_logprobs=3)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens == 6
    assert "".join(t.token for t in content) == r.choices[0].message.content
    for t in content:
        assert len(t.top_logprobs) == 3 and t.logprob <= 0 and t.top_logprobs[0].token == t.token  # greedy = top-1
        assert bytes(t.bytes).decode("utf-8", "replace") == t.token
    plain = c.chat.completions.create(model="chat", messages=HI, max_tokens=3, temperature=0)
    assert plain.choices[0].logprobs is None


def test_n_samples_share_the_prefill_and_count_usage_once(client):
    c, _ = client
    r = c.chat.completions.create(model="chat", messages=HI, max_tokens=8, temperature=1.0, seed=7, n=3)
    assert [ch.index for ch in r.choices] == [0, 1, 2]
    metas = r.model_extra["macaronic"]["choices"]
    assert metas[0]["prefill_tokens"] > 0 and all(m["prefill_tokens"] == 0 for m in metas[1:])
    one = c.chat.completions.create(model="chat", messages=HI, max_tokens=8, temperature=1.0, seed=7)
    assert r.usage.prompt_tokens == one.usage.prompt_tokens and 3 <= r.usage.completion_tokens <= 24
    assert r.choices[0].message.content == one.choices[0].message.content  # sample 0 is the n=1 sample
    assert len({ch.message.content for ch in r.choices}) > 1  # seeds 7, 8, 9 differ
    again = c.chat.completions.create(model="chat", messages=HI, max_tokens=8, temperature=1.0, seed=7, n=3)
    assert [ch.message.content for ch in again.choices] == [ch.message.content for ch in r.choices]
    with pytest.raises(openai.BadRequestError):
        c.chat.completions.create(model="chat", messages=HI, max_tokens=4, n=9)
    chunks = list(c.chat.completions.create(model="chat", messages=HI, max_tokens=8, temperature=1.0, seed=7, n=3,
                                            stream=True, stream_options={"include_usage": True}))
    texts = {i: "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices and ch.choices[0].index == i)
             for i in range(3)}
    assert [texts[i] for i in range(3)] == [ch.message.content for ch in r.choices]
    assert chunks[-1].usage.completion_tokens == r.usage.completion_tokens


def test_a_repetition_loop_is_cut_with_a_flag(client):
    c, script = client
    script.replies["chat"] = "la " * 200
    r = c.chat.completions.create(model="chat", messages=HI, max_tokens=400, temperature=0)
    meta = r.model_extra["macaronic"]
    assert r.choices[0].finish_reason == "length" and meta["loop_cut"]["period_tokens"] >= 1
    assert r.usage.completion_tokens < 200
    script.replies["chat"] = "one two three four five six seven eight nine ten"
    r = c.chat.completions.create(model="chat", messages=HI, max_tokens=400, temperature=0)
    assert r.choices[0].finish_reason == "stop" and "loop_cut" not in r.model_extra["macaronic"]


def test_tool_schema_keywords_a_grammar_cannot_enforce_are_checked_after_decoding(client):
    c, script = client
    tags = {"type": "function", "function": {"name": "tag", "parameters": {
        "type": "object", "properties": {"labels": {"type": "array", "items": {"enum": ["a", "b"]}, "uniqueItems": True}},
        "required": ["labels"], "additionalProperties": False}}}
    script.replies["agent"] = '<tool_call>{"name": "tag", "arguments": {"labels": ["a", "a"]}}</tool_call>'
    r = c.chat.completions.create(model="agent", messages=HI, tools=[tags], max_tokens=160, temperature=0)
    assert not r.choices[0].message.tool_calls and "unique" in r.model_extra["macaronic"]["tool_error"]
    script.replies["agent"] = '<tool_call>{"name": "tag", "arguments": {"labels": ["a", "b"]}}</tool_call>'
    r = c.chat.completions.create(model="agent", messages=HI, tools=[tags], max_tokens=160, temperature=0)
    assert json.loads(r.choices[0].message.tool_calls[0].function.arguments) == {"labels": ["a", "b"]}
    with pytest.raises(openai.BadRequestError, match="uniqueItems"):  # a response_format promises the schema
        c.chat.completions.create(model="chat", messages=HI, max_tokens=8, response_format={
            "type": "json_schema", "json_schema": {"name": "x", "schema": tags["function"]["parameters"]}})


def test_a_number_in_a_call_ends_at_its_fifteenth_digit(client):
    c, script = client  # the float noise small models write into arguments: the grammar cuts it
    area = {"type": "function", "function": {"name": "set_area", "parameters": {
        "type": "object", "properties": {"area": {"type": "number"}, "unit": {"enum": ["m2", "ft2"]}},
        "required": ["area", "unit"], "additionalProperties": False}}}
    script.replies["agent"] = '<tool_call>{"name": "set_area", "arguments": {"area": 100.00000000000001, "unit": "m2"}}</tool_call>'
    r = c.chat.completions.create(model="agent", messages=HI, tools=[area], max_tokens=160, temperature=0)
    raw = r.choices[0].message.tool_calls[0].function.arguments
    number = raw.split('"area": ')[1].split(",")[0].split("}")[0]
    assert sum(ch.isdigit() for ch in number.split("e")[0].split("E")[0]) <= 15, raw
    assert json.loads(raw)["area"] != 100.00000000000001
    script.replies["agent"] = '<tool_call>{"name": "set_area", "arguments": {"area": 12.75, "unit": "m2"}}</tool_call>'
    r = c.chat.completions.create(model="agent", messages=HI, tools=[area], max_tokens=160, temperature=0)
    assert json.loads(r.choices[0].message.tool_calls[0].function.arguments) == {"area": 12.75, "unit": "m2"}


def test_streamed_calls_arrive_as_deltas_with_arguments_as_they_decode(client):
    c, script = client
    script.replies["agent"] = ('Setting it. <tool_call>{"name": "set_level", "arguments": {"level": "high"}}</tool_call>'
                               '\n<tool_call>{"name": "mute", "arguments": {"on": true}}</tool_call>')
    chunks = list(c.chat.completions.create(model="agent", messages=HI, tools=[LEVEL, MUTE], max_tokens=200,
                                            temperature=0, stream=True))
    deltas = [tc for ch in chunks if ch.choices for tc in (ch.choices[0].delta.tool_calls or [])]
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert "tool_call" not in text and text.strip() == "Setting it."
    calls: dict[int, dict] = {}
    for d in deltas:
        entry = calls.setdefault(d.index, {"id": None, "name": None, "arguments": ""})
        entry["id"] = d.id or entry["id"]
        entry["name"] = (d.function.name if d.function and d.function.name else None) or entry["name"]
        entry["arguments"] += (d.function.arguments or "") if d.function else ""
    assert [(v["name"], json.loads(v["arguments"])) for v in calls.values()] == [
        ("set_level", {"level": "high"}), ("mute", {"on": True})]
    assert sum(1 for d in deltas if d.index == 0) > 2  # the arguments came in pieces, not whole at the end
    finals = [ch for ch in chunks if ch.choices and ch.choices[0].finish_reason]
    assert finals[-1].choices[0].finish_reason == "tool_calls" and not finals[-1].choices[0].delta.tool_calls
    # the same turn without streaming names the same calls
    r = c.chat.completions.create(model="agent", messages=HI, tools=[LEVEL, MUTE], max_tokens=200, temperature=0)
    assert [x.function.name for x in r.choices[0].message.tool_calls] == ["set_level", "mute"]


def test_responses_stream_function_call_items_with_argument_deltas(client):
    c, script = client
    script.replies["agent"] = 'On it. <tool_call>{"name": "set_level", "arguments": {"level": "low"}}</tool_call>'
    tools = [{"type": "function", **LEVEL["function"]}]
    events = list(c.responses.create(model="agent", input="set the alarm", tools=tools, max_output_tokens=160,
                                     temperature=0, stream=True))
    kinds = [e.type for e in events]
    added = [e for e in events if e.type == "response.output_item.added" and e.item.type == "function_call"]
    assert len(added) == 1 and added[0].item.name == "set_level"
    args = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    assert json.loads(args) == {"level": "low"} and "response.function_call_arguments.done" in kinds
    final = events[-1].response
    calls = [o for o in final.output if o.type == "function_call"]
    assert [(o.id, o.call_id) for o in calls] == [(added[0].item.id, added[0].item.call_id)]


def test_the_number_bound_rewrites_xgrammars_plain_number_rule():
    import xgrammar as xgr
    from xgrammar.testing import _is_grammar_accept_string as accepts

    from macaronic.serve.structured import bounded_numbers

    schema = {"type": "object", "properties": {"n": {"type": "integer"}, "x": {"type": "number"}},
              "required": ["x", "n"], "additionalProperties": False}
    plain = str(xgr.Grammar.from_json_schema(json.dumps(schema), any_whitespace=False, separators=(", ", ": "),
                                             strict_mode=True))
    bounded = bounded_numbers(plain)
    assert bounded != plain  # xgrammar still writes the rule the bound replaces: a changed xgrammar fails here
    grammar = xgr.Grammar.from_ebnf(bounded)
    for x in ("0", "-0.5", "12.75", "100.000000000000", "123456789012345", "0.00000000000001", "-5.5e-06", "3E+2",
              "1.60217663e-19", "6.02e23", "12345678901234.5", "1.5e-308"):
        assert accepts(grammar, f'{{"n": 7, "x": {x}}}'), x
    for x in ("100.00000000000001", "1234567890123456", "0.000000000000001", "05", "1.", ".5",
              "0.01000000000000e-06", "123456789012345e2", "1e1000"):
        assert not accepts(grammar, f'{{"n": 7, "x": {x}}}'), x
    assert accepts(grammar, '{"n": 12345678901234567890, "x": 1}')  # integers keep xgrammar's rule
    assert bounded_numbers("root ::= \"a\"") == "root ::= \"a\""  # no such rule: unchanged
