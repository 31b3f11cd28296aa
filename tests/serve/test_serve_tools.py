"""Tool calls through the official client: Chat Completions (JSON and streaming) and the Responses
API (function_call items, function_call_output continuing on the calling adapter)."""

from __future__ import annotations

import json

import openai

from test_serve_mol import TOOLS

CALL = '<tool_call>{"name": "create_reminder", "arguments": {"text": "buy milk"}}</tool_call>'


def agent_reply(view):
    return "Done: reminder 7." if view[-1]["role"] == "tool" else "On it. " + CALL


def agent_calls(view):
    """An agent that opens with the call, as the shipped agents are trained to (their data engines
    write calls alone): what the bundle's `tools_decide` reads from a routed turn's first tokens."""
    return "Done: reminder 7." if view[-1]["role"] == "tool" else CALL


def test_chat_completions_tool_calls(inproc):
    url, mol, script = inproc
    script.replies["agent"] = agent_reply
    c = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0)
    convo = [{"role": "user", "content": "remind me to buy milk"}]
    r = c.chat.completions.create(model="agent", messages=convo, tools=TOOLS, max_tokens=96)
    msg = r.choices[0].message
    assert r.choices[0].finish_reason == "tool_calls" and msg.content == "On it."
    assert msg.tool_calls[0].function.name == "create_reminder"
    assert json.loads(msg.tool_calls[0].function.arguments) == {"text": "buy milk"}
    # the tool prompt reached the adapter, in the shared header
    assert "create_reminder" in script.seen[-1][1][0]["content"]

    convo += [msg.model_dump(exclude_none=True),
              {"role": "tool", "tool_call_id": msg.tool_calls[0].id, "content": '{"id": 7}'}]
    chunks = list(c.chat.completions.create(model="macaronic", messages=convo, tools=TOOLS, max_tokens=64,
                                            stream=True))
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    meta = chunks[-1].model_extra["macaronic"]
    assert text == "Done: reminder 7." and meta["policy"] == "sticky" and meta["adapter"] == "agent"

    # streaming a call: prose streams, the call streams as delta.tool_calls, nothing of it leaks
    chunks = list(c.chat.completions.create(model="agent", messages=convo[:1], tools=TOOLS, max_tokens=96,
                                            stream=True))
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    final = [ch for ch in chunks if ch.choices and ch.choices[0].finish_reason][0]
    assert "<tool_call>" not in text and text.strip() == "On it."
    assert final.choices[0].finish_reason == "tool_calls"
    deltas = [d for ch in chunks if ch.choices for d in ch.choices[0].delta.tool_calls or []]
    assert deltas[0].function.name == "create_reminder" and deltas[0].id
    assert json.loads("".join(d.function.arguments or "" for d in deltas)) == {"text": "buy milk"}


def test_responses_function_calls(inproc):
    url, mol, script = inproc
    script.replies["agent"] = agent_reply
    c = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0)
    tools = [{"type": "function", **TOOLS[0]["function"]}]
    r1 = c.responses.create(model="agent", input="remind me to buy milk", tools=tools, max_output_tokens=96)
    calls = [o for o in r1.output if o.type == "function_call"]
    assert len(calls) == 1 and calls[0].name == "create_reminder" and r1.output_text == "On it."
    r2 = c.responses.create(model="macaronic", previous_response_id=r1.id, tools=tools, max_output_tokens=64,
                            input=[{"type": "function_call_output", "call_id": calls[0].call_id, "output": '{"id": 7}'}])
    assert r2.output_text == "Done: reminder 7."
    assert r2.model_extra["macaronic"]["policy"] == "sticky" and r2.model_extra["macaronic"]["adapter"] == "agent"


class SaysGenui:
    """A router that sends every turn to genui, as the shipped head did with tools attached."""

    def route(self, messages, *args, **kw):
        from macaronic.router.types import RouteDecision

        return RouteDecision("genui", {"genui": 1.0}, 1.0, "head", 0.1, "scored")


