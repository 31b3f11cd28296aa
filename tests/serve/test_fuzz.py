"""Hypothesis-generated requests against a real `macaronic serve` on loopback (tiny random model):
chat payloads, tools and tool schemas, tool calls, deep nesting, unicode edge cases (lone
surrogates, NUL, astral characters), on both APIs, streaming or not. No answer may be a 5xx, every
error must be in the OpenAI shape, and the server must be healthy after.

The run is derandomized (the same cases in the same order on every machine) and bounded by
`BUDGET_S` of wall time, so CI pays a fixed price; `FUZZ_EXAMPLES` caps the count. Hunt locally with
`MACARONIC_FUZZ_SEED=N MACARONIC_FUZZ_BUDGET_S=300 MACARONIC_FUZZ_EXAMPLES=3000`."""

from __future__ import annotations

import json
import os
import re
import time

import httpx
import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

BUDGET_S = float(os.environ.get("MACARONIC_FUZZ_BUDGET_S", "45"))
FUZZ_EXAMPLES = int(os.environ.get("MACARONIC_FUZZ_EXAMPLES", "300"))
FUZZ_SEED = os.environ.get("MACARONIC_FUZZ_SEED")  # set it to explore other cases locally (CI: derandomized)

# every code point, surrogates included (JSON can spell them; no tokenizer can encode them)
edgy = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()), max_size=12)
plain = st.sampled_from(["hi", "", " ", "remind me", "{", "<tool_call>", "\x00", "😀", "é" * 3, "a" * 50])
text = st.one_of(plain, edgy)
scalar = st.none() | st.booleans() | st.integers(-2**40, 2**40) | st.floats(allow_nan=False, allow_infinity=False) | text
json_value = st.recursive(scalar, lambda inner: st.lists(inner, max_size=3)
                          | st.dictionaries(text, inner, max_size=3), max_leaves=10)


@st.composite
def nested(draw, leaf=json_value):
    """A value wrapped in 0..800 levels of lists or objects (deeper ones travel as text, `deep_text`)."""
    v, n = draw(leaf), draw(st.sampled_from([0, 1, 5, 40, 70, 300, 800]))
    wrap = draw(st.sampled_from(["list", "dict"]))
    for _ in range(n):
        v = [v] if wrap == "list" else {"a": v}
    return v


prop_schema = st.one_of(
    st.fixed_dictionaries({"type": st.sampled_from(["string", "integer", "number", "boolean", "array", "object",
                                                    "nope", 5])}, optional={"description": text, "enum": json_value}),
    json_value)
parameters = st.one_of(
    st.fixed_dictionaries({"type": st.sampled_from(["object", "string", None])},
                          optional={"properties": st.one_of(st.dictionaries(text, prop_schema, max_size=3), json_value),
                                    "required": st.one_of(st.lists(text, max_size=3), json_value),
                                    "additionalProperties": st.booleans()}),
    json_value, nested())
function = st.fixed_dictionaries({"name": st.one_of(st.sampled_from(["create_reminder", "t", "get-x", "bad name"]),
                                                    text, scalar)},
                                 optional={"description": st.one_of(text, scalar), "parameters": parameters,
                                           "strict": scalar})
tool = st.one_of(st.fixed_dictionaries({"type": st.sampled_from(["function", "code"]), "function": function}),
                 json_value)
deep_text = st.sampled_from([100, 3000, 20000]).map(lambda n: '{"a": ' + "[" * n + "]" * n + "}")
arguments = st.one_of(text, nested().map(json.dumps), deep_text, st.just('{"text": "x"}'), json_value)
call = st.one_of(st.fixed_dictionaries({"id": st.sampled_from(["c1", "c2", ""]), "type": st.just("function"),
                                        "function": st.fixed_dictionaries({"name": st.one_of(text, scalar),
                                                                           "arguments": arguments})}),
                 json_value)
content = st.one_of(text, st.none(), st.lists(st.one_of(
    st.fixed_dictionaries({"type": st.sampled_from(["text", "input_text", "image_url"]), "text": text}),
    json_value), max_size=2), scalar)
message = st.one_of(
    st.fixed_dictionaries({"role": st.sampled_from(["user", "system", "developer", "assistant", "tool", "robot"]),
                           "content": content},
                          optional={"tool_calls": st.one_of(st.lists(call, max_size=2), json_value),
                                    "tool_call_id": st.one_of(st.sampled_from(["c1", "c2"]), scalar),
                                    "name": text, "adapter": st.one_of(text, st.sampled_from(["agent", "chat"]))}),
    json_value)