def test_routed_requests_with_tools_get_tool_calls(inproc):
    """An agent framework points `model="macaronic"` at the server and sends tools: a request that names
    what its tools are about goes to the agent by the tools rule, whatever the head would say of it,
    and the call comes back; a request about something else is the head's."""
    url, mol, script = inproc
    script.replies["agent"] = agent_calls
    mol.router = SaysGenui()  # the head would send this text to genui: the rule must not ask it
    c = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0)
    convo = [{"role": "user", "content": "remind me to buy milk, and show it nicely"}]
    for choice in (None, "auto", "required", {"type": "function", "function": {"name": "create_reminder"}}):
        kw = {} if choice is None else {"tool_choice": choice}
        r = c.chat.completions.create(model="macaronic", messages=convo, tools=TOOLS, max_tokens=96, **kw)
        meta = r.model_extra["macaronic"]
        assert meta["adapter"] == "agent" and meta["policy"] == "tools", (choice, meta)
        assert r.choices[0].message.tool_calls[0].function.name == "create_reminder"
    # a request about something else, tools attached: the head decides (here genui, which never calls)
    r = c.chat.completions.create(model="macaronic", messages=[{"role": "user", "content": "a card saying hello"}],
                                  tools=TOOLS, max_tokens=8)
    assert r.model_extra["macaronic"]["policy"] == "head" and not r.choices[0].message.tool_calls
    # tool_choice "none": no calls wanted, so the router decides from the text as before
    r = c.chat.completions.create(model="macaronic", messages=convo, tools=TOOLS, tool_choice="none", max_tokens=8)
    assert r.model_extra["macaronic"]["policy"] == "head" and not r.choices[0].message.tool_calls


def test_a_role_without_an_adapter_is_listed_and_answered_by_the_base(scripted, monkeypatch):
    """A specialist that failed the do-no-harm rule ships no adapter: its role stays a model id,
    routed and forced turns of that role are answered by the bare base under the role's instruction."""
    import httpx

    from macaronic.serve.app import create_app
    from serve_helpers import InProcessServer

    mol, script = scripted
    everything = mol.backend.adapters()
    monkeypatch.setattr(mol.backend, "adapters", lambda: {k: v for k, v in everything.items() if v.role != "coding"})
    script.replies[None] = "def f(): pass"
    srv = InProcessServer(create_app(mol))
    try:
        models = {m["id"]: m["macaronic"] for m in httpx.get(srv.url + "/v1/models").json()["data"]}
        assert models["coding"] == {"kind": "role", "adapter": None, "role": "coding"}
        assert models["chat"]["kind"] == "adapter"
        c = openai.OpenAI(base_url=srv.url + "/v1", api_key="x", max_retries=0)
        r = c.chat.completions.create(model="coding", messages=[{"role": "user", "content": "a stub"}], max_tokens=16)
        meta = r.model_extra["macaronic"]
        assert meta["specialist"] == "coding" and meta["adapter"] is None
        assert r.choices[0].message.content == "def f(): pass"
    finally:
        srv.stop()


class SaysChat:
    """A router that sends every turn to chat."""

    def route(self, messages, *args, **kw):
        from macaronic.router.types import RouteDecision

        return RouteDecision("chat", {"chat": 1.0}, 1.0, "head", 0.1, "scored")


def _asked(script, since: int, text: str) -> list:
    """The adapters that generated for this user text since `since` (not the summary hops)."""
    return [a for a, v in script.seen[since:] if v[-1]["content"] == text]


def _deciding(mol, on: bool = True):
    from dataclasses import replace

    mol.bundle = replace(mol.bundle, router={**mol.bundle.router, "tools_decide": on})


def _decider(inproc, not_a_call: str, chat: str):
    """The in-process server with `tools_decide` on, a head that says chat, an agent that calls for
    milk and otherwise says `not_a_call`, and chat saying `chat`: (client, script)."""
    url, mol, script = inproc
    _deciding(mol)
    mol.router = SaysChat()
    script.replies["agent"] = lambda view: CALL if "milk" in view[-1]["content"] else not_a_call
    script.replies["chat"] = chat
    return openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0), script


def _routed(client, text: str, max_tokens: int):
    """One routed turn with the tools attached: (response, its macaronic metadata)."""
    r = client.chat.completions.create(model="macaronic", messages=[{"role": "user", "content": text}], tools=TOOLS,
                                       max_tokens=max_tokens)
    return r, r.model_extra["macaronic"]


def test_the_agent_decides_calls_for_turns_the_head_sends_to_a_text_specialist(inproc):
    """`tools_decide`: a request with tools that names none of them and that the head sends to chat is
    read first by the agent; its call opens from the first token, so the turn is the agent's and
    the call comes back. A request it answers in text stays chat's, and chat answers without the
    tools: the agent said no call is needed."""
    c, script = _decider(inproc, "No tool fits.", "Hello!")
    r, meta = _routed(c, "jot down: buy milk", 96)
    assert (meta["adapter"], meta["policy"], meta["reason"]) == ("agent", "tools", "tools-decided-call"), meta
    assert r.choices[0].message.tool_calls[0].function.name == "create_reminder"
    assert json.loads(r.choices[0].message.tool_calls[0].function.arguments) == {"text": "buy milk"}
    assert _asked(script, 0, "jot down: buy milk") == ["agent", "agent"]

    seen = len(script.seen)
    r, meta = _routed(c, "hi there", 16)
    assert (meta["adapter"], meta["policy"]) == ("chat", "head") and meta["reason"].endswith("tools-decided-no-call")
    assert r.choices[0].message.content == "Hello!" and not r.choices[0].message.tool_calls
    asked = [(a, v) for a, v in script.seen[seen:] if v[-1]["content"] == "hi there"]  # not the summary hop
    assert [a for a, _ in asked] == ["agent", "chat"]
    assert "create_reminder" in asked[0][1][0]["content"]  # the agent read the tools
    assert "create_reminder" not in "".join(m["content"] for m in asked[1][1])  # chat did not


def test_the_agent_decides_turns_the_tools_rule_sent_it_by_their_words(inproc):
    """A request that says a word of one of its tools goes to the agent by the rule; with
    `tools_decide` the agent still reads it first: a call stays the rule's turn, a reply in text
    hands it to the head (which here says chat), and chat answers without the tools."""
    c, script = _decider(inproc, "A note for later.", "A reminder is a note that alerts you at a set time.")
    r, meta = _routed(c, "remind me: milk", 96)
    assert (meta["adapter"], meta["policy"], meta["reason"]) == ("agent", "tools", "request-names-its-tools"), meta
    assert r.choices[0].message.tool_calls[0].function.name == "create_reminder"
    seen = len(script.seen)
    r, meta = _routed(c, "what is a reminder?", 32)
    assert (meta["adapter"], meta["policy"], meta["reason"]) == ("chat", "head", "scored; tools-decided-no-call"), meta
    assert r.choices[0].message.content.startswith("A reminder is") and not r.choices[0].message.tool_calls
    assert _asked(script, seen, "what is a reminder?") == ["agent", "chat"]


def test_a_follow_up_in_a_tool_session_is_the_agents_to_decide(inproc):
    """An agent framework's conversation: an earlier assistant turn called a tool, and the next user
    turn ("and the other one too") names none of the tools. The tools rule sends it to the agent as a
    tool session (the head, which says chat, would have dropped the tools); the agent decides greedily
    as it would answer: a call stays its turn, a reply in text goes to the head and chat, without the
    tools."""
    c, script = _decider(inproc, "You're welcome.", "Glad to help!")
    call = {"id": "c1", "type": "function", "function": {"name": "create_reminder", "arguments": '{"text": "eggs"}'}}
    history = [{"role": "user", "content": "remind me: eggs"},
               {"role": "assistant", "content": None, "tool_calls": [call]},
               {"role": "tool", "tool_call_id": "c1", "content": '{"ok": true}'},
               {"role": "assistant", "content": "Done."}]
    r = c.chat.completions.create(model="macaronic", messages=[*history, {"role": "user", "content": "and milk too"}],
                                  tools=TOOLS, max_tokens=96)
    meta = r.model_extra["macaronic"]
    assert (meta["adapter"], meta["policy"], meta["reason"]) == ("agent", "tools", "tool-session"), meta
    assert r.choices[0].message.tool_calls[0].function.name == "create_reminder"
    seen = len(script.seen)
    r = c.chat.completions.create(model="macaronic", messages=[*history, {"role": "user", "content": "thanks!"}],
                                  tools=TOOLS, max_tokens=32)
    meta = r.model_extra["macaronic"]
    assert (meta["adapter"], meta["policy"], meta["reason"]) == ("chat", "head", "scored; tools-decided-no-call"), meta
    assert r.choices[0].message.content == "Glad to help!" and not r.choices[0].message.tool_calls
    assert _asked(script, seen, "thanks!") == ["agent", "chat"]
    # without an earlier call the same words go to the head, which the agent's decision then reads
    r = c.chat.completions.create(model="macaronic", messages=[{"role": "user", "content": "and milk too"}],
                                  tools=TOOLS, max_tokens=96)
    assert r.model_extra["macaronic"]["reason"] == "tools-decided-call"