models = st.sampled_from(["agent", "macaronic", "chat", "coding", "genui", "nope"]) | scalar
tail = st.fixed_dictionaries({"role": st.just("user"), "content": text})  # often a valid last message
chat_body = st.fixed_dictionaries(
    {"model": models, "messages": st.one_of(st.lists(message, max_size=4).flatmap(
        lambda ms: st.just(ms) | tail.map(lambda t: ms + [t])), json_value)},
    optional={"tools": st.one_of(st.lists(tool, max_size=2), json_value),
              "tool_choice": st.one_of(st.sampled_from(["auto", "none", "required", "sometimes"]), json_value),
              "stream": st.booleans(), "max_tokens": st.sampled_from([1, 2, 3, 0, -1, 10**9]) | scalar,
              "temperature": st.sampled_from([0, 0.7, 3]) | scalar, "stop": st.one_of(text, st.lists(text, max_size=2)),
              "seed": st.integers(-5, 2**64), "metadata": nested(), "n": scalar, "top_p": scalar,
              "stream_options": st.one_of(st.just({"include_usage": True}), json_value)})
input_item = st.one_of(
    st.fixed_dictionaries({"type": st.just("message"), "role": st.sampled_from(["user", "system", "assistant", "x"]),
                           "content": content}),
    st.fixed_dictionaries({"type": st.just("function_call"), "call_id": st.sampled_from(["c1", "c2"]),
                           "name": st.one_of(text, scalar), "arguments": arguments}),
    st.fixed_dictionaries({"type": st.just("function_call_output"), "call_id": st.sampled_from(["c1", "c2", None]),
                           "output": st.one_of(text, json_value)}),
    json_value)
responses_body = st.fixed_dictionaries(
    {"model": models, "input": st.one_of(text, st.lists(input_item, max_size=3), json_value)},
    optional={"tools": st.one_of(st.lists(st.one_of(function.map(lambda f: {"type": "function", **f}), tool),
                                          max_size=2), json_value),
              "tool_choice": json_value, "stream": st.booleans(), "max_output_tokens": st.sampled_from([1, 2, 0]),
              "instructions": st.one_of(text, scalar), "store": st.booleans(),
              "previous_response_id": st.one_of(text, st.just("resp_missing"))})

# ---- valid requests, then at most one mutation anywhere in them ----------------------------

good_text = st.one_of(plain, st.text(max_size=12))  # no surrogates
good_tool = st.builds(
    lambda name, desc, props, req: {"type": "function", "function": {
        "name": name, "description": desc,
        "parameters": {"type": "object", "properties": {k: {"type": t} for k, t in props.items()},
                       "required": [k for k in props if k in req]}}},
    st.sampled_from(["create_reminder", "t", "get-x"]), good_text,
    st.dictionaries(st.sampled_from(["text", "n", "when"]), st.sampled_from(["string", "integer", "boolean"]),
                    max_size=3), st.sets(st.sampled_from(["text", "n"])))


@st.composite
def good_convo(draw):
    user = {"role": "user", "content": draw(good_text)}
    shape = draw(st.sampled_from(["one", "two", "tool", "system"]))
    if shape == "one":
        return [user]
    if shape == "system":
        return [{"role": "system", "content": draw(good_text)}, user]
    if shape == "two":
        return [user, {"role": "assistant", "content": draw(good_text)}, {"role": "user", "content": draw(good_text)}]
    args = draw(st.one_of(st.sampled_from(['{"text": "x"}', "{}", "{oops", '{"a": [[[1]]]}']), deep_text))
    return [user, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "create_reminder", "arguments": args}}]},
        {"role": "tool", "tool_call_id": "c1", "content": draw(good_text)}]


schema_like = st.one_of(parameters, st.just({"type": "object", "properties": {"a": {"type": "integer"}},
                                              "required": ["a"]}),
                        st.just({"type": "array", "items": {"type": "string", "maxLength": 3}, "maxItems": 2}),
                        st.just({"enum": ["x", "y"]}), st.just({"$ref": "#/$defs/x", "$defs": {"x": {"type": "null"}}}))
response_format = st.one_of(
    st.fixed_dictionaries({"type": st.sampled_from(["text", "json_object", "json_schema", "xml"])},
                          optional={"json_schema": st.one_of(st.fixed_dictionaries(
                              {"name": st.one_of(st.just("out"), text, scalar), "schema": schema_like},
                              optional={"strict": scalar}), json_value)}),
    json_value)