def test_the_tools_decision_stays_out_of_its_way(inproc):
    """Off (a bundle without `tools_decide`, or with it false, answers as before: chat keeps the
    tools, the agent is not asked); never for a card route, `tool_choice` none or required, or a
    forced model."""
    from macaronic.router.config import RouterConfig

    url, mol, script = inproc
    assert RouterConfig.from_dict({}).tools_decide is False
    _deciding(mol, False)
    mol.router = SaysChat()
    script.replies["agent"] = CALL
    script.replies["chat"] = "Hello!"
    c = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0)
    hi = [{"role": "user", "content": "hi there"}]
    seen = len(script.seen)
    r = c.chat.completions.create(model="macaronic", messages=hi, tools=TOOLS, max_tokens=16)
    assert r.model_extra["macaronic"]["reason"] == "scored" and _asked(script, seen, "hi there") == ["chat"]
    assert "create_reminder" in script.seen[-1][1][0]["content"]  # without the rule chat sees the tools
    _deciding(mol)
    for kw in ({"tool_choice": "none"}, {"model": "chat"}):
        seen = len(script.seen)
        r = c.chat.completions.create(**{"model": "macaronic", "messages": hi, "tools": TOOLS, "max_tokens": 16, **kw})
        assert _asked(script, seen, "hi there") == ["chat"], kw
    seen = len(script.seen)
    r = c.chat.completions.create(model="macaronic", messages=hi, tools=TOOLS, tool_choice="required", max_tokens=96)
    assert r.model_extra["macaronic"]["reason"] == "tool-choice" and _asked(script, seen, "hi there") == ["agent"]
    mol.router = SaysGenui()
    seen = len(script.seen)
    c.chat.completions.create(model="macaronic", messages=[{"role": "user", "content": "a card saying hello"}],
                              tools=TOOLS, max_tokens=8)
    assert _asked(script, seen, "a card saying hello") == ["genui"]


def test_a_failed_tools_decision_keeps_the_heads_route_and_the_tools(scripted):
    import asyncio

    from macaronic.serve.backends import BackendError

    mol, script = scripted
    _deciding(mol)
    mol.router = SaysChat()
    script.replies["chat"] = "Hello!"
    real = mol.backend.stream

    def stream(view, adapter, sampling, **kw):
        if sampling.max_tokens == 1:  # the decision's read
            raise BackendError("overloaded", 503, "overloaded")
        return real(view, adapter, sampling, **kw)

    mol.backend.stream = stream
    try:
        r = asyncio.run(mol.aturn([{"role": "user", "content": "hi there"}], tools=TOOLS, sampling={"max_tokens": 32}))
    finally:
        del mol.backend.stream
    assert (r.route.specialist, r.route.reason, r.text) == ("chat", "scored", "Hello!")
    assert "create_reminder" in r.view[0]["content"]


def test_the_agent_takes_a_turn_only_when_it_opens_the_call_with_the_bundles_confidence(scripted):
    """`tools_call_confidence`: the agent's first token opens a call with probability 0.9 (its
    top alternatives' mass on the call marker's first piece): under 0.95 the head's chat answers,
    without the tools; under 0.85 the agent takes it. `opening_probability` reads the mass."""
    import asyncio
    import math
    from dataclasses import replace

    from macaronic.serve.backends import Generation
    from macaronic.serve.mol import opening_probability

    top = [{"token": "<", "logprob": math.log(0.6)}, {"token": "<tool_call>", "logprob": math.log(0.3)},
           {"token": "Sure", "logprob": math.log(0.1)}]
    assert math.isclose(opening_probability([{"token": "<", "top_logprobs": top}]), 0.9)
    assert opening_probability(None, "<") == 1.0 and opening_probability(None, "Sure") == 0.0
    assert opening_probability([{"token": " Hi", "top_logprobs": [{"token": " Hi", "logprob": 0.0}]}]) == 0.0

    mol, script = scripted
    mol.router = SaysChat()
    script.replies["chat"] = "Hello!"
    script.replies["agent"] = CALL
    real = mol.backend.stream

    def stream(view, adapter, sampling, **kw):
        if sampling.max_tokens != 1:
            return real(view, adapter, sampling, **kw)

        async def read():
            yield "<"
            yield Generation("<", "length", {}, None, [{"token": "<", "logprob": math.log(0.6), "top_logprobs": top}])
        return read()

    mol.backend.stream = stream
    try:
        for confidence, specialist in ((0.95, "chat"), (0.85, "agent")):
            mol.bundle = replace(mol.bundle, router={**mol.bundle.router, "tools_decide": True,
                                                     "tools_call_confidence": confidence})
            r = asyncio.run(mol.aturn([{"role": "user", "content": "jot down: buy milk"}], tools=TOOLS,
                                      sampling={"max_tokens": 96}))
            assert r.route.specialist == specialist, (confidence, r.route)
            assert bool(r.tool_calls) == (specialist == "agent")
    finally:
        del mol.backend.stream


def test_tools_call_confidence_is_a_probability():
    import pytest

    from macaronic.router.config import RouterConfig

    assert RouterConfig.from_dict({"tools_call_confidence": 0.5}).tools_call_confidence == 0.5
    for bad in (1.5, -0.1, "high", True):
        with pytest.raises(ValueError, match="tools_call_confidence"):
            RouterConfig.from_dict({"tools_call_confidence": bad})