good_chat = st.fixed_dictionaries(
    {"model": st.sampled_from(["agent", "macaronic", "chat", "coding", "genui"]), "messages": good_convo(),
     "max_tokens": st.integers(1, 3)},
    optional={"tools": st.lists(good_tool, max_size=2, unique_by=lambda t: t["function"]["name"]),
              "stream": st.booleans(), "temperature": st.sampled_from([0, 0.7]), "seed": st.integers(0, 99),
              "stream_options": st.just({"include_usage": True}), "response_format": response_format,
              "tool_choice": st.sampled_from(["auto", "none", "required"]), "n": st.integers(1, 3),
              "logprobs": st.booleans(), "top_logprobs": st.integers(0, 3)})
good_responses = st.fixed_dictionaries(
    {"model": st.sampled_from(["agent", "macaronic", "chat"]), "input": good_text, "max_output_tokens": st.integers(1, 3)},
    optional={"stream": st.booleans(), "store": st.booleans(), "instructions": good_text,
              "text": st.one_of(response_format.map(lambda f: {"format": {**f, **(f.get("json_schema") or {})}
                                                                if isinstance(f, dict) and isinstance(
                                                                    f.get("json_schema", {}), dict) else f}),
                                json_value),
              "tools": st.lists(good_tool.map(lambda t: {"type": "function", **t["function"]}), max_size=1)})


def containers(v, path=()):
    """Paths of every object and list inside a JSON value."""
    out = [path] if isinstance(v, (dict, list)) else []
    items = v.items() if isinstance(v, dict) else enumerate(v) if isinstance(v, list) else ()
    for k, x in items:
        out += containers(x, (*path, k))
    return out


@st.composite
def mutated(draw, base):
    """`base` with one key or item (existing or new) set to an arbitrary, edgy or deeply nested value."""
    body = json.loads(json.dumps(draw(base)))
    if not draw(st.booleans()):
        return body
    path = draw(st.sampled_from(containers(body)))
    target = body
    for k in path:
        target = target[k]
    value = draw(st.one_of(json_value, nested(), edgy, scalar, deep_text))
    if isinstance(target, dict):
        key = draw(st.sampled_from(sorted(target) + ["role", "content", "type", "name", "parameters", "extra"]))
        target[key] = value
    elif target:
        target[draw(st.integers(0, len(target) - 1))] = value
    else:
        target.append(value)
    return body


request = st.one_of(st.tuples(st.just("/v1/chat/completions"), mutated(good_chat)),
                    st.tuples(st.just("/v1/responses"), mutated(good_responses)),
                    st.tuples(st.just("/v1/chat/completions"), chat_body),
                    st.tuples(st.just("/v1/responses"), responses_body))


def server_errors(url: str) -> int:
    text = httpx.get(url + "/metrics", timeout=30).text
    return sum(int(float(n)) for n in re.findall(r'macaronic_requests_total\{[^}]*status="5\d\d"\} (\S+)', text))


@pytest.mark.long  # over 10 s on 2 cores: the long CI step keeps the default suite under 15 minutes
def test_fuzzed_requests_never_get_a_5xx(server, capsys):
    url, t0, seen = server.url, time.monotonic(), []
    errors_before = server_errors(url)

    @given(req=request)
    @settings(max_examples=FUZZ_EXAMPLES, deadline=None, derandomize=FUZZ_SEED is None, database=None,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    @seed(int(FUZZ_SEED or 0))
    def run(req):
        if time.monotonic() - t0 > BUDGET_S:
            return  # the budget is spent: the remaining examples pass untried
        path, body = req
        raw = json.dumps(body).encode()  # ASCII-escaped: lone surrogates travel as \ud800
        with httpx.Client(timeout=120) as c:
            with c.stream("POST", url + path, content=raw, headers={"content-type": "application/json"}) as r:
                data = r.read()
        seen.append(r.status_code)
        shown = f"{path} {raw[:600]!r}\n-> {r.status_code} {data[:400]!r}"
        assert r.status_code < 500, shown
        if r.status_code >= 400:
            err = json.loads(data)["error"]
            assert set(err) == {"message", "type", "param", "code"}, shown
        elif r.headers["content-type"].startswith("text/event-stream"):
            assert b"internal_error" not in data and b"server_error" not in data, shown

    run()
    with capsys.disabled():
        counts = {s: seen.count(s) for s in sorted(set(seen))}
        print(f"\n[fuzz] {len(seen)} requests in {time.monotonic() - t0:.1f} s, statuses {counts}")
    assert len(seen) >= 20, f"only {len(seen)} requests in {BUDGET_S} s"
    assert any(s == 200 for s in seen) and any(400 <= s < 500 for s in seen), seen
    assert server_errors(url) == errors_before
    assert httpx.get(url + "/health", timeout=30).status_code == 200
    r = httpx.post(url + "/v1/chat/completions", json={"model": "chat", "max_tokens": 2,
                                                        "messages": [{"role": "user", "content": "still there?"}]})
    assert r.status_code == 200, r.text
